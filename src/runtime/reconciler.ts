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
 * A thrown error is retried on the key's growing backoff, unless it is a {@link TerminalError}
 * (retrying cannot help): then it is reported and the key is forgotten until its next event.
 * Never called twice at once for one key. `signal` aborts when the controller stops: a reconcile
 * that waits on something may give up then (what it has written stays written).
 */
export interface Reconciler {
  reconcile(key: string, signal: AbortSignal): Promise<Result>;
}

const TERMINAL = Symbol.for("referable.dev/TerminalError");

/**
 * controller-runtime's `reconcile.TerminalError`: a failure retrying cannot mend (only a new
 * event can). The runtime (settle, in workers.ts) does not requeue the key, and the controller counts it in
 * `controller_runtime_terminal_reconcile_errors_total` as well as in the errors.
 */
export class TerminalError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "TerminalError";
    // A brand, not instanceof alone: two copies of this module (Jest's registry) must agree.
    Object.defineProperty(this, TERMINAL, { value: true });
  }
}

// The errors JavaScript throws for a programming error: controller-runtime's recovered panic.
// Not SyntaxError: JSON.parse of a malformed response throws it, which is not our bug.
const PANICS = new Set(["TypeError", "ReferenceError", "RangeError", "EvalError", "URIError"]);

/**
 * What a reconcile threw: "terminal" (a {@link TerminalError}: not retried), "panic" (a bug: a
 * TypeError, ReferenceError, RangeError, EvalError or URIError without a cause, or a thrown
 * non-Error; retried
 * with backoff as controller-runtime retries a recovered panic), or "error" (retried with backoff).
 */
export function classifyError(err: unknown): "terminal" | "panic" | "error" {
  if (typeof err !== "object" || err === null) return "panic";
  if ((err as Record<symbol, unknown>)[TERMINAL] === true) return "terminal";
  if (!(err instanceof Error) && !("message" in err)) return "panic";
  // fetch (undici) reports a failed connection as TypeError("fetch failed", { cause }): the
  // network's failure, retried as any error, not a bug of ours.
  if ((err as Error).cause !== undefined) return "error";
  return PANICS.has((err as Error).name) ? "panic" : "error";
}

/** The sooner of two results: a requeue on backoff wins over a delay, a shorter delay over a longer. */
export function sooner(a: Result, b: Result): Result {
  if (a.requeue || b.requeue) return { requeue: true };
  if (a.requeueAfterMs === undefined) return b;
  if (b.requeueAfterMs === undefined) return a;
  return { requeueAfterMs: Math.min(a.requeueAfterMs, b.requeueAfterMs) };
}
