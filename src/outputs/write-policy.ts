/**
 * When the controller may write, for every output (a Referable's status, the objects its keys
 * sit in): two token buckets.
 *
 * - One per Referable: `rate` writes a second, sustained, and `burst` at once after a quiet
 *   spell. A source changing at up to `rate` times a second always finds a token, so none of
 *   its values is held back; a storm faster than that is coalesced (the work queue keeps one
 *   entry per Referable, and the write made when the next token comes computes from the latest
 *   result, so the last value is always written). It is also the guard for write loops that
 *   cycle detection cannot see (Referables reading each other across controllers): such a loop
 *   writes at `rate`, not as fast as the API server answers.
 * - One for the whole controller: a budget of `budget` writes a second (`budgetBurst` at once),
 *   since the API server is shared. It is a reservation: a write that finds the budget spent
 *   takes the next token and waits for it, so writers are served in order and the budget is
 *   never exceeded, whatever the number of workers.
 *
 * A writer waits as a requeue, never in a sleep: {@link WritePolicy.pass} says how long, and a
 * {@link WriteGate} (one per writer: a Referable's status, one target object of its keys) holds
 * the place reserved meanwhile. Key writes have a bucket of their own per object (one write per
 * 100 ms, burst 1, the interval docs/api.md promises) and share the controller's budget.
 *
 * Pure logic on a clock given as milliseconds (performance.now() by default), for fake time.
 */

import { TokenBucket } from "../timing/token-bucket.ts";

export { TokenBucket } from "../timing/token-bucket.ts";

/** The policy's settings; see the module comment. */
export interface WritePolicyOptions {
  /** Sustained status writes a second one Referable may make. @default 25 */
  rate?: number;
  /** Status writes one Referable may make at once after a quiet spell. @default 5 */
  burst?: number;
  /** Sustained status writes a second for the whole controller; 0 for no budget. @default 500 */
  budget?: number;
  /** Status writes the whole controller may make at once after a quiet spell. @default 1000 */
  budgetBurst?: number;
}

/** The defaults, measured in BENCHMARKS.md (hot source and fan-out). */
export const WRITE_POLICY_DEFAULTS = { rate: 25, burst: 5, budget: 500, budgetBurst: 1000 } as const;

/** What {@link WritePolicy.admit} decides for one write. */
export type Admission =
  /** Write now. */
  | { write: true }
  /** The Referable has used its rate: look again after this many ms (nothing was taken). */
  | { write: false; retryAfterMs: number }
  /** A place in the controller's budget is reserved: wait this many ms, then write. */
  | { write: "after"; waitMs: number };

/** The write policy of one controller; see the module comment. */
export class WritePolicy {
  readonly rate: number;
  readonly burst: number;
  private readonly budget: TokenBucket | undefined;
  private readonly now: () => number;

  constructor(options: WritePolicyOptions = {}, now: () => number = () => performance.now()) {
    this.rate = options.rate ?? WRITE_POLICY_DEFAULTS.rate;
    this.burst = options.burst ?? WRITE_POLICY_DEFAULTS.burst;
    if (!(this.rate > 0)) throw new RangeError("the status write rate must be greater than 0");
    if (!(this.burst >= 1)) throw new RangeError("the status write burst must be at least 1");
    const budget = options.budget ?? WRITE_POLICY_DEFAULTS.budget;
    if (budget < 0) throw new RangeError("the status write budget must not be negative");
    this.budget =
      budget > 0
        ? new TokenBucket(
            budget,
            Math.max(1, options.budgetBurst ?? WRITE_POLICY_DEFAULTS.budgetBurst),
            now(),
          )
        : undefined;
    this.now = now;
  }

  /** A new Referable's bucket. */
  bucket(): TokenBucket {
    return new TokenBucket(this.rate, this.burst, this.now());
  }

  /** The policy's clock, in milliseconds. */
  clock(): number {
    return this.now();
  }

  /** A gate for a new writer: the Referable's rate, or `rate`/`burst` of its own (0: none). */
  gate(rate?: number, burst = 1): WriteGate {
    if (rate === undefined) return new WriteGate(this.bucket());
    return new WriteGate(rate > 0 ? new TokenBucket(rate, burst, this.now()) : undefined);
  }

  /**
   * The gate of a Referable whose last write was admitted at `admittedAt` (this policy's clock)
   * from a full bucket: one token taken then, refilled since. Without: a new Referable's gate.
   */
  gateAfter(admittedAt: number | undefined): WriteGate {
    if (admittedAt === undefined) return this.gate();
    const bucket = new TokenBucket(this.rate, this.burst, admittedAt);
    bucket.tryTake(admittedAt);
    return new WriteGate(bucket);
  }

  /** A place in the controller's budget only, for a writer without a rate of its own. */
  admitBudget(): Admission {
    const waitMs = this.budget?.reserve(this.now()) ?? 0;
    return waitMs > 0 ? { write: "after", waitMs } : { write: true };
  }

  /**
   * Whether one Referable, with `bucket`, may write now. A write that may go takes the
   * Referable's token and reserves a place in the controller's budget; a write that has to wait
   * for the Referable's rate takes nothing, so the look after `retryAfterMs` computes from the
   * latest result.
   */
  admit(bucket: TokenBucket): Admission {
    const now = this.now();
    const retryAfterMs = bucket.tryTake(now);
    if (retryAfterMs > 0) return { write: false, retryAfterMs };
    const waitMs = this.budget?.reserve(now) ?? 0;
    return waitMs > 0 ? { write: "after", waitMs } : { write: true };
  }
}

/** What {@link WritePolicy.pass} decides: write now, or look again after `retryAfterMs`. */
export type Pass =
  | { write: true }
  /** `rate`: over the writer's own rate; `budget`: a place in the budget is now reserved; `reserved`: still waiting for it. */
  | { write: false; retryAfterMs: number; reason: "rate" | "budget" | "reserved" };

/** One writer's share of a {@link WritePolicy}: its bucket, and the budget place it holds. */
export class WriteGate {
  /** Undefined for a writer without a rate of its own (only the budget applies). */
  readonly bucket: TokenBucket | undefined;
  /** When the place this writer holds in the controller's budget is due (policy clock). */
  reservedUntil: number | undefined = undefined;

  constructor(bucket: TokenBucket | undefined) {
    this.bucket = bucket;
  }
}

/** {@link WritePolicy.admit}, for a writer that may not sleep: a wait is returned, the place kept in `gate`. */
export function pass(policy: WritePolicy, gate: WriteGate): Pass {
  const now = policy.clock();
  if (gate.reservedUntil !== undefined) {
    const wait = gate.reservedUntil - now;
    if (wait > 0) return { write: false, retryAfterMs: Math.ceil(wait), reason: "reserved" };
    gate.reservedUntil = undefined;
    return { write: true };
  }
  const admission = gate.bucket ? policy.admit(gate.bucket) : policy.admitBudget();
  if (admission.write === true) return admission;
  if (admission.write === false) return { ...admission, reason: "rate" };
  gate.reservedUntil = now + admission.waitMs;
  return { write: false, retryAfterMs: admission.waitMs, reason: "budget" };
}
