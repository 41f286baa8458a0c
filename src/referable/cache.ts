/**
 * The Referable cache: the informers of Referables, keeping what the controller reads of each
 * (projectReferable: a shared spec, a skeleton status, another replica's Referable as a compact
 * record), and the echo of this replica's own status write read as the status it wrote, so one
 * copy is kept, not two. It never queues anything: the watches (watches.ts) do.
 *
 * One informer of every Referable, or (sharded, the buckets dividing 1024: `bySlot`) the layers
 * of layers.ts: an informer per bucket served, selected by the slot label, the stray watch and
 * the graph view, so a shard lists, watches and decodes only what it serves (issue 39).
 */
import { REFERABLE_RESOURCE, type Referable, type ReferableStatus } from "../api/referable.ts";
import {
  Informer,
  type InformerListener,
  type InformerOptions,
  type InformerState,
} from "../informers/informer.ts";
import { StringPool } from "../informers/projection.ts";
import type { KubeClient, KubeObject } from "../kube/client.ts";
import type { Logger } from "../api/log.ts";
import {
  andSelector,
  bucketSelector,
  GRAPH_SELECTOR,
  listsBySlot,
  STRAY_SELECTOR,
} from "../runtime/slots.ts";
import type { ControllerMetrics } from "./metrics.ts";
import { referableOf } from "./compact.ts";
import { SlotLayers } from "./layers.ts";
import { projectReferable } from "./spec.ts";
import type { ReferableStates } from "./state.ts";
import { statusEquals } from "./status.ts";
import { parseReferableEvent } from "./watch-line.ts";

/** Options for {@link ReferableCache}. */
export interface ReferableCacheOptions {
  client: Pick<KubeClient, "request" | "watch">;
  /** What this replica wrote, whose echo keeps the status it wrote. */
  states: ReferableStates;
  /** Whether this replica serves a Referable (sharded: its bucket); others are kept compact. */
  serves?: (name: string) => boolean;
  /** Sharded: the number of buckets and a name's bucket. */
  buckets?: { buckets: number; bucketOf(name: string): number } | undefined;
  /**
   * Sharded: list only the buckets served, by slot, when their number divides 1024 (else every
   * Referable is listed). @default true
   */
  listBySlot?: boolean | undefined;
  /** By slot: a Referable held under a slot label of a bucket its name is not of (layers.ts). */
  onMisplaced?: ((obj: KubeObject) => void) | undefined;
  logger: Logger;
  metrics?: ControllerMetrics | undefined;
  /** A Referable watch silent this long is reopened. @default 90000 */
  watchdogMs?: number | undefined;
  /** Only Referables with these labels. @default every Referable */
  labelSelector?: string | undefined;
  /** The lifetime the API server gives each Referable watch, in seconds. @default [30, 50] */
  watchTimeoutSeconds?: [number, number] | undefined;
}

/** The Referable cache; see the module comment. */
export class ReferableCache {
  /** Whether a shard lists only its buckets (the slot label's selectors). */
  readonly bySlot: boolean;
  /** The one informer of every Referable (not {@link bySlot}). */
  private readonly whole: Informer | undefined;
  /** The layers of a shard that lists by slot. */
  private readonly layers: SlotLayers | undefined;
  /** What recurs across Referables, shared (see projectReferable); bounded by the pool. */
  private readonly pool = new StringPool();
  private readonly options: ReferableCacheOptions;

  constructor(options: ReferableCacheOptions) {
    this.options = options;
    const buckets = options.buckets;
    this.bySlot = buckets !== undefined && options.listBySlot !== false && listsBySlot(buckets.buckets);
    const user = options.labelSelector || undefined;
    if (this.bySlot) {
      this.layers = new SlotLayers(
        (selector, compact, name) => this.informer(selector, compact, name),
        (name) => buckets!.bucketOf(name),
        (bucket) => andSelector(bucketSelector(bucket, buckets!.buckets), user),
        andSelector(STRAY_SELECTOR, user),
        andSelector(GRAPH_SELECTOR, user),
        options.onMisplaced,
      );
    } else this.whole = this.informer(user, false);
  }

  /** A cached Referable as the reconciler reads it: a compact record made whole (compact.ts). */
  get(name: string): Referable | undefined {
    return referableOf(this.raw(name));
  }

  /** Every cached Referable, as cached. */
  list(): Iterable<KubeObject> {
    return this.layers ? this.layers.list() : this.whole!.list();
  }

  /** The Referables of `bucket` held whole (by slot: its informer's and the stray watch's). */
  *listBucket(bucket: number): Iterable<KubeObject> {
    if (this.layers) yield* this.layers.listBucket(bucket);
    else
      for (const obj of this.whole!.list())
        if (this.options.buckets?.bucketOf(obj.metadata?.name ?? "") === bucket) yield obj;
  }

  /** How many Referables are cached. */
  get size(): number {
    return this.layers ? this.layers.size : this.whole!.size;
  }

  /** Synced once the first list is in (by slot: the stray watch's and the view's). */
  get state(): InformerState {
    return this.layers ? this.layers.state : this.whole!.state;
  }

  /** Adds a listener of the cache's events and state (before the watches: see watches.ts). */
  listen(listener: InformerListener): void {
    this.addListener(listener);
  }

  /** As {@link listen}: the cache is an informer source of the watches (runtime/source.ts). */
  addListener(listener: InformerListener): void {
    if (this.layers) this.layers.addListener(listener);
    else this.whole!.addListener(listener);
  }

  /** Resolves once the first list is in (or failed, or stopped). */
  whenSettled(): Promise<void> {
    return this.layers ? this.layers.whenSettled() : this.whole!.whenSettled();
  }

  start(): void {
    if (this.layers) this.layers.start();
    else this.whole!.start();
  }

  async stop(): Promise<void> {
    await (this.layers ? this.layers.stop() : this.whole!.stop());
  }

  /**
   * Whether `name`'s bucket was just taken and its list is not in yet: its events are not
   * queued one by one, the hand-off serves the bucket once the list is in.
   */
  listing(name: string): boolean {
    return this.layers?.listing(name) ?? false;
  }

  /** By slot: opens `bucket`'s informer; resolves once its list is in. Otherwise nothing to do. */
  async openBucket(bucket: number): Promise<void> {
    await this.layers?.openBucket(bucket);
  }

  /**
   * A bucket given back: by slot its informer is closed (see layers.ts); otherwise its
   * Referables are kept as compact records, their status a summary, as any other replica's.
   */
  async closeBucket(bucket: number): Promise<void> {
    if (this.layers) return this.layers.closeBucket(bucket);
    for (const obj of [...this.listBucket(bucket)])
      if (obj.digest === undefined && obj.status !== undefined)
        this.whole!.replace(projectReferable(obj, this.pool, obj, true));
  }

  /** A cached Referable as cached (another replica's as a compact record). */
  raw(name: string): KubeObject | undefined {
    return this.layers ? this.layers.get(name) : this.whole!.get(undefined, name);
  }

  /** One informer of Referables: `selector`, and whether it keeps every Referable compact. */
  private informer(selector: string | undefined, compact: boolean, name?: string): Informer {
    const { options } = this;
    let informer: Informer | undefined;
    const cached = (name: string) => informer!.get(undefined, name);
    const informerOptions: InformerOptions = {
      client: options.client,
      resource: REFERABLE_RESOURCE,
      logger: options.logger,
      decode: (raw) => this.decode(raw, cached, compact),
      // The Referables' own informers count in the restart metric too: at 100,000 their list is
      // the largest the controller makes.
      onSignal: (signal, reason) => options.metrics?.informerSignals.labels(signal, reason).inc(),
      // What decode never keeps is never parsed: managedFields of a listed Referable, and of a
      // watch event everything but what decode keeps (a spec unchanged not even that).
      itemFilter: { dropManagedFields: () => true },
      parseEvent: (line) => parseReferableEvent(line, cached),
    };
    if (options.watchdogMs !== undefined) informerOptions.watchdogMs = options.watchdogMs;
    if (selector) informerOptions.labelSelector = selector;
    if (name) informerOptions.name = name;
    if (options.watchTimeoutSeconds) informerOptions.watchTimeoutSeconds = options.watchTimeoutSeconds;
    return (informer = new Informer(informerOptions));
  }

  private decode(
    raw: KubeObject,
    cached: (name: string) => KubeObject | undefined,
    compact: boolean,
  ): KubeObject {
    const name = raw.metadata?.name;
    const serves = this.options.serves;
    const slim = projectReferable(
      raw,
      this.pool,
      name === undefined ? undefined : cached(name),
      // Another replica's Referable (its status echoes too): a compact record (compact.ts).
      compact || (serves !== undefined && !serves(name ?? "")),
    );
    // The echo of this replica's status write holds the status it wrote: one copy, not two
    // (the version it wrote says so without a comparison; any other is compared).
    const state = name === undefined ? undefined : this.options.states.get(name);
    const own = state?.own;
    if (
      own !== undefined &&
      slim.status !== undefined &&
      slim.digest === undefined &&
      ((state!.overlay?.resourceVersion !== undefined &&
        state!.overlay.resourceVersion === slim.metadata?.resourceVersion &&
        state!.overlay.status === own) ||
        statusEquals(slim.status as ReferableStatus, own))
    )
      slim.status = own;
    return slim;
  }
}
