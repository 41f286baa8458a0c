/**
 * The controller process: parse the configuration once, build the parts, elect a leader,
 * serve metrics and probes, and shut down gracefully on SIGTERM (stop writing, release the
 * lease, close informers).
 */
import { hostname } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { ConfigError, helpText, parseConfig, type Config } from "./config.ts";
import { ReferableController } from "./controller/controller.ts";
import { EventRecorder } from "./controller/events.ts";
import { LeaderElector } from "./controller/leader-election.ts";
import { Manager } from "./manager.ts";
import { asError } from "./errors.ts";
import { loadClusterAccess, type ClusterAccess } from "./kube/access.ts";
import { KubeClient } from "./kube/client.ts";
import { Discovery } from "./kube/discovery.ts";
import { createAdmissionHandler, startWebhookServer } from "./webhook/index.ts";
import type { ResourceInfo } from "./kube/discovery.ts";
import { createProcessLogger } from "./log-format.ts";
import { ControllerMetrics } from "./metrics.ts";
import { openSecureMetrics } from "./metrics-auth.ts";
import { Resolver } from "./resolver/resolver.ts";
import { closeServer, parseBindAddress, startMetricsServer, startProbeServer } from "./server.ts";
import { StartupGate } from "./startup.ts";
import { VERSION, versionText } from "./version.ts";

/** Which sources the controller refuses, whatever RBAC allows: Secrets unless allowed, and the deny list. */
export function sourcePolicy(
  config: Pick<Config, "allowSecrets" | "denyKinds">,
): (resource: ResourceInfo) => string | undefined {
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

/** Runs the controller until SIGTERM/SIGINT; resolves with the exit code. */
export async function main(argv: readonly string[], env: NodeJS.ProcessEnv): Promise<number> {
  let config: Config;
  try {
    const parsed = parseConfig(argv, env, { terminal: process.stdout.isTTY === true });
    if (parsed === "help" || parsed === "version") {
      process.stdout.write(`${parsed === "help" ? helpText() : versionText()}\n`);
      return 0;
    }
    config = parsed;
  } catch (err) {
    process.stderr.write(`${err instanceof ConfigError ? err.message : asError(err).message}\n`);
    return 2;
  }

  const logger = createProcessLogger({
    level: config.logLevel,
    format: config.logFormat,
    base: { component: "referable-controller", identity: config.identity },
  });
  process.on("unhandledRejection", (reason) =>
    logger.error({ err: asError(reason).message }, "unhandled rejection (a bug: please report it)"),
  );

  let access: ClusterAccess;
  try {
    access = await loadClusterAccess({ kubeconfig: config.kubeconfig, context: config.context, env });
  } catch (err) {
    logger.error({ err: asError(err).message }, "no cluster to talk to: pass --kubeconfig, or run in a pod");
    return 2;
  }
  const server = access.server;
  const host = new URL(server).host;
  const metrics = new ControllerMetrics({ leaseName: config.leaderElectionId });
  const client = new KubeClient({
    access,
    observe: (o) => metrics.observeRequest(host, o.method, o.verb, o.code, o.durationSeconds),
  });
  const discovery = new Discovery({ client });
  const resolver = new Resolver({
    client,
    discovery,
    logger: logger.child({ part: "resolver" }),
    maxValueBytes: config.maxValueBytes,
    informerLingerMs: config.informerLingerMs,
    watchdogMs: config.watchdogMs,
    sourcePolicy: sourcePolicy(config),
    onInformerSignal: (signal) => metrics.informerSignals.labels(signal).inc(),
  });
  const events = new EventRecorder({
    client,
    instance: config.identity,
    logger,
    onEmit: (type) => metrics.events.labels(type).inc(),
  });
  const controller = new ReferableController({
    client,
    resolver,
    metrics,
    events,
    logger: logger.child({ part: "controller" }),
    concurrency: config.concurrency,
    writePolicy: {
      rate: config.statusWriteRate,
      burst: config.statusWriteBurst,
      budget: config.statusWriteBudget,
      budgetBurst: config.statusWriteBudgetBurst,
    },
    watchdogMs: config.watchdogMs,
    labelSelector: config.referableSelector,
    leaseName: config.leaderElectionId,
    allowSecretExport: config.allowSecretExport,
  });

  let shuttingDown = false;
  // The controller starts only once the cluster has what it needs (CRD, RBAC, the Lease's
  // namespace); until then /readyz says what is missing and how to fix it.
  const startup = new StartupGate({
    client,
    leaderElect: config.leaderElect,
    leaseNamespace: config.leaderElectionNamespace,
    leaseName: config.leaderElectionId,
    logger: logger.child({ part: "startup" }),
  });
  const stopChecks = new AbortController();
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
      return 1;
    }
  }
  const metricsServer = await startMetricsServer(
    config.metricsBindAddress,
    metrics.registry,
    () => {
      metrics.setReferableCounts(controller.countByReason());
      metrics.setUnfinishedWork(controller.unfinishedWork());
      metrics.sourceInformers.set(resolver.informerCount);
      metrics.watchesOpen.set(client.activeWatches);
    },
    secureMetrics,
  );
  metricsServer?.on("close", () => secureMetrics?.close());
  const probeServer = await startProbeServer(
    config.healthProbeBindAddress,
    () => startup.problem?.message ?? (controller.synced && !shuttingDown),
    () => true,
  );
  // Every replica serves the webhook, leader or not: admission must not wait for an election.
  let webhookServer: Awaited<ReturnType<typeof startWebhookServer>> | undefined;
  if (parseBindAddress(config.webhookBindAddress)) {
    const webhookLogger = logger.child({ part: "webhook" });
    try {
      webhookServer = await startWebhookServer({
        address: config.webhookBindAddress,
        certFile: join(config.webhookCertDir, "tls.crt"),
        keyFile: join(config.webhookCertDir, "tls.key"),
        handler: createAdmissionHandler({ client, discovery, logger: webhookLogger }),
        logger: webhookLogger,
      });
    } catch (err) {
      logger.error(
        { err: asError(err).message, certDir: config.webhookCertDir },
        "cannot serve the admission webhook",
      );
      await Promise.all([closeServer(metricsServer), closeServer(probeServer)]);
      await client.close();
      return 1;
    }
  }
  let exitWith: (code: number) => void = () => undefined;
  const exited = new Promise<number>((resolve) => (exitWith = resolve));
  let elector: LeaderElector | undefined;
  let manager: Manager | undefined;

  const shutdown = async (why: string, code: number) => {
    if (shuttingDown) return;
    shuttingDown = true;
    stopChecks.abort();
    logger.info({ why }, "shutting down");
    const timer = setTimeout(() => {
      logger.error({ timeoutMs: config.shutdownTimeoutMs }, "graceful shutdown timed out");
      exitWith(1);
    }, config.shutdownTimeoutMs);
    timer.unref();
    try {
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
      logger.info({}, "stopped");
      exitWith(code);
    } catch (err) {
      logger.error({ err: asError(err).message }, "error during shutdown");
      exitWith(1);
    } finally {
      clearTimeout(timer);
    }
  };
  process.once("SIGTERM", () => void shutdown("SIGTERM", 0));
  process.once("SIGINT", () => void shutdown("SIGINT", 0));

  const begin = () => {
    if (config.leaderElect) {
      elector = new LeaderElector({
        client,
        namespace: config.leaderElectionNamespace,
        name: config.leaderElectionId,
        identity: config.identity,
        leaseDurationMs: config.leaseDurationMs,
        renewDeadlineMs: config.renewDeadlineMs,
        retryPeriodMs: config.retryPeriodMs,
        logger: logger.child({ part: "leader-election" }),
        onStartedLeading: () => controller.setLeader(true),
        onStoppedLeading: () => {
          controller.setLeader(false);
          // As controller-runtime does: a replica that lost its lease exits and is restarted as
          // a fresh candidate, rather than risk acting on a state it no longer owns.
          if (!shuttingDown) {
            logger.error({}, "lost the leader lease: exiting");
            void shutdown("lost leadership", 1);
          }
        },
      });
    }
    // Caches, then writers, then leadership.
    manager = new Manager({ controller, resolver, elector, logger: logger.child({ part: "manager" }) });
    void manager.start();
    logger.info(
      { version: VERSION, leaderElect: config.leaderElect, concurrency: config.concurrency },
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

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  main(process.argv.slice(2), process.env).then(
    (code) => process.exit(code),
    (err: unknown) => {
      process.stderr.write(`fatal: ${asError(err).message}\n`);
      process.exit(1);
    },
  );
}
