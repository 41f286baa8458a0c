/**
 * What Kubernetes CEL users reach for and the CEL library in use does not ship: the rest of
 * cel-go's strings extension (`replace`, `format`, `charAt`, `reverse`) and its encoders
 * extension (`base64.decode`, `base64.encode`). Each function that could build a large string in
 * one call checks the size first, so one call cannot allocate past the cost budget's reach.
 */
import type { Environment } from "@marcbachmann/cel-js";

/** The largest string one extension call may build, in characters. */
export const MAX_BUILT_STRING = 1 << 20;

/**
 * An error of an extension function. Its message is ours and never quotes the data, so the
 * engine shows it as it is (the library's own messages may quote the value and are screened).
 */
export class ExtensionError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ExtensionError";
  }
}

/** Errors thrown inside a function are reported by the library as the call's runtime error. */
function fail(message: string): never {
  throw new ExtensionError(message);
}

function checkBuilt(length: number, what: string): void {
  if (length > MAX_BUILT_STRING)
    fail(`${what} would build a string of ${length} characters, over the limit of ${MAX_BUILT_STRING}`);
}

/** The receiver of `base64.decode(...)`: CEL sees `base64` as a constant of this type. */
class Base64Namespace {}

/** The receiver of `strings.quote(...)`, as {@link Base64Namespace}. */
class StringsNamespace {}

const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;
const BASE64_URL = /^[A-Za-z0-9_-]*={0,2}$/;

function decodeBase64(text: string): Uint8Array {
  // cel-go accepts padded and unpadded standard base64; Buffer silently skips bad characters, so
  // the text is checked first and a typo is an error, not a shorter value.
  const trimmed = text.replace(/[\r\n]/g, "");
  if (!BASE64.test(trimmed) && !BASE64_URL.test(trimmed)) fail("base64.decode: the text is not base64");
  if (trimmed.replace(/=+$/, "").length % 4 === 1) fail("base64.decode: the text is not base64");
  return new Uint8Array(
    Buffer.from(trimmed, trimmed.includes("-") || trimmed.includes("_") ? "base64url" : "base64"),
  );
}

function replace(s: string, from: string, to: string, limit: bigint): string {
  if (limit === 0n) return s;
  const parts = s.split(from);
  let count = parts.length - 1;
  if (limit > 0n && BigInt(count) > limit) count = Number(limit);
  checkBuilt(s.length + count * (to.length - from.length), "replace");
  if (count === parts.length - 1) return parts.join(to);
  return parts.slice(0, count + 1).join(to) + from + parts.slice(count + 1).join(from);
}

/**
 * Formats one value as cel-go's `%s` does: strings unquoted, lists and maps (keys sorted)
 * recursively. The text is counted as it is built and the walk stops once it passes `room`
 * characters, so a list of many references to one large string fails at the limit rather than
 * after building the whole text.
 */
function formatPlain(value: unknown, room: number): string {
  const parts: string[] = [];
  let length = 0;
  const tooLong = () => fail(`format would build a string over the limit of ${MAX_BUILT_STRING} characters`);
  const put = (text: string) => {
    length += text.length;
    if (length > room) tooLong();
    parts.push(text);
  };
  const walk = (v: unknown, depth: number): void => {
    if (depth > 100) fail("format: the value is nested deeper than 100 levels");
    if (typeof v === "string") return put(v);
    if (typeof v === "bigint" || typeof v === "boolean") return put(String(v));
    if (typeof v === "number") {
      if (Number.isNaN(v)) return put("NaN");
      if (!Number.isFinite(v)) return put(v > 0 ? "Infinity" : "-Infinity");
      return put(String(v));
    }
    if (v === null || v === undefined) return put("null");
    // Decoding allocates no more than the bytes, which already exist.
    if (v instanceof Uint8Array) return put(Buffer.from(v).toString("utf8"));
    if (v instanceof Date) return put(v.toISOString().replace(/\.000Z$/, "Z"));
    if (Array.isArray(v)) {
      put("[");
      v.forEach((x, i) => {
        if (i > 0) put(", ");
        walk(x, depth + 1);
      });
      return put("]");
    }
    const name = (v as object).constructor?.name;
    if (name === "Duration") return put(String(v));
    if (name === "UnsignedInt") return put(String(v.valueOf()));
    if (name === "Type") return put(String((v as { name?: unknown }).name));
    const entries: Array<[string, unknown]> =
      v instanceof Map
        ? [...v].map(([k, x]) => [formatPlain(k, room - length), x])
        : Object.keys(v as object).map((k) => [k, (v as Record<string, unknown>)[k]]);
    entries.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    put("{");
    entries.forEach(([k, x], i) => {
      if (i > 0) put(", ");
      put(k);
      put(": ");
      walk(x, depth + 1);
    });
    put("}");
  };
  walk(value, 0);
  return parts.join("");
}

/** cel-go's `strings.quote`: the text in double quotes, with escapes for what is not printable. */
function quote(text: string): string {
  const escapes: Record<string, string> = {
    "\\": "\\\\",
    '"': '\\"',
    "\x07": "\\a",
    "\b": "\\b",
    "\f": "\\f",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
    "\v": "\\v",
  };
  let out = "";
  for (const ch of text) {
    const code = ch.codePointAt(0)!;
    if (escapes[ch] !== undefined) out += escapes[ch];
    else if (code < 0x20 || code === 0x7f) out += `\\x${code.toString(16).padStart(2, "0")}`;
    else out += ch;
  }
  return `"${out}"`;
}

function asNumber(value: unknown, verb: string): number {
  if (typeof value === "bigint") return Number(value);
  if (typeof value === "number") return value;
  if (value !== null && typeof value === "object" && value.constructor?.name === "UnsignedInt")
    return Number(value.valueOf());
  return fail(`format: %${verb} takes a number, not ${value === null ? "null" : typeof value}`);
}

function asInteger(value: unknown, verb: string): bigint {
  if (typeof value === "bigint") return value;
  if (value !== null && typeof value === "object" && value.constructor?.name === "UnsignedInt")
    return BigInt(String(value.valueOf()));
  return fail(`format: %${verb} takes an int or uint`);
}

/** `value` with `digits` decimals, a tie rounded to even as Go does (toFixed rounds it away from zero). */
function fixed(value: number, digits: number): string {
  if (!Number.isFinite(value)) return Number.isNaN(value) ? "NaN" : value > 0 ? "Infinity" : "-Infinity";
  const scaled = Math.abs(value) * 10 ** digits;
  if (digits <= 15 && scaled < Number.MAX_SAFE_INTEGER && scaled % 1 === 0.5) {
    const even = Math.floor(scaled) % 2 === 0 ? Math.floor(scaled) : Math.ceil(scaled);
    return (Math.sign(value) * (even / 10 ** digits)).toFixed(digits);
  }
  return value.toFixed(digits);
}

const VERB = /%(?:\.(\d{1,3}))?([sdfeExXob%])/g;

/** cel-go's `string.format(list)`: `%s %d %f %e %x %X %o %b %%`, with a precision on `%f`/`%e`. */
function format(template: string, args: unknown[]): string {
  let next = 0;
  let built = 0;
  const out = template.replace(VERB, (_match, precision: string | undefined, verb: string) => {
    if (verb === "%") return "%";
    if (next >= args.length) fail(`format: the template has more verbs than the ${args.length} arguments`);
    const arg = args[next++];
    let text: string;
    switch (verb) {
      case "s":
        text = formatPlain(arg, MAX_BUILT_STRING - template.length - built);
        break;
      case "d":
        text = String(asInteger(arg, verb));
        break;
      case "f":
        text = fixed(asNumber(arg, verb), precision === undefined ? 6 : Number(precision));
        break;
      case "e":
      case "E": {
        text = asNumber(arg, verb).toExponential(precision === undefined ? 6 : Number(precision));
        text = text.replace(/e([+-])(\d)$/, "e$10$2");
        if (verb === "E") text = text.toUpperCase();
        break;
      }
      case "x":
      case "X": {
        text =
          typeof arg === "string"
            ? Buffer.from(arg, "utf8").toString("hex")
            : arg instanceof Uint8Array
              ? Buffer.from(arg).toString("hex")
              : asInteger(arg, verb).toString(16);
        if (verb === "X") text = text.toUpperCase();
        break;
      }
      case "o":
        text = asInteger(arg, verb).toString(8);
        break;
      default:
        text = typeof arg === "boolean" ? (arg ? "1" : "0") : asInteger(arg, verb).toString(2);
    }
    built += text.length;
    checkBuilt(template.length + built, "format");
    return text;
  });
  return out;
}

/** Registers the extension functions on `env`. */
export function registerExtensions(env: Environment): void {
  env
    .registerType("referable.Base64Namespace", Base64Namespace)
    .registerConstant("base64", "referable.Base64Namespace", new Base64Namespace())
    .registerFunction("referable.Base64Namespace.decode(string): bytes", (_ns: unknown, s: string) =>
      decodeBase64(s),
    )
    .registerFunction("referable.Base64Namespace.encode(bytes): string", (_ns: unknown, b: Uint8Array) =>
      Buffer.from(b).toString("base64"),
    )
    .registerType("referable.StringsNamespace", StringsNamespace)
    .registerConstant("strings", "referable.StringsNamespace", new StringsNamespace())
    .registerFunction("referable.StringsNamespace.quote(string): string", (_ns: unknown, t: string) => {
      checkBuilt(t.length * 4 + 2, "strings.quote");
      return quote(t);
    })
    .registerFunction("string.replace(string, string): string", (s: string, a: string, b: string) =>
      replace(s, a, b, -1n),
    )
    .registerFunction(
      "string.replace(string, string, int): string",
      (s: string, a: string, b: string, n: bigint) => replace(s, a, b, n),
    )
    .registerFunction("string.format(list): string", (s: string, args: unknown[]) => format(s, args))
    .registerFunction("string.charAt(int): string", (s: string, i: bigint) => {
      const chars = [...s];
      if (i < 0n || i > BigInt(chars.length)) fail(`charAt: index ${i} is out of range`);
      return chars[Number(i)] ?? "";
    })
    .registerFunction("string.reverse(): string", (s: string) => [...s].reverse().join(""));
}
