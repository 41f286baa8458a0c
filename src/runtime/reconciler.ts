/**
 * The seam between the runtime and what it runs: a {@link Reconciler} has one method, and the
 * promises callers rely on are written here, as controller-runtime writes them on its own.
 */

/**
 * What a reconcile asks of the runtime for its key. The empty result is "done": the key's
 * backoff is forgotten and nothing is scheduled.
 */
export interface Result {
  /**
   * Look again after this many milliseconds (the key's backoff is forgotten): a step that needs
   * another pass (a finalizer, then keys), a write waiting for budget, a retry a stage paces
   * itself. A key added meanwhile is looked at sooner; of several delays the earliest wins.
   */
  requeueAfterMs?: number;
  /**
   * Look again on the key's growing backoff, without counting an error: a write that lost a
   * race (409 Conflict) and must be computed again from a newer version.
   */
  requeue?: boolean;
}

/** The result that asks for nothing more. */
export const DONE: Result = Object.freeze({});

/**
 * Reconciles one key: reads the current state, makes the world match it, and says when to look
 * again. Level-based: it never acts on an event's payload, only on what it reads.
 *
 * A thrown error is retried on the key's growing backoff, unless {@link isTerminalError} says
 * retrying cannot help: then it is reported and the key is forgotten until its next event.
 * Never called twice at once for one key.
 */
export interface Reconciler {
  reconcile(key: string): Promise<Result>;
}

const TERMINAL = Symbol.for("referable.dev/TerminalError");

/** An error that retrying the same reconcile cannot mend; its `reason` is a machine reason. */
export class TerminalError extends Error {
  readonly reason: string;

  constructor(reason: string, message: string, options?: { cause?: unknown }) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.name = "TerminalError";
    this.reason = reason;
    Object.defineProperty(this, TERMINAL, { value: true });
  }
}

/** True for a {@link TerminalError} from any copy of this module (not `instanceof`: Jest keeps two). */
export function isTerminalError(err: unknown): err is TerminalError {
  return typeof err === "object" && err !== null && (err as Record<symbol, unknown>)[TERMINAL] === true;
}

/** The sooner of two results: a requeue on backoff wins over a delay, a shorter delay over a longer. */
export function sooner(a: Result, b: Result): Result {
  if (a.requeue || b.requeue) return { requeue: true };
  if (a.requeueAfterMs === undefined) return b;
  if (b.requeueAfterMs === undefined) return a;
  return { requeueAfterMs: Math.min(a.requeueAfterMs, b.requeueAfterMs) };
}
