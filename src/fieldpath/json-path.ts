/**
 * JSONPath, for a path that starts with `$`, or with `{` in kubectl's form (`{.status.x}` is
 * `$.status.x`). The grammar is kubectl's JSONPath: `.name` (a backslash escapes a character,
 * as in `{.metadata.labels.kubernetes\.io/hostname}`), `..` recursive descent, `*`, `[n]` with
 * negative indexes from the end, `[start:end:step]`, unions `['a','b']` / `[0,2]`, and the
 * equality filter `[?(@.type=="Ready")]`, which here returns every matching item.
 *
 * Parsing is ours, so an error names its position and nothing but this grammar ever reaches
 * jsonpath-plus: no script (`[(expr)]`, other filters), and none of its extensions (`^`, `~`,
 * `@string()`, backticks). Evaluation goes one step at a time over the list of selected values:
 * jsonpath-plus selects wildcards, slices and descendants; names, indexes and filters are read
 * here as own properties only. (jsonpath-plus would mangle keys that hold `;`, `^`, `~` or
 * `%@%`, and ignores negative indexes.) Stepping lets us cap the values in flight, which is what
 * keeps `$..*..*` on a large object finite.
 */
import { ResolutionError } from "../api/errors.ts";
import type { EvalResult } from "./compiled-path.ts";
import { type Filter, matchesFilter, readFilter } from "./filter.ts";
import { countItems, describeKind, listItem, ownField } from "./json-value.ts";
import { jsonPathPlusSelect } from "./jsonpath-plus-adapter.ts";
import { FieldPathLimits } from "./limits.ts";
import { describeMemberMiss } from "./member.ts";
import { quote } from "./quote.ts";
import { Scanner, isSpaceOrControl } from "./scanner.ts";

type Member =
  { readonly kind: "name"; readonly name: string } | { readonly kind: "index"; readonly index: number };

type Selector =
  | { readonly kind: "members"; readonly members: readonly Member[] }
  | { readonly kind: "wildcard" }
  | { readonly kind: "slice"; readonly text: string }
  | { readonly kind: "filter"; readonly filter: Filter };

interface Step {
  readonly start: number;
  readonly end: number;
  /** `..`: apply the selector to every value at or below each selected value. */
  readonly descend: boolean;
  readonly selector: Selector;
}

interface Program {
  readonly path: string;
  readonly braces: boolean;
  readonly steps: readonly Step[];
}

/** True if `path` is written in JSONPath syntax: it starts with `$` or `{`. */
export function isJsonPath(path: string): boolean {
  return path.startsWith("$") || path.startsWith("{");
}

/** Parses a JSONPath; throws an InvalidSpec ResolutionError if it does not parse. */
export function compileJsonPathSyntax(path: string): (obj: unknown) => EvalResult {
  const program = parse(path);
  return (obj) => evaluate(program, obj);
}

// ---- parsing ----

// Characters that end an unquoted name; a backslash before one makes it part of the name.
const NAME_STOPS = ".[]()'\",?*@{}=!\\";

function parse(path: string): Program {
  const braces = path.startsWith("{");
  const closed = braces && path.length >= 2 && path.endsWith("}");
  const s: Scanner = new Scanner(path, braces ? 1 : 0, closed ? path.length - 1 : path.length);
  if (!s.eat("$") && !(braces && (s.peek() === "." || s.peek() === "["))) {
    s.fail(braces ? `"$", "." or "["` : `"$"`);
  }
  const steps: Step[] = [];
  let descents = 0;
  while (!s.atEnd()) {
    const start = s.pos;
    s.countSegment();
    let descend = false;
    let selector: Selector;
    if (s.eat("..")) {
      descend = true;
      if (++descents > FieldPathLimits.maxRecursiveDescents) {
        s.fail(`at most ${FieldPathLimits.maxRecursiveDescents} recursive descents ("..")`, start);
      }
      if (s.eat("[")) selector = readBracket(s);
      else if (s.eat("*")) selector = { kind: "wildcard" };
      else
        selector = {
          kind: "members",
          members: [{ kind: "name", name: readName(s, `a field name, "*" or "["`) }],
        };
    } else if (s.eat(".")) {
      if (s.eat("*")) selector = { kind: "wildcard" };
      else
        selector = { kind: "members", members: [{ kind: "name", name: readName(s, `a field name or "*"`) }] };
    } else if (s.eat("[")) {
      selector = readBracket(s);
    } else {
      s.fail(`".", "[" or ${braces ? `the closing "}" as the last character` : "the end of the path"}`);
    }
    steps.push({ start, end: s.pos, descend, selector });
  }
  if (braces && !closed) s.fail(`"}"`, path.length);
  return { path, braces, steps };
}

function readName(s: Scanner, expected: string): string {
  let name = "";
  let chunk = s.pos;
  for (let ch = s.peek(); ch !== undefined; ch = s.peek()) {
    if (ch === "\\") {
      const escaped = s.peek(1);
      if (escaped === undefined) s.fail("a character after the backslash", s.pos + 1);
      // Keep a whole surrogate pair together, so an escaped emoji stays one character.
      const low = s.peek(2);
      const pair =
        escaped >= "\ud800" && escaped <= "\udbff" && low !== undefined && low >= "\udc00" && low <= "\udfff";
      const width = pair ? 2 : 1;
      name += s.source.slice(chunk, s.pos) + s.source.slice(s.pos + 1, s.pos + 1 + width);
      s.pos += 1 + width;
      chunk = s.pos;
      continue;
    }
    if (NAME_STOPS.includes(ch) || isSpaceOrControl(ch)) break;
    s.pos++;
  }
  name += s.source.slice(chunk, s.pos);
  if (name === "") s.fail(expected);
  return name;
}

/** After `[`: `*`, a filter, a slice, or a union of quoted names and indexes; through `]`. */
function readBracket(s: Scanner): Selector {
  s.skipSpaces();
  if (s.peek() === "?") return { kind: "filter", filter: readFilter(s) };
  if (s.eat("*")) {
    s.skipSpaces();
    s.expect("]");
    return { kind: "wildcard" };
  }
  const members: Member[] = [];
  for (;;) {
    const ch = s.peek();
    if (ch === "'" || ch === '"') {
      members.push({ kind: "name", name: s.readQuoted() });
    } else if (members.length === 0 && (ch === ":" || isIntegerStart(s))) {
      const first = ch === ":" ? "" : readInteger(s);
      if (s.peek() !== ":") {
        members.push({ kind: "index", index: Number(first) });
      } else {
        return readSlice(s, first);
      }
    } else if (isIntegerStart(s)) {
      members.push({ kind: "index", index: Number(readInteger(s)) });
    } else {
      s.fail(
        members.length === 0
          ? `"*", an index, a slice, a quoted name or a filter`
          : "an index or a quoted name",
      );
    }
    s.skipSpaces();
    if (s.eat("]")) return { kind: "members", members };
    if (!s.eat(",")) s.fail(`"," or "]"`);
    s.countSegment();
    s.skipSpaces();
  }
}

/** After the start of a slice (possibly empty), at its first `:`; through `]`. */
function readSlice(s: Scanner, start: string): Selector {
  const parts = [start];
  while (parts.length < 3 && s.eat(":")) {
    s.skipSpaces();
    parts.push(isIntegerStart(s) ? readInteger(s) : "");
    s.skipSpaces();
  }
  s.expect("]");
  // Canonical text for jsonpath-plus's slice pattern: "start:end:step", numbers normalized.
  return { kind: "slice", text: parts.map((p) => (p === "" ? "" : String(Number(p)))).join(":") };
}

function isIntegerStart(s: Scanner): boolean {
  const ch = s.peek() === "-" ? s.peek(1) : s.peek();
  return ch !== undefined && ch >= "0" && ch <= "9";
}

/** An optionally negative integer within ±{@link FieldPathLimits.maxIndex}, as written. */
function readInteger(s: Scanner): string {
  const start = s.pos;
  const sign = s.eat("-") ? "-" : "";
  const digits = s.readDigits();
  s.toIndex(digits, start);
  return sign + digits;
}

// ---- evaluation ----

function evaluate(program: Program, obj: unknown): EvalResult {
  if (obj === undefined) return { found: false, missing: "there is no object" };
  let values: unknown[] = [obj];
  for (const [i, step] of program.steps.entries()) {
    const next = step.descend ? descend(program, step, values) : select(program, step.selector, values);
    if (next.length === 0) {
      const subject =
        i === 0 ? "the object" : quote(program.path.slice(0, step.start) + (program.braces ? "}" : ""));
      return { found: false, missing: describeMiss(program, step, subject, values) };
    }
    values = next;
  }
  return { found: true, value: values.length === 1 ? values[0] : values };
}

function select(program: Program, selector: Selector, from: readonly unknown[]): unknown[] {
  const out: unknown[] = [];
  const add = (value: unknown): void => {
    if (value === undefined) return;
    out.push(value);
    if (out.length > FieldPathLimits.maxJsonPathMatches) throw tooMany(program.path);
  };
  for (const value of from) {
    if (typeof value !== "object" || value === null) continue;
    switch (selector.kind) {
      case "members":
        for (const m of selector.members)
          add(m.kind === "name" ? ownField(value, m.name) : listItem(value, m.index));
        break;
      case "wildcard":
        for (const v of jsonPathPlusSelect("$[*]", value)) add(v);
        break;
      case "slice":
        for (const v of jsonPathPlusSelect(`$[${selector.text}]`, value)) add(v);
        break;
      case "filter":
        if (Array.isArray(value))
          for (const item of value as unknown[]) if (matchesFilter(item, selector.filter)) add(item);
        break;
    }
  }
  return out;
}

function descend(program: Program, step: Step, from: readonly unknown[]): unknown[] {
  // The same object reached twice would be walked twice; each is walked once, in order.
  const roots = [...new Set(from.filter((v) => typeof v === "object" && v !== null))];
  const { selector } = step;
  try {
    if (selector.kind === "wildcard" || selector.kind === "slice") {
      const path = selector.kind === "wildcard" ? "$..*" : `$..[${selector.text}]`;
      const out: unknown[] = [];
      for (const root of roots) {
        for (const v of jsonPathPlusSelect(path, root)) {
          out.push(v);
          if (out.length > FieldPathLimits.maxJsonPathMatches) throw tooMany(program.path);
        }
      }
      return out;
    }
    const everything = roots.flatMap((root) => jsonPathPlusSelect("$..", root));
    return select(program, selector, everything);
  } catch (err) {
    // jsonpath-plus recurses once per level: an object nested some thousands deep overflows the stack.
    if (err instanceof RangeError) {
      throw new ResolutionError(
        "ValueTooLarge",
        `fieldPath ${quote(program.path)}: the object is nested too deeply for a recursive descent ("..")`,
        { cause: err },
      );
    }
    throw err;
  }
}

function tooMany(path: string): ResolutionError {
  return new ResolutionError(
    "ValueTooLarge",
    `fieldPath ${quote(path)} selects more than ${FieldPathLimits.maxJsonPathMatches} values, the limit`,
  );
}

function describeMiss(program: Program, step: Step, subject: string, values: readonly unknown[]): string {
  const [only] = values;
  const text = quote(program.path.slice(step.start, step.end));
  if (values.length !== 1 || step.descend) return `nothing matches ${text} in ${subject}`;
  const { selector } = step;
  if (selector.kind === "members" && selector.members.length === 1) {
    const [m] = selector.members;
    if (m?.kind === "name") return describeMemberMiss(subject, only, { kind: "key", key: m.name });
    if (m?.kind === "index") {
      return Array.isArray(only)
        ? `${subject} has ${countItems(only)}, no index ${m.index}`
        : `${subject} is ${describeKind(only)}, not a list`;
    }
  }
  if (selector.kind === "filter") {
    return Array.isArray(only)
      ? `${subject} has ${countItems(only)}, none where ${selector.filter.text}`
      : `${subject} is ${describeKind(only)}, not a list to filter`;
  }
  return `nothing matches ${text} in ${subject}`;
}
