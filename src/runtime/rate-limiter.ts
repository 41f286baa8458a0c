/**
 * How long a key waits before it is retried: client-go's rate limiters (per-key exponential
 * backoff, an overall token bucket, and the larger of several), made of the one backoff and
 * token bucket.
 */
import { KeyedBackoff } from "../timing/backoff.ts";
import { TokenBucket } from "../timing/token-bucket.ts";

/** Decides how long a key waits before it is retried; client-go's `TypedRateLimiter`. */
export interface RateLimiter {
  /** Records one more failure of `key` and returns how long it should wait, in milliseconds. */
  when(key: string): number;
  /** Ends the tracking of `key`: its next failure starts from the base delay again. */
  forget(key: string): void;
  /** How many failures of `key` are being tracked. */
  numRequeues(key: string): number;
}

/** Options for {@link ItemExponentialFailureRateLimiter}. */
export interface ExponentialBackoffOptions {
  /** Delay after the first failure; each further failure doubles it. @default 5 */
  baseDelayMs?: number;
  /** Longest delay. @default 1000000 (1000 s, as client-go) */
  maxDelayMs?: number;
}

/** Per-key exponential backoff: `baseDelayMs * 2^failures`, capped at `maxDelayMs` (see backoff.ts). */
export class ItemExponentialFailureRateLimiter implements RateLimiter {
  private readonly backoff: KeyedBackoff;

  constructor(options: ExponentialBackoffOptions = {}) {
    this.backoff = new KeyedBackoff({
      baseMs: options.baseDelayMs ?? 5,
      maxMs: options.maxDelayMs ?? 1_000_000,
    });
  }

  when(key: string): number {
    return this.backoff.next(key);
  }

  forget(key: string): void {
    this.backoff.forget(key);
  }

  numRequeues(key: string): number {
    return this.backoff.failures(key);
  }
}

/** Options for {@link BucketRateLimiter}. */
export interface TokenBucketOptions {
  /** Tokens added per second. @default 10 */
  qps?: number;
  /** Size of the bucket, which starts full. @default 100 */
  burst?: number;
}

/**
 * An overall token bucket shared by every key (golang.org/x/time/rate's reservations, as
 * client-go's `BucketRateLimiter` uses them): each call takes a token, possibly one not yet
 * refilled, and waits until it would be.
 */
export class BucketRateLimiter implements RateLimiter {
  private readonly bucket: TokenBucket;

  constructor(options: TokenBucketOptions = {}) {
    const qps = options.qps ?? 10;
    const burst = options.burst ?? 100;
    if (!(qps > 0) || !(burst >= 1)) throw new RangeError("the token bucket needs qps > 0 and burst >= 1");
    this.bucket = new TokenBucket(qps, burst, performance.now());
  }

  when(): number {
    return this.bucket.reserve(performance.now());
  }

  forget(): void {}

  numRequeues(): number {
    return 0;
  }
}

/** The largest delay of several limiters; `forget` and `numRequeues` apply to them all. */
export class MaxOfRateLimiter implements RateLimiter {
  private readonly limiters: readonly RateLimiter[];

  constructor(...limiters: RateLimiter[]) {
    this.limiters = limiters;
  }

  when(key: string): number {
    // Every limiter must record the failure, so no short-circuit.
    return this.limiters.reduce((longest, limiter) => Math.max(longest, limiter.when(key)), 0);
  }

  forget(key: string): void {
    for (const limiter of this.limiters) limiter.forget(key);
  }

  numRequeues(key: string): number {
    return this.limiters.reduce((most, limiter) => Math.max(most, limiter.numRequeues(key)), 0);
  }
}

/** client-go's `DefaultTypedControllerRateLimiter`: per-key exponential backoff, and an overall bucket. */
export function defaultControllerRateLimiter(
  options: ExponentialBackoffOptions & TokenBucketOptions = {},
): RateLimiter {
  return new MaxOfRateLimiter(new ItemExponentialFailureRateLimiter(options), new BucketRateLimiter(options));
}
