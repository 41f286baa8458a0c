/**
 * The one backoff: a delay that doubles with each attempt, up to a cap, and the one jitter that
 * spreads the waits of many clients. The work queue, the key and field outputs, status repairs,
 * the kind waiter, the informers, discovery, the start-up checks, leader election, the shard
 * rounds and the webhook's certificate checks all use them. Imports nothing, so any room may.
 */

/** The two numbers of a backoff. */
export interface BackoffOptions {
  /** The delay of the first attempt (attempt 0). */
  baseMs: number;
  /** The longest delay. */
  maxMs: number;
}

/** `baseMs * 2^attempt`, capped at `maxMs` (2^attempt stops growing long before it matters). */
export function backoffDelay(attempt: number, { baseMs, maxMs }: BackoffOptions): number {
  return Math.min(maxMs, baseMs * 2 ** Math.min(Math.max(0, attempt), 30));
}

/**
 * client-go's `wait.Jitter`: `ms` and up to `factor` times more, by `random` (a draw in [0, 1)):
 * a wait in [ms, ms * (1 + factor)).
 */
export function jitter(ms: number, factor: number, random: number = Math.random()): number {
  return ms * (1 + factor * random);
}

/**
 * A random wait in [ms/2, ms] ({@link jitter} of half of it): retries of many clients spread out,
 * none waits less than half.
 */
export function jittered(ms: number, random: number = Math.random()): number {
  return jitter(ms / 2, 1, random);
}

/** Failures counted per key, each key's next delay by {@link backoffDelay}. */
export class KeyedBackoff {
  private readonly options: BackoffOptions;
  private readonly attempts = new Map<string, number>();

  constructor(options: BackoffOptions) {
    this.options = options;
  }

  /** Records one more failure of `key` and returns how long it should wait. */
  next(key: string): number {
    const attempt = this.attempts.get(key) ?? 0;
    this.attempts.set(key, attempt + 1);
    return backoffDelay(attempt, this.options);
  }

  /** Ends the tracking of `key`: its next failure starts from the base delay again. */
  forget(key: string): void {
    this.attempts.delete(key);
  }

  /** How many failures of `key` are being tracked. */
  failures(key: string): number {
    return this.attempts.get(key) ?? 0;
  }

  /** Forgets every key. */
  clear(): void {
    this.attempts.clear();
  }
}
