/**
 * The workers that take keys from a {@link WorkQueue} and reconcile them, and {@link settle}: the
 * one switch that turns how a reconcile ended into what the queue does with its key
 * (controller-runtime's `reconcileHandler`).
 */
import { asError } from "../api/errors.ts";
import { classifyError, type Result } from "./reconciler.ts";
import type { WorkQueue } from "./workqueue.ts";

/** How a reconcile ended, as controller-runtime's `controller_runtime_reconcile_total` labels it. */
export type ReconcileOutcome = "success" | "requeue" | "requeue_after" | "error";

/** How one reconcile ended: the result it returned, or what it threw. */
export type Ending = { result: Result } | { error: unknown };

/**
 * The one mapping of a reconcile's end onto the queue, following controller-runtime:
 * - a thrown {@link TerminalError}: the key's backoff is forgotten (retrying cannot help; its
 *   next event brings it back);
 * - any other thrown error, and `{ requeue: true }`: the key comes back on its growing backoff;
 * - `{ requeueAfterMs }`: the backoff is forgotten, and the key comes back after that delay;
 * - the empty result: the backoff is forgotten.
 */
export function settle(queue: WorkQueue, key: string, ending: Ending): ReconcileOutcome {
  if ("error" in ending) {
    if (classifyError(ending.error) === "terminal") queue.forget(key);
    else queue.addRateLimited(key);
    return "error";
  }
  const { result } = ending;
  if (result.requeue) {
    queue.addRateLimited(key);
    return "requeue";
  }
  queue.forget(key);
  if (result.requeueAfterMs === undefined) return "success";
  queue.addAfter(key, Number.isFinite(result.requeueAfterMs) ? result.requeueAfterMs : 0);
  return "requeue_after";
}

/** Options for {@link runWorkers}. */
export interface RunWorkersOptions {
  /** Told of every error a handler throws (the key is then retried, unless terminal). @default none */
  onError?: (key: string, err: Error) => void;
  /** Told how each key's reconcile ended (after {@link settle}). Must not throw. @default none */
  onSettled?: (key: string, outcome: ReconcileOutcome, error: unknown) => void;
}

/**
 * Runs `concurrency` workers that take keys from `queue` and call `handler`, each end going
 * through {@link settle}. Never rejects; resolves once the queue is shut down and every worker
 * has exited.
 */
export async function runWorkers(
  queue: WorkQueue,
  concurrency: number,
  handler: (key: string) => Promise<Result>,
  options: RunWorkersOptions = {},
): Promise<void> {
  if (!Number.isInteger(concurrency) || concurrency < 1)
    throw new RangeError(`concurrency must be a positive integer, not ${concurrency}`);
  const worker = async (): Promise<void> => {
    for (;;) {
      const key = await queue.get();
      if (key === undefined) return;
      let ending: Ending;
      try {
        ending = { result: await handler(key) };
      } catch (err) {
        ending = { error: err };
        try {
          options.onError?.(key, asError(err));
        } catch {
          // The error hook is for reporting; what it throws cannot stop the worker.
        }
      }
      try {
        const outcome = settle(queue, key, ending);
        options.onSettled?.(key, outcome, "error" in ending ? ending.error : undefined);
      } catch {
        // A metrics hook must never stop the worker.
      } finally {
        queue.done(key);
      }
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
}
