/** Table tests of a parser of text, shared by the unit tests of the flag and option parsers. */
import { expect, it } from "@jest/globals";

/** A text the parser accepts, the value it gives, and why. */
export interface Accepted<T> {
  reason: string;
  text: string;
  want: T;
}

/** A text the parser refuses, and why. */
export interface Refused {
  reason: string;
  text: string;
}

/**
 * One test per case: `parse(text)` equals each accepted case's `want`; each refused text throws
 * what `refusal(text)` names (a message it contains, or an error class).
 */
export function parserCases<T>(
  parse: (text: string) => T,
  accepted: ReadonlyArray<Accepted<T>>,
  refused: ReadonlyArray<Refused>,
  refusal: (text: string) => string | (new (...args: never[]) => Error),
): void {
  it.each(accepted)("$reason: $text", ({ text, want }) => {
    expect(parse(text)).toEqual(want);
  });
  it.each(refused)("refuses $reason: $text", ({ text }) => {
    expect(() => parse(text)).toThrow(refusal(text));
  });
}
