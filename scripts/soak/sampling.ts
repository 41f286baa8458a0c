/**
 * What the soak samples while the churn runs: the controller's /metrics every few seconds, and its
 * live heap after a forced full collection; and the memory trend read from them.
 */
import { setTimeout as delay } from "node:timers/promises";
import { type ControllerProcess, metricValue, parseMetrics } from "../../test/harness/process.ts";
import type { MetricsSample, SoakReport } from "./report.ts";

export function regressionSlope(points: ReadonlyArray<[number, number]>): number {
  const n = points.length;
  if (n < 2) return 0;
  const mx = points.reduce((s, [x]) => s + x, 0) / n;
  const my = points.reduce((s, [, y]) => s + y, 0) / n;
  let num = 0;
  let den = 0;
  for (const [x, y] of points) {
    num += (x - mx) * (y - my);
    den += (x - mx) ** 2;
  }
  return den === 0 ? 0 : num / den;
}

/** histogram_quantile over the cumulative buckets of `name` in a metrics text. */
export function histogramQuantile(text: string, name: string, q: number): number {
  const buckets = parseMetrics(text)
    .filter((s) => s.name === `${name}_bucket`)
    .map((s) => ({ le: s.labels.le === "+Inf" ? Infinity : Number(s.labels.le), count: s.value }))
    .sort((a, b) => a.le - b.le);
  const total = buckets[buckets.length - 1]?.count ?? 0;
  if (total === 0) return NaN;
  const rank = q * total;
  let prevLe = 0;
  let prevCount = 0;
  for (const b of buckets) {
    if (b.count >= rank) {
      if (b.le === Infinity) return prevLe;
      return prevLe + ((b.le - prevLe) * (rank - prevCount)) / Math.max(1e-12, b.count - prevCount);
    }
    prevLe = b.le;
    prevCount = b.count;
  }
  return prevLe;
}

export async function sampleMetrics(p: ControllerProcess, t: number): Promise<MetricsSample> {
  const text = await p.metrics();
  const v = (name: string) => metricValue(text, name) ?? NaN;
  return {
    t,
    heapUsedBytes: v("nodejs_heap_size_used_bytes"),
    residentBytes: v("process_resident_memory_bytes"),
    eventLoopLagSeconds: v("nodejs_eventloop_lag_seconds"),
    eventLoopLagP99Seconds: v("nodejs_eventloop_lag_p99_seconds"),
    eventLoopLagMaxSeconds: v("nodejs_eventloop_lag_max_seconds"),
    sourceInformers: v("referable_source_informers"),
    watchesOpen: v("referable_watches_open"),
  };
}

/** Memory trend after warm-up; see {@link SoakReport.memory}. */
export function memoryTrend(
  samples: MetricsSample[],
  liveHeap: SoakReport["liveHeap"],
  warmupMs: number,
  churnMs: number,
): SoakReport["memory"] {
  const kept = samples.filter((s) => s.t >= warmupMs && s.t <= churnMs && Number.isFinite(s.heapUsedBytes));
  const kib = (b: number) => b / 1024;
  const slope = regressionSlope(kept.map((s) => [s.t / 60_000, kib(s.heapUsedBytes)]));
  // Minimum per window: what is left after the collector has run. A window must span at least
  // one major collection (the heap saw-tooths over tens of seconds), so: a minute, twelve
  // samples, or a fifteenth of the run, whichever is longest.
  const span = kept.length > 1 ? kept[kept.length - 1]!.t - kept[0]!.t : 0;
  const windowMs = Math.max(60_000, 12 * (kept.length > 1 ? span / (kept.length - 1) : 0), span / 15);
  const floors = new Map<number, MetricsSample>();
  for (const s of kept) {
    const w = Math.floor((s.t - warmupMs) / windowMs);
    const prev = floors.get(w);
    if (!prev || s.heapUsedBytes < prev.heapUsedBytes) floors.set(w, s);
  }
  const floorPoints = [...floors.entries()].map(([w, s]): [number, number] => [
    (warmupMs + (w + 0.5) * windowMs) / 60_000,
    kib(s.heapUsedBytes),
  ]);
  const floorSlope = floorPoints.length >= 3 ? regressionSlope(floorPoints) : slope;
  const live = liveHeap.filter((l) => l.t >= warmupMs && l.t <= churnMs);
  const liveSlope = live.length >= 3 ? regressionSlope(live.map((l) => [l.t / 60_000, kib(l.bytes)])) : NaN;
  const judged = churnMs - warmupMs >= 10 * 60_000;
  // Judged on the live heap when there is one, else on the floor.
  const trend = Number.isFinite(liveSlope) ? liveSlope : floorSlope;
  return {
    warmupMs,
    samples: kept.length,
    heapFirstMiB: kept.length ? kept[0]!.heapUsedBytes / 2 ** 20 : NaN,
    heapLastMiB: kept.length ? kept[kept.length - 1]!.heapUsedBytes / 2 ** 20 : NaN,
    slopeKiBPerMin: slope,
    floorSlopeKiBPerMin: floorSlope,
    liveSlopeKiBPerMin: liveSlope,
    liveFirstMiB: live.length ? live[0]!.bytes / 2 ** 20 : NaN,
    liveLastMiB: live.length ? live[live.length - 1]!.bytes / 2 ** 20 : NaN,
    judged,
    // 128 KiB/min is under 4 MiB over 30 minutes: above the live heap's noise, below any leak
    // that matters (the churn recreates thousands of objects, so a leak per object shows).
    growing: judged && trend > 128,
  };
}

/**
 * Forces a full collection in the process whose inspector listens on `port`, and returns the
 * heap used after it (Chrome DevTools Protocol: HeapProfiler.collectGarbage, Runtime.getHeapUsage).
 */
export async function liveHeapBytes(port: number): Promise<number> {
  const targets = (await (await fetch(`http://127.0.0.1:${port}/json/list`)).json()) as Array<{
    webSocketDebuggerUrl: string;
  }>;
  const ws = new WebSocket(targets[0]!.webSocketDebuggerUrl);
  const replies = new Map<number, (result: Record<string, unknown>) => void>();
  ws.addEventListener("message", (event) => {
    const message = JSON.parse(String(event.data)) as { id?: number; result?: Record<string, unknown> };
    if (message.id !== undefined) replies.get(message.id)?.(message.result ?? {});
  });
  await new Promise<void>((resolve, reject) => {
    ws.addEventListener("open", () => resolve(), { once: true });
    ws.addEventListener("error", () => reject(new Error("the inspector refused the connection")), {
      once: true,
    });
  });
  let id = 0;
  const call = (method: string) =>
    new Promise<Record<string, unknown>>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`${method} got no answer`)), 30_000);
      replies.set(++id, (result) => {
        clearTimeout(timer);
        resolve(result);
      });
      ws.send(JSON.stringify({ id, method }));
    });
  try {
    await call("HeapProfiler.collectGarbage");
    return Number((await call("Runtime.getHeapUsage")).usedSize);
  } finally {
    ws.close();
  }
}

/** Scrapes /metrics every `everyMs`, one scrape at a time, until stopped; stop() gives the failures. */
export function startSampler(
  p: ControllerProcess,
  started: number,
  everyMs: number,
  live: { port: number; everyMs: number } | undefined,
) {
  const samples: MetricsSample[] = [];
  const liveHeap: SoakReport["liveHeap"] = [];
  let running = true;
  let failures = 0;
  let nextLive = performance.now();
  const loop = (async () => {
    while (running) {
      try {
        samples.push(await sampleMetrics(p, performance.now() - started));
        if (live && performance.now() >= nextLive) {
          nextLive += live.everyMs;
          liveHeap.push({ t: performance.now() - started, bytes: await liveHeapBytes(live.port) });
        }
      } catch {
        failures++;
      }
      await delay(everyMs);
    }
  })();
  return {
    samples,
    liveHeap,
    stop: async (): Promise<number> => {
      running = false;
      await loop;
      return failures;
    },
  };
}
