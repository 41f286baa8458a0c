/**
 * A request's deadline: aborted after `ms`, or when `outer` aborts (with its reason), as
 * `AbortSignal.any([outer, AbortSignal.timeout(ms)])`, but with a timer that {@link end} clears.
 * AbortSignal.timeout's timer stays until it fires, and the signals it and AbortSignal.any hold
 * through weak references live until a full GC: per request of a cold start's thousands.
 */
export class Deadline {
  private readonly controller = new AbortController();
  private readonly timer: NodeJS.Timeout;
  private readonly outer: AbortSignal | undefined;
  private readonly onOuterAbort: (() => void) | undefined;

  constructor(ms: number, outer: AbortSignal | undefined) {
    const controller = this.controller;
    this.timer = setTimeout(
      () => controller.abort(new DOMException("The operation was aborted due to timeout", "TimeoutError")),
      ms,
    );
    this.timer.unref(); // as AbortSignal.timeout's: a deadline keeps no process alive
    if (!outer) return;
    if (outer.aborted) {
      controller.abort(outer.reason);
      return;
    }
    this.outer = outer;
    this.onOuterAbort = () => controller.abort(outer.reason);
    outer.addEventListener("abort", this.onOuterAbort, { once: true });
  }

  /** Aborted at the deadline, or with the outer signal. */
  get signal(): AbortSignal {
    return this.controller.signal;
  }

  /** The request ended: no timer or listener stays behind. */
  end(): void {
    clearTimeout(this.timer);
    if (this.onOuterAbort) this.outer!.removeEventListener("abort", this.onOuterAbort);
  }
}
