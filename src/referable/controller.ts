/**
 * The Referable controller: Referable informer → runtime Controller (queue, workers) →
 * ReferableReconciler → outputs (keys, then status). This file only wires them and turns
 * informer events into keys; the Manager (src/runtime/manager.ts) runs it.
 *
 * Every replica keeps its caches and subscriptions warm; only the leader writes.
 */
import {
  REFERABLE_RESOURCE,
  type Referable,
  type ReferableStatus,
  type ServiceAccountRef,
} from "../api/referable.ts";
import { actingAccount } from "../api/service-account.ts";
import { Informer, type InformerEvent, type InformerOptions } from "../informers/informer.ts";
import { compareResourceVersions } from "../informers/object-store.ts";
import { StringPool } from "../informers/projection.ts";
import type { KubeClient, KubeObject } from "../kube/client.ts";
import { silentLogger, type Logger } from "../api/log.ts";
import type { ControllerMetrics } from "./metrics.ts";
import { Discovery, type KindResolver } from "../kube/discovery.ts";
import { FieldOutput } from "../outputs/field/output.ts";
import { isFieldEntry } from "../outputs/field/target.ts";
import { KeysOutput } from "../outputs/keys/output.ts";
import { KeyOwnership } from "../outputs/keys/ownership.ts";
import { objectKey, parseTarget, type ExportTarget } from "../outputs/keys/target.ts";
import { TargetWatch } from "../outputs/keys/target-watch.ts";
import { ReadBudget } from "../outputs/read-budget.ts";
import { StatusOutput } from "../outputs/status.ts";
import { WritePolicy, type WritePolicyOptions } from "../outputs/write-policy.ts";
import type { Resolver } from "../resolver/resolver.ts";
import { Controller, type ControllerObserver } from "../runtime/controller.ts";
import type { ShardGate } from "../runtime/shard-gate.ts";
import type { UnfinishedWork } from "../runtime/workqueue.ts";
import { referableOf, sameSpecKept } from "./compact.ts";
import type { EventRecorder } from "./events.ts";
import { ReferableCounts } from "./counts.ts";
import { ReferableReconciler, type Cycles } from "./reconciler.ts";
import { ReferenceGraph } from "./reference-graph.ts";
import { projectReferable, readsOf } from "./spec.ts";
import { ReferableStates } from "./state.ts";
import { readyCondition, statusEquals } from "./status.ts";
import { Subscriptions } from "./subscriptions.ts";
import { parseReferableEvent } from "./watch-line.ts";

/** Options for {@link ReferableController}. */
export interface ReferableControllerOptions {
  client: Pick<KubeClient, "request" | "watch">;
  /** `cachedVersion` (when given) orders a bucket taken over: see {@link mayHaveChanged}. */
  resolver: Pick<Resolver, "watch"> & Partial<Pick<Resolver, "cachedVersion">>;
  metrics?: ControllerMetrics;
  events?: EventRecorder;
  logger?: Logger;
  /** Reconciles at once. @default 16 (fan-out measured in BENCHMARKS.md) */
  concurrency?: number;
  /** A Referable watch silent this long is reopened. @default 90000 */
  watchdogMs?: number;
  /**
   * Only Referables with these labels (label selector string form): runs several controllers,
   * or shards, side by side. @default every Referable
   */
  labelSelector?: string;
  /** Name of the leader-election Lease, the label of leader_election_master_status. @default "referable-controller" */
  leaseName?: string;
  /** Clock for condition timestamps. @default () => new Date() */
  now?: () => Date;
  /**
   * When outputs may write: a rate and burst per Referable, and a budget for the whole
   * controller, shared by status and key writes. See {@link WritePolicy}.
   */
  writePolicy?: WritePolicyOptions;
  /** See {@link ReferableReconcilerOptions.maxRepairIntervalMs}. @default 30000 */
  maxRepairIntervalMs?: number;
  /** Whether spec.export may write into Secrets (--allow-secret-export). @default false */
  allowSecretExport?: boolean;
  /** Maps a field target's kind to its resource (share the resolver's). @default one of its own */
  discovery?: KindResolver;
  /** Longest time between two reads of an object a field is exported into. @default 30000 */
  fieldRereadMs?: number;
  /**
   * Reads a second the whole controller makes on its own initiative (drift reads of field
   * targets, missing targets read again), shared fairly between Referables; 0: no budget.
   * @default 10
   */
  driftReadBudget?: number;
  /**
   * How often the targets of a namespace where the controller may not watch them (no list or
   * watch granted there) are read again for drift. @default 30000
   */
  exportResyncMs?: number;
  /**
   * Sharding (--shards): this replica reconciles, subscribes and writes only the Referables of
   * the buckets the gate serves; the Referable cache and the reference graph stay whole.
   * @default none: every Referable (one leader)
   */
  shards?: ShardGate;
  /**
   * The ServiceAccount a Referable that names none acts as (--default-service-account): its
   * reads checked, its export writes impersonated. @default none: the controller's own rights
   */
  defaultServiceAccount?: ServiceAccountRef;
}

const NAME = "referable";

/** Referables of a bucket taken over subscribed and queued per turn of the event loop (serveRest). */
const SERVE_CHUNK = 200;

/** The Referable controller; see the module comment. */
export class ReferableController {
  private readonly options: ReferableControllerOptions;
  private readonly logger: Logger;
  private readonly informer: Informer;
  private readonly runtime: Controller;
  private readonly states = new ReferableStates();
  private readonly subscriptions: Subscriptions;
  private readonly graph = new ReferenceGraph();
  /** Who owns each exported key, from the cached specs. */
  private readonly ownership = new KeyOwnership();
  /** Watches the targets, for drift. */
  private readonly targets: TargetWatch;
  /** The field output (made with the reconciler), whose claims a bucket handed over lets go of. */
  private fields: FieldOutput | undefined;
  /** The budget of reads on the controller's own initiative (made with the reconciler). */
  private reads: ReadBudget | undefined;
  private graphFlushScheduled = false;
  /** What the reconciler reads of leadership, once per reconcile. */
  private readonly leadership = { leading: false };
  private primed = false;
  /** A count per bucket of the passes that took or let go of it: a pass over its rest stops when it moved on. */
  private readonly bucketEpochs = new Map<number, number>();
  /** The Referable cache's string pool, for the compact records of a bucket given back. */
  private pool: StringPool | undefined;
  private cacheStarted = false;
  /** What a scrape reports of the cache, kept from its events (counts.ts). */
  private readonly counts: ReferableCounts;

  constructor(options: ReferableControllerOptions) {
    this.options = options;
    this.logger = options.logger ?? silentLogger;
    this.subscriptions = new Subscriptions(
      this.states,
      options.resolver,
      (name) => this.runtime.enqueue(name),
      options.defaultServiceAccount,
    );
    const shards = options.shards;
    this.counts = new ReferableCounts(shards);
    const reconciler = shards ? shards.wrap(this.reconciler()) : this.reconciler();
    const runtime: ConstructorParameters<typeof Controller>[0] = {
      name: NAME,
      reconciler,
      logger: this.logger,
    };
    if (shards) {
      runtime.admit = (name) => shards.admits(name);
      shards.listen({
        onBucketAdded: (bucket) => this.serveBucket(bucket),
        onBucketRemoved: (bucket) => this.forgetBucket(bucket),
      });
    }
    if (options.concurrency !== undefined) runtime.concurrency = options.concurrency;
    if (options.metrics) runtime.observer = controllerObserver(options.metrics);
    this.runtime = new Controller(runtime);
    this.informer = this.referableInformer();
    this.targets = this.targetWatch();
    this.ownership.listen(this.targets);
  }

  /** Starts watching Referables and reconciling them: {@link startCache}, then {@link startWorkers}. */
  start(): void {
    this.startCache();
    this.startWorkers();
  }

  /** Starts the Referable cache; nothing is reconciled until {@link startWorkers}. */
  startCache(): void {
    if (this.cacheStarted) return;
    this.cacheStarted = true;
    this.informer.start();
  }

  /** Starts the workers that reconcile (and, once leading, write). */
  startWorkers(): void {
    this.options.metrics?.maxConcurrentReconciles.labels(NAME).set(this.runtime.concurrency);
    this.runtime.start();
  }

  /** Whether the Referable cache has completed its first list. */
  get synced(): boolean {
    return this.informer.state.phase === "Synced";
  }

  /** Resolves once the Referable cache has completed its first list (or failed). */
  whenSynced(): Promise<void> {
    return this.informer.whenSettled();
  }

  /** Makes this replica write (true) or only keep its caches warm (false). */
  setLeader(leader: boolean): void {
    if (this.leadership.leading === leader) return;
    this.leadership.leading = leader;
    // Sharded, "leading" only means "writes the buckets it serves": there is no one leader.
    if (!this.options.shards)
      this.options.metrics?.leaderStatus
        .labels(this.options.leaseName ?? "referable-controller")
        .set(leader ? 1 : 0);
    this.states.changeLeadership();
    // A new leader looks at everything: statuses may be stale from the previous leader's last moments.
    if (leader) for (const obj of this.informer.list()) this.runtime.enqueue(obj.metadata?.name ?? "");
  }

  /** Referables waiting for their turn in the read budget now. */
  readsWaiting(): number {
    return this.reads?.waiting ?? 0;
  }

  /** The work queue's work in progress (the stuck-worker gauges), measured now. */
  unfinishedWork(): UnfinishedWork {
    return this.runtime.unfinishedWork();
  }

  /** The Referables this replica serves: all of them, or (sharded) those of its buckets. */
  countOwned(): number {
    const shards = this.options.shards;
    if (!shards && !this.leadership.leading) return 0;
    return shards ? this.counts.inBuckets(shards.held) : this.informer.size;
  }

  /**
   * A bucket is served from now on: subscribe its Referables (in one go, as at start) and queue
   * them, those whose value may have changed while nobody served them first
   * ({@link mayHaveChanged}): they are subscribed first, so the sources the cache must read
   * again are read for them first, and queued with the normal priority. The rest, most of them
   * and nearly always unchanged (their reconcile compares digests and writes nothing), wait in
   * the queue's low lane, behind every other key of this replica.
   */
  private serveBucket(bucket: number): void {
    const shards = this.options.shards!;
    const first: KubeObject[] = [];
    const rest: KubeObject[] = [];
    const cachedVersion = this.options.resolver.cachedVersion?.bind(this.options.resolver);
    for (const obj of this.informer.list()) {
      if (shards.bucketOf(obj.metadata?.name ?? "") !== bucket) continue;
      (mayHaveChanged(obj as unknown as Referable, cachedVersion) ? first : rest).push(obj);
    }
    const epoch = (this.bucketEpochs.get(bucket) ?? 0) + 1;
    this.bucketEpochs.set(bucket, epoch);
    if (this.primed) for (const obj of first) this.subscriptions.track(obj as unknown as Referable);
    for (const obj of first) this.runtime.enqueue(obj.metadata?.name ?? "");
    this.logger.info(
      { bucket, first: first.length, rest: rest.length },
      "queued a bucket's Referables, those that may have changed first",
    );
    // From the next turn: buckets taken in one round have all their first ones subscribed (and
    // their sources asked for, in that order) before any bucket's rest.
    setImmediate(() => this.serveRest(bucket, epoch, rest, 0));
  }

  /**
   * The rest of a bucket taken over, subscribed and queued (low) a chunk per turn of the event
   * loop, from the turn after the bucket was taken: subscribing 8,000 Referables in one go (a shard's share of a failover at 100,000) held
   * the loop for seconds, before the reconciles of those that may have changed could run. Stops
   * when the bucket was let go of (or taken again: a newer pass serves it) meanwhile.
   */
  private serveRest(bucket: number, epoch: number, rest: readonly KubeObject[], from: number): void {
    if (this.bucketEpochs.get(bucket) !== epoch || !this.options.shards!.held.has(bucket)) return;
    const to = Math.min(rest.length, from + SERVE_CHUNK);
    for (let i = from; i < to; i++) {
      const obj = rest[i]!;
      if (this.primed) this.subscriptions.track(obj as unknown as Referable);
      this.runtime.enqueue(obj.metadata?.name ?? "", "low");
    }
    if (to < rest.length) setImmediate(() => this.serveRest(bucket, epoch, rest, to));
  }

  /**
   * A bucket is no longer served and none of its reconciles runs: the one place its
   * Referables' state is dropped, subscriptions closed (another replica serves them now).
   */
  private forgetBucket(bucket: number): void {
    const shards = this.options.shards!;
    this.bucketEpochs.set(bucket, (this.bucketEpochs.get(bucket) ?? 0) + 1);
    for (const obj of this.informer.list()) {
      const name = obj.metadata?.name ?? "";
      if (shards.bucketOf(name) !== bucket) continue;
      const state = this.states.delete(name);
      if (state?.uid) this.options.events?.forget(state.uid);
      // Its cached status drops to a summary, as for any other replica's Referable.
      if (obj.digest === undefined && obj.status !== undefined)
        this.informer.replace(projectReferable(obj, this.pool, obj, true));
    }
  }

  /** Referables by their Ready reason, for the gauge. */
  countByReason(): Map<string, number> {
    return this.counts.byReason();
  }

  /**
   * Stops writing and taking work, and resolves once every running reconcile (and the write it
   * may be making) has finished: after this, nothing of this replica writes.
   */
  async drain(): Promise<void> {
    this.setLeader(false);
    await this.runtime.drain();
  }

  /** {@link drain}s, then closes the cache and every subscription. */
  async stop(): Promise<void> {
    await this.drain();
    await this.informer.stop();
    await this.targets.stop();
    this.states.clear();
  }

  private reconciler(): ReferableReconciler {
    const { options } = this;
    const metrics = options.metrics;
    const policy = new WritePolicy(options.writePolicy);
    const actAs = (obj: Referable) => actingAccount(obj.spec, options.defaultServiceAccount);
    const cycles: Cycles = {
      cycleOf: (name) => this.graph.cycleOf(name),
      flush: (reconciling) => this.flushGraph(reconciling),
    };
    return new ReferableReconciler({
      reader: { get: (name) => expandReferable(this.informer.get(undefined, name)) },
      states: this.states,
      track: (obj) => this.subscriptions.track(obj),
      cycles,
      leadership: this.leadership,
      status: new StatusOutput({
        client: options.client,
        policy,
        logger: this.logger,
        onWrite: (result) => metrics?.statusWrites.labels(result).inc(),
        onDeferred: (reason) => metrics?.statusWritesDeferred.labels(reason).inc(),
      }),
      keys: new KeysOutput({
        client: options.client,
        policy,
        logger: this.logger,
        allowSecrets: options.allowSecretExport ?? false,
        ownership: this.ownership,
        actAs,
        onWrite: (result) => metrics?.exportWrites.labels(result).inc(),
      }),
      fields: (this.fields = new FieldOutput({
        client: options.client,
        discovery: options.discovery ?? new Discovery({ client: options.client }),
        policy,
        logger: this.logger,
        enqueue: (name) => this.runtime.enqueue(name),
        actAs,
        onWrite: (result) => metrics?.exportWrites.labels(result).inc(),
        allowSecrets: options.allowSecretExport ?? false,
        reads: (this.reads = new ReadBudget(options.driftReadBudget, () => policy.clock(), {
          onRead: () => metrics?.driftReads.inc(),
        })),
        ...(options.fieldRereadMs !== undefined && { rereadMs: options.fieldRereadMs }),
      })),
      ...(options.events && { events: options.events }),
      logger: this.logger,
      ...(options.now && { now: options.now }),
      ...(options.maxRepairIntervalMs !== undefined && { maxRepairIntervalMs: options.maxRepairIntervalMs }),
      onPropagation: (seconds) => metrics?.propagation.observe(seconds),
      onRepair: () => metrics?.statusRepairs.inc(),
    });
  }

  /** The target watch: drift marks what a Referable knows of an object stale, and queues it. */
  private targetWatch(): TargetWatch {
    return new TargetWatch({
      client: this.options.client,
      ownership: this.ownership,
      allowSecrets: this.options.allowSecretExport ?? false,
      logger: this.logger,
      ...(this.options.exportResyncMs !== undefined && { resyncMs: this.options.exportResyncMs }),
      lastVersion: (name, object) => this.states.get(name)?.keys?.objects.get(objectKey(object))?.version,
      drifted: (name, object, version) => {
        this.states.get(name)?.keys?.stale.set(objectKey(object), version);
        this.runtime.enqueue(name);
      },
    });
  }

  private referableInformer(): Informer {
    // What recurs across Referables, shared (see projectReferable); bounded by the pool.
    const pool = new StringPool();
    const decode = (raw: KubeObject): KubeObject => {
      const name = raw.metadata?.name;
      const shards = this.options.shards;
      const slim = projectReferable(
        raw,
        pool,
        name === undefined ? undefined : informer.get(undefined, name),
        // Another replica's Referable (its status echoes too): a compact record (compact.ts).
        shards !== undefined && !shards.admits(name ?? ""),
      );
      // The echo of this replica's status write holds the status it wrote: one copy, not two
      // (the version it wrote says so without a comparison; any other is compared).
      const state = name === undefined ? undefined : this.states.get(name);
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
    };
    const options: InformerOptions = {
      client: this.options.client,
      resource: REFERABLE_RESOURCE,
      logger: this.logger,
      decode,
      // The Referables' own informer counts in the restart metric too: at 100,000 its list is
      // the largest the controller makes.
      onSignal: (signal, reason) => this.options.metrics?.informerSignals.labels(signal, reason).inc(),
      // What decode never keeps is never parsed: managedFields of a listed Referable, and of a
      // watch event everything but what decode keeps (a spec unchanged not even that).
      itemFilter: { dropManagedFields: () => true },
      parseEvent: (line) => parseReferableEvent(line, (name) => informer.get(undefined, name)),
    };
    if (this.options.watchdogMs !== undefined) options.watchdogMs = this.options.watchdogMs;
    if (this.options.labelSelector) options.labelSelector = this.options.labelSelector;
    const informer = new Informer(options);
    this.pool = pool;
    informer.addListener({
      onEvent: (event) => {
        this.counts.apply(event);
        this.onEvent(event);
      },
      onState: (state) => {
        if (state.phase === "Failed") this.logger.error({ reason: state.reason }, state.message);
        // Subscribe every Referable in one go, before any source list returns: the source cache
        // keeps only what is read, so an object listed before its reader subscribed would need
        // a second read. Reconciles then find their subscriptions made.
        if (state.phase === "Synced" && !this.primed) {
          this.primed = true;
          const shards = this.options.shards;
          for (const obj of informer.list())
            if (!shards || shards.admits(obj.metadata?.name ?? ""))
              this.subscriptions.track(obj as unknown as Referable);
        }
      },
    });
    return informer;
  }

  /** Events only enqueue names, and keep the reference graph in step. */
  private onEvent(event: InformerEvent): void {
    this.follow(event);
    const referable = event.object as unknown as Referable;
    const name = referable.metadata?.name ?? "";
    // The echo of this replica's own status write brings nothing to do: it holds what was
    // written, which reconcile already compares against. Skipping it halves the reconciles of a
    // fan-out (one source read by a thousand Referables), where the controller shares the
    // machine with the API server it waits for. A step that needs another pass asks for it in
    // its result, so no echo is ever needed for progress.
    const state = this.states.get(name);
    const overlay = state?.overlay;
    if (
      event.type === "MODIFIED" &&
      overlay?.resourceVersion !== undefined &&
      overlay.resourceVersion === referable.metadata?.resourceVersion
    ) {
      // The cache shows what was written: the overlay has nothing left to add (viewOf would
      // drop it at the next reconcile, but an echo brings none), so it goes now.
      state!.overlay = undefined;
      return;
    }
    this.runtime.enqueue(name);
  }

  /** Keeps the reference graph in step with a Referable event, and schedules a look for new cycles. */
  private follow(event: InformerEvent): void {
    const obj = event.object as unknown as Referable;
    const name = obj.metadata?.name;
    if (!name || unchangedEdges(event)) return;
    if (event.type === "DELETED") this.graph.delete(name);
    else this.graph.set(name, obj.metadata.labels as Record<string, string> | undefined, readsOf(obj));
    // Claims on fields and keys from every cached Referable, served here or not: one owner per
    // key or field cluster-wide. A field whose owner changed enqueues its claimants itself.
    if (event.type === "DELETED") this.fields?.forget(name);
    else this.fields?.follow(obj);
    // A key whose owner changed: its claimants look again (the new owner writes it).
    const handover =
      event.type === "DELETED"
        ? this.ownership.delete(name)
        : this.ownership.set(name, String(obj.metadata.creationTimestamp ?? ""), exportTargets(obj));
    for (const other of handover) this.runtime.enqueue(other);
    // Once per burst of events (a relist delivers thousands at once), not once per event.
    if (this.graphFlushScheduled) return;
    this.graphFlushScheduled = true;
    queueMicrotask(() => {
      this.graphFlushScheduled = false;
      this.flushGraph(undefined);
    });
  }

  /** Recomputes the cycles if the graph changed, and queues every Referable whose cycle changed. */
  private flushGraph(reconciling: string | undefined): void {
    for (const changed of this.graph.flush()) if (changed !== reconciling) this.runtime.enqueue(changed);
  }
}

/**
 * Whether a change leaves the graph's edges and the key ownership as they were: the same spec,
 * labels and creation time (a status echo: the decode keeps the very spec and labels objects
 * of the version it replaces when they are equal, see projectReferable; a compact record its
 * shared spec, see sameSpecKept).
 */
function unchangedEdges(event: InformerEvent): boolean {
  const old = event.old;
  if (event.type !== "MODIFIED" || old === undefined) return false;
  const m = event.object.metadata;
  const om = old.metadata;
  return (
    sameSpecKept(old, event.object) &&
    om?.labels === m?.labels &&
    om?.creationTimestamp === m?.creationTimestamp &&
    om?.uid === m?.uid
  );
}

/** A cached Referable as the reconciler reads it: a compact record made whole, its skeleton status expanded (compact.ts). */
function expandReferable(obj: KubeObject | undefined): Referable | undefined {
  return referableOf(obj);
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

/** The targets of a Referable's spec.export; none when one is invalid (then nothing is written: InvalidSpec). */
function exportTargets(obj: Referable): ExportTarget[] {
  const raw = obj.spec?.export;
  if (!Array.isArray(raw)) return [];
  const targets: ExportTarget[] = [];
  for (const t of raw) {
    // A field target is the field output's (FieldOutput.follow), not a key of this one.
    if (isFieldEntry(t)) continue;
    const parsed = parseTarget(t, "export");
    if (typeof parsed === "string") return [];
    targets.push(parsed);
  }
  return targets;
}

/** The runtime's measurements into controller-runtime's metrics. */
function controllerObserver(metrics: ControllerMetrics): ControllerObserver {
  const labels = { name: NAME, controller: NAME };
  // Each series looked up once: these are called several times per reconcile, and a lookup
  // checks and copies its labels every time.
  const adds = metrics.workqueueAdds.labels(labels);
  const depth = metrics.workqueueDepth.labels(labels);
  const queued = metrics.workqueueQueueDuration.labels(labels);
  const worked = metrics.workqueueWorkDuration.labels(labels);
  const retries = metrics.workqueueRetries.labels(labels);
  const active = metrics.activeWorkers.labels(NAME);
  const reconcileTime = metrics.reconcileTime.labels(NAME);
  return {
    onAdd: () => adds.inc(),
    onDepth: (d) => depth.set(d),
    onGet: (s) => queued.observe(s),
    onDone: (s) => worked.observe(s),
    onRetry: () => retries.inc(),
    onActive: (delta) => (delta > 0 ? active.inc() : active.dec()),
    onReconcile: (outcome, seconds, error) => {
      if (outcome === "error") metrics.observeReconcileError(error ?? "error");
      else metrics.reconcileTotal.labels(NAME, outcome).inc();
      reconcileTime.observe(seconds);
    },
  };
}
