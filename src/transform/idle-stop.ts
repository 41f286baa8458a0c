/**
 * When to stop the transform workers: each is a whole V8 isolate (megabytes of RSS), kept only
 * while transforms run. The pool says when it holds work and when it holds none; once it has held
 * none for `afterMs`, `stop` runs. Work that comes back cancels the wait; the pool starts workers
 * again on its next evaluation, as it did the first time.
 */

/** The timer functions the idle stop uses (Node's, or a test's fake). */
export interface IdleTimers {
  set(run: () => void, ms: number): unknown;
  clear(handle: unknown): void;
}

const NODE_TIMERS: IdleTimers = {
  set: (run, ms) => setTimeout(run, ms).unref(),
  clear: (handle) => clearTimeout(handle as NodeJS.Timeout),
};

/** Runs `stop` once the pool has held no work for `afterMs`; 0 never stops. */
export class IdleStop {
  private readonly afterMs: number;
  private readonly stop: () => void;
  private readonly timers: IdleTimers;
  private handle: unknown;
  private armed = false;

  constructor(afterMs: number, stop: () => void, timers: IdleTimers = NODE_TIMERS) {
    this.afterMs = afterMs;
    this.stop = stop;
    this.timers = timers;
  }

  /** The pool holds work (queued or running): no stop until it is idle again. */
  busy(): void {
    if (!this.armed) return;
    this.armed = false;
    this.timers.clear(this.handle);
    this.handle = undefined;
  }

  /** The pool holds no work: `stop` runs after `afterMs` unless work comes first. */
  idle(): void {
    if (this.armed || this.afterMs <= 0) return;
    this.armed = true;
    this.handle = this.timers.set(() => {
      this.armed = false;
      this.handle = undefined;
      this.stop();
    }, this.afterMs);
  }
}
