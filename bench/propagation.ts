/**
 * Propagation: the floor (write ack → a plain watch sees it, plus one status patch) and the
 * controller's own (a source written → its Referable's status.value seen through a watch).
 */
import type { Controller } from "./controller.ts";
import {
  configMapSource,
  createReferable,
  createSource,
  type Fixture,
  RF,
  setSource,
  sourcePath,
} from "./fixtures.ts";
import { histogramQuantile, requestsByVerb, scrape, sumOf } from "./metrics.ts";
import { log, RUN } from "./run-id.ts";
import type { ReferableWatch } from "./referable-watch.ts";
import type { BenchClient } from "./retry.ts";
import { type Stats, stats, until } from "./stats.ts";
import { reopeningWatch } from "./watch.ts";

/** The propagation floor: what the API server alone takes. */
export interface Floor {
  watchDelivery: Stats;
  statusPatch: Stats;
  p50: number;
  p99: number;
}

/** The floor: write ack → a plain watch sees it, plus one status patch round trip. */
export async function measureFloor(client: BenchClient, samples: number): Promise<Floor> {
  const labels = { "bench-set": `${RUN}-floor` };
  await createSource(client, "ConfigMap", `${RUN}-floor`, "v0", labels);
  await createReferable(client, `${RUN}-floor`, labels, configMapSource(`${RUN}-floor`));
  const list = await client.request<{ metadata: { resourceVersion: string } }>(
    "GET",
    sourcePath("ConfigMap"),
    { query: { limit: 1 } },
  );
  const seen = new Map<string, number>();
  let waiter: ((v: string) => void) | undefined;
  const stream = reopeningWatch(
    client,
    sourcePath("ConfigMap"),
    {
      resourceVersion: list.metadata.resourceVersion,
      query: { fieldSelector: `metadata.name=${RUN}-floor` },
      onReopen: (why) => log(`floor watch reopened: ${why}`),
    },
    (e) => {
      const v = (e.object.data as { value?: string } | undefined)?.value;
      if (v) {
        seen.set(v, performance.now());
        waiter?.(v);
      }
    },
  );
  const delivery: number[] = [];
  const patch: number[] = [];
  try {
    for (let i = 1; i <= samples; i++) {
      const value = `f${i}`;
      const arrived = new Promise<void>((resolve) => {
        waiter = (v) => v === value && resolve();
      });
      await setSource(client, "ConfigMap", `${RUN}-floor`, value);
      const acked = performance.now();
      await arrived;
      delivery.push(Math.max(0, seen.get(value)! - acked));
      const t0 = performance.now();
      await client.request("PATCH", `${RF}/${RUN}-floor/status`, {
        body: [{ op: "add", path: "/status", value: { value, observedGeneration: 1 } }],
        contentType: "application/json-patch+json",
      });
      patch.push(performance.now() - t0);
    }
  } finally {
    stream.close();
  }
  const w = stats(delivery);
  const p = stats(patch);
  return { watchDelivery: w, statusPatch: p, p50: w.p50 + p.p50, p99: w.p99 + p.p99 };
}

/** One propagation phase's figures. */
export interface Propagation {
  /** Inside the controller: its subscription's push → status written (histogram bucket bounds, ms). */
  controllerP50: number;
  controllerP99: number;
  /** Largest work-queue depth sampled during the phase. */
  maxQueueDepth: number;
  /** The controller's status patch round trips in the phase (bucket bounds, ms). */
  patchP50: number;
  patchP99: number;
  rate: number;
  updates: number;
  seen: number;
  latency: Stats;
  statusWrites: number;
  requests: Record<string, number>;
}

/**
 * Updates made so far in this run, over every phase: each update's value is the next number, so
 * no update ever writes a value a source already holds. A phase that numbered its own from 1
 * wrote, now and then, the value an earlier phase of the same size had left in the source: the
 * API server makes no new version of a patch that changes nothing, so no event came, and the
 * update was counted as never seen (1 of 2,000 in issue 38's run, with one status write fewer).
 */
let updatesInRun = 0;

/** Updates random sources at `rate`/s for `seconds`; latency is write ack → Referable watch sees the value. */
export async function measurePropagation(
  client: BenchClient,
  c: Pick<Controller, "metricsPort">,
  fx: Fixture,
  watch: Pick<ReferableWatch, "onChange" | "latest">,
  rate: number,
  seconds: number,
): Promise<Propagation> {
  // An update is measured from its write's acknowledgement to the Referable watch showing the
  // value; the watch can win the race against reading the response, which counts as 0 ms.
  const pending = new Map<string, { value: string; ackedAt?: number; seenAt?: number }>();
  const latencies: number[] = [];
  const settle = (name: string) => {
    const p = pending.get(name);
    if (p?.ackedAt === undefined || p.seenAt === undefined) return;
    latencies.push(Math.max(0, p.seenAt - p.ackedAt));
    pending.delete(name);
  };
  const off = watch.onChange((name) => {
    const p = pending.get(name);
    if (p && p.seenAt === undefined && watch.latest.get(name)?.value === p.value) {
      p.seenAt = performance.now();
      settle(name);
    }
  });
  const before = await scrape(c);
  let maxQueueDepth = 0;
  const sampler = setInterval(() => {
    void scrape(c).then(
      (m) =>
        (maxQueueDepth = Math.max(
          maxQueueDepth,
          m.get('workqueue_depth{name="referable",controller="referable"}') ?? 0,
        )),
      () => undefined,
    );
  }, 250);
  const total = Math.round(rate * seconds);
  const interval = 1000 / rate;
  const start = performance.now();
  const writes: Promise<void>[] = [];
  let seq = 0;
  let failedWrites = 0;
  for (let i = 0; i < total; i++) {
    const due = start + i * interval;
    const wait = due - performance.now();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    // A source not already in flight, so each measured update is unambiguous.
    let idx = Math.floor(Math.random() * fx.names.length);
    for (let tries = 0; pending.has(fx.names[idx]!) && tries < 20; tries++)
      idx = Math.floor(Math.random() * fx.names.length);
    const name = fx.names[idx]!;
    if (pending.has(name)) continue;
    seq++;
    const value = `u${++updatesInRun}-${RUN}`;
    const s = fx.sources[idx]!;
    const entry: { value: string; ackedAt?: number; seenAt?: number } = { value };
    pending.set(name, entry);
    writes.push(
      setSource(client, s.kind, s.name, value).then(
        () => {
          entry.ackedAt = performance.now();
          settle(name);
        },
        // Out of retries: reported, and the update left out of the figures (never unhandled).
        (err: unknown) => {
          failedWrites++;
          pending.delete(name);
          log(`an update of ${s.name} failed: ${(err as Error).message.slice(0, 200)}`);
        },
      ),
    );
  }
  await Promise.all(writes);
  if (failedWrites) log(`${failedWrites} of ${seq} updates failed and are not counted`);
  await until("the last updates to propagate", () => (pending.size === 0 ? true : undefined), 30_000).catch(
    () => {
      // Which, and what the watch shows of each: the next lost update says where to look.
      const some = [...pending].slice(0, 5).map(([name, p]) => {
        const shown = JSON.stringify(watch.latest.get(name)?.value) ?? "nothing";
        return `${name} (${p.ackedAt === undefined ? "not acknowledged" : "acknowledged"}, ${p.value} wanted, ${shown} shown)`;
      });
      log(`${pending.size} updates never propagated: ${some.join(", ")}${pending.size > 5 ? ", ..." : ""}`);
    },
  );
  off();
  clearInterval(sampler);
  const after = await scrape(c);
  const req = requestsByVerb(after);
  const reqBefore = requestsByVerb(before);
  const requests: Record<string, number> = {};
  for (const verb of Object.keys(req)) requests[verb] = (req[verb] ?? 0) - (reqBefore[verb] ?? 0);
  const writesOf = (m: Map<string, number>) => sumOf(m, 'referable_status_writes_total{result="success"}');
  return {
    rate,
    updates: seq,
    seen: latencies.length,
    latency: stats(latencies),
    statusWrites: writesOf(after) - writesOf(before),
    requests,
    controllerP50: histogramQuantile(before, after, "referable_propagation_seconds", 0.5),
    controllerP99: histogramQuantile(before, after, "referable_propagation_seconds", 0.99),
    maxQueueDepth,
    patchP50: histogramQuantile(before, after, "rest_client_request_duration_seconds", 0.5, 'verb="patch"'),
    patchP99: histogramQuantile(before, after, "rest_client_request_duration_seconds", 0.99, 'verb="patch"'),
  };
}
