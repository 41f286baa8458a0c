/**
 * The controller process: parse the configuration once, build the parts, elect a leader,
 * serve metrics and probes, and shut down gracefully on SIGTERM (stop writing, release the
 * lease, close informers).
 */
import { hostname } from "node:os";
import { join } from "node:path";
import type { Server } from "node:http";
import { ConfigError, helpText, parseConfig, type Config } from "./config.ts";
import { buildController, type Built } from "../referable/build.ts";
import { Manager, type ManagedElector } from "../runtime/manager.ts";
import { ShardGate } from "../runtime/shard-gate.ts";
import { ShardCoordinator } from "../runtime/shards.ts";
import { asError } from "../api/errors.ts";
import { isMainModule } from "./main-module.ts";
import { loadClusterAccess, type ClusterAccess } from "../kube/access.ts";
import { KubeClient } from "../kube/client.ts";
import { Discovery } from "../kube/discovery.ts";
// The webhook is imported when configured (serveWebhook): a process that does not serve it does
// not keep its code (BENCHMARKS.md, "At rest").
import type { OpenCertificate, startWebhookServer } from "../webhook/index.ts";
import type { Logger } from "pino";
import { createProcessLogger } from "./log-format.ts";
import { ControllerMetrics } from "../referable/metrics.ts";
import { openSecureMetrics } from "./metrics-auth.ts";
import { closeServer, startMetricsServer, startProbeServer } from "./server.ts";
import { parseBindAddress } from "../webhook/bind-address.ts";
import { StartupGate } from "./startup.ts";
import { VERSION, versionText } from "../api/version.ts";
import { keepWasmAtBaseline, RestCollector } from "./at-rest.ts";

/** Runs the controller until SIGTERM/SIGINT; resolves with the exit code. */
export async function main(argv: readonly string[], env: NodeJS.ProcessEnv): Promise<number> {
  const config = readConfig(argv, env);
  if (typeof config === "number") return config;
  const logger = processLogger(config);
  collectAtRest(logger);
  const connected = await connect(config, env, logger);
  if (!connected) return 2;
  const { client, metrics } = connected;
  const { discovery, shards, controller, resolver } = buildParts(config, client, logger, metrics);
  let shuttingDown = false;
  const startup = startupGateFor(config, client, logger);
  const stopChecks = new AbortController();
  const served = await serveMetricsAndProbes(config, metrics, client, logger, {
    controller,
    resolver,
    shards,
    problem: () => startup.problem?.message,
    shuttingDown: () => shuttingDown,
  });
  if (!served) return 1;
  const { metricsServer, probeServer } = served;
  // Every replica serves the webhook, leader or not: admission must not wait for an election.
  const webhookServer = await serveWebhook(config, client, discovery, logger);
  if (webhookServer === "failed") {
    await Promise.all([closeServer(metricsServer), closeServer(probeServer)]);
    await client.close();
    return 1;
  }
  let exitWith: (code: number) => void = () => undefined;
  const exited = new Promise<number>((resolve) => (exitWith = resolve));
  let manager: Manager | undefined;

  const shutdown = async (why: string, code: number) => {
    if (shuttingDown) return;
    shuttingDown = true;
    stopChecks.abort();
    exitWith(
      await stopInOrder(logger, config.shutdownTimeoutMs, why, code, async () => {
        // Stop writing, let the writes in flight finish, then release the lease (so a standby
        // takes over at once, and after our last write), then close the caches. Before the
        // start-up checks passed nothing was started but the caches' owners.
        if (manager) await manager.stop();
        else {
          await controller.stop();
          await resolver.stop();
        }
        await Promise.all([closeServer(metricsServer), closeServer(probeServer), closeServer(webhookServer)]);
        await client.close();
      }),
    );
  };
  process.once("SIGTERM", () => void shutdown("SIGTERM", 0));
  process.once("SIGINT", () => void shutdown("SIGINT", 0));

  const begin = () => {
    // Caches, then writers, then leadership; the manager campaigns for the Lease.
    manager = managerFor(config, { controller, resolver, client, logger, metrics, shards }, () => {
      if (shuttingDown) return;
      logger.error({}, "lost the leader lease: exiting");
      void shutdown("lost leadership", 1);
    });
    void manager.start();
    logger.info(
      {
        version: VERSION,
        leaderElect: config.leaderElect,
        shards: config.shards,
        concurrency: config.concurrency,
      },
      "controller started",
    );
  };
  // The controller starts only once the cluster has what it needs (CRD, RBAC, the Lease's
  // namespace); until then /readyz says what is missing and how to fix it.
  void startup.waitUntilPassing(stopChecks.signal).then((passed) => {
    if (passed && !shuttingDown) begin();
  });
  return exited;
}

/** The controller and resolver `main` runs, with the shard gate when `--shards` is on. */
function buildParts(config: Config, client: KubeClient, logger: Logger, metrics: ControllerMetrics) {
  const discovery = new Discovery({ client });
  const shards = config.shards > 0 ? new ShardGate(config.shards, logger) : undefined;
  const built = buildController({
    ...config,
    client,
    discovery,
    logger,
    metrics,
    ...(shards && { shardGate: shards }),
  });
  return { discovery, shards, ...built };
}

/** The start-up checks for this configuration (CRD, RBAC, the Lease's namespace). */
function startupGateFor(config: Config, client: KubeClient, logger: Logger): StartupGate {
  return new StartupGate({
    client,
    leaderElect: config.leaderElect || config.shards > 0,
    shards: config.shards > 0,
    leaseNamespace: config.leaderElectionNamespace,
    leaseName: config.leaderElectionId,
    logger: logger.child({ part: "startup" }),
  });
}

/**
 * Runs `stop` within `timeoutMs`; resolves with the exit code: `code`, or 1 when the stop
 * failed or timed out (then the process exits without waiting for it).
 */
function stopInOrder(
  logger: Logger,
  timeoutMs: number,
  why: string,
  code: number,
  stop: () => Promise<void>,
): Promise<number> {
  logger.info({ why }, "shutting down");
  return new Promise<number>((resolve) => {
    const timer = setTimeout(() => {
      logger.error({ timeoutMs }, "graceful shutdown timed out");
      resolve(1);
    }, timeoutMs);
    timer.unref();
    stop()
      .then(
        () => {
          logger.info({}, "stopped");
          resolve(code);
        },
        (err: unknown) => {
          logger.error({ err: asError(err).message }, "error during shutdown");
          resolve(1);
        },
      )
      .finally(() => clearTimeout(timer));
  });
}

/** The cluster connection and the metrics that observe it; undefined when there is no cluster. */
async function connect(
  config: Config,
  env: NodeJS.ProcessEnv,
  logger: Logger,
): Promise<{ client: KubeClient; metrics: ControllerMetrics } | undefined> {
  let access: ClusterAccess;
  try {
    access = await loadClusterAccess({ kubeconfig: config.kubeconfig, context: config.context, env });
  } catch (err) {
    logger.error({ err: asError(err).message }, "no cluster to talk to: pass --kubeconfig, or run in a pod");
    return undefined;
  }
  const host = new URL(access.server).host;
  const metrics = new ControllerMetrics({ leaseName: config.leaderElectionId });
  const client = new KubeClient({
    access,
    observe: (o) => metrics.observeRequest(host, o.method, o.verb, o.code, o.durationSeconds),
  });
  return { client, metrics };
}

/**
 * The metrics endpoint (gauges read when scraped; TLS and authorization with --metrics-secure)
 * and the probes (ready once synced, until stopping); undefined when secure metrics cannot be
 * served (the client is closed then).
 */
async function serveMetricsAndProbes(
  config: Config,
  metrics: ControllerMetrics,
  client: KubeClient,
  logger: Logger,
  parts: Pick<Built, "controller" | "resolver"> & {
    shards: ShardGate | undefined;
    problem: () => string | undefined;
    shuttingDown: () => boolean;
  },
): Promise<{ metricsServer: Server | undefined; probeServer: Server | undefined } | undefined> {
  const { controller, resolver } = parts;
  let secureMetrics: Awaited<ReturnType<typeof openSecureMetrics>> | undefined;
  if (config.metricsSecure && parseBindAddress(config.metricsBindAddress)) {
    try {
      secureMetrics = await openSecureMetrics({
        client,
        certDir: config.metricsCertDir,
        dnsNames: ["localhost", hostname()],
        logger: logger.child({ part: "metrics" }),
      });
    } catch (err) {
      logger.error(
        { err: asError(err).message, certDir: config.metricsCertDir },
        "cannot serve secure metrics: --metrics-cert-dir needs tls.crt and tls.key",
      );
      await client.close();
      return undefined;
    }
  }
  const metricsServer = await startMetricsServer(
    config.metricsBindAddress,
    metrics.registry,
    () => {
      metrics.setReferableCounts(controller.countByReason());
      metrics.setUnfinishedWork(controller.unfinishedWork());
      metrics.shardReferables.set(controller.countOwned());
      if (parts.shards) {
        metrics.shardBuckets.set(parts.shards.held.size);
        // Sharded, a replica "leads" while it serves a bucket: the NoLeader alert (the sum over
        // replicas below 1) still fires when nobody writes.
        metrics.leaderStatus.labels(config.leaderElectionId).set(parts.shards.held.size > 0 ? 1 : 0);
      }
      metrics.sourceInformers.set(resolver.informerCount);
      metrics.labelKeysKept.set(resolver.labelKeysKept);
      metrics.driftReadsWaiting.set(controller.readsWaiting());
      metrics.setTransformQuarantine(resolver.transformQuarantine());
      metrics.subscriptions.set(resolver.subscriptionCount);
      metrics.watchesOpen.set(client.activeWatches);
    },
    secureMetrics,
  );
  metricsServer?.on("close", () => secureMetrics?.close());
  const probeServer = await startProbeServer(
    config.healthProbeBindAddress,
    () => parts.problem() ?? (controller.synced && !parts.shuttingDown()),
    () => true,
  );
  return { metricsServer, probeServer };
}

/**
 * One memory-reducing collection each time the process comes to rest (at-rest.ts), from now on;
 * its timer keeps no process alive.
 */
function collectAtRest(logger: Logger): void {
  const mib = (bytes: number) => Math.round(bytes / 2 ** 20);
  const collector = new RestCollector({
    onCollected: ({ ms, heapBefore, heapAfter }) =>
      logger.debug(
        { ms: Math.round(ms), heapUsedMiB: mib(heapBefore), heapUsedAfterMiB: mib(heapAfter) },
        "collected garbage at rest",
      ),
  });
  collector.start();
}

/** The process's logger; it also reports an unhandled rejection (a bug) rather than crash. */
function processLogger(config: Config): Logger {
  const logger = createProcessLogger({
    level: config.logLevel,
    format: config.logFormat,
    base: { component: "referable-controller", identity: config.identity },
  });
  process.on("unhandledRejection", (reason) =>
    logger.error({ err: asError(reason).message }, "unhandled rejection (a bug: please report it)"),
  );
  return logger;
}

/** The configuration, or the exit code when there is none to run with (help, or an error). */
function readConfig(argv: readonly string[], env: NodeJS.ProcessEnv): Config | number {
  try {
    const parsed = parseConfig(argv, env, { terminal: process.stdout.isTTY === true });
    if (parsed !== "help" && parsed !== "version") return parsed;
    process.stdout.write(`${parsed === "help" ? helpText() : versionText()}\n`);
    return 0;
  } catch (err) {
    process.stderr.write(`${err instanceof ConfigError ? err.message : asError(err).message}\n`);
    return 2;
  }
}

/** The admission webhook's server, when configured; "failed" when it cannot serve. */
async function serveWebhook(
  config: Config,
  client: KubeClient,
  discovery: Discovery,
  logger: Logger,
): Promise<Awaited<ReturnType<typeof startWebhookServer>> | undefined | "failed"> {
  if (!parseBindAddress(config.webhookBindAddress)) return undefined;
  const { CertRotator, createAdmissionHandler, rememberedSelfUsername, startWebhookServer } =
    await import("../webhook/index.ts");
  const webhookLogger = logger.child({ part: "webhook" });
  // --webhook-cert-secret: a certificate of its own, rotated; else cert-manager's from --webhook-cert-dir.
  const managed: OpenCertificate | undefined =
    config.webhookCertSecret !== undefined
      ? (onChange) =>
          CertRotator.start({
            client,
            namespace: config.webhookCertNamespace,
            secretName: config.webhookCertSecret!,
            serviceName: config.webhookService!,
            webhookConfigurationName: config.webhookConfiguration!,
            logger: logger.child({ part: "webhook-certificate" }),
            onChange,
          })
      : undefined;
  try {
    return await startWebhookServer({
      address: config.webhookBindAddress,
      ...(managed
        ? { certificate: managed }
        : {
            certFile: join(config.webhookCertDir, "tls.crt"),
            keyFile: join(config.webhookCertDir, "tls.key"),
          }),
      handler: createAdmissionHandler({
        client,
        discovery,
        logger: webhookLogger,
        maxValueBytes: config.maxValueBytes,
        // The webhook runs in the controller's process: the API server tells it who that is.
        controllerUsername: rememberedSelfUsername(client),
      }),
      logger: webhookLogger,
    });
  } catch (err) {
    logger.error(
      {
        err: asError(err).message,
        ...(managed ? { certSecret: config.webhookCertSecret } : { certDir: config.webhookCertDir }),
      },
      "cannot serve the admission webhook",
    );
    return "failed";
  }
}

/**
 * The manager of the controller's parts: caches, then writers, then leadership; it campaigns
 * for the Lease when leader election is on. `onLost` runs when leadership ends other than by a
 * stop: as controller-runtime does, a replica that lost its lease exits and is restarted as a
 * fresh candidate, rather than risk acting on a state it no longer owns.
 */
function managerFor(
  config: Config,
  parts: Pick<Built, "controller" | "resolver" | "metrics"> & {
    client: KubeClient;
    logger: Logger;
    shards: ShardGate | undefined;
  },
  onLost: () => void,
): Manager {
  const { controller, resolver, client, logger, shards } = parts;
  if (shards)
    return new Manager({
      controller,
      resolver,
      logger: logger.child({ part: "manager" }),
      elector: shardElector(config, { ...parts, shards }),
    });
  return new Manager({
    controller,
    resolver,
    logger: logger.child({ part: "manager" }),
    ...(config.leaderElect && {
      leaderElection: {
        client,
        namespace: config.leaderElectionNamespace,
        name: config.leaderElectionId,
        identity: config.identity,
        leaseDurationMs: config.leaseDurationMs,
        renewDeadlineMs: config.renewDeadlineMs,
        retryPeriodMs: config.retryPeriodMs,
        logger: logger.child({ part: "leader-election" }),
        onLost,
      },
    }),
  });
}

/**
 * Sharded (--shards): the coordinator in the elector's place. The controller writes from the
 * start, but only what the gate admits (the buckets whose Leases this replica holds); the
 * manager drains the writers before the coordinator releases the buckets on stop. A bucket
 * lost is not a reason to exit: the others are still served, and it is taken again when free.
 */
function shardElector(
  config: Config,
  parts: Pick<Built, "controller" | "metrics"> & { client: KubeClient; logger: Logger; shards: ShardGate },
): ManagedElector {
  const { controller, metrics, client, logger, shards } = parts;
  const coordinator = new ShardCoordinator({
    client,
    namespace: config.leaderElectionNamespace,
    name: config.leaderElectionId,
    identity: config.identity,
    gate: shards,
    leaseDurationMs: config.leaseDurationMs,
    renewDeadlineMs: config.renewDeadlineMs,
    retryPeriodMs: config.retryPeriodMs,
    logger: logger.child({ part: "shards" }),
    observer: {
      onHandover: (kind) => metrics.shardHandovers.labels(kind).inc(),
      onMembers: (live) => metrics.shardMembers.set(live),
      onTakeover: (seconds) => metrics.shardTakeover.observe(seconds),
    },
  });
  return {
    run: () => {
      controller.setLeader(true);
      return coordinator.run();
    },
    stop: () => coordinator.stop(),
    // Known to the others while the Referable cache syncs: they leave this replica its share.
    announce: () => coordinator.announce(),
  };
}

if (isMainModule(import.meta.url, process.argv[1])) {
  // Before the first request compiles undici's parser (at-rest.ts): the process's V8 flags.
  keepWasmAtBaseline();
  main(process.argv.slice(2), process.env).then(
    (code) => process.exit(code),
    (err: unknown) => {
      process.stderr.write(`fatal: ${asError(err).message}\n`);
      process.exit(1);
    },
  );
}
