/** Assertions shared by the field-path unit tests of both syntaxes. */
import { expect } from "@jest/globals";
import { isResolutionError } from "../../src/api/errors.ts";
import { evaluateFieldPath } from "../../src/fieldpath/index.ts";

/** Expects `path` to be refused as InvalidSpec with a message naming its position and `expected`. */
export function expectPathError(path: string, position: number, expected: string): void {
  let error: unknown;
  try {
    evaluateFieldPath({}, path);
  } catch (err) {
    error = err;
  }
  expect(isResolutionError(error)).toBe(true);
  if (!isResolutionError(error)) return;
  expect(error.reason).toBe("InvalidSpec");
  expect(error.message).toContain(`fieldPath ${JSON.stringify(path)} at position ${position}: `);
  expect(error.message).toContain(expected);
}
