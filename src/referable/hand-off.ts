/**
 * A bucket handed to or taken from this replica (sharding). Taken: its Referables are
 * subscribed and emitted for a look, those whose value may have changed while nobody served
 * them first ({@link mayHaveChanged}), the rest a chunk per turn of the event loop on a low
 * lane. Given back: what this replica kept for them is forgotten, and their cached status
 * drops to a summary, as for any other replica's Referable (a shard that lists by slot opens the
 * bucket's informer when it takes it, serves it once its list is in, and closes it when it gives
 * it back: cache.ts).
 */
import type { Referable } from "../api/referable.ts";
import type { EventRecorder } from "./events.ts";
import { compareResourceVersions } from "../informers/object-store.ts";
import type { KubeObject } from "../kube/client.ts";
import type { Logger } from "../api/log.ts";
import type { Resolver } from "../resolver/resolver.ts";
import type { ShardGate } from "../runtime/shard-gate.ts";
import { Channel } from "../runtime/source.ts";
import type { ReferableCache } from "./cache.ts";
import type { ReferableStates } from "./state.ts";
import { readyCondition } from "./status.ts";

/** Referables of a bucket taken over subscribed and emitted per turn of the event loop (serveRest). */
const SERVE_CHUNK = 200;

/** Options for {@link BucketHandOff}. */
export interface BucketHandOffOptions {
  shards: ShardGate;
  cache: ReferableCache;
  states: ReferableStates;
  /** Makes a Referable's subscription, once the cache has primed them all (see isPrimed). */
  track(obj: Referable): void;
  /** Whether the cache's first list has subscribed every Referable served. */
  isPrimed(): boolean;
  /** Orders a bucket taken over: see {@link mayHaveChanged}. */
  cachedVersion?: Resolver["cachedVersion"] | undefined;
  events?: Pick<EventRecorder, "forget"> | undefined;
  logger: Logger;
}

/** The hand-off of buckets; see the module comment. */
export class BucketHandOff {
  /** Referables of a bucket taken that may have changed: looked at first. */
  readonly served = new Channel<string>();
  /** The rest of a bucket taken: looked at behind every other key (the queue's low lane). */
  readonly servedLater = new Channel<string>();
  private readonly options: BucketHandOffOptions;
  /** A count per bucket of the passes that took or let go of it: a pass over its rest stops when it moved on. */
  private readonly epochs = new Map<number, number>();

  constructor(options: BucketHandOffOptions) {
    this.options = options;
    options.shards.listen({
      onBucketAdded: (bucket) => this.serve(bucket),
      onBucketRemoved: (bucket) => this.forget(bucket),
    });
  }

  /**
   * A bucket is served from now on: subscribe its Referables (in one go, as at start) and emit
   * them, those whose value may have changed while nobody served them first: they are
   * subscribed first, so the sources the cache must read again are read for them first, and
   * queued with the normal priority. The rest, most of them and nearly always unchanged (their
   * reconcile compares digests and writes nothing), wait in the queue's low lane.
   */
  private serve(bucket: number): void {
    const epoch = (this.epochs.get(bucket) ?? 0) + 1;
    this.epochs.set(bucket, epoch);
    const { cache } = this.options;
    if (!cache.bySlot) return this.serveListed(bucket, epoch);
    cache.openBucket(bucket).then(
      () => this.serveListed(bucket, epoch),
      (err: unknown) =>
        this.options.logger.error(
          { bucket, err: String(err) },
          "could not list a bucket taken (a bug: please report it)",
        ),
    );
  }

  /** {@link serve}, once the bucket's Referables are cached. */
  private serveListed(bucket: number, epoch: number): void {
    const { shards, cache, cachedVersion } = this.options;
    // Given back (or taken again) while its list came in: that pass is the one that counts.
    if (this.epochs.get(bucket) !== epoch || !shards.held.has(bucket)) return;
    const first: KubeObject[] = [];
    const rest: KubeObject[] = [];
    for (const obj of cache.listBucket(bucket))
      (mayHaveChanged(obj as unknown as Referable, cachedVersion) ? first : rest).push(obj);
    if (this.options.isPrimed()) for (const obj of first) this.options.track(obj as unknown as Referable);
    for (const obj of first) this.served.emit(obj.metadata?.name ?? "");
    this.options.logger.info(
      { bucket, first: first.length, rest: rest.length },
      "queued a bucket's Referables, those that may have changed first",
    );
    // From the next turn: buckets taken in one round have all their first ones subscribed (and
    // their sources asked for, in that order) before any bucket's rest.
    setImmediate(() => this.serveRest(bucket, epoch, rest, 0));
  }

  /**
   * The rest of a bucket taken over, subscribed and emitted a chunk per turn of the event loop:
   * subscribing 8,000 Referables in one go (a shard's share of a failover at 100,000) held the
   * loop for seconds, before the reconciles of those that may have changed could run. Stops when
   * the bucket was let go of (or taken again: a newer pass serves it) meanwhile.
   */
  private serveRest(bucket: number, epoch: number, rest: readonly KubeObject[], from: number): void {
    if (this.epochs.get(bucket) !== epoch || !this.options.shards.held.has(bucket)) return;
    const to = Math.min(rest.length, from + SERVE_CHUNK);
    for (let i = from; i < to; i++) {
      const obj = rest[i]!;
      if (this.options.isPrimed()) this.options.track(obj as unknown as Referable);
      this.servedLater.emit(obj.metadata?.name ?? "");
    }
    if (to < rest.length) setImmediate(() => this.serveRest(bucket, epoch, rest, to));
  }

  /**
   * A bucket is no longer served and none of its reconciles runs: the one place its
   * Referables' state is dropped, subscriptions closed (another replica serves them now).
   */
  private forget(bucket: number): void {
    const { cache, states } = this.options;
    this.epochs.set(bucket, (this.epochs.get(bucket) ?? 0) + 1);
    for (const obj of cache.listBucket(bucket)) {
      const state = states.delete(obj.metadata?.name ?? "");
      if (state?.uid) this.options.events?.forget(state.uid);
    }
    cache
      .closeBucket(bucket)
      .catch((err: unknown) =>
        this.options.logger.error(
          { bucket, err: String(err) },
          "could not close a bucket given back (a bug: please report it)",
        ),
      );
  }
}

/**
 * Whether the value of a Referable this replica has just taken over may have changed while
 * nobody served it: its status is not Ready or not of its generation, or it reads a selector
 * (the cache cannot tell which objects it read), or the source it names is not cached here, or
 * is cached at a resourceVersion newer than the Referable's (the source changed after the status
 * was last written). ResourceVersions of two objects are compared as etcd's revisions: an
 * ordering hint only, never a correctness condition (whatever it says, every Referable of the
 * bucket is reconciled; one it misses, such as a status written from a cache that lagged, only
 * comes later). A resourceVersion that is not a decimal number counts as changed.
 */
export function mayHaveChanged(
  obj: Referable,
  cachedVersion: Resolver["cachedVersion"] | undefined,
): boolean {
  const status = obj.status;
  if (readyCondition(status)?.status !== "True" || status?.observedGeneration !== obj.metadata.generation)
    return true;
  const { apiVersion, kind, namespace, name } = obj.spec?.source ?? {};
  if (typeof apiVersion !== "string" || typeof kind !== "string" || typeof name !== "string" || !name)
    return true;
  if (namespace !== undefined && typeof namespace !== "string") return true;
  const version = cachedVersion?.({ apiVersion, kind, name, ...(namespace !== undefined && { namespace }) });
  return version === undefined || compareResourceVersions(version, obj.metadata.resourceVersion) >= 0;
}
