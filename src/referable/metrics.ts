/**
 * The controller's Prometheus metrics, on a registry injected per instance (prom-client's
 * default registry is global). The families themselves (names, help, labels, buckets) are in
 * ./metric-families.ts.
 */
import { createRequire } from "node:module";
import type * as Prom from "prom-client";
import type { UnfinishedWork } from "../runtime/workqueue.ts";
import { VERSION } from "../api/version.ts";
import {
  CONTROLLER,
  MetricMaker,
  processMetrics,
  QUEUE,
  READY_OF_REASON,
  reconcileMetrics,
  referableMetrics,
  shardMetrics,
  workqueueMetrics,
} from "./metric-families.ts";

// From their own files, as ./metric-families.ts explains: prom-client's index loads much the
// controller never uses.
const require = createRequire(import.meta.url);
const Registry = require("prom-client/lib/registry.js") as typeof Prom.Registry;
const collectDefaultMetrics =
  require("prom-client/lib/defaultMetrics.js") as typeof Prom.collectDefaultMetrics;
type Registry = Prom.Registry;
type Counter<T extends string = string> = Prom.Counter<T>;
type Gauge<T extends string = string> = Prom.Gauge<T>;
type Histogram<T extends string = string> = Prom.Histogram<T>;

/** Every metric the controller exports. */
export class ControllerMetrics {
  readonly registry: Registry;
  readonly reconcileTotal: Counter<"controller" | "result">;
  readonly reconcileErrors: Counter<"controller">;
  readonly reconcilePanics: Counter<"controller">;
  readonly terminalReconcileErrors: Counter<"controller">;
  readonly reconcileTime: Histogram<"controller">;
  readonly activeWorkers: Gauge<"controller">;
  readonly maxConcurrentReconciles: Gauge<"controller">;
  readonly workqueueDepth: Gauge<"name" | "controller">;
  readonly workqueueAdds: Counter<"name" | "controller">;
  readonly workqueueRetries: Counter<"name" | "controller">;
  readonly workqueueQueueDuration: Histogram<"name" | "controller">;
  readonly workqueueWorkDuration: Histogram<"name" | "controller">;
  readonly workqueueUnfinishedWork: Gauge<"name" | "controller">;
  readonly workqueueLongestRunningProcessor: Gauge<"name" | "controller">;
  readonly buildInfo: Gauge<"version" | "node_version">;
  readonly leaderStatus: Gauge<"name">;
  readonly shardBuckets: Gauge;
  readonly shardReferables: Gauge;
  readonly shardMembers: Gauge;
  readonly shardHandovers: Counter<"kind">;
  readonly shardTakeover: Histogram;
  readonly subscriptions: Gauge;
  readonly restRequests: Counter<"code" | "method" | "host">;
  readonly restLatency: Histogram<"verb">;
  readonly referables: Gauge<"ready" | "reason">;
  readonly sourceInformers: Gauge;
  readonly labelKeysKept: Gauge;
  readonly watchesOpen: Gauge;
  readonly informerSignals: Counter<"signal" | "reason">;
  readonly propagation: Histogram;
  readonly statusWrites: Counter<"result">;
  readonly statusRepairs: Counter;
  readonly statusWritesDeferred: Counter<"reason">;
  readonly exportWrites: Counter<"result">;
  readonly driftReads: Counter;
  readonly transformQuarantined: Gauge;
  readonly transformQuarantineEvaluations: Counter;
  readonly driftReadsWaiting: Gauge;
  readonly events: Counter<"type">;
  readonly accessReviews: Counter<"result">;
  /** The quarantine's evaluations already counted. */
  private laneEvaluationsSeen = 0;

  constructor(
    options: {
      registry?: Registry;
      defaultMetrics?: boolean;
      leaseName?: string;
      /** The controller's version, for `referable_build_info`. @default package.json's */
      version?: string;
    } = {},
  ) {
    const registry = (this.registry = options.registry ?? new Registry());
    const m = new MetricMaker(registry);
    const version = options.version ?? VERSION;
    const leaseName = options.leaseName ?? "referable-controller";
    ({
      reconcileTotal: this.reconcileTotal,
      reconcileErrors: this.reconcileErrors,
      reconcilePanics: this.reconcilePanics,
      terminalReconcileErrors: this.terminalReconcileErrors,
      reconcileTime: this.reconcileTime,
      activeWorkers: this.activeWorkers,
      maxConcurrentReconciles: this.maxConcurrentReconciles,
      workqueueDepth: this.workqueueDepth,
      workqueueAdds: this.workqueueAdds,
      workqueueRetries: this.workqueueRetries,
      workqueueQueueDuration: this.workqueueQueueDuration,
      workqueueWorkDuration: this.workqueueWorkDuration,
      workqueueUnfinishedWork: this.workqueueUnfinishedWork,
      workqueueLongestRunningProcessor: this.workqueueLongestRunningProcessor,
      buildInfo: this.buildInfo,
      leaderStatus: this.leaderStatus,
      shardBuckets: this.shardBuckets,
      shardReferables: this.shardReferables,
      shardMembers: this.shardMembers,
      shardHandovers: this.shardHandovers,
      shardTakeover: this.shardTakeover,
      subscriptions: this.subscriptions,
      restRequests: this.restRequests,
      restLatency: this.restLatency,
      referables: this.referables,
      sourceInformers: this.sourceInformers,
      labelKeysKept: this.labelKeysKept,
      watchesOpen: this.watchesOpen,
      informerSignals: this.informerSignals,
      propagation: this.propagation,
      statusWrites: this.statusWrites,
      statusRepairs: this.statusRepairs,
      statusWritesDeferred: this.statusWritesDeferred,
      exportWrites: this.exportWrites,
      driftReads: this.driftReads,
      transformQuarantined: this.transformQuarantined,
      transformQuarantineEvaluations: this.transformQuarantineEvaluations,
      driftReadsWaiting: this.driftReadsWaiting,
      events: this.events,
      accessReviews: this.accessReviews,
    } = {
      ...reconcileMetrics(m),
      ...workqueueMetrics(m),
      ...processMetrics(m, version, leaseName),
      ...shardMetrics(m),
      ...referableMetrics(m),
    });
    // The event-loop delay histogram samples once a second, not every 10 ms (prom-client's
    // default): its timer woke an idle controller about 190 times a second, most of its CPU at
    // rest (BENCHMARKS.md, "At rest"). A stall of the loop still shows in the sample it delays,
    // and nodejs_eventloop_lag_seconds is measured at each scrape.
    if (options.defaultMetrics ?? true)
      collectDefaultMetrics({ register: registry, eventLoopMonitoringPrecision: 1000 });
  }

  /** Replaces the Referables-by-reason gauge with fresh counts (unknown reasons count under their own). */
  setReferableCounts(counts: Map<string, number>): void {
    for (const [reason, ready] of Object.entries(READY_OF_REASON))
      this.referables.labels(ready, reason).set(counts.get(reason) ?? 0);
  }

  /**
   * Counts a reconcile that threw, as controller-runtime does: an error in the totals, and also
   * a panic (a programming error) or a terminal error (not retried), as `kind` says.
   */
  observeReconcileError(kind: "terminal" | "panic" | "error"): void {
    this.reconcileTotal.labels(CONTROLLER, "error").inc();
    this.reconcileErrors.labels(CONTROLLER).inc();
    if (kind === "panic") this.reconcilePanics.labels(CONTROLLER).inc();
    if (kind === "terminal") this.terminalReconcileErrors.labels(CONTROLLER).inc();
  }

  /** Sets the work-in-progress gauges from the queue's measurement, taken at scrape time. */
  setUnfinishedWork(work: UnfinishedWork): void {
    this.workqueueUnfinishedWork.labels(...QUEUE).set(work.unfinishedWorkSeconds);
    this.workqueueLongestRunningProcessor.labels(...QUEUE).set(work.longestRunningProcessorSeconds);
  }

  /** Sets the transform quarantine's figures from the pool's, at scrape time. */
  setTransformQuarantine(figures: { quarantined: number; evaluations: number }): void {
    this.transformQuarantined.set(figures.quarantined);
    const delta = figures.evaluations - this.laneEvaluationsSeen;
    if (delta > 0) this.transformQuarantineEvaluations.inc(delta);
    this.laneEvaluationsSeen = Math.max(this.laneEvaluationsSeen, figures.evaluations);
  }

  /** Observes one API request, client-go style. */
  observeRequest(host: string, method: string, verb: string, code: number, seconds: number): void {
    this.restRequests.labels(code === 0 ? "<error>" : String(code), method, host).inc();
    this.restLatency.labels(verb).observe(seconds);
  }
}
