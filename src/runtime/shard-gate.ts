/**
 * The admission of keys when the work is sharded: a key is worked on only while this replica
 * serves the key's bucket. It wraps a {@link Reconciler} (keys of other buckets are answered
 * "done" without a call) and filters the queue's admission ({@link ShardGate.admits}), so the
 * reconciler and what it writes need not know that sharding exists.
 *
 * A bucket is given back in one order, whatever the reason: it stops being admitted at once,
 * then {@link ShardGate.remove} waits for the reconciles of its keys already running (and the
 * writes they make), then the listeners forget what they kept for its keys, and only then does
 * the caller release its Lease. So a bucket never has two writers: the next holder takes it
 * only after this replica stopped writing it.
 */
import { asError } from "../api/errors.ts";
import { silentLogger, type Logger } from "../api/log.ts";
import { bucketOf } from "./buckets.ts";
import type { Reconciler, Result } from "./reconciler.ts";
import { DONE } from "./reconciler.ts";

/** Told when this replica starts or stops serving a bucket. Must not throw. */
export interface ShardListener {
  /** The bucket is served from now on: look at its keys. */
  onBucketAdded?(bucket: number): void;
  /** The bucket is no longer served and none of its reconciles runs: forget its keys. */
  onBucketRemoved?(bucket: number): void;
}

/** The largest number of buckets: bucket numbers are metric labels, and each is a Lease. */
export const MAX_BUCKETS = 1024;

/** Which buckets this replica serves, and the reconciles running in each; see the module comment. */
export class ShardGate {
  /** The number of buckets. */
  readonly buckets: number;
  private readonly served = new Set<number>();
  private readonly running = new Map<number, number>();
  private readonly idle = new Map<number, Array<() => void>>();
  private readonly listeners: ShardListener[] = [];
  private readonly logger: Logger;

  constructor(buckets: number, logger: Logger = silentLogger) {
    if (!Number.isInteger(buckets) || buckets < 1 || buckets > MAX_BUCKETS)
      throw new RangeError(`the number of buckets must be a whole number from 1 to ${MAX_BUCKETS}`);
    this.buckets = buckets;
    this.logger = logger;
  }

  /** The bucket of `key`. */
  bucketOf(key: string): number {
    return bucketOf(key, this.buckets);
  }

  /** Whether this replica serves the bucket of `key` now. */
  admits(key: string): boolean {
    return this.served.has(this.bucketOf(key));
  }

  /** The buckets served now. */
  get held(): ReadonlySet<number> {
    return this.served;
  }

  /** Adds a listener, told of every bucket added or removed from now on. */
  listen(listener: ShardListener): void {
    this.listeners.push(listener);
  }

  /** Starts serving `bucket` (its Lease is held); the listeners look at its keys. */
  add(bucket: number): void {
    if (this.served.has(bucket)) return;
    this.served.add(bucket);
    for (const listener of this.listeners) this.call(() => listener.onBucketAdded?.(bucket));
  }

  /**
   * Stops admitting `bucket`'s keys, waits for its running reconciles to finish, then tells the
   * listeners to forget its keys. Once this resolves, nothing of this replica writes the bucket.
   */
  async remove(bucket: number): Promise<void> {
    if (!this.served.delete(bucket)) return;
    if ((this.running.get(bucket) ?? 0) > 0)
      await new Promise<void>((resolve) => {
        const waiting = this.idle.get(bucket) ?? [];
        waiting.push(resolve);
        this.idle.set(bucket, waiting);
      });
    // Added back while draining (a hand-over that turned around): it is served again, keep it.
    if (this.served.has(bucket)) return;
    for (const listener of this.listeners) this.call(() => listener.onBucketRemoved?.(bucket));
  }

  /** `reconciler`, answering "done" for keys of buckets not served, and counting the running ones. */
  wrap(reconciler: Reconciler): Reconciler {
    return { reconcile: (key, signal) => this.reconcile(reconciler, key, signal) };
  }

  private async reconcile(reconciler: Reconciler, key: string, signal: AbortSignal): Promise<Result> {
    const bucket = this.bucketOf(key);
    // A key queued before its bucket was given back: another replica serves it now.
    if (!this.served.has(bucket)) return DONE;
    this.running.set(bucket, (this.running.get(bucket) ?? 0) + 1);
    try {
      return await reconciler.reconcile(key, signal);
    } finally {
      const left = this.running.get(bucket)! - 1;
      if (left > 0) this.running.set(bucket, left);
      else {
        this.running.delete(bucket);
        const waiting = this.idle.get(bucket);
        this.idle.delete(bucket);
        for (const resolve of waiting ?? []) resolve();
      }
    }
  }

  private call(callback: () => void): void {
    try {
      callback();
    } catch (err) {
      this.logger.error({ err: asError(err).message }, "shard listener failed (a bug: please report it)");
    }
  }
}
