/**
 * The Referable controller: the Referable cache (cache.ts), the watches that turn every event
 * into names (watches.ts) → the runtime Controller (queue, workers) → ReferableReconciler →
 * outputs (keys, then status). This file makes the parts and owns their start, stop and
 * leadership; the Manager (src/runtime/manager.ts) runs it.
 *
 * Every replica keeps its caches and subscriptions warm; only the leader writes.
 */
import type { Referable, ServiceAccountRef } from "../api/referable.ts";
import { actingAccount } from "../api/service-account.ts";
import type { KubeClient } from "../kube/client.ts";
import { silentLogger, type Logger } from "../api/log.ts";
import type { ControllerMetrics } from "./metrics.ts";
import { Discovery, type KindResolver } from "../kube/discovery.ts";
import { FieldOutput } from "../outputs/field/output.ts";
import { KeysOutput } from "../outputs/keys/output.ts";
import { objectKey } from "../outputs/keys/target.ts";
import { TargetWatch } from "../outputs/keys/target-watch.ts";
import { ReadBudget } from "../outputs/read-budget.ts";
import { StatusOutput } from "../outputs/status.ts";
import { WritePolicy, type WritePolicyOptions } from "../outputs/write-policy.ts";
import type { Resolver } from "../resolver/resolver.ts";
import type { Controller, ControllerObserver } from "../runtime/controller.ts";
import type { ShardGate } from "../runtime/shard-gate.ts";
import type { UnfinishedWork } from "../runtime/workqueue.ts";
import { ReferableCache } from "./cache.ts";
import { ReferableCounts } from "./counts.ts";
import { ReferableEdges } from "./edges.ts";
import type { EventRecorder } from "./events.ts";
import { BucketHandOff } from "./hand-off.ts";
import { ReferableLabels, SlotRepair } from "./labels.ts";
import { ReferableReconciler, type Cycles } from "./reconciler.ts";
import { ReferableStates } from "./state.ts";
import { Subscriptions } from "./subscriptions.ts";
import { NAME, ReferableChannels, referableController } from "./watches.ts";

export { mayHaveChanged } from "./hand-off.ts";

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
  /** The lifetime the API server gives each Referable watch, in seconds. @default [30, 50] */
  watchTimeoutSeconds?: [number, number];
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
   * Sharded: list only the buckets served, by the slot label (runtime/slots.ts), when the number
   * of buckets divides 1024; false keeps every Referable listed (compact records of the others).
   * @default true
   */
  listBySlot?: boolean;
  /**
   * The ServiceAccount a Referable that names none acts as (--default-service-account): its
   * reads checked, its export writes impersonated. @default none: the controller's own rights
   */
  defaultServiceAccount?: ServiceAccountRef;
}

/** The Referable controller; see the module comment. */
export class ReferableController {
  private readonly options: ReferableControllerOptions;
  private readonly logger: Logger;
  private readonly cache: ReferableCache;
  private readonly runtime: Controller;
  private readonly states = new ReferableStates();
  private readonly channels = new ReferableChannels();
  private readonly subscriptions: Subscriptions;
  private readonly edges: ReferableEdges;
  /** Watches the targets, for drift. */
  private readonly targets: TargetWatch;
  /** The field output (made with the reconciler), whose claims a bucket handed over lets go of. */
  private fields: FieldOutput | undefined;
  /** The budget of reads on the controller's own initiative (made with the reconciler). */
  private reads: ReadBudget | undefined;
  /** What the reconciler reads of leadership, once per reconcile. */
  private readonly leadership = { leading: false };
  private primed = false;
  private cacheStarted = false;
  /** What a scrape reports of the cache, kept from its events (counts.ts). */
  private readonly counts: ReferableCounts;

  constructor(options: ReferableControllerOptions) {
    this.options = options;
    this.logger = options.logger ?? silentLogger;
    const shards = options.shards;
    this.subscriptions = new Subscriptions(
      this.states,
      options.resolver,
      (name) => this.channels.pushed.emit(name),
      options.defaultServiceAccount,
    );
    this.counts = new ReferableCounts(shards);
    const misplaced = new SlotRepair(options.client, this.logger);
    this.cache = new ReferableCache({
      client: options.client,
      states: this.states,
      ...(shards && { serves: (name: string) => shards.admits(name), buckets: shards }),
      listBySlot: options.listBySlot,
      // A Referable held here under a slot label someone changed, served by another replica.
      onMisplaced: (obj) => misplaced.check(obj as unknown as Referable),
      logger: this.logger,
      metrics: options.metrics,
      watchdogMs: options.watchdogMs,
      labelSelector: options.labelSelector,
      watchTimeoutSeconds: options.watchTimeoutSeconds,
    });
    this.edges = new ReferableEdges(this.cache.bySlot);
    if (shards && !this.cache.bySlot && options.listBySlot !== false)
      this.logger.warn(
        { shards: shards.buckets },
        "--shards does not divide 1024: every replica lists every Referable; choose 2, 4, 8, 16, 32 or another divisor of 1024 so that each lists only its buckets'",
      );
    // Before the watches: the graph, the ownership and the counts follow an event before any
    // key it queues is reconciled.
    this.cache.listen({
      onEvent: (event) => {
        this.counts.apply(event);
        this.edges.follow(event);
      },
      onState: (state) => {
        if (state.phase === "Failed") this.logger.error({ reason: state.reason }, state.message);
        if (state.phase === "Synced") this.prime();
      },
    });
    const handOff =
      shards &&
      new BucketHandOff({
        shards,
        cache: this.cache,
        states: this.states,
        track: (obj) => this.subscriptions.track(obj),
        isPrimed: () => this.primed,
        cachedVersion: options.resolver.cachedVersion?.bind(options.resolver),
        events: options.events,
        logger: this.logger,
      });
    const reconciler = this.reconciler();
    this.runtime = referableController(
      { cache: this.cache, states: this.states, edges: this.edges, channels: this.channels, handOff, shards },
      reconciler,
      {
        logger: this.logger,
        concurrency: options.concurrency,
        ...(options.metrics && { observer: controllerObserver(options.metrics) }),
      },
    );
    this.targets = this.targetWatch();
    this.edges.ownership.listen(this.targets);
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
    this.cache.start();
  }

  /** Starts the workers that reconcile (and, once leading, write). */
  startWorkers(): void {
    this.options.metrics?.maxConcurrentReconciles.labels(NAME).set(this.runtime.concurrency);
    this.runtime.start();
  }

  /** Whether the Referable cache has completed its first list. */
  get synced(): boolean {
    return this.cache.state.phase === "Synced";
  }

  /** Resolves once the Referable cache has completed its first list (or failed). */
  whenSynced(): Promise<void> {
    return this.runtime.whenSynced();
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
    if (leader) this.channels.leading.emit(true);
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
    return shards ? this.counts.inBuckets(shards.held) : this.cache.size;
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
    await this.cache.stop();
    await this.targets.stop();
    this.states.clear();
  }

  /**
   * Subscribes every Referable served in one go, once the cache's first list is in, before any
   * source list returns: the source cache keeps only what is read, so an object listed before
   * its reader subscribed would need a second read. Reconciles then find their subscriptions made.
   */
  private prime(): void {
    if (this.primed) return;
    this.primed = true;
    const shards = this.options.shards;
    for (const obj of this.cache.list())
      if (!shards || shards.admits(obj.metadata?.name ?? ""))
        this.subscriptions.track(obj as unknown as Referable);
  }

  private reconciler(): ReferableReconciler {
    const { options } = this;
    const metrics = options.metrics;
    const policy = new WritePolicy(options.writePolicy);
    const actAs = (obj: Referable) => actingAccount(obj.spec, options.defaultServiceAccount);
    const cycles: Cycles = {
      cycleOf: (name) => this.edges.cycleOf(name),
      flush: (reconciling) => this.edges.flush(reconciling),
    };
    return new ReferableReconciler({
      reader: this.cache,
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
        ownership: this.edges.ownership,
        actAs,
        onWrite: (result) => metrics?.exportWrites.labels(result).inc(),
      }),
      ...(this.cache.bySlot && {
        labels: new ReferableLabels({
          client: options.client,
          policy,
          readBy: (name) => this.edges.readBy(name),
          logger: this.logger,
        }),
      }),
      fields: (this.fields = new FieldOutput({
        client: options.client,
        discovery: options.discovery ?? new Discovery({ client: options.client }),
        policy,
        logger: this.logger,
        claims: this.edges.fieldOwnership,
        actAs,
        onWrite: (result) => metrics?.exportWrites.labels(result).inc(),
        allowSecrets: options.allowSecretExport ?? false,
        reads: (this.reads = new ReadBudget(options.driftReadBudget, () => policy.clock(), {
          onRead: () => metrics?.driftReads.inc(),
        })),
        rereadMs: options.fieldRereadMs,
      })),
      ...(options.events && { events: options.events }),
      logger: this.logger,
      ...(options.now && { now: options.now }),
      maxRepairIntervalMs: options.maxRepairIntervalMs,
      onPropagation: (seconds) => metrics?.propagation.observe(seconds),
      onRepair: () => metrics?.statusRepairs.inc(),
    });
  }

  /** The target watch: drift marks what a Referable knows of an object stale, and queues it. */
  private targetWatch(): TargetWatch {
    return new TargetWatch({
      client: this.options.client,
      ownership: this.edges.ownership,
      allowSecrets: this.options.allowSecretExport ?? false,
      logger: this.logger,
      resyncMs: this.options.exportResyncMs,
      lastVersion: (name, object) => this.states.get(name)?.keys?.objects.get(objectKey(object))?.version,
      drifted: (name, object, version) => {
        this.states.get(name)?.keys?.stale.set(objectKey(object), version);
        this.channels.drifted.emit(name);
      },
    });
  }
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
