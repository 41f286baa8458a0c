/**
 * The one token bucket: the work queue's overall limiter, the write policy (per Referable and
 * controller-wide) and the Event recorder all count with it. Pure logic on a clock given as
 * milliseconds, for fake time; imports nothing, so any room may use it.
 */

const EPSILON = 1e-9;
const EPSILON_MS = 1e-6;

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
  delay(now: number, tokens = 1): number {
    this.refill(now);
    // Refills add up fractions: a hair below one token is one (else the wait rounds to 0 ms).
    // The same hair off the milliseconds: 0.7 of a token at 10 a second is 70 ms, not 71.
    return this.tokens >= tokens - EPSILON
      ? 0
      : Math.ceil(((tokens - this.tokens) * 1000) / this.rate - EPSILON_MS);
  }

  /**
   * Takes `tokens` (at most the burst: more never come) if they are there now: 0. Else takes
   * nothing: the milliseconds until they are.
   */
  tryTake(now: number, tokens = 1): number {
    const wait = this.delay(now, tokens);
    if (wait === 0) this.tokens -= tokens;
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
