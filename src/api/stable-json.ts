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
