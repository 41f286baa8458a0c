/**
 * The one constructor of the controller's parts: main.ts, the test harness and (through
 * main.ts) the bench build the resolver, the Event recorder and the Referable controller here,
 * wired the same way. Options carry the names of the configuration (src/process/config.ts).
 */
import type { KubeClient } from "../kube/client.ts";
import { Discovery, type ResourceInfo } from "../kube/discovery.ts";
import { silentLogger, type Logger } from "../api/log.ts";
import { ControllerMetrics } from "./metrics.ts";
import { parseServiceAccount } from "../api/service-account.ts";
import { AccessReviews } from "../resolver/access-reviews.ts";
import { Resolver, type ResolverOptions } from "../resolver/resolver.ts";
import type { ShardGate } from "../runtime/shard-gate.ts";
import { ReferableController } from "./controller.ts";
import { EventRecorder } from "./events.ts";

/** Which sources the controller refuses, whatever RBAC allows: Secrets unless allowed, and the deny list. */
export function sourcePolicy(config: {
  allowSecrets: boolean;
  denyKinds: readonly string[];
}): (resource: ResourceInfo) => string | undefined {
  const denied = new Set(config.denyKinds.map((k) => k.toLowerCase()));
  return (resource) => {
    if (resource.group === "" && resource.resource === "secrets" && !config.allowSecrets) {
      return "the controller does not read Secrets unless started with --allow-secrets (and RBAC allows it)";
    }
    const kindGroup = (resource.group ? `${resource.kind}.${resource.group}` : resource.kind).toLowerCase();
    if (denied.has(kindGroup))
      return `the controller's configuration denies ${kindGroup} sources (--deny-kinds)`;
    return undefined;
  };
}

/** Options of {@link buildController}: the parts to share, and the configuration's settings. */
export interface BuildOptions {
  /** The controller's credentials: it reads sources and Referables, and writes, with them. */
  client: KubeClient;
  /** Writes (and watches Referables) through this instead, e.g. a client that injects faults. @default client */
  writer?: Pick<KubeClient, "request" | "watch">;
  /** Discovery shared with the webhook. @default one of the resolver's own */
  discovery?: Discovery;
  /** @default silentLogger */
  logger?: Logger;
  /** @default a registry of its own, without default metrics */
  metrics?: ControllerMetrics;
  /** This replica's identity, the reporting instance of its Events. */
  identity: string;
  /** Whether Secrets may be read (--allow-secrets). @default false */
  allowSecrets?: boolean;
  /** Kinds never read (--deny-kinds). @default none */
  denyKinds?: readonly string[];
  /** Whether spec.export may write into Secrets (--allow-secret-export). @default false */
  allowSecretExport?: boolean;
  /** How often targets where the controller may not watch are read again for drift. @default 30000 */
  exportResyncMs?: number;
  /** See {@link ResolverOptions.maxValueBytes}. */
  maxValueBytes?: number;
  /** Worker threads that evaluate transforms (--transform-workers). */
  transformWorkers?: number;
  /** Deadline of one transform evaluation (--transform-timeout). */
  transformTimeoutMs?: number;
  /** Heap ceiling of each transform worker, in MiB (--transform-max-heap). */
  transformMaxHeapMiB?: number;
  /** See {@link ResolverOptions.informerLingerMs}. */
  informerLingerMs?: number;
  /** See {@link ResolverOptions.maxLabelKeysPerKind} (--max-label-keys-per-kind). */
  maxLabelKeysPerKind?: number;
  /** See {@link ResolverOptions.maxLabelBytesPerObject} (--max-label-bytes-per-object). */
  maxLabelBytesPerObject?: number;
  /** A silent watch (sources and Referables) is reopened after this long. */
  watchdogMs?: number;
  /** See {@link ResolverOptions.kindRetryMs}. */
  kindRetryMs?: ResolverOptions["kindRetryMs"];
  /** See {@link ResolverOptions.watchTimeoutSeconds}. */
  watchTimeoutSeconds?: ResolverOptions["watchTimeoutSeconds"];
  /** The lifetime the API server gives each Referable watch, in seconds. @default [30, 50] */
  referableWatchTimeoutSeconds?: [number, number];
  /** Reconciles at once. */
  concurrency?: number;
  statusWriteRate?: number;
  statusWriteBurst?: number;
  statusWriteBudget?: number;
  statusWriteBudgetBurst?: number;
  /** Longest time between two reads of an object a field is exported into. @default 30000 */
  fieldRereadMs?: number;
  /** Reads a second on the controller's own initiative (--drift-read-budget). @default 10 */
  driftReadBudget?: number;
  /** Only Referables with these labels (--selector). */
  referableSelector?: string;
  /** Name of the Lease (--leader-election-id), the label of the leader gauge. */
  leaderElectionId?: string;
  /** Sharding (--shards): the buckets this replica serves. @default none (one leader) */
  shardGate?: ShardGate;
  /**
   * `NAMESPACE/NAME` (--default-service-account): the ServiceAccount a Referable that names none
   * acts as. @default none: such a Referable reads and writes with the controller's rights
   */
  defaultServiceAccount?: string | undefined;
}

/** The parts {@link buildController} makes. */
export interface Built {
  controller: ReferableController;
  resolver: Resolver;
  events: EventRecorder;
  metrics: ControllerMetrics;
}

/** Builds the resolver, the Event recorder and the Referable controller; starts nothing. */
export function buildController(options: BuildOptions): Built {
  const { client } = options;
  const logger = options.logger ?? silentLogger;
  const metrics = options.metrics ?? new ControllerMetrics({ defaultMetrics: false });
  // One discovery for the resolver (sources) and the field output (targets).
  const discovery = options.discovery ?? new Discovery({ client });
  const resolver = new Resolver({
    client,
    discovery,
    logger: logger.child?.({ part: "resolver" }) ?? logger,
    sourcePolicy: sourcePolicy({
      allowSecrets: options.allowSecrets ?? false,
      denyKinds: options.denyKinds ?? [],
    }),
    onInformerSignal: (signal, reason) => metrics.informerSignals.labels(signal, reason).inc(),
    // One cache of access answers for every Referable that acts as a ServiceAccount; made
    // here so its reviews are counted (its RBAC watch starts with the first check).
    accessReviews: new AccessReviews({
      client,
      logger: logger.child?.({ part: "access" }) ?? logger,
      onReview: (result) => metrics.accessReviews.labels(result).inc(),
    }),
    maxValueBytes: options.maxValueBytes,
    informerLingerMs: options.informerLingerMs,
    maxLabelKeysPerKind: options.maxLabelKeysPerKind,
    maxLabelBytesPerObject: options.maxLabelBytesPerObject,
    watchdogMs: options.watchdogMs,
    kindRetryMs: options.kindRetryMs,
    watchTimeoutSeconds: options.watchTimeoutSeconds,
    transformPool: {
      workers: options.transformWorkers,
      timeoutMs: options.transformTimeoutMs,
      maxHeapMiB: options.transformMaxHeapMiB,
    },
  });
  const gate = options.shardGate;
  const events = new EventRecorder({
    client,
    instance: options.identity,
    logger,
    onEmit: (type) => metrics.events.labels(type).inc(),
    // Sharded: the budget is the set's, shared out by the buckets each replica serves.
    ...(gate && { share: () => gate.held.size / gate.buckets }),
  });
  const controller = new ReferableController({
    client: options.writer ?? client,
    resolver,
    metrics,
    events,
    logger: logger.child?.({ part: "controller" }) ?? logger,
    writePolicy: {
      rate: options.statusWriteRate,
      burst: options.statusWriteBurst,
      budget: options.statusWriteBudget,
      budgetBurst: options.statusWriteBudgetBurst,
    },
    allowSecretExport: options.allowSecretExport ?? false,
    discovery,
    fieldRereadMs: options.fieldRereadMs,
    driftReadBudget: options.driftReadBudget,
    concurrency: options.concurrency,
    watchdogMs: options.watchdogMs,
    watchTimeoutSeconds: options.referableWatchTimeoutSeconds,
    labelSelector: options.referableSelector,
    leaseName: options.leaderElectionId,
    exportResyncMs: options.exportResyncMs,
    shards: options.shardGate,
    defaultServiceAccount: options.defaultServiceAccount
      ? parseServiceAccount(options.defaultServiceAccount)
      : undefined,
  });
  return { controller, resolver, events, metrics };
}
