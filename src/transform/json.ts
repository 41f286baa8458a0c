/**
 * The mapping between JSON values and CEL values, as Kubernetes CEL maps a schemaless field:
 * a whole JSON number is a CEL `int` (a bigint), any other number a `double`; strings, bools,
 * null, lists and maps keep their kind. Back to JSON, `int`/`uint` become numbers (only while a
 * JSON reader can hold them exactly), `bytes` become base64 text as protobuf's JSON mapping
 * writes them, a timestamp RFC 3339 text, a duration text such as `"90s"`, and an optional its
 * value. Anything else (a NaN, a type) is a runtime error: a transform must return JSON.
 */
import { ResolutionError } from "../errors.ts";

/** Deepest nesting of lists and maps converted either way; deeper data fails instead of exhausting the stack. */
export const MAX_DEPTH = 100;

function tooDeep(): never {
  throw new ResolutionError(
    "TransformFailed",
    `the transform's input or result is nested deeper than ${MAX_DEPTH} levels`,
  );
}

/** The CEL value of JSON `value`: whole numbers become `int` (bigint), other numbers `double`. */
export function toCel(value: unknown, depth = 0): unknown {
  if (depth > MAX_DEPTH) tooDeep();
  if (typeof value === "number") {
    // A whole number beyond int64 (1e300) stays a double rather than wrapping around.
    return Number.isSafeInteger(value) ? BigInt(value) : value;
  }
  if (Array.isArray(value)) return value.map((v) => toCel(v, depth + 1));
  if (value !== null && typeof value === "object") {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) {
      // defineProperty, so a "__proto__" key stays a key and never becomes a prototype.
      Object.defineProperty(out, k, { value: toCel(v, depth + 1), enumerable: true, writable: true });
    }
    return out;
  }
  return value;
}

function runtime(message: string): never {
  throw new ResolutionError("TransformFailed", message);
}

/** The JSON value of a CEL result; throws `TransformFailed` for what JSON cannot hold. */
export function toJson(value: unknown, depth = 0): unknown {
  if (depth > MAX_DEPTH) tooDeep();
  switch (typeof value) {
    case "string":
    case "boolean":
      return value;
    case "bigint":
      return exactNumber(value, "int");
    case "number":
      if (!Number.isFinite(value)) runtime(`the transform returned ${value}, which JSON cannot hold`);
      return value;
    case "undefined":
      return runtime("the transform returned no value");
    case "object":
      break;
    default:
      return runtime(`the transform returned a ${typeof value}, which JSON cannot hold`);
  }
  if (value === null) return null;
  if (Array.isArray(value)) return value.map((v) => toJson(v, depth + 1));
  if (value instanceof Uint8Array) return Buffer.from(value).toString("base64");
  if (value instanceof Date) return value.toISOString();
  if (value instanceof Map) {
    const out: Record<string, unknown> = {};
    for (const [k, v] of value) define(out, String(toJson(k, depth + 1)), toJson(v, depth + 1));
    return out;
  }
  const tag = Object.prototype.toString.call(value);
  const obj = value as Record<string, unknown> & { hasValue?: () => boolean; value?: unknown };
  if (tag === "[object optional]" || tag === "[object Optional]") {
    if (typeof obj.hasValue === "function" && obj.hasValue())
      return toJson((obj.value as () => unknown)(), depth);
    return runtime("the transform returned an empty optional: end it with .orValue(...)");
  }
  if (value.constructor?.name === "UnsignedInt") return exactNumber(BigInt(String(value.valueOf())), "uint");
  if (value.constructor?.name === "Duration") return String(value);
  if (Object.getPrototypeOf(value) === Object.prototype || Object.getPrototypeOf(value) === null) {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) define(out, k, toJson(v, depth + 1));
    return out;
  }
  return runtime(`the transform returned a ${value.constructor?.name ?? "value"}, which JSON cannot hold`);
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
