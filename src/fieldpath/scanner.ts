/**
 * A cursor over a path being parsed. Every parse error goes through here, so every message has
 * the same shape: `fieldPath "<path>" at position <n>: expected <what>, found <what>`, where
 * positions are 1-based and count Unicode code points (what a user sees as characters).
 */
import { ResolutionError } from "../api/errors.ts";
import { FieldPathLimits } from "./limits.ts";
import { quote } from "./quote.ts";

const SPACE_OR_CONTROL = /[\s\p{Cc}]/u;
const DIGITS = /^[0-9]+$/;

/** True for whitespace or a control character: these never belong to an unquoted name. */
export function isSpaceOrControl(ch: string): boolean {
  return SPACE_OR_CONTROL.test(ch);
}

/** The 1-based code point position of the UTF-16 offset `at` in `source`. */
function positionOf(source: string, at: number): number {
  let count = 1;
  for (const _ of source.slice(0, at)) count++;
  return count;
}

/** An InvalidSpec error for `source`, pointing at offset `at`, saying what was expected there. */
function parseError(source: string, at: number, expected: string): ResolutionError {
  const code = source.codePointAt(at);
  const found = code === undefined ? "the end of the path" : quote(String.fromCodePoint(code));
  return new ResolutionError(
    "InvalidSpec",
    `fieldPath ${quote(source)} at position ${positionOf(source, at)}: expected ${expected}, found ${found}`,
  );
}

/** Reads `source` from `start` up to (not including) `end`; all offsets are UTF-16 offsets into `source`. */
export class Scanner {
  readonly source: string;
  readonly end: number;
  pos: number;
  private segments = 0;

  constructor(source: string, start: number, end: number) {
    this.source = source;
    this.pos = start;
    this.end = end;
  }

  /** True once every character up to `end` is consumed. */
  atEnd(): boolean {
    return this.pos >= this.end;
  }

  /** The next UTF-16 code unit, or `undefined` at the end. */
  peek(offset = 0): string | undefined {
    const at = this.pos + offset;
    return at < this.end ? this.source[at] : undefined;
  }

  /** True if the text at the cursor starts with `text`. */
  lookingAt(text: string): boolean {
    return this.pos + text.length <= this.end && this.source.startsWith(text, this.pos);
  }

  /** Consumes `text` if the cursor is at it. */
  eat(text: string): boolean {
    if (!this.lookingAt(text)) return false;
    this.pos += text.length;
    return true;
  }

  /** Consumes `text` or fails saying it was expected. */
  expect(text: string): void {
    if (!this.eat(text)) this.fail(quote(text));
  }

  /** Skips spaces and tabs (allowed only where a grammar says so, such as around filter operators). */
  skipSpaces(): void {
    while (this.peek() === " " || this.peek() === "\t") this.pos++;
  }

  /** Throws the InvalidSpec parse error for this position (or `at`). */
  fail(expected: string, at: number = this.pos): never {
    throw parseError(this.source, at, expected);
  }

  /** Counts one more segment of the path, failing beyond {@link FieldPathLimits.maxSegments}. */
  countSegment(): void {
    this.segments++;
    if (this.segments > FieldPathLimits.maxSegments) {
      throw new ResolutionError(
        "InvalidSpec",
        `fieldPath ${quote(this.source)} at position ${positionOf(this.source, this.pos)}: ` +
          `more than ${FieldPathLimits.maxSegments} segments, the limit`,
      );
    }
  }

  /**
   * Reads a single- or double-quoted string at the cursor. Inside, a backslash escapes a quote
   * character or a backslash; any other escape is an error rather than a guess.
   */
  readQuoted(): string {
    const open = this.pos;
    const delimiter = this.peek();
    this.pos++;
    let text = "";
    let chunk = this.pos;
    for (;;) {
      const ch = this.peek();
      if (ch === undefined)
        this.fail(
          `a closing ${delimiter} for the string opened at position ${positionOf(this.source, open)}`,
        );
      if (ch === delimiter) {
        text += this.source.slice(chunk, this.pos);
        this.pos++;
        return text;
      }
      if (ch === "\\") {
        const escaped = this.peek(1);
        if (escaped !== "\\" && escaped !== "'" && escaped !== '"') {
          this.fail(`\\\\, \\' or \\" after a backslash`, this.pos + 1);
        }
        text += this.source.slice(chunk, this.pos) + escaped;
        this.pos += 2;
        chunk = this.pos;
      } else {
        this.pos++;
      }
    }
  }

  /** Reads a run of ASCII digits (possibly empty). */
  readDigits(): string {
    const start = this.pos;
    for (let ch = this.peek(); ch !== undefined && ch >= "0" && ch <= "9"; ch = this.peek()) this.pos++;
    return this.source.slice(start, this.pos);
  }

  /** Converts digits read at `at` to an index, failing beyond {@link FieldPathLimits.maxIndex}. */
  toIndex(digits: string, at: number): number {
    const index = Number(digits);
    if (digits.length > 16 || index > FieldPathLimits.maxIndex) {
      this.fail(`an index of at most ${FieldPathLimits.maxIndex}`, at);
    }
    return index;
  }
}

/** True if `text` is a non-empty run of ASCII digits. */
export function isDigits(text: string): boolean {
  return DIGITS.test(text);
}
