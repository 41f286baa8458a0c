/**
 * The scale scenario's phases: the status-write floor, a cold start of one replica or of
 * shards, and the failover after a kill -9 of one shard.
 */
import type { ReferableStatus } from "../src/api/referable.ts";
import { statusPatch } from "../src/referable/status.ts";
import type { ControlPlane } from "../test/harness/control-plane.ts";
import { apiServerMetrics, apiServerProfile } from "./apiserver-diag.ts";
import { countLogLines } from "./controller-logs.ts";
import {
  alive,
  type Controller,
  type Cost,
  cost,
  cpuSince,
  peakRssMiBOf,
  type PlaneCpu,
  planeCpuNow,
  samplePeaks,
  startController,
  withHeapCap,
} from "./controller.ts";
import { type Fixture, NS, RF, setSource, WIDGET_GROUP } from "./fixtures.ts";
import { memoryMap } from "./memory-map.ts";
import { perReferable, scrape, sumOf } from "./metrics.ts";
import { controllerNodeOptions, log, phaseSeconds, quick, RUN, scaleBuckets } from "./options.ts";
import { measurePropagation } from "./propagation.ts";
import type { ReferableWatch } from "./referable-watch.ts";
import { FLOOR_REASON } from "./referable-watch.ts";
import { type BenchClient, pool } from "./retry.ts";
import { budgetBoundSeconds, type ScaleFailover, type ScalePhase } from "./scale-report.ts";
import { stats, until } from "./stats.ts";

/**
 * The floor of a cold start: the n status writes it must make (the controller's JSON patch with
 * its preconditions), sent straight to the API server `concurrency` at a time. The status each
 * writes has no Ready condition, so a controller started after it must write every Referable
 * again: this is also what makes the next cold start a cold one.
 */
/**
 * What the scale floor writes of a Referable over `source`: the status the controller writes
 * (value, text, the source read with its uid and resourceVersion, a Ready condition), field for
 * field and of about the same length, so the API server validates, stores and sends the same
 * bytes as in the cold start (the floor wrote `{value, observedGeneration}` alone until
 * perf/shard-cold2: a fifth of the bytes). Not Ready ({@link FLOOR_REASON}), so a controller
 * started after it writes every Referable again; of the Referable's generation (1), so a shard
 * lists the others' Referables as compact records (a status of a generation not observed yet
 * stays whole: with generation 0 every shard kept the 75,000 others' statuses whole at 100,000).
 */
function floorStatus(round: string, source: Fixture["sources"][number], at: string): ReferableStatus {
  const condition = {
    type: "Ready",
    status: "False",
    reason: FLOOR_REASON,
    message: "",
    observedGeneration: 1,
    lastTransitionTime: at,
  };
  return {
    value: round,
    text: round,
    sources: [
      {
        apiVersion: source.kind === "ConfigMap" ? "v1" : `${WIDGET_GROUP}/v1`,
        kind: source.kind,
        namespace: NS,
        name: source.name,
        uid: "00000000-0000-4000-8000-000000000000",
        resourceVersion: "1000000",
      },
    ],
    observedGeneration: 1,
    conditions: [condition],
  } as ReferableStatus;
}

/** Lengths of kube-apiserver's CPU profiles (BENCH_APISERVER_DIAG): in the writes; the cold start's first seconds. */
const DIAG_PROFILE_SECONDS = Number(process.env.BENCH_DIAG_PROFILE_SECONDS ?? 20);
const DIAG_FIRST_SECONDS = Number(process.env.BENCH_DIAG_FIRST_SECONDS ?? 15);

/** The status-write floor of a cold start (see {@link floorStatus}), with the CPU the control plane spent on it. */
export async function scaleFloor(
  client: BenchClient,
  plane: ControlPlane,
  watch: ReferableWatch,
  fx: Fixture,
  concurrency: number,
  round: string,
): Promise<{ seconds: number; cpu: PlaneCpu }> {
  const names = fx.names;
  const sourceOf = new Map(names.map((name, i) => [name, fx.sources[i]!]));
  const at = new Date().toISOString().replace(/\.\d+Z$/, "Z");
  // Counted as the watch shows them: a poll must not walk 100,000 names every 50 ms.
  const shown = new Set<string>();
  const off = watch.onChange((name) => {
    if (watch.latest.get(name)?.value === round) shown.add(name);
  });
  try {
    await apiServerMetrics(plane.kubeconfigPath, `${round}-start`);
    apiServerProfile(plane.kubeconfigPath, round, 3000, DIAG_PROFILE_SECONDS);
    const cpu0 = await planeCpuNow(plane);
    const t0 = performance.now();
    let written = 0;
    let lastLog = t0;
    await pool(names, concurrency, async (name) => {
      const seen = watch.latest.get(name);
      if (!seen) throw new Error(`the watch has not seen ${name}`);
      await client.request("PATCH", `${RF}/${name}/status`, {
        body: statusPatch(seen.uid, floorStatus(round, sourceOf.get(name)!, at)),
        contentType: "application/json-patch+json",
        timeoutMs: 120_000,
      });
      written++;
      if (performance.now() - lastLog > 30_000) {
        lastLog = performance.now();
        log(
          `scale: ${round}: ${written} of ${names.length} written in ${((lastLog - t0) / 1000).toFixed(0)} s`,
        );
      }
    });
    const seconds = (performance.now() - t0) / 1000;
    const cpu = cpuSince(cpu0, await planeCpuNow(plane));
    await apiServerMetrics(plane.kubeconfigPath, `${round}-end`);
    await until(
      "the floor's writes to show",
      () => (shown.size >= names.length && watch.readyCount() === 0 ? true : undefined),
      600_000,
    );
    return { seconds, cpu };
  } finally {
    off();
  }
}

/** Starts `replicas` controllers (sharded when more than one), waits for every Referable Ready. */
export async function scaleColdStart(
  client: BenchClient,
  plane: ControlPlane,
  fx: Fixture,
  watch: ReferableWatch,
  replicas: number,
  heapCapMiB: number,
  floor: { seconds: number; cpu: PlaneCpu },
  baselineHeapMiB: number,
  baselineLiveMiB: number | undefined,
): Promise<{ phase: ScalePhase; controllers: Controller[] }> {
  const floorSeconds = floor.seconds;
  const n = fx.names.length;
  const selector = `bench-set=${fx.label}`;
  const nodeOptions = withHeapCap(controllerNodeOptions, heapCapMiB);
  const args =
    replicas === 1
      ? ["--leader-elect=false"]
      : [
          `--shards=${scaleBuckets}`,
          `--leader-election-namespace=${NS}`,
          `--leader-election-id=${RUN}-scale`,
        ];
  log(`scale: cold start of ${n} Referables, ${replicas} replica(s), heap cap ${heapCapMiB} MiB`);
  await apiServerMetrics(plane.kubeconfigPath, `cold-${replicas}-start`);
  if (DIAG_FIRST_SECONDS > 0)
    apiServerProfile(plane.kubeconfigPath, `cold-${replicas}-first`, 0, DIAG_FIRST_SECONDS);
  let profiled = false;
  let firstCpu: Promise<PlaneCpu> | undefined;
  const cpu0 = await planeCpuNow(plane);
  const t0 = performance.now();
  const controllers: Controller[] = [];
  // /readyz waits for the list of every Referable: minutes at 100,000 on a loaded machine.
  const readyTimeoutMs = 60_000 + n * 10;
  try {
    await Promise.all(
      Array.from({ length: replicas }, async () => {
        controllers.push(
          await startController(plane.kubeconfigPath, selector, args, nodeOptions, readyTimeoutMs),
        );
      }),
    );
  } catch (err) {
    await Promise.all(controllers.map((c) => c.stop()));
    throw err;
  }
  // Once a second: a scrape walks prom-client's registry, and four shards scraped every 200 ms
  // spent a tenth of their cold-start CPU on the bench's sampler (perf/echo's profile). The peak
  // RSS is the kernel's own high-water mark (VmHWM) besides, so no peak falls between samples.
  const peaks = controllers.map((c) => samplePeaks(c, 1000));
  // When the first, 10%, 50%, 90% and the last were Ready: the write phase's start and rate.
  const marks = [1, Math.ceil(n / 10), Math.ceil(n / 2), Math.ceil((n * 9) / 10), n];
  const markedAt: number[] = [];
  try {
    let lastLog = performance.now();
    await until(
      `all ${n} Referables Ready`,
      () => {
        alive(controllers);
        const ready = watch.readyCount();
        if (firstCpu === undefined && ready >= 1) {
          firstCpu = planeCpuNow(plane).then((c) => {
            const d = cpuSince(cpu0, c);
            log(
              `scale: CPU s until the first Ready (${((performance.now() - t0) / 1000).toFixed(1)} s): kube-apiserver ${d.apiServer}, etcd ${d.etcd}`,
            );
            return d;
          });
          void apiServerMetrics(plane.kubeconfigPath, `cold-${replicas}-first`);
        }
        if (!profiled && ready >= Math.ceil(n / 10)) {
          profiled = true;
          apiServerProfile(plane.kubeconfigPath, `cold-${replicas}-writes`, 0, DIAG_PROFILE_SECONDS);
        }
        while (markedAt.length < marks.length && ready >= marks[markedAt.length]!)
          markedAt.push(Number(((performance.now() - t0) / 1000).toFixed(1)));
        if (performance.now() - lastLog > 30_000) {
          lastLog = performance.now();
          log(`scale: ${ready} of ${n} Ready after ${((lastLog - t0) / 1000).toFixed(0)} s`);
        }
        return ready >= n ? true : undefined;
      },
      Math.max(3_600_000, n * 60),
    );
  } catch (err) {
    await Promise.all(peaks.map((p) => p.stop()));
    await Promise.all(controllers.map((c) => c.stop()));
    throw err;
  }
  const coldStartSeconds = (performance.now() - t0) / 1000;
  const coldStartCpu = cpuSince(cpu0, await planeCpuNow(plane));
  await apiServerMetrics(plane.kubeconfigPath, `cold-${replicas}-end`);
  const [first, p10, p50, p90, last] = markedAt;
  const readyAt = { first: first!, p10: p10!, p50: p50!, p90: p90!, last: last! };
  log(`scale: ${replicas} replica(s) made ${n} Referables Ready in ${coldStartSeconds.toFixed(1)} s`);
  log(
    `scale: Ready at (s from the start): first ${readyAt.first}, 10% ${readyAt.p10}, 50% ${readyAt.p50}, 90% ${readyAt.p90}, last ${readyAt.last}`,
  );
  for (const [what, c] of [
    ["floor", floor.cpu],
    ["cold start", coldStartCpu],
  ] as const)
    log(`scale: CPU s of the ${what}: kube-apiserver ${c.apiServer}, etcd ${c.etcd}, bench ${c.bench}`);
  const costs = await Promise.all(controllers.map((c) => cost(c)));
  const metrics = await Promise.all(controllers.map((c) => scrape(c)));
  // Where each replica's RSS goes: V8's spaces (used / committed) beside RSS, heap and external.
  for (const c of costs)
    log(
      `scale: memory: RSS ${c.rssMiB} MiB, heap ${c.heapMiB} / ${c.heapTotalMiB} MiB, external ${c.externalMiB} MiB; spaces (used / committed MiB): ${Object.entries(
        c.heapSpacesMiB,
      )
        .map(([space, v]) => `${space} ${v.used} / ${v.committed}`)
        .join(", ")}`,
    );
  // And by kind of mapping (/proc/<pid>/smaps): the binary's pages, malloc's arenas, V8's pages.
  for (const c of controllers) {
    const map = await memoryMap(c.proc.pid!).catch(() => undefined);
    if (map) log(`scale: memory map (resident MiB): ${JSON.stringify(map)}`);
  }
  log(`scale: propagation at 50 updates/s for ${phaseSeconds} s`);
  const prop = await measurePropagation(client, controllers[0]!, fx, watch, 50, phaseSeconds);
  alive(controllers);
  const peak = await Promise.all(
    peaks.map(async (p, i) => {
      const sampled = await p.stop();
      const hwm = await peakRssMiBOf(controllers[i]!.proc.pid!).catch(() => 0);
      return { ...sampled, rssMiB: Math.max(sampled.rssMiB, hwm) };
    }),
  );
  log(
    `scale: informer restarts per replica (by signal): ${metrics.map((m) => JSON.stringify(informerRestarts(m))).join("; ")}`,
  );
  log(`scale: peaks per replica: ${peak.map((p) => `RSS ${p.rssMiB} / heap ${p.heapMiB} MiB`).join("; ")}`);
  const overIdle = (c: Cost) => (c.heapMiB - baselineHeapMiB) * 1024 * 1024;
  const statusWrites = metrics.map((m) => sumOf(m, 'referable_status_writes_total{result="success"}'));
  const budgetSeconds = budgetBoundSeconds(Math.ceil(n / replicas));
  const phase: ScalePhase = {
    replicas,
    heapCapMiB,
    coldStartSeconds,
    coldStartOverFloor: Number((coldStartSeconds / floorSeconds).toFixed(2)),
    floorSeconds,
    ...(budgetSeconds !== undefined && {
      budgetSeconds,
      coldStartOverBudget: Number((coldStartSeconds / budgetSeconds).toFixed(2)),
    }),
    cost: costs,
    peakRssMiB: Math.max(...peak.map((p) => p.rssMiB)),
    propagation: { rate: prop.rate, updates: prop.updates, seen: prop.seen, latency: prop.latency },
    statusWrites,
    statusWritesPerReferable: Number((statusWrites.reduce((a, b) => a + b, 0) / n).toFixed(2)),
    deferredPerReferable: {
      budget: perReferable(metrics, 'referable_status_writes_deferred_total{reason="budget"', n),
      rate: perReferable(metrics, 'referable_status_writes_deferred_total{reason="rate"', n),
    },
    reconcilesPerReferable: perReferable(metrics, "controller_runtime_reconcile_total{", n),
    informerRestarts: metrics.map(informerRestarts),
    logLines: await countLogLines(controllers.map((c) => c.logPath)),
    readyAt,
    planeCpu: { floor: floor.cpu, coldStart: coldStartCpu },
  };
  if (replicas === 1) {
    phase.bytesPerReferable = Math.round(overIdle(costs[0]!) / n);
    if (costs[0]!.liveHeapMiB !== undefined && baselineLiveMiB !== undefined)
      phase.liveBytesPerReferable = Math.round(((costs[0]!.liveHeapMiB - baselineLiveMiB) * 1024 * 1024) / n);
  } else {
    phase.buckets = metrics.map((m) => m.get("referable_shard_buckets") ?? NaN);
    phase.owned = metrics.map((m) => m.get("referable_shard_referables_owned") ?? NaN);
    phase.bytesPerOwned = costs.map((c, i) => Math.round(overIdle(c) / phase.owned![i]!));
    phase.bytesPerReferableEach = costs.map((c) => Math.round(overIdle(c) / n));
  }
  return { phase, controllers };
}

/** kill -9 of the first shard: how long until the others hold its buckets and serve its Referables. */
export async function scaleFailover(
  client: BenchClient,
  controllers: Controller[],
  fx: Fixture,
  watch: ReferableWatch,
): Promise<ScaleFailover> {
  const [victim, ...rest] = controllers;
  const sample = Math.min(fx.names.length, quick ? 40 : 200);
  const step = Math.max(1, Math.floor(fx.names.length / sample));
  const indexes = Array.from({ length: sample }, (_, k) => k * step);
  log(`scale: kill -9 of one shard, then ${sample} sources changed`);
  const killedAt = performance.now();
  victim!.proc.kill("SIGKILL");
  const seenAt = new Map<string, number>();
  const value = `failover-${RUN}`;
  const off = watch.onChange((name) => {
    if (!seenAt.has(name) && watch.latest.get(name)?.value === value) seenAt.set(name, performance.now());
  });
  try {
    await pool(indexes, 16, (i) => setSource(client, fx.sources[i]!.kind, fx.sources[i]!.name, value));
    let bucketsTakenSeconds = NaN;
    let lastScrape = 0;
    await until(
      "the surviving shards to hold every bucket and serve every changed source",
      async () => {
        alive(rest);
        // The survivors' metrics four times a second, not at every 50 ms poll.
        if (Number.isNaN(bucketsTakenSeconds) && performance.now() - lastScrape >= 250) {
          lastScrape = performance.now();
          const held = await Promise.all(
            rest.map(async (c) => (await scrape(c)).get("referable_shard_buckets") ?? 0),
          );
          if (held.reduce((a, b) => a + b, 0) >= scaleBuckets)
            bucketsTakenSeconds = (performance.now() - killedAt) / 1000;
        }
        return !Number.isNaN(bucketsTakenSeconds) && indexes.every((i) => seenAt.has(fx.names[i]!))
          ? true
          : undefined;
      },
      // The survivors reconcile the dead shard's share (25,000 at 100,000) before all show.
      Math.max(300_000, fx.names.length * 6),
    );
    const follow = stats(indexes.map((i) => (seenAt.get(fx.names[i]!)! - killedAt) / 1000));
    return {
      bucketsTakenSeconds,
      sources: sample,
      followP50Seconds: follow.p50,
      followMaxSeconds: follow.max,
    };
  } finally {
    off();
  }
}

/**
 * A replica's informer restarts, by signal (referable_informer_restarts_total: relist, expired,
 * watchdog, error), its sources' and its Referables' alike; only the signals it counted.
 */
function informerRestarts(metrics: Map<string, number>): Record<string, number> {
  const bySignal: Record<string, number> = {};
  for (const [key, value] of metrics) {
    if (!key.startsWith("referable_informer_restarts_total{") || value === 0) continue;
    const signal = /signal="([^"]*)"/.exec(key)?.[1] ?? "other";
    bySignal[signal] = (bySignal[signal] ?? 0) + value;
  }
  return bySignal;
}
