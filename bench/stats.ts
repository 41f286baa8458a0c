/** Waiting for a condition with a deadline, and the figures a run reports (percentiles, ms, MiB). */

/** Polls `probe` every 50 ms until it gives a value, or throws naming `what` after `timeoutMs`. */
export async function until<T>(
  what: string,
  probe: () => Promise<T | undefined> | T | undefined,
  timeoutMs: number,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** `promise`, or an Error with `message` once `timeoutMs` has passed without it settling. */
export async function withDeadline<T>(promise: Promise<T>, timeoutMs: number, message: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  return await Promise.race([
    promise,
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(message)), timeoutMs);
    }),
  ]).finally(() => clearTimeout(timer));
}

/**
 * Calls `write`, then waits (`timeoutMs` at most) until `shown()` holds after a change `watch`
 * reports; returns the ms from the write's acknowledgement (0 when the watch was first).
 */
export async function timeToShow(
  watch: { onChange(listener: () => void): () => void },
  shown: () => boolean,
  write: () => Promise<unknown>,
  what: string,
  timeoutMs = 60_000,
): Promise<number> {
  let seenAt = 0;
  const seen = new Promise<void>((resolve) => {
    const off = watch.onChange(() => {
      if (!shown()) return;
      seenAt = performance.now();
      off();
      resolve();
    });
  });
  await write();
  const acked = performance.now();
  await withDeadline(seen, timeoutMs, `${what}: not seen within ${timeoutMs / 1000} s`);
  return Math.max(0, seenAt - acked);
}

function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
}

/** The percentiles of a set of samples (ms). */
export interface Stats {
  n: number;
  p50: number;
  p95: number;
  p99: number;
  max: number;
}

/** The count, percentiles and maximum of `samples`. */
export function stats(samples: number[]): Stats {
  const s = [...samples].sort((a, b) => a - b);
  return {
    n: s.length,
    p50: percentile(s, 50),
    p95: percentile(s, 95),
    p99: percentile(s, 99),
    max: s[s.length - 1] ?? NaN,
  };
}

/** A figure in ms for a table (`-` when there is none). */
export const ms = (v: number) => (Number.isFinite(v) ? v.toFixed(1) : "-");
/** Bytes in MiB, one decimal. */
export const mib = (bytes: number) => (bytes / 1024 / 1024).toFixed(1);
