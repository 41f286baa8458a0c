/**
 * The controller's metric families: each metric's name and help (controller-runtime's and
 * client-go's own, so existing dashboards and alerts work), its labels, its buckets and the
 * series that exist at zero from the start. Label values are bounded: never an object name or
 * a value. ControllerMetrics (./metrics.ts) makes them all on one registry.
 */
import { createRequire } from "node:module";
import type * as Prom from "prom-client";
import { Reasons } from "../api/errors.ts";
import { signalReasonPairs } from "../informers/restart-reason.ts";

// prom-client's parts, each from its own file: its index also loads the Pushgateway (http,
// https, zlib, url) and Summary (tdigest), which the controller never uses, and an idle
// controller's RSS is mostly the code it loaded (BENCHMARKS.md, "At rest"). prom-client's
// version is pinned in package.json; a renamed file fails at start-up, loudly.
const require = createRequire(import.meta.url);
const Counter = require("prom-client/lib/counter.js") as typeof Prom.Counter;
const Gauge = require("prom-client/lib/gauge.js") as typeof Prom.Gauge;
const Histogram = require("prom-client/lib/histogram.js") as typeof Prom.Histogram;
type Registry = Prom.Registry;
type Counter<T extends string = string> = Prom.Counter<T>;
type Gauge<T extends string = string> = Prom.Gauge<T>;
type Histogram<T extends string = string> = Prom.Histogram<T>;

/** The controller label of controller-runtime's series. */
export const CONTROLLER = "referable";

/** Condition status by reason, for the series that exist at zero from the start. */
export const READY_OF_REASON: Record<string, "True" | "False" | "Unknown"> = Object.fromEntries(
  Object.values(Reasons).map((reason) => [
    reason,
    reason === "Available" || reason === "Defaulted" || reason === "Optional"
      ? "True"
      : reason === "Pending"
        ? "Unknown"
        : "False",
  ]),
);

/** The labels (name, controller) of the one queue's series. */
export const QUEUE = [CONTROLLER, CONTROLLER];
const exp = (start: number, factor: number, count: number) =>
  Array.from({ length: count }, (_, i) => start * factor ** i);

/** Each metric's help: controller-runtime's and client-go's own words for theirs. */
const HELP = {
  controller_runtime_reconcile_total: "Total number of reconciliations per controller",
  controller_runtime_reconcile_errors_total: "Total number of reconciliation errors per controller",
  controller_runtime_reconcile_panics_total: "Total number of reconciliation panics per controller",
  controller_runtime_terminal_reconcile_errors_total:
    "Total number of terminal reconciliation errors per controller",
  controller_runtime_reconcile_time_seconds: "Length of time per reconciliation per controller",
  controller_runtime_active_workers: "Number of currently used workers per controller",
  controller_runtime_max_concurrent_reconciles: "Maximum number of concurrent reconciles per controller",
  workqueue_depth: "Current depth of workqueue",
  workqueue_adds_total: "Total number of adds handled by workqueue",
  workqueue_retries_total: "Total number of retries handled by workqueue",
  workqueue_queue_duration_seconds: "How long in seconds an item stays in workqueue before being requested",
  workqueue_work_duration_seconds: "How long in seconds processing an item from workqueue takes",
  workqueue_unfinished_work_seconds:
    "How many seconds of work has done that is in progress and hasn't been observed by work_duration. Large values indicate stuck threads. One can deduce the number of stuck threads by observing the rate at which this increases.",
  workqueue_longest_running_processor_seconds:
    "How many seconds has the longest running processor for workqueue been running.",
  referable_build_info: "Always 1; the labels say which version of the controller runs, on which Node.js",
  leader_election_master_status:
    "Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, 1 indicates master",
  rest_client_requests_total: "Number of HTTP requests, partitioned by status code, method, and host",
  rest_client_request_duration_seconds: "Request latency in seconds, broken down by verb",
  referable_referables: "Referables by the status and reason of their Ready condition",
  referable_source_informers: "Source informers open (one per source resource and scope)",
  referable_label_keys_kept:
    "Label keys the cached objects of the watched kind that keeps the most keep (at most --max-label-keys-per-kind)",
  referable_watches_open:
    "Watch streams the controller holds open (its own on Referables, plus one per source informer)",
  referable_informer_restarts_total:
    "Informer relists and restarts, by signal (relist, expired, watchdog, error) and reason (watch-expired, list-expired, watchdog, throttled, timeout, server-error, unauthorized, forbidden, not-found, rejected, decode, connection, watch-ended-early, other; a relist carries the reason of the restart it follows)",
  referable_propagation_seconds:
    "Time from a source change observed by the controller to the Referable's status written",
  referable_status_writes_total: "Status writes of Referables, by result (success, conflict, error)",
  referable_status_repairs_total:
    "Status writes that put back a status someone else had changed (only the controller writes it)",
  referable_status_writes_deferred_total:
    "Status writes the write policy made wait, by reason: rate (one Referable over its rate; coalesced) or budget (the controller over its budget; queued)",
  referable_transform_quarantined:
    "Transform expressions quarantined after hitting their time or memory limit: they run in a lane of their own, backing off (at most 1024 remembered)",
  referable_transform_quarantine_evaluations_total:
    "Transform evaluations run in the quarantine's lane, apart from the healthy expressions",
  referable_drift_reads_total:
    "Reads the controller made on its own initiative (drift reads of field targets, missing targets read again), within --drift-read-budget",
  referable_drift_reads_waiting:
    "Referables waiting for their turn in the read budget (--drift-read-budget; each holds at most one place)",
  referable_export_writes_total:
    "Writes of exported keys (spec.export), by result (success, conflict, forbidden, error)",
  referable_events_total: "Kubernetes Events emitted, by type (Normal, Warning, Dropped: rate-limited)",
  referable_access_reviews_total:
    "SubjectAccessReviews made to check a ServiceAccount's reads (spec.serviceAccountRef, --default-service-account), by result (allowed, denied, error)",
  referable_shard_buckets: "Buckets this replica serves (holds the Lease of) when sharded with --shards",
  referable_shard_referables_owned:
    "Referables this replica serves: those of its buckets when sharded, else all of them while leading",
  referable_shard_members:
    "Live replicas this replica sees (member Leases renewed), itself included, when sharded",
  referable_shard_handovers_total:
    "Buckets that changed hands at this replica, by kind: acquired, released (handed over after a drain), lost (not renewed in time, or taken)",
  referable_shard_takeover_seconds:
    "Buckets taken over from a replica that stopped renewing them (killed, or cut off): seconds from the last renewal this replica saw to the takeover, at least the lease duration",
  referable_subscriptions_open:
    "Resolver subscriptions open: one per Referable whose spec could be read, every Referable unsharded (standbys too), sharded only those of the buckets served",
} as const;

/** A metric's name. */
type MetricName = keyof typeof HELP;

/**
 * Makes metrics on one registry. `zero` lists the label values (in `labelNames` order) of the
 * series made at start, so that they read 0 before their first change.
 */
export class MetricMaker {
  private readonly registers: Registry[];

  constructor(registry: Registry) {
    this.registers = [registry];
  }

  counter<L extends string>(name: MetricName, labelNames: readonly L[] = [], zero: Series = []): Counter<L> {
    const metric = new Counter<L>({ name, help: HELP[name], labelNames, registers: this.registers });
    for (const values of zero) metric.labels(...values).inc(0);
    return metric;
  }

  gauge<L extends string>(name: MetricName, labelNames: readonly L[] = [], zero: Series = []): Gauge<L> {
    const metric = new Gauge<L>({ name, help: HELP[name], labelNames, registers: this.registers });
    for (const values of zero) metric.labels(...values).set(0);
    return metric;
  }

  /** A histogram whose `zero` series exist with no observation. */
  histogram<L extends string>(
    name: MetricName,
    buckets: number[],
    labelNames: readonly L[] = [],
    zero: Series = [],
  ): Histogram<L> {
    const metric = new Histogram<L>({
      name,
      help: HELP[name],
      buckets,
      labelNames,
      registers: this.registers,
    });
    for (const values of zero) metric.labels(...values);
    return metric;
  }
}

type Series = ReadonlyArray<readonly string[]>;

/** controller-runtime's reconcile metrics, under its names. */
export function reconcileMetrics(m: MetricMaker) {
  return {
    reconcileTotal: m.counter(
      "controller_runtime_reconcile_total",
      ["controller", "result"],
      ["success", "error", "requeue", "requeue_after"].map((result) => [CONTROLLER, result]),
    ),
    reconcileErrors: m.counter("controller_runtime_reconcile_errors_total", ["controller"], [[CONTROLLER]]),
    // As controller-runtime: a panic (here, a programming error such as a TypeError escaping
    // reconcile) is counted here and as an error, and retried with backoff like one.
    reconcilePanics: m.counter("controller_runtime_reconcile_panics_total", ["controller"], [[CONTROLLER]]),
    terminalReconcileErrors: m.counter(
      "controller_runtime_terminal_reconcile_errors_total",
      ["controller"],
      [[CONTROLLER]],
    ),
    reconcileTime: m.histogram(
      "controller_runtime_reconcile_time_seconds",
      [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
      ["controller"],
      [[CONTROLLER]],
    ),
    activeWorkers: m.gauge("controller_runtime_active_workers", ["controller"], [[CONTROLLER]]),
    maxConcurrentReconciles: m.gauge("controller_runtime_max_concurrent_reconciles", ["controller"]),
  };
}

/** client-go's workqueue metrics, under its names, for the one queue. */
export function workqueueMetrics(m: MetricMaker) {
  const labelNames = ["name", "controller"] as const;
  const zero = [QUEUE];
  return {
    workqueueDepth: m.gauge("workqueue_depth", labelNames, zero),
    workqueueAdds: m.counter("workqueue_adds_total", labelNames, zero),
    workqueueRetries: m.counter("workqueue_retries_total", labelNames, zero),
    workqueueQueueDuration: m.histogram(
      "workqueue_queue_duration_seconds",
      exp(1e-8, 10, 11),
      labelNames,
      zero,
    ),
    workqueueWorkDuration: m.histogram(
      "workqueue_work_duration_seconds",
      exp(1e-8, 10, 11),
      labelNames,
      zero,
    ),
    // Both set at each scrape from the queue (setUnfinishedWork), as client-go's are every 500 ms.
    workqueueUnfinishedWork: m.gauge("workqueue_unfinished_work_seconds", labelNames, zero),
    workqueueLongestRunningProcessor: m.gauge(
      "workqueue_longest_running_processor_seconds",
      labelNames,
      zero,
    ),
  };
}

/** The process's identity, its lease and its API requests (client-go's names). */
export function processMetrics(m: MetricMaker, version: string, leaseName: string) {
  const buildInfo = m.gauge("referable_build_info", ["version", "node_version"]);
  buildInfo.labels(version, process.versions.node).set(1);
  return {
    buildInfo,
    leaderStatus: m.gauge("leader_election_master_status", ["name"], [[leaseName]]),
    restRequests: m.counter("rest_client_requests_total", ["code", "method", "host"]),
    restLatency: m.histogram(
      "rest_client_request_duration_seconds",
      [0.005, 0.025, 0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60],
      ["verb"],
    ),
  };
}

/**
 * Sharding (--shards); without it the buckets and members stay 0 and the Referables owned are
 * all of them while leading.
 */
export function shardMetrics(m: MetricMaker) {
  return {
    shardBuckets: m.gauge("referable_shard_buckets"),
    shardReferables: m.gauge("referable_shard_referables_owned"),
    shardMembers: m.gauge("referable_shard_members"),
    shardHandovers: m.counter(
      "referable_shard_handovers_total",
      ["kind"],
      [["acquired"], ["released"], ["lost"]],
    ),
    shardTakeover: m.histogram(
      "referable_shard_takeover_seconds",
      [5, 10, 15, 17.5, 20, 25, 30, 45, 60, 120],
    ),
    subscriptions: m.gauge("referable_subscriptions_open"),
  };
}

/** Referables, their sources and their writes. */
export function referableMetrics(m: MetricMaker) {
  return {
    referables: m.gauge(
      "referable_referables",
      ["ready", "reason"],
      Object.entries(READY_OF_REASON).map(([reason, ready]) => [ready, reason]),
    ),
    sourceInformers: m.gauge("referable_source_informers"),
    labelKeysKept: m.gauge("referable_label_keys_kept"),
    watchesOpen: m.gauge("referable_watches_open"),
    informerSignals: m.counter(
      "referable_informer_restarts_total",
      ["signal", "reason"],
      signalReasonPairs(),
    ),
    propagation: m.histogram(
      "referable_propagation_seconds",
      [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    ),
    ...writeMetrics(m),
  };
}

/** Writes of statuses, exported keys and Events, by result. */
function writeMetrics(m: MetricMaker) {
  return {
    statusWrites: m.counter(
      "referable_status_writes_total",
      ["result"],
      [["success"], ["conflict"], ["error"]],
    ),
    statusRepairs: m.counter("referable_status_repairs_total"),
    statusWritesDeferred: m.counter(
      "referable_status_writes_deferred_total",
      ["reason"],
      [["rate"], ["budget"]],
    ),
    exportWrites: m.counter(
      "referable_export_writes_total",
      ["result"],
      [["success"], ["conflict"], ["forbidden"], ["error"]],
    ),
    events: m.counter("referable_events_total", ["type"], [["Normal"], ["Warning"], ["Dropped"]]),
    accessReviews: m.counter(
      "referable_access_reviews_total",
      ["result"],
      [["allowed"], ["denied"], ["error"]],
    ),
    driftReads: m.counter("referable_drift_reads_total"),
    transformQuarantined: m.gauge("referable_transform_quarantined"),
    transformQuarantineEvaluations: m.counter("referable_transform_quarantine_evaluations_total"),
    driftReadsWaiting: m.gauge("referable_drift_reads_waiting"),
  };
}
