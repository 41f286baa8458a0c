/**
 * `value` with every object's keys in reverse order, at every level: the opposite of how
 * kube-apiserver writes them (sorted), for tests and benches of key-order-independent texts.
 */
export function keysReversed(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(keysReversed);
  if (typeof value !== "object" || value === null) return value;
  return Object.fromEntries(
    Object.keys(value)
      .reverse()
      .map((k) => [k, keysReversed((value as Record<string, unknown>)[k])]),
  );
}
