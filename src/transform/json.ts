/**
 * The mapping between JSON values and CEL values, as Kubernetes CEL maps a schemaless field:
 * a whole JSON number is a CEL `int` (a bigint), any other number a `double`; strings, bools,
 * null, lists and maps keep their kind. Back to JSON, `int`/`uint` become numbers (only while a
 * JSON reader can hold them exactly), `bytes` become base64 text as protobuf's JSON mapping
 * writes them, a timestamp RFC 3339 text, a duration text such as `"90s"`, and an optional its
 * value. Anything else (a NaN, a type) is a runtime error: a transform must return JSON.
 */
import { ResolutionError } from "../api/errors.ts";

/** Deepest nesting of lists and maps converted either way; deeper data fails instead of exhausting the stack. */
export const MAX_DEPTH = 100;

function tooDeep(): never {
  throw new ResolutionError(
    "TransformFailed",
    `the transform's input or result is nested deeper than ${MAX_DEPTH} levels`,
  );
}

/** The CEL value of JSON `value`: whole numbers become `int` (bigint), other numbers `double`, objects `Map`s. */
export function toCel(value: unknown, depth = 0): unknown {
  if (depth > MAX_DEPTH) tooDeep();
  if (typeof value === "number") {
    // A whole number beyond int64 (1e300) stays a double rather than wrapping around.
    return Number.isSafeInteger(value) ? BigInt(value) : value;
  }
  if (Array.isArray(value)) return value.map((v) => toCel(v, depth + 1));
  if (value !== null && typeof value === "object") {
    // A Map, not an object: the CEL library reads an object's type from its `constructor`, so a
    // key named "constructor" (or "__proto__") in an object would break it or be lost.
    const out = new Map<string, unknown>();
    for (const k of Object.keys(value)) out.set(k, toCel((value as Record<string, unknown>)[k], depth + 1));
    return out;
  }
  return value;
}

function runtime(message: string): never {
  throw new ResolutionError("TransformFailed", message);
}

/**
 * The JSON value of a CEL result, sized as it is built: the bytes its JSON text would take are
 * counted as the walk goes (a value reached twice, through two references, counts twice, as
 * JSON would write it twice), and the walk stops as soon as the count passes `maxBytes`, so a
 * result far over the limit costs no more than the limit to refuse. Throws `TransformFailed`
 * (ValueTooLarge in the message) over the limit, and for what JSON cannot hold.
 */
export function toJson(value: unknown, maxBytes = Number.POSITIVE_INFINITY): unknown {
  const budget = { left: maxBytes, limit: maxBytes };
  return convert(value, 0, budget);
}

interface Budget {
  left: number;
  readonly limit: number;
}

function spend(budget: Budget, bytes: number): void {
  budget.left -= bytes;
  if (budget.left < 0)
    runtime(
      `the transform's result is over the limit of ${budget.limit} bytes of JSON (ValueTooLarge): make it return less`,
    );
}

/** Bytes of `text` as a JSON string: checked against the budget before the escaped copy is made. */
function spendString(budget: Budget, text: string): void {
  // A JSON string takes at least its length plus the quotes; only one that may fit is escaped.
  spend(budget, text.length + 2);
  budget.left += text.length + 2;
  spend(budget, Buffer.byteLength(JSON.stringify(text), "utf8"));
}

function convert(value: unknown, depth: number, budget: Budget): unknown {
  if (depth > MAX_DEPTH) tooDeep();
  if (typeof value !== "object") return convertScalar(value, budget);
  if (value === null) {
    spend(budget, 4);
    return null;
  }
  if (Array.isArray(value)) {
    spend(budget, 2 + Math.max(0, value.length - 1));
    const out: unknown[] = [];
    for (const v of value) out.push(convert(v, depth + 1, budget));
    return out;
  }
  if (value instanceof Uint8Array) {
    spend(budget, 4 * Math.ceil(value.length / 3) + 2);
    return Buffer.from(value).toString("base64");
  }
  if (value instanceof Date) {
    const text = value.toISOString();
    spendString(budget, text);
    return text;
  }
  if (value instanceof Map) {
    spend(budget, 2 + Math.max(0, value.size - 1));
    const out: Record<string, unknown> = {};
    for (const [k, v] of value) {
      const key = String(convert(k, depth + 1, budget));
      spend(budget, typeof k === "string" ? 1 : 3); // the colon (and quotes for a non-string key)
      define(out, key, convert(v, depth + 1, budget));
    }
    return out;
  }
  const tag = Object.prototype.toString.call(value);
  const obj = value as Record<string, unknown> & { hasValue?: () => boolean; value?: unknown };
  if (tag === "[object optional]" || tag === "[object Optional]") {
    if (typeof obj.hasValue === "function" && obj.hasValue())
      return convert((obj.value as () => unknown)(), depth, budget);
    return runtime("the transform returned an empty optional: end it with .orValue(...)");
  }
  if (value.constructor?.name === "UnsignedInt") {
    const n = exactNumber(BigInt(String(value.valueOf())), "uint");
    spend(budget, String(n).length);
    return n;
  }
  if (value.constructor?.name === "Duration") {
    const text = String(value);
    spendString(budget, text);
    return text;
  }
  if (Object.getPrototypeOf(value) === Object.prototype || Object.getPrototypeOf(value) === null) {
    const keys = Object.keys(value);
    spend(budget, 2 + Math.max(0, keys.length - 1));
    const out: Record<string, unknown> = {};
    for (const k of keys) {
      spendString(budget, k);
      spend(budget, 1);
      define(out, k, convert((value as Record<string, unknown>)[k], depth + 1, budget));
    }
    return out;
  }
  return runtime(`the transform returned a ${value.constructor?.name ?? "value"}, which JSON cannot hold`);
}

/** A value that is not an object: a string, boolean, integer or number (anything else is an error). */
function convertScalar(value: unknown, budget: Budget): unknown {
  switch (typeof value) {
    case "string":
      spendString(budget, value);
      return value;
    case "boolean":
      spend(budget, value ? 4 : 5);
      return value;
    case "bigint": {
      const n = exactNumber(value, "int");
      spend(budget, String(n).length);
      return n;
    }
    case "number":
      if (!Number.isFinite(value)) runtime(`the transform returned ${value}, which JSON cannot hold`);
      spend(budget, JSON.stringify(value).length);
      return value;
    case "undefined":
      return runtime("the transform returned no value");
    default:
      return runtime(`the transform returned a ${typeof value}, which JSON cannot hold`);
  }
}

function define(out: Record<string, unknown>, key: string, value: unknown): void {
  Object.defineProperty(out, key, { value, enumerable: true, writable: true, configurable: true });
}

function exactNumber(value: bigint, type: string): number {
  if (value > BigInt(Number.MAX_SAFE_INTEGER) || value < BigInt(Number.MIN_SAFE_INTEGER)) {
    runtime(`the transform returned the ${type} ${value}, beyond what a JSON number holds exactly (2^53)`);
  }
  return Number(value);
}
