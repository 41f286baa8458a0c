/**
 * Safe reads from parsed JSON: only own properties of plain objects and items of arrays count,
 * so no key (`__proto__`, `constructor`, `prototype`) can reach a prototype or a function.
 */

/** True for a plain object (any realm, or a null prototype): the only kind with fields. */
export function isJsonObject(value: unknown): value is Record<string, unknown> {
  if (typeof value !== "object" || value === null || Array.isArray(value)) return false;
  const proto: unknown = Object.getPrototypeOf(value);
  return proto === null || Object.getPrototypeOf(proto) === null;
}

/** The value of the own field `key` of a plain object; `undefined` when there is none. */
export function ownField(value: unknown, key: string): unknown {
  return isJsonObject(value) && Object.hasOwn(value, key) ? value[key] : undefined;
}

/** The item at `index` of an array, counting from the end when negative; `undefined` when out of range. */
export function listItem(value: unknown, index: number): unknown {
  if (!Array.isArray(value)) return undefined;
  const at = index < 0 ? value.length + index : index;
  return at >= 0 && at < value.length ? (value[at] as unknown) : undefined;
}

/** What a value is, for messages ("a string", "a list"); never the value itself, which may be secret. */
export function describeKind(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "a list";
  if (isJsonObject(value)) return "an object";
  switch (typeof value) {
    case "string":
      return "a string";
    case "number":
      return "a number";
    case "boolean":
      return "a boolean";
    case "undefined":
      return "absent";
    default:
      return "not a JSON value";
  }
}

/** "1 item", "3 items". */
export function countItems(list: readonly unknown[]): string {
  return list.length === 1 ? "1 item" : `${list.length} items`;
}
