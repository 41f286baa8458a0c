/** JSON text with object keys sorted, for comparing and keying values whatever their field order. */

/** JSON text with object keys sorted, so equal values give equal text. */
export function stableStringify(value: unknown): string {
  return JSON.stringify(value, (_key, v: unknown) => {
    if (v === null || typeof v !== "object" || Array.isArray(v)) return v;
    // fromEntries defines own properties: an assignment `sorted[k] = ...` would run the
    // `__proto__` setter for a "__proto__" key (a valid ConfigMap key) and drop it, making two
    // statuses that differ only there compare equal.
    return Object.fromEntries(
      Object.keys(v as object)
        .sort()
        .map((k) => [k, (v as Record<string, unknown>)[k]]),
    );
  });
}

/**
 * `stableStringify(a) === stableStringify(b)`, without making either text when both are plain
 * JSON data (null, booleans, finite numbers, strings, arrays and plain objects of them, as
 * JSON.parse gives): those are compared member by member, which allocates nothing. Anything
 * else (undefined members, non-finite numbers, functions, class instances, toJSON) is compared
 * by the texts, so the answer is always the texts'.
 */
export function jsonEqual(a: unknown, b: unknown): boolean {
  const plain = plainEqual(a, b, 0);
  return plain === NOT_PLAIN ? stableStringify(a) === stableStringify(b) : plain;
}

const NOT_PLAIN = 2;
/** Deeper than this, the texts decide (no recursion without bound). */
const MAX_DEPTH = 64;

/** true/false for plain JSON data, NOT_PLAIN when something is not (or too deep). */
function plainEqual(a: unknown, b: unknown, depth: number): boolean | typeof NOT_PLAIN {
  if (a === b) return true; // the same value writes the same text
  // null is also what NaN, Infinity and an array's undefined or function write as.
  if (a === null || b === null) return kinds(a, b, depth);
  const type = typeof a;
  if (type !== typeof b) return kinds(a, b, depth);
  switch (type) {
    case "string":
    case "boolean":
      return a === b;
    case "number":
      // -0 and 0 write the same; NaN and Infinity write as null.
      return Number.isFinite(a) && Number.isFinite(b) ? a === b : NOT_PLAIN;
    case "object": {
      if (depth >= MAX_DEPTH) return NOT_PLAIN;
      const aArray = Array.isArray(a);
      if (aArray !== Array.isArray(b)) return kinds(a, b, depth);
      if (aArray) {
        const x = a as unknown[];
        const y = b as unknown[];
        if (x.length !== y.length) return everyPlain(x, depth) && everyPlain(y, depth) ? false : NOT_PLAIN;
        let equal = true;
        for (let i = 0; i < x.length; i++) {
          const e = plainEqual(x[i], y[i], depth + 1);
          if (e === NOT_PLAIN) return NOT_PLAIN;
          if (!e) equal = false;
        }
        return equal;
      }
      if (!plainObject(a) || !plainObject(b)) return NOT_PLAIN;
      const x = a as Record<string, unknown>;
      const y = b as Record<string, unknown>;
      const keys = Object.keys(x);
      let equal = keys.length === Object.keys(y).length;
      for (const k of keys) {
        if (!Object.hasOwn(y, k)) {
          if (!isPlain(x[k], depth + 1)) return NOT_PLAIN;
          equal = false;
          continue;
        }
        const e = plainEqual(x[k], y[k], depth + 1);
        if (e === NOT_PLAIN) return NOT_PLAIN;
        if (!e) equal = false;
      }
      // Unequal by their members: still not plain if b has a member a lacks that is not plain.
      if (!equal)
        for (const k of Object.keys(y))
          if (!Object.hasOwn(x, k) && !isPlain(y[k], depth + 1)) return NOT_PLAIN;
      return equal;
    }
    default:
      return NOT_PLAIN; // undefined, functions, symbols, bigints
  }
}

/** Two values of different kinds: unequal if both are plain JSON, else the texts decide. */
function kinds(a: unknown, b: unknown, depth: number): false | typeof NOT_PLAIN {
  return isPlain(a, depth) && isPlain(b, depth) ? false : NOT_PLAIN;
}

function plainObject(v: unknown): boolean {
  if (typeof v !== "object" || v === null) return false;
  const proto = Object.getPrototypeOf(v) as unknown;
  return proto === Object.prototype || proto === null;
}

function everyPlain(values: unknown[], depth: number): boolean {
  for (const v of values) if (!isPlain(v, depth + 1)) return false;
  return true;
}

/** Whether `v` is plain JSON data (see {@link jsonEqual}). */
function isPlain(v: unknown, depth: number): boolean {
  if (v === null) return true;
  switch (typeof v) {
    case "string":
    case "boolean":
      return true;
    case "number":
      return Number.isFinite(v);
    case "object": {
      if (depth >= MAX_DEPTH) return false;
      if (Array.isArray(v)) return everyPlain(v, depth);
      if (!plainObject(v)) return false;
      for (const k of Object.keys(v))
        if (!isPlain((v as Record<string, unknown>)[k], depth + 1)) return false;
      return true;
    }
    default:
      return false;
  }
}
