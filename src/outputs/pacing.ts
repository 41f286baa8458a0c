/**
 * How an output paces its writes to the objects it writes into: a gate per object and
 * Referable under the shared write policy (one write per `minWriteIntervalMs`, within the
 * controller's budget), and a doubling backoff after a failed pass. What it counts lives in the
 * Referable's memory, so a change of leader starts it afresh.
 */
import { backoffDelay } from "../timing/backoff.ts";
import { pass, WritePolicy, type WriteGate } from "./write-policy.ts";

/** The part of an output's per-Referable memory that pacing reads and counts. */
export interface PacedMemory {
  /** Per written object (its key), its share of the write policy. */
  gates: Map<string, WriteGate>;
  /** Failed passes in a row, for the backoff. */
  failures: number;
}

/** Options for {@link OutputPacing}, each output's own of the same name. */
export interface PacingOptions {
  /** The write policy whose budget the writes share. @default one of its own */
  policy?: WritePolicy;
  /** Monotonic clock in milliseconds, for a policy of its own. @default performance.now */
  clock?: () => number;
  /** Shortest time between two writes of one object by one Referable; 0: none. @default 100 */
  minWriteIntervalMs?: number;
  /** First wait after a failed pass; doubles up to maxRetryMs. @default 1000 */
  minRetryMs?: number;
  /** @default 300000 */
  maxRetryMs?: number;
}

/** Paces one output's writes: see the module comment. */
export class OutputPacing {
  /** The write policy the writes share. */
  readonly policy: WritePolicy;
  private readonly options: PacingOptions;

  constructor(options: PacingOptions) {
    this.options = options;
    this.policy = options.policy ?? new WritePolicy({}, options.clock);
  }

  /**
   * Whether the object `key` may be written now; if not, the wait is folded into
   * `deferred.deferredMs` (the soonest of the pass's waits).
   */
  admit(key: string, memory: PacedMemory, deferred: { deferredMs: number | undefined }): boolean {
    let gate = memory.gates.get(key);
    if (!gate) {
      const interval = this.options.minWriteIntervalMs ?? 100;
      memory.gates.set(key, (gate = this.policy.gate(interval > 0 ? 1000 / interval : 0)));
    }
    const admission = pass(this.policy, gate);
    if (admission.write) return true;
    deferred.deferredMs = Math.min(deferred.deferredMs ?? admission.retryAfterMs, admission.retryAfterMs);
    return false;
  }

  /** The wait before the next pass of a Referable whose pass failed; counts the failure. */
  afterFailure(memory: PacedMemory): number {
    const attempt = memory.failures++;
    return backoffDelay(attempt, {
      baseMs: this.options.minRetryMs ?? 1000,
      maxMs: this.options.maxRetryMs ?? 300_000,
    });
  }
}
