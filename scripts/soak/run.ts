/** One soak, phase by phase: the world and the controller, the churn, the quiet, the verdict, the teardown. */
import { randomInt } from "node:crypto";
import { setTimeout as delay } from "node:timers/promises";
import type { KubeClient } from "../../src/kube/client.ts";
import { type PrivateControlPlane, startControlPlane } from "../../test/harness/control-plane.ts";
import { SHARD_LABEL } from "../../test/harness/controller.ts";
import { clientFor } from "../../test/harness/faults.ts";
import { waitFor } from "../../test/harness/kube.ts";
import { describeMismatch, type Mismatch } from "../../test/harness/oracle.ts";
import {
  type ControllerProcess,
  type Exit,
  freePort,
  metricValue,
  startControllerProcess,
} from "../../test/harness/process.ts";
import { Churn } from "./churn.ts";
import type { MetricsSample, SoakOptions, SoakReport } from "./report.ts";
import { histogramQuantile, memoryTrend, sampleMetrics, startSampler } from "./sampling.ts";
import { judge, problemsOf, readLogs } from "./verdict.ts";
import { Dice, LEASE_NAMESPACE, RF, setUpWorld } from "./world.ts";

/** The controller over the soak's Referables (its shard), once it leads; killed when it never does. */
async function startLeadingController(
  kubeconfigPath: string,
  shard: string,
  inspectPort: number | undefined,
): Promise<ControllerProcess> {
  const proc = await startControllerProcess(
    [
      "--kubeconfig",
      kubeconfigPath,
      "--referable-selector",
      `${SHARD_LABEL}=${shard}`,
      "--leader-elect=true",
      "--leader-election-namespace",
      LEASE_NAMESPACE,
      "--informer-linger",
      "3s",
    ],
    { kubeconfig: false, env: inspectPort ? { NODE_OPTIONS: `--inspect=127.0.0.1:${inspectPort}` } : {} },
  );
  try {
    await waitFor(
      "the controller to lead",
      async () => metricValue(await proc.metrics(), "leader_election_master_status") === 1,
      { timeoutMs: 60_000, intervalMs: 200 },
    );
  } catch (err) {
    await proc.stop("SIGKILL").catch(() => undefined);
    throw err;
  }
  return proc;
}

/** The baseline the informers must come back to: no source informer, and the controller's own watch on Referables. */
async function baselineOf(proc: ControllerProcess): Promise<MetricsSample> {
  return await waitFor(
    "the controller's watch on Referables to open",
    async () => {
      const s = await sampleMetrics(proc, 0);
      return s.watchesOpen === 1 && s.sourceInformers === 0 && s;
    },
    { timeoutMs: 60_000, intervalMs: 200 },
  );
}

/** The churn at `rate` operations a second until `durationMs` from `started` (or the controller is gone), with progress lines. */
async function churnFor(
  churn: Churn,
  started: number,
  durationMs: number,
  rate: number,
  controllerGone: () => boolean,
  samples: readonly MetricsSample[],
  log: (line: string) => void,
): Promise<void> {
  let lastProgress = started;
  for (let i = 0; performance.now() - started < durationMs && !controllerGone(); i++) {
    await churn.step();
    if (performance.now() - lastProgress >= 30_000) {
      lastProgress = performance.now();
      const s = samples[samples.length - 1];
      log(
        `  ${Math.round((lastProgress - started) / 1000)} s: ${churn.total} operations, heap ${s ? (s.heapUsedBytes / 2 ** 20).toFixed(1) : "?"} MiB, ${s?.sourceInformers ?? "?"} source informers`,
      );
    }
    // Pacing, not synchronisation: the next operation is due at a fixed rate.
    await delay(Math.max(0, started + ((i + 1) * 1000) / rate - performance.now()));
  }
}

/** The oracle's verdict, and on a mismatch a second look 30 s later, to tell a slow controller from a wrong one. */
async function judgeTwice(admin: KubeClient, shard: string, log: (line: string) => void) {
  const verdict = await judge(admin, shard);
  let persistent: Mismatch[] = [];
  if (verdict.mismatches.length) {
    for (const m of verdict.mismatches) log(`  MISMATCH ${describeMismatch(m)}`);
    log("  looking again in 30 s, to tell a slow controller from a wrong one");
    await delay(30_000);
    persistent = (await judge(admin, shard)).mismatches;
    for (const m of persistent) log(`  STILL ${describeMismatch(m)}`);
  }
  return { verdict, persistent };
}

/** Runs one soak; see the module comment. Never leaves a process behind. */
export async function runSoak(options: SoakOptions): Promise<SoakReport> {
  const log = options.log ?? ((line: string) => process.stderr.write(`${line}\n`));
  const seed = options.seed ?? randomInt(2 ** 32);
  const rate = options.ratePerSecond ?? 20;
  const quietMs = options.quietMs ?? 10_000;
  const sampleEveryMs = options.sampleEveryMs ?? 5_000;
  const warmupMs = options.warmupMs ?? Math.min(180_000, Math.max(15_000, options.durationMs * 0.2));
  const liveHeapEveryMs = options.liveHeapEveryMs ?? 60_000;
  const inspectPort = liveHeapEveryMs > 0 ? await freePort() : undefined;
  log(
    `soak: seed ${seed} (replay with --seed ${seed}), ${(options.durationMs / 60_000).toFixed(1)} min at ${rate} ops/s`,
  );

  const shard = `soak-${seed.toString(16)}`;
  let plane: PrivateControlPlane | undefined;
  let admin: KubeClient | undefined;
  let controller: ControllerProcess | undefined;
  let controllerExit: Exit | undefined;
  try {
    plane = await startControlPlane({ private: true, log: (line) => log(`[control-plane] ${line}`) });
    admin = clientFor(plane.kubeconfigPath);
    await setUpWorld(admin);

    controller = await startLeadingController(plane.kubeconfigPath, shard, inspectPort);
    const proc = controller;
    void proc.exited.then((exit) => (controllerExit = exit));
    const baseline = await baselineOf(proc);
    log(
      `controller pid ${proc.pid} leads; baseline: ${baseline.sourceInformers} source informers, ${baseline.watchesOpen} watch(es)`,
    );

    const started = performance.now();
    const sampler = startSampler(
      proc,
      started,
      sampleEveryMs,
      inspectPort ? { port: inspectPort, everyMs: liveHeapEveryMs } : undefined,
    );
    const samples = sampler.samples;

    const churn = new Churn(new Dice(seed), admin, shard);
    await churnFor(
      churn,
      started,
      options.durationMs,
      rate,
      () => controllerExit !== undefined,
      samples,
      log,
    );
    const churnMs = performance.now() - started;
    log(
      `churn done: ${churn.total} operations in ${(churnMs / 1000).toFixed(0)} s (${churn.failed} refused); quiet for ${quietMs / 1000} s`,
    );
    for (const line of churn.firstErrors) log(`  refused: ${line}`);
    // The quiet period the oracle is defined after; then the controller must also be idle.
    await delay(quietMs);
    await waitFor(
      "the controller to be idle",
      async () => {
        const text = await proc.metrics();
        return (
          metricValue(text, "workqueue_depth") === 0 &&
          metricValue(text, "controller_runtime_active_workers", { controller: "referable" }) === 0
        );
      },
      { timeoutMs: 60_000, intervalMs: 200 },
    );

    const { verdict, persistent } = await judgeTwice(admin, shard, log);
    const endText = await proc.metrics();
    const peak = Math.max(...samples.map((s) => s.sourceInformers).filter(Number.isFinite));

    // Every Referable gone: the source informers must close (after their linger).
    await Promise.all(
      churn.referableNames().map((name) => admin!.request("DELETE", `${RF}/${name}`).catch(() => undefined)),
    );
    let end = await sampleMetrics(proc, performance.now() - started);
    try {
      await waitFor(
        "the source informers to close",
        async () => {
          end = await sampleMetrics(proc, performance.now() - started);
          return end.sourceInformers === baseline.sourceInformers && end.watchesOpen === baseline.watchesOpen;
        },
        { timeoutMs: 45_000, intervalMs: 250 },
      );
    } catch {
      // reported below
    }
    const scrapeFailures = await sampler.stop();
    if (scrapeFailures) log(`  (${scrapeFailures} scrapes of /metrics failed)`);

    controllerExit ??= await proc.stop("SIGTERM");
    const { unhandled, bugLines, errorLines } = readLogs(proc.logs());

    const lags = samples.filter((s) => s.t >= warmupMs && Number.isFinite(s.eventLoopLagP99Seconds));
    const report: SoakReport = {
      seed,
      churnMs,
      operations: { total: churn.total, failed: churn.failed, byType: churn.counts },
      referablesChecked: verdict.checked,
      reasons: verdict.reasons,
      mismatches: verdict.mismatches,
      persistentMismatches: persistent,
      memory: memoryTrend(samples, sampler.liveHeap, warmupMs, churnMs),
      informers: {
        baseline: baseline.sourceInformers,
        peak,
        end: end.sourceInformers,
        backToBaseline:
          end.sourceInformers === baseline.sourceInformers && end.watchesOpen === baseline.watchesOpen,
        watchesEnd: end.watchesOpen,
      },
      eventLoop: {
        p99MaxMs: Math.max(0, ...lags.map((s) => s.eventLoopLagP99Seconds * 1000)),
        p99MeanMs:
          lags.reduce((sum, s) => sum + s.eventLoopLagP99Seconds * 1000, 0) / Math.max(1, lags.length),
        maxMs: Math.max(0, ...lags.map((s) => s.eventLoopLagMaxSeconds * 1000)),
      },
      propagation: {
        count: metricValue(endText, "referable_propagation_seconds_count") ?? 0,
        p50Ms: histogramQuantile(endText, "referable_propagation_seconds", 0.5) * 1000,
        p99Ms: histogramQuantile(endText, "referable_propagation_seconds", 0.99) * 1000,
      },
      statusWrites: {
        success: metricValue(endText, "referable_status_writes_total", { result: "success" }) ?? 0,
        conflict: metricValue(endText, "referable_status_writes_total", { result: "conflict" }) ?? 0,
        error: metricValue(endText, "referable_status_writes_total", { result: "error" }) ?? 0,
      },
      unhandledRejections: unhandled,
      bugLines,
      errorLines,
      controllerExit,
      samples,
      liveHeap: sampler.liveHeap,
      problems: [],
      passed: false,
    };
    report.problems = problemsOf(report, baseline);
    report.passed = report.problems.length === 0;
    return report;
  } finally {
    if (controller && controllerExit === undefined) await controller.stop("SIGKILL").catch(() => undefined);
    await admin?.close();
    await plane?.stop();
  }
}
