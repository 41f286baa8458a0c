/**
 * The Referable controller: Referable informer → work queue → reconcile → status.
 *
 * Level-based: events only enqueue names; reconcile reads the Referable from the cache and the
 * current result of its resolver subscription, computes the status from them, and writes it
 * through the status subresource only when it differs from what is stored. Every replica keeps
 * its caches and subscriptions warm; only the leader writes.
 */
import { asError, isResolutionError, ResolutionError } from "../errors.ts";
import { Informer, type InformerEvent, type InformerOptions } from "../informers/informer.ts";
import { compileLabelSelector } from "../informers/label-selector.ts";
import { isApiError, type KubeClient } from "../kube/client.ts";
import { silentLogger, type Logger } from "../log.ts";
import type { ControllerMetrics } from "../metrics.ts";
import type { Resolver, Subscription } from "../resolver/resolver.ts";
import type { ResolutionResult } from "../resolver/types.ts";
import type { EventRecorder } from "./events.ts";
import { Exporter, type ExportStep } from "./export.ts";
import {
  REFERABLE_API_VERSION,
  REFERABLE_GROUP,
  REFERABLE_RESOURCE,
  requestFor,
  slimReferable,
  type Referable,
  type ReferableStatus,
} from "./referable.ts";
import { describeCycle, ReferenceGraph, type ReadsReferables } from "./reference-graph.ts";
import { desiredStatus, readyCondition, stableStringify, statusEquals, statusPatch } from "./status.ts";
import {
  classifyError,
  runWorkers,
  TerminalError,
  WorkQueue,
  type UnfinishedWork,
  type WorkResult,
} from "./workqueue.ts";
import { WritePolicy, type TokenBucket, type WritePolicyOptions } from "./write-policy.ts";

/** Options for {@link ReferableController}. */
export interface ReferableControllerOptions {
  client: Pick<KubeClient, "request" | "watch">;
  resolver: Pick<Resolver, "watch">;
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
   * When status writes may be made: a rate and burst per Referable, and a budget for the whole
   * controller. See {@link WritePolicy}.
   */
  writePolicy?: WritePolicyOptions;
  /**
   * Longest time between two writes that put back a status someone else changed. Each repair
   * of one Referable within a minute of the last waits twice as long as the one before (from
   * 100 ms), up to this: a writer that forges a status in a loop cannot drive the controller
   * into one.
   * @default 30000
   */
  maxRepairIntervalMs?: number;
  /** Whether spec.export may write into Secrets (--allow-secret-export). @default false */
  allowSecretExport?: boolean;
}

/** What the controller keeps for one Referable. */
interface Tracked {
  uid: string | undefined;
  /** The spec the subscription was made for. */
  specKey: string;
  subscription: Subscription | undefined;
  /** The result when the spec cannot even be turned into a request. */
  fixed: ResolutionResult | undefined;
  /** When the first not-yet-written push arrived, for the propagation histogram. */
  pushedAt: number | undefined;
  /** Our last write, until the informer has caught up with it. */
  written:
    | {
        /** The resourceVersion the write was computed from. */
        baseResourceVersion: string | undefined;
        /** The resourceVersion the write made. */
        resourceVersion: string | undefined;
        status: ReferableStatus;
      }
    | undefined;
  /**
   * The status this replica last wrote while leading: what it computed, which it puts back
   * whenever the stored status differs. Forgotten when leadership changes hands.
   */
  own: ReferableStatus | undefined;
  /** This Referable's share of the write policy, made at its first write. */
  bucket: TokenBucket | undefined;
  /** When a status write last succeeded (performance.now()), for the repair backoff. */
  lastWriteAt: number | undefined;
  /** Repairs (writes putting back a status someone else changed) in the current streak. */
  repairs: number;
  /** When the last repair was written (performance.now()). */
  lastRepairAt: number | undefined;
}

const PENDING: ResolutionResult = {
  ok: false,
  error: new ResolutionError("Pending", "resolving the source"),
};

/** A repair this long after the last one starts a new streak, at the shortest interval. */
const REPAIR_STREAK_MS = 60_000;
/** The shortest interval between a write and a repair after it: the first step of the backoff. */
const REPAIR_BASE_MS = 100;

const isReferableKind = (apiVersion: string | undefined, kind: string | undefined): boolean =>
  kind === "Referable" && apiVersion?.split("/")[0] === REFERABLE_GROUP;

/** The Referable controller; see the module comment. */
export class ReferableController {
  private readonly options: ReferableControllerOptions;
  private readonly logger: Logger;
  private readonly informer: Informer;
  private readonly queue: WorkQueue;
  private readonly tracked = new Map<string, Tracked>();
  private readonly writePolicy: WritePolicy;
  private readonly exporter: Exporter;
  /** When a Referable whose export failed is tried again: set by reconcile, read by timedReconcile. */
  private readonly exportRetry = new Map<string, number>();
  private readonly graph = new ReferenceGraph();
  private graphFlushScheduled = false;
  private leader = false;
  private primed = false;
  private cacheStarted = false;
  private workers: Promise<void> | undefined;

  constructor(options: ReferableControllerOptions) {
    this.options = options;
    this.logger = options.logger ?? silentLogger;
    this.writePolicy = new WritePolicy(options.writePolicy);
    this.exporter = new Exporter({
      client: options.client,
      logger: this.logger,
      allowSecrets: options.allowSecretExport ?? false,
      onWrite: (result) => options.metrics?.exportWrites.labels(result).inc(),
    });
    const metrics = options.metrics;
    const labels = { name: "referable", controller: "referable" };
    this.queue = new WorkQueue({
      observer: metrics && {
        onAdd: () => metrics.workqueueAdds.labels(labels).inc(),
        onDepth: (depth) => metrics.workqueueDepth.labels(labels).set(depth),
        onGet: (s) => metrics.workqueueQueueDuration.labels(labels).observe(s),
        onDone: (s) => metrics.workqueueWorkDuration.labels(labels).observe(s),
        onRetry: () => metrics.workqueueRetries.labels(labels).inc(),
      },
    });
    const informerOptions: InformerOptions = {
      client: options.client,
      resource: REFERABLE_RESOURCE,
      logger: this.logger,
      decode: slimReferable,
    };
    if (options.watchdogMs !== undefined) informerOptions.watchdogMs = options.watchdogMs;
    if (options.labelSelector) informerOptions.labelSelector = options.labelSelector;
    this.informer = new Informer(informerOptions);
    this.informer.addListener({
      onEvent: (event) => {
        this.follow(event);
        const name = event.object.metadata?.name ?? "";
        // The echo of this replica's own status write brings nothing to do: it holds what was
        // written, which reconcile already compares against. Skipping it halves the reconciles
        // of a fan-out (one source read by a thousand Referables), where the controller shares
        // the machine with the API server it waits for. Not for a Referable that exports or
        // holds a finalizer: the export's next step (letting go of the finalizer once the
        // status no longer lists a key) starts from that echo.
        const written = this.tracked.get(name)?.written;
        const referable = event.object as unknown as Referable;
        if (
          event.type === "MODIFIED" &&
          written?.resourceVersion !== undefined &&
          written.resourceVersion === referable.metadata?.resourceVersion &&
          !referable.metadata.finalizers?.length &&
          !referable.spec?.export?.length
        )
          return;
        this.queue.add(name);
      },
      onState: (state) => {
        if (state.phase === "Failed") this.logger.error({ reason: state.reason }, state.message);
        // Subscribe every Referable in one go, before any source list returns: the source cache
        // keeps only what is read, so an object listed before its reader subscribed would need
        // a second read. Reconciles then find their subscriptions made.
        if (state.phase === "Synced" && !this.primed) {
          this.primed = true;
          for (const obj of this.informer.list()) this.track(obj as unknown as Referable);
        }
      },
    });
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
    if (this.workers) return;
    const concurrency = this.options.concurrency ?? 16;
    this.options.metrics?.maxConcurrentReconciles.labels("referable").set(concurrency);
    this.workers = runWorkers(this.queue, concurrency, (name) => this.timedReconcile(name), {
      onError: (name, err) => {
        const kind = classifyError(err);
        // A terminal error is not retried (a new event of the Referable brings a new try); a
        // panic is a bug in this controller, said loudly.
        if (kind === "terminal")
          this.logger.error(
            { referable: name, err: err.message },
            "reconcile failed; not retried (terminal)",
          );
        else if (kind === "panic")
          this.logger.error(
            { referable: name, err: err.message, stack: err.stack?.split("\n").slice(0, 6).join("\n") },
            "reconcile panicked (a bug: please report it); retrying with backoff",
          );
        else
          this.logger.warn({ referable: name, err: err.message }, "reconcile failed; retrying with backoff");
      },
    });
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
    if (this.leader === leader) return;
    this.leader = leader;
    this.options.metrics?.leaderStatus
      .labels(this.options.leaseName ?? "referable-controller")
      .set(leader ? 1 : 0);
    if (!leader) return;
    // What another leader wrote is not ours to put back: start from what is stored.
    this.exporter.reset();
    for (const t of this.tracked.values()) {
      t.own = undefined;
      t.repairs = 0;
      t.lastRepairAt = undefined;
    }
    // A new leader looks at everything: statuses may be stale from the previous leader's last moments.
    for (const obj of this.informer.list()) this.queue.add(obj.metadata?.name ?? "");
  }

  /** The work queue's work in progress (the stuck-worker gauges), measured now. */
  unfinishedWork(): UnfinishedWork {
    return this.queue.unfinishedWork();
  }

  /** Referables by their Ready reason, for the gauge. */
  countByReason(): Map<string, number> {
    const counts = new Map<string, number>();
    for (const obj of this.informer.list()) {
      const reason = readyCondition((obj as unknown as Referable).status)?.reason ?? "Pending";
      counts.set(reason, (counts.get(reason) ?? 0) + 1);
    }
    return counts;
  }

  /**
   * Stops writing and taking work, and resolves once every running reconcile (and the status
   * write it may be making) has finished: after this, nothing of this replica writes.
   */
  async drain(): Promise<void> {
    this.setLeader(false);
    await this.queue.shutDownWithDrain();
    await this.workers;
  }

  /** {@link drain}s, then closes the cache and every subscription. */
  async stop(): Promise<void> {
    await this.drain();
    await this.informer.stop();
    for (const t of this.tracked.values()) t.subscription?.close();
    this.tracked.clear();
  }

  private async timedReconcile(name: string): Promise<WorkResult> {
    const metrics = this.options.metrics;
    const started = performance.now();
    metrics?.activeWorkers.labels("referable").inc();
    try {
      const result = this.withExportRetry(name, await this.reconcile(name));
      this.logger.debug(
        {
          referable: name,
          result: typeof result === "string" ? result : "requeue_after",
          ms: Math.round(performance.now() - started),
        },
        "reconciled",
      );
      metrics?.reconcileTotal
        .labels(
          "referable",
          result === "done" ? "success" : result === "requeue" ? "requeue" : "requeue_after",
        )
        .inc();
      return result;
    } catch (err) {
      metrics?.observeReconcileError(classifyError(err));
      throw err;
    } finally {
      metrics?.activeWorkers.labels("referable").dec();
      metrics?.reconcileTime.labels("referable").observe((performance.now() - started) / 1000);
    }
  }

  /**
   * `reserved`: this reconcile follows a wait for a place in the controller's write budget,
   * already taken with the Referable's token.
   */
  private async reconcile(name: string, reserved = false): Promise<WorkResult> {
    const obj = this.informer.get(undefined, name) as unknown as Referable | undefined;
    if (!obj) {
      this.forget(name);
      return "done";
    }
    if (this.exporter.finalizing(obj)) {
      if (!this.leader) return "done";
      const wait = await this.exporter.finalize(obj);
      return wait === undefined ? "done" : { requeueAfterMs: wait };
    }
    const tracked = this.track(obj);
    this.flushGraph(name);
    const current = tracked.subscription?.current;
    const result = tracked.fixed ?? this.unlessCycle(name, current ?? PENDING);
    // Nothing to say yet: the subscription pushes its first result (after a discovery lookup, or
    // a targeted read of a source cached before anyone read it), which queues this Referable
    // again. A "Pending" written now would only be overwritten a few milliseconds later.
    if (tracked.subscription && current === undefined && result === PENDING) return "done";
    // If the cache has not seen our last write yet, compare against what we wrote, at the
    // version that write made.
    const written = tracked.written;
    const behind = written !== undefined && written.baseResourceVersion === obj.metadata.resourceVersion;
    if (written && !behind) tracked.written = undefined;
    const base: Referable = behind ? { ...obj, status: written.status } : obj;
    const baseVersion = behind ? written.resourceVersion : obj.metadata.resourceVersion;

    // The keys it wrote are those of the status it wrote, when it knows it: a forged
    // status.exports must not send it to release (or read) targets it never wrote.
    const exported = await this.exportStep(
      this.leader && tracked.own ? { ...base, status: tracked.own } : base,
      result,
    );
    if (exported === "restart") return "done";
    const own = this.leader ? tracked.own : undefined;
    const desired = desiredStatus(base, result, this.options.now?.() ?? new Date(), own, exported?.state);
    if (!desired || statusEquals(base.status, desired)) {
      tracked.pushedAt = undefined;
      return "done";
    }
    if (!this.leader) return "done";
    // The stored status is not what this replica wrote: someone else wrote it.
    const repair = own !== undefined && !statusEquals(base.status, own);
    const streak =
      repair &&
      tracked.lastRepairAt !== undefined &&
      performance.now() - tracked.lastRepairAt < REPAIR_STREAK_MS
        ? tracked.repairs
        : 0;
    if (repair && tracked.lastWriteAt !== undefined) {
      const interval = Math.min(
        Math.max(REPAIR_BASE_MS, this.options.maxRepairIntervalMs ?? 30_000),
        REPAIR_BASE_MS * 2 ** Math.min(streak, 30),
      );
      const wait = tracked.lastWriteAt + interval - performance.now();
      if (wait > 0) return { requeueAfterMs: wait };
    }
    if (!reserved) {
      const admission = this.writePolicy.admit((tracked.bucket ??= this.writePolicy.bucket()));
      // Over the Referable's rate: coalesced; the look after the wait computes from the latest result.
      if (admission.write === false) {
        this.options.metrics?.statusWritesDeferred.labels("rate").inc();
        return { requeueAfterMs: admission.retryAfterMs };
      }
      // Over the controller's budget: a place is reserved; wait for it, then compute again, as
      // the result may have moved on meanwhile.
      if (admission.write === "after") {
        this.options.metrics?.statusWritesDeferred.labels("budget").inc();
        await new Promise((resolve) => setTimeout(resolve, admission.waitMs));
        return this.reconcile(name, true);
      }
    }
    const lastWriteAt = tracked.lastWriteAt;
    const outcome = await this.writeStatus(obj, base.status, baseVersion, desired, tracked);
    if (repair && tracked.lastWriteAt !== lastWriteAt) {
      tracked.repairs = streak + 1;
      tracked.lastRepairAt = performance.now();
      this.options.metrics?.statusRepairs.inc();
      this.logger.warn(
        { referable: name, repairs: tracked.repairs },
        "put back a status someone else changed: only the controller writes a Referable's status",
      );
    }
    return outcome;
  }

  private async writeStatus(
    obj: Referable,
    current: ReferableStatus | undefined,
    baseVersion: string | undefined,
    desired: ReferableStatus,
    tracked: Tracked,
  ): Promise<WorkResult> {
    const name = obj.metadata.name;
    const metrics = this.options.metrics;
    try {
      const body = statusPatch(obj.metadata.uid, desired, baseVersion);
      const updated = await this.options.client.request<Referable>(
        "PATCH",
        `/apis/${REFERABLE_API_VERSION}/referables/${name}/status`,
        {
          body,
          contentType: "application/json-patch+json",
        },
      );
      tracked.written = {
        baseResourceVersion: obj.metadata.resourceVersion,
        resourceVersion: updated.metadata?.resourceVersion,
        status: desired,
      };
      tracked.own = desired;
      // Only a write that succeeded starts the repair interval: a failed one is retried on the
      // work queue's growing backoff, which a requeueAfter here would reset.
      tracked.lastWriteAt = performance.now();
    } catch (err) {
      if (isApiError(err, 404)) return "done"; // deleted meanwhile: nothing to write
      if (isApiError(err, 422)) {
        // The uid precondition failed (the object was re-created: its own events follow), or the
        // API server's schema refused the status. Retrying the same write cannot help; a new
        // result will bring a new write.
        metrics?.statusWrites.labels("error").inc();
        throw new TerminalError(
          `the API server refused the status: ${(err as Error).message.slice(0, 300)}`,
          {
            cause: err,
          },
        );
      }
      if (isApiError(err, 409)) {
        // The Referable changed since the version this status was computed from (another
        // leader's write, a spec edit): recompute from the newer version, on the backoff.
        metrics?.statusWrites.labels("conflict").inc();
        return "requeue";
      }
      metrics?.statusWrites.labels("error").inc();
      throw err;
    }
    metrics?.statusWrites.labels("success").inc();
    if (tracked.pushedAt !== undefined)
      metrics?.propagation.observe((performance.now() - tracked.pushedAt) / 1000);
    tracked.pushedAt = undefined;

    const before = readyCondition(current);
    const after = readyCondition(desired)!;
    this.logger.info(
      { referable: name, ready: after.status, reason: after.reason, generation: desired.observedGeneration },
      "status written",
    );
    // Pending is where every new Referable starts: not worth an Event.
    if (before?.reason !== after.reason && after.reason !== "Pending") {
      this.options.events?.transition(obj, after.reason, after.message);
    }
    return "done";
  }

  /**
   * spec.export (see export.ts): the leader writes the value into the targets before the status
   * says so. Nothing happens before the value is observed (Pending), nor on a Referable being
   * deleted without the finalizer (none may be added then).
   */
  private async exportStep(obj: Referable, result: ResolutionResult): Promise<ExportStep | undefined> {
    if (!this.leader || (!result.ok && result.error.reason === "Pending")) return undefined;
    if (obj.metadata.deletionTimestamp !== undefined) return undefined;
    const step = await this.exporter.sync(obj, result);
    if (step !== "restart" && step.retryAfterMs !== undefined)
      this.exportRetry.set(obj.metadata.name, step.retryAfterMs);
    return step;
  }

  /** `result`, or a later retry when the export step asked for one and nothing sooner is due. */
  private withExportRetry(name: string, result: WorkResult): WorkResult {
    const retry = this.exportRetry.get(name);
    if (retry === undefined) return result;
    this.exportRetry.delete(name);
    if (result === "done") return { requeueAfterMs: retry };
    if (typeof result === "object") return { requeueAfterMs: Math.min(result.requeueAfterMs, retry) };
    return result;
  }

  /** The subscription state for `obj`, made or remade when its spec (or uid) changed. */
  private track(obj: Referable): Tracked {
    const name = obj.metadata.name;
    // The API server moves metadata.generation on every spec change (the status subresource
    // keeps status writes out of it): a key that costs nothing to build or to keep, where the
    // spec's JSON would cost both, 10,000 times over.
    const specKey =
      obj.metadata.generation !== undefined
        ? String(obj.metadata.generation)
        : stableStringify(obj.spec ?? null);
    const existing = this.tracked.get(name);
    if (existing && existing.specKey === specKey && existing.uid === obj.metadata.uid) return existing;
    existing?.subscription?.close();
    const same = existing !== undefined && existing.uid === obj.metadata.uid;
    const tracked: Tracked = {
      uid: obj.metadata.uid,
      specKey,
      subscription: undefined,
      fixed: undefined,
      pushedAt: undefined,
      written: same ? existing?.written : undefined,
      own: same ? existing?.own : undefined,
      // Kept across spec edits too: a spec rewritten in a loop must not write in one.
      bucket: same ? existing.bucket : undefined,
      lastWriteAt: same ? existing?.lastWriteAt : undefined,
      repairs: same ? existing.repairs : 0,
      lastRepairAt: same ? existing.lastRepairAt : undefined,
    };
    this.tracked.set(name, tracked);
    try {
      const request = requestFor(obj.spec);
      const source = obj.spec?.source;
      if (
        source?.apiVersion === REFERABLE_API_VERSION &&
        source.kind === "Referable" &&
        source.name === name
      ) {
        throw new ResolutionError(
          "InvalidSpec",
          "a Referable cannot read itself: point spec.source at another object",
        );
      }
      // A push made while watch() runs (a synced kind gives its first result at once) is read by
      // the reconcile running now. Queueing the name for it would run a second reconcile right
      // after this one, and, if this one's write failed, retry that write without its backoff.
      let subscribing = true;
      try {
        tracked.subscription = this.options.resolver.watch(
          request,
          () => {
            tracked.pushedAt ??= performance.now();
            if (!subscribing) this.queue.add(name);
          },
          { fieldPrefix: "spec.source" },
        );
      } finally {
        subscribing = false;
      }
    } catch (err) {
      tracked.fixed = {
        ok: false,
        error: isResolutionError(err) ? err : new ResolutionError("InvalidSpec", asError(err).message),
      };
    }
    return tracked;
  }

  /**
   * `result`, unless the Referable reads itself, directly (a selector that matches it) or
   * through other Referables (a cycle of any length): then InvalidSpec. Such a loop never
   * settles when the field read changes with every write (metadata.resourceVersion, the status
   * itself), so the controller refuses it rather than write forever. The cycles are those of the
   * Referables this controller sees (see {@link ReferenceGraph}).
   */
  private unlessCycle(name: string, result: ResolutionResult): ResolutionResult {
    const path = this.graph.cycleOf(name);
    if (!path) return result;
    const message =
      path.length === 2
        ? "a Referable cannot read itself: spec.source selects this Referable; point spec.source at another object"
        : `spec.source reads Referables in a cycle of ${path.length - 1} (${describeCycle(path)}): a Referable cannot read itself, directly or through others; point spec.source at another object`;
    return { ok: false, error: new ResolutionError("InvalidSpec", message) };
  }

  /** Keeps the reference graph in step with a Referable event, and schedules a look for new cycles. */
  private follow(event: InformerEvent): void {
    const obj = event.object as unknown as Referable;
    const name = obj.metadata?.name;
    if (!name) return;
    if (event.type === "DELETED") this.graph.delete(name);
    else this.graph.set(name, obj.metadata.labels as Record<string, string> | undefined, readsOf(obj));
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
    for (const changed of this.graph.flush()) if (changed !== reconciling) this.queue.add(changed);
  }

  private forget(name: string): void {
    const tracked = this.tracked.get(name);
    if (!tracked) return;
    tracked.subscription?.close();
    this.tracked.delete(name);
    this.exporter.forget(name);
    if (tracked.uid) this.options.events?.forget(tracked.uid);
  }
}

/** What a Referable reads among Referables, from its spec: the reference graph's edges. */
function readsOf(obj: Referable): ReadsReferables | undefined {
  const source = obj.spec?.source;
  if (!source || !isReferableKind(source.apiVersion, source.kind)) return undefined;
  if (source.name) return { name: source.name };
  if (!source.selector) return undefined;
  try {
    return { selector: compileLabelSelector(source.selector) };
  } catch {
    return undefined; // an invalid selector reads nothing: the resolver reports it (InvalidSpec)
  }
}
