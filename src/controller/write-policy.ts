/**
 * When the controller may write a Referable's status: two token buckets.
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
 * Pure logic on a clock given as milliseconds (performance.now() by default), for fake time.
 */

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

const EPSILON = 1e-9;

/**
 * A token bucket that starts full. Its tokens may go below zero: {@link reserve} takes a token
 * that is not there yet and says how long to wait for it.
 */
export class TokenBucket {
  private readonly rate: number;
  private readonly burst: number;
  private tokens: number;
  private at: number;

  /** `rate` tokens a second, at most `burst` kept. */
  constructor(rate: number, burst: number, now: number) {
    if (!(rate > 0)) throw new RangeError("a token bucket's rate must be greater than 0");
    if (!(burst >= 1)) throw new RangeError("a token bucket's burst must be at least 1");
    this.rate = rate;
    this.burst = burst;
    this.tokens = burst;
    this.at = now;
  }

  /**
   * Milliseconds until a token is there (0: one is there now), in whole milliseconds so that a
   * wait always moves the clock on. Takes nothing.
   */
  delay(now: number): number {
    this.refill(now);
    // Refills add up fractions: a hair below one token is one (else the wait rounds to 0 ms).
    return this.tokens >= 1 - EPSILON ? 0 : Math.ceil(((1 - this.tokens) * 1000) / this.rate);
  }

  /** Takes a token if one is there now: 0. Else takes nothing: the milliseconds until one is. */
  tryTake(now: number): number {
    const wait = this.delay(now);
    if (wait === 0) this.tokens -= 1;
    return wait;
  }

  /** Takes the next token, there or not: the milliseconds until it is (0: now). */
  reserve(now: number): number {
    const wait = this.delay(now);
    this.tokens -= 1;
    return wait;
  }

  /** Whether the bucket is full again, so one made anew would behave the same. */
  full(now: number): boolean {
    this.refill(now);
    return this.tokens >= this.burst;
  }

  private refill(now: number): void {
    if (now > this.at) {
      this.tokens = Math.min(this.burst, this.tokens + ((now - this.at) * this.rate) / 1000);
      this.at = now;
    }
  }
}

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
