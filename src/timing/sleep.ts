/** The one abortable sleep: a wait that a stop cuts short. Imports nothing, so any room may use it. */

/**
 * Resolves after `ms`, or at once when `signal` aborts; never rejects. A negative `ms` (a deadline
 * that passed while the API server was frozen) waits no time, without Node's TimeoutNegativeWarning.
 */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const finish = () => {
      clearTimeout(timer);
      signal?.removeEventListener("abort", finish);
      resolve();
    };
    const timer = setTimeout(finish, Math.max(0, ms));
    signal?.addEventListener("abort", finish, { once: true });
  });
}
