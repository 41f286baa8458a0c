/** Promises for tests that drive code under fake timers. */

/** A promise that reports whether it has settled, and with what, without waiting for it. */
export function track<T>(promise: Promise<T>): { settled: () => boolean; value: () => T | undefined } {
  let settled = false;
  let value: T | undefined;
  void promise.then((v) => {
    settled = true;
    value = v;
  });
  return { settled: () => settled, value: () => value };
}
