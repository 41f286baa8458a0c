/**
 * The Referable cache: the informer of Referables, keeping what the controller reads of each
 * (projectReferable: a shared spec, a skeleton status, another replica's Referable as a compact
 * record), and the echo of this replica's own status write read as the status it wrote, so one
 * copy is kept, not two. It never queues anything: the watches (watches.ts) do.
 */
import { REFERABLE_RESOURCE, type Referable, type ReferableStatus } from "../api/referable.ts";
import { Informer, type InformerListener, type InformerOptions } from "../informers/informer.ts";
import { StringPool } from "../informers/projection.ts";
import type { KubeClient, KubeObject } from "../kube/client.ts";
import type { Logger } from "../api/log.ts";
import type { ControllerMetrics } from "./metrics.ts";
import { referableOf } from "./compact.ts";
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
  readonly informer: Informer;
  /** What recurs across Referables, shared (see projectReferable); bounded by the pool. */
  private readonly pool = new StringPool();
  private readonly options: ReferableCacheOptions;

  constructor(options: ReferableCacheOptions) {
    this.options = options;
    const informerOptions: InformerOptions = {
      client: options.client,
      resource: REFERABLE_RESOURCE,
      logger: options.logger,
      decode: (raw) => this.decode(raw),
      // The Referables' own informer counts in the restart metric too: at 100,000 its list is
      // the largest the controller makes.
      onSignal: (signal, reason) => options.metrics?.informerSignals.labels(signal, reason).inc(),
      // What decode never keeps is never parsed: managedFields of a listed Referable, and of a
      // watch event everything but what decode keeps (a spec unchanged not even that).
      itemFilter: { dropManagedFields: () => true },
      parseEvent: (line) => parseReferableEvent(line, (name) => this.informer.get(undefined, name)),
    };
    if (options.watchdogMs !== undefined) informerOptions.watchdogMs = options.watchdogMs;
    if (options.labelSelector) informerOptions.labelSelector = options.labelSelector;
    if (options.watchTimeoutSeconds) informerOptions.watchTimeoutSeconds = options.watchTimeoutSeconds;
    this.informer = new Informer(informerOptions);
  }

  /** A cached Referable as the reconciler reads it: a compact record made whole (compact.ts). */
  get(name: string): Referable | undefined {
    return referableOf(this.informer.get(undefined, name));
  }

  /** Every cached Referable, as cached. */
  list(): Iterable<KubeObject> {
    return this.informer.list();
  }

  /** Adds a listener of the cache's events and state (before the watches: see watches.ts). */
  listen(listener: InformerListener): void {
    this.informer.addListener(listener);
  }

  /**
   * Keeps `obj` (a Referable this replica stopped serving) as a compact record, its status a
   * summary, as any other replica's Referable is kept.
   */
  compact(obj: KubeObject): void {
    if (obj.digest === undefined && obj.status !== undefined)
      this.informer.replace(projectReferable(obj, this.pool, obj, true));
  }

  private decode(raw: KubeObject): KubeObject {
    const name = raw.metadata?.name;
    const serves = this.options.serves;
    const slim = projectReferable(
      raw,
      this.pool,
      name === undefined ? undefined : this.informer.get(undefined, name),
      // Another replica's Referable (its status echoes too): a compact record (compact.ts).
      serves !== undefined && !serves(name ?? ""),
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
