/**
 * The controller's Prometheus metrics, on a registry injected per instance (prom-client's
 * default registry is global). Names follow controller-runtime and client-go so existing
 * dashboards and alerts work. Label values are bounded: never an object name or a value.
 */
import { createRequire } from "node:module";
import type * as Prom from "prom-client";

// prom-client's parts, each from its own file: its index also loads the Pushgateway (http,
// https, zlib, url) and Summary (tdigest), which the controller never uses, and an idle
// controller's RSS is mostly the code it loaded (BENCHMARKS.md, "At rest"). prom-client's
// version is pinned in package.json; a renamed file fails at start-up, loudly.
const require = createRequire(import.meta.url);
const Registry = require("prom-client/lib/registry.js") as typeof Prom.Registry;
const Counter = require("prom-client/lib/counter.js") as typeof Prom.Counter;
const Gauge = require("prom-client/lib/gauge.js") as typeof Prom.Gauge;
const Histogram = require("prom-client/lib/histogram.js") as typeof Prom.Histogram;
const collectDefaultMetrics =
  require("prom-client/lib/defaultMetrics.js") as typeof Prom.collectDefaultMetrics;
type Registry = Prom.Registry;
type Counter<T extends string = string> = Prom.Counter<T>;
type Gauge<T extends string = string> = Prom.Gauge<T>;
type Histogram<T extends string = string> = Prom.Histogram<T>;
import { Reasons } from "./errors.ts";
import type { UnfinishedWork } from "./runtime/workqueue.ts";
import { VERSION } from "./version.ts";

const CONTROLLER = "referable";

/** Condition status by reason, for the series that exist at zero from the start. */
const READY_OF_REASON: Record<string, "True" | "False" | "Unknown"> = Object.fromEntries(
  Object.values(Reasons).map((reason) => [
    reason,
    reason === "Available" || reason === "Defaulted" || reason === "Optional"
      ? "True"
      : reason === "Pending"
        ? "Unknown"
        : "False",
  ]),
);

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
  readonly restRequests: Counter<"code" | "method" | "host">;
  readonly restLatency: Histogram<"verb">;
  readonly referables: Gauge<"ready" | "reason">;
  readonly sourceInformers: Gauge;
  readonly watchesOpen: Gauge;
  readonly informerSignals: Counter<"signal">;
  readonly propagation: Histogram;
  readonly statusWrites: Counter<"result">;
  readonly statusRepairs: Counter;
  readonly statusWritesDeferred: Counter<"reason">;
  readonly exportWrites: Counter<"result">;
  readonly events: Counter<"type">;

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
    const registers = [registry];
    const queueLabels = { name: CONTROLLER, controller: CONTROLLER };
    const exp = (start: number, factor: number, count: number) =>
      Array.from({ length: count }, (_, i) => start * factor ** i);

    this.reconcileTotal = new Counter({
      name: "controller_runtime_reconcile_total",
      help: "Total number of reconciliations per controller",
      labelNames: ["controller", "result"],
      registers,
    });
    for (const result of ["success", "error", "requeue", "requeue_after"])
      this.reconcileTotal.labels(CONTROLLER, result).inc(0);
    this.reconcileErrors = new Counter({
      name: "controller_runtime_reconcile_errors_total",
      help: "Total number of reconciliation errors per controller",
      labelNames: ["controller"],
      registers,
    });
    this.reconcileErrors.labels(CONTROLLER).inc(0);
    // As controller-runtime: a panic (here, a programming error such as a TypeError escaping
    // reconcile) is counted here and as an error, and retried with backoff like one.
    this.reconcilePanics = new Counter({
      name: "controller_runtime_reconcile_panics_total",
      help: "Total number of reconciliation panics per controller",
      labelNames: ["controller"],
      registers,
    });
    this.reconcilePanics.labels(CONTROLLER).inc(0);
    this.terminalReconcileErrors = new Counter({
      name: "controller_runtime_terminal_reconcile_errors_total",
      help: "Total number of terminal reconciliation errors per controller",
      labelNames: ["controller"],
      registers,
    });
    this.terminalReconcileErrors.labels(CONTROLLER).inc(0);
    this.reconcileTime = new Histogram({
      name: "controller_runtime_reconcile_time_seconds",
      help: "Length of time per reconciliation per controller",
      labelNames: ["controller"],
      buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
      registers,
    });
    this.reconcileTime.labels(CONTROLLER);
    this.activeWorkers = new Gauge({
      name: "controller_runtime_active_workers",
      help: "Number of currently used workers per controller",
      labelNames: ["controller"],
      registers,
    });
    this.activeWorkers.labels(CONTROLLER).set(0);
    this.maxConcurrentReconciles = new Gauge({
      name: "controller_runtime_max_concurrent_reconciles",
      help: "Maximum number of concurrent reconciles per controller",
      labelNames: ["controller"],
      registers,
    });
    this.workqueueDepth = new Gauge({
      name: "workqueue_depth",
      help: "Current depth of workqueue",
      labelNames: ["name", "controller"],
      registers,
    });
    this.workqueueDepth.labels(queueLabels).set(0);
    this.workqueueAdds = new Counter({
      name: "workqueue_adds_total",
      help: "Total number of adds handled by workqueue",
      labelNames: ["name", "controller"],
      registers,
    });
    this.workqueueAdds.labels(queueLabels).inc(0);
    this.workqueueRetries = new Counter({
      name: "workqueue_retries_total",
      help: "Total number of retries handled by workqueue",
      labelNames: ["name", "controller"],
      registers,
    });
    this.workqueueRetries.labels(queueLabels).inc(0);
    this.workqueueQueueDuration = new Histogram({
      name: "workqueue_queue_duration_seconds",
      help: "How long in seconds an item stays in workqueue before being requested",
      labelNames: ["name", "controller"],
      buckets: exp(1e-8, 10, 11),
      registers,
    });
    this.workqueueQueueDuration.labels(queueLabels);
    this.workqueueWorkDuration = new Histogram({
      name: "workqueue_work_duration_seconds",
      help: "How long in seconds processing an item from workqueue takes",
      labelNames: ["name", "controller"],
      buckets: exp(1e-8, 10, 11),
      registers,
    });
    this.workqueueWorkDuration.labels(queueLabels);
    // Both set at each scrape from the queue (setUnfinishedWork), as client-go's are every 500 ms.
    this.workqueueUnfinishedWork = new Gauge({
      name: "workqueue_unfinished_work_seconds",
      help: "How many seconds of work has done that is in progress and hasn't been observed by work_duration. Large values indicate stuck threads. One can deduce the number of stuck threads by observing the rate at which this increases.",
      labelNames: ["name", "controller"],
      registers,
    });
    this.workqueueUnfinishedWork.labels(queueLabels).set(0);
    this.workqueueLongestRunningProcessor = new Gauge({
      name: "workqueue_longest_running_processor_seconds",
      help: "How many seconds has the longest running processor for workqueue been running.",
      labelNames: ["name", "controller"],
      registers,
    });
    this.workqueueLongestRunningProcessor.labels(queueLabels).set(0);
    this.buildInfo = new Gauge({
      name: "referable_build_info",
      help: "Always 1; the labels say which version of the controller runs, on which Node.js",
      labelNames: ["version", "node_version"],
      registers,
    });
    this.buildInfo.labels(options.version ?? VERSION, process.versions.node).set(1);
    this.leaderStatus = new Gauge({
      name: "leader_election_master_status",
      help: "Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, 1 indicates master",
      labelNames: ["name"],
      registers,
    });
    this.leaderStatus.labels(options.leaseName ?? "referable-controller").set(0);
    // Sharding (--shards); without it the buckets and members stay 0 and the Referables owned
    // are all of them while leading.
    this.shardBuckets = new Gauge({
      name: "referable_shard_buckets",
      help: "Buckets this replica serves (holds the Lease of) when sharded with --shards",
      registers,
    });
    this.shardReferables = new Gauge({
      name: "referable_shard_referables_owned",
      help: "Referables this replica serves: those of its buckets when sharded, else all of them while leading",
      registers,
    });
    this.shardMembers = new Gauge({
      name: "referable_shard_members",
      help: "Live replicas this replica sees (member Leases renewed), itself included, when sharded",
      registers,
    });
    this.shardHandovers = new Counter({
      name: "referable_shard_handovers_total",
      help: "Buckets that changed hands at this replica, by kind: acquired, released (handed over after a drain), lost (not renewed in time, or taken)",
      labelNames: ["kind"],
      registers,
    });
    for (const kind of ["acquired", "released", "lost"]) this.shardHandovers.labels(kind).inc(0);
    this.restRequests = new Counter({
      name: "rest_client_requests_total",
      help: "Number of HTTP requests, partitioned by status code, method, and host",
      labelNames: ["code", "method", "host"],
      registers,
    });
    this.restLatency = new Histogram({
      name: "rest_client_request_duration_seconds",
      help: "Request latency in seconds, broken down by verb",
      labelNames: ["verb"],
      buckets: [0.005, 0.025, 0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60],
      registers,
    });
    this.referables = new Gauge({
      name: "referable_referables",
      help: "Referables by the status and reason of their Ready condition",
      labelNames: ["ready", "reason"],
      registers,
    });
    for (const [reason, ready] of Object.entries(READY_OF_REASON))
      this.referables.labels(ready, reason).set(0);
    this.sourceInformers = new Gauge({
      name: "referable_source_informers",
      help: "Source informers open (one per source resource and scope)",
      registers,
    });
    this.watchesOpen = new Gauge({
      name: "referable_watches_open",
      help: "Watch streams the controller holds open (its own on Referables, plus one per source informer)",
      registers,
    });
    this.informerSignals = new Counter({
      name: "referable_informer_restarts_total",
      help: "Informer relists and restarts, by cause (relist, expired, watchdog, error)",
      labelNames: ["signal"],
      registers,
    });
    for (const signal of ["relist", "expired", "watchdog", "error"])
      this.informerSignals.labels(signal).inc(0);
    this.propagation = new Histogram({
      name: "referable_propagation_seconds",
      help: "Time from a source change observed by the controller to the Referable's status written",
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers,
    });
    this.statusWrites = new Counter({
      name: "referable_status_writes_total",
      help: "Status writes of Referables, by result (success, conflict, error)",
      labelNames: ["result"],
      registers,
    });
    for (const result of ["success", "conflict", "error"]) this.statusWrites.labels(result).inc(0);
    this.statusRepairs = new Counter({
      name: "referable_status_repairs_total",
      help: "Status writes that put back a status someone else had changed (only the controller writes it)",
      registers,
    });
    this.statusWritesDeferred = new Counter({
      name: "referable_status_writes_deferred_total",
      help: "Status writes the write policy made wait, by reason: rate (one Referable over its rate; coalesced) or budget (the controller over its budget; queued)",
      labelNames: ["reason"],
      registers,
    });
    for (const reason of ["rate", "budget"]) this.statusWritesDeferred.labels(reason).inc(0);
    this.exportWrites = new Counter({
      name: "referable_export_writes_total",
      help: "Writes of exported keys (spec.export), by result (success, conflict, forbidden, error)",
      labelNames: ["result"],
      registers,
    });
    for (const result of ["success", "conflict", "forbidden", "error"])
      this.exportWrites.labels(result).inc(0);
    this.events = new Counter({
      name: "referable_events_total",
      help: "Kubernetes Events emitted, by type (Normal, Warning, Dropped: rate-limited)",
      labelNames: ["type"],
      registers,
    });
    for (const type of ["Normal", "Warning", "Dropped"]) this.events.labels(type).inc(0);
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
    const labels = { name: CONTROLLER, controller: CONTROLLER };
    this.workqueueUnfinishedWork.labels(labels).set(work.unfinishedWorkSeconds);
    this.workqueueLongestRunningProcessor.labels(labels).set(work.longestRunningProcessorSeconds);
  }

  /** Observes one API request, client-go style. */
  observeRequest(host: string, method: string, verb: string, code: number, seconds: number): void {
    this.restRequests.labels(code === 0 ? "<error>" : String(code), method, host).inc();
    this.restLatency.labels(verb).observe(seconds);
  }
}
