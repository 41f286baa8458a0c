/**
 * Bytes the Referable controller's cache keeps per Referable it does not reconcile, measured
 * exactly and without an API server: the real ReferableController over a fake of our own client
 * interface that lists N Referables as the API server returns them (metadata with managedFields,
 * a spec over a ConfigMap, the status the controller writes), its cache only (no workers, so no
 * subscription). `--mode full`: one replica (every status cached whole); `--mode other`: sharded
 * (`--shards`), no bucket served, so every Referable is another replica's (a compact record).
 * `--mode own`: one replica that serves them all, as after its cold start: a real resolver over
 * N ConfigMaps (a source each, so the source cache is counted in), the workers running, leading,
 * every status written (the fake answers the patch and echoes the Referable on its watch) and
 * the queue empty. The heap after a full GC with the cache synced (own: every status written),
 * minus before, divided by N; the reference graph and the key ownership are counted in.
 * `--snapshot FILE` writes a heap snapshot of the measured state (for a breakdown by structure).
 * Run with --expose-gc. Prints one JSON line.
 */
import { writeHeapSnapshot } from "node:v8";
import { numberFlag, parseOrExit } from "../src/process/cli.ts";
import { REFERABLE_API_VERSION, type Referable } from "../src/api/referable.ts";
import type { KubeClient, KubeObject, RequestOptions, WatchEvent, WatchStream } from "../src/kube/client.ts";
import type { KindResolver } from "../src/kube/discovery.ts";
import { buildController } from "../src/referable/build.ts";
import { ReferableController } from "../src/referable/controller.ts";
import { desiredStatus } from "../src/referable/status.ts";
import { ShardGate } from "../src/runtime/shard-gate.ts";
import { CONFIGMAPS, silentWatch } from "../test/harness/fake-kube.ts";
import { page, pagedClient } from "./paged-client.ts";

const flags = parseOrExit({
  usage: "node --expose-gc bench/referable-cost.ts [options]",
  description: "Bytes the Referable cache keeps per Referable; prints one JSON line.",
  flags: {
    referables: { type: "string", valueName: "N", default: "20000", help: "Referables served" },
    mode: {
      type: "string",
      valueName: "MODE",
      default: "other",
      help: "full (one replica, cache only), own (one replica serving them all) or other (sharded, not served)",
    },
    snapshot: { type: "string", valueName: "FILE", help: "write a heap snapshot of the measured state" },
  },
});
const N = numberFlag(flags, "referables", 20_000);
const mode = flags.mode === "full" || flags.mode === "own" ? flags.mode : "other";

const gc = (globalThis as { gc?: () => void }).gc;
if (!gc) throw new Error("run with node --expose-gc");

function referable(i: number, withStatus = true): Referable {
  const name = `bench-scale-r-${i}`;
  const obj: Referable = {
    apiVersion: REFERABLE_API_VERSION,
    kind: "Referable",
    metadata: {
      name,
      uid: `6f1c2a3e-${String(i).padStart(6, "0")}-4b5c-9d8e-0a1b2c3d4e5f`,
      resourceVersion: String(100_000 + i),
      generation: 1,
      creationTimestamp: "2026-11-23T10:00:00Z",
      labels: { "bench-set": "scale-1" },
      managedFields: [
        {
          manager: "bench",
          operation: "Update",
          apiVersion: REFERABLE_API_VERSION,
          fieldsType: "FieldsV1",
          fieldsV1: { "f:spec": {} },
        },
        {
          manager: "referable",
          operation: "Update",
          subresource: "status",
          fieldsType: "FieldsV1",
          fieldsV1: { "f:status": {} },
        },
      ],
    } as Referable["metadata"],
    spec: {
      source: {
        apiVersion: "v1",
        kind: "ConfigMap",
        namespace: "bench",
        name: `bench-scale-s-${i}`,
        fieldPath: "data.value",
      },
    },
  };
  if (!withStatus) return obj;
  obj.status = desiredStatus(
    obj,
    {
      ok: true,
      reason: "Available",
      value: `value-${i}`,
      source: {
        apiVersion: "v1",
        kind: "ConfigMap",
        namespace: "bench",
        name: `bench-scale-s-${i}`,
        uid: `7a1c2a3e-${String(i).padStart(6, "0")}-4b5c-9d8e-0a1b2c3d4e5f`,
        resourceVersion: String(50_000 + i),
      },
    },
    new Date(Date.UTC(2026, 10, 23, 10, 0, i % 600)),
  );
  return obj;
}

/** The ConfigMap Referable `i` reads, as the API server lists it. */
function source(i: number): KubeObject {
  return {
    apiVersion: "v1",
    kind: "ConfigMap",
    metadata: {
      name: `bench-scale-s-${i}`,
      namespace: "bench",
      uid: `7a1c2a3e-${String(i).padStart(6, "0")}-4b5c-9d8e-0a1b2c3d4e5f`,
      resourceVersion: String(50_000 + i),
      creationTimestamp: "2026-11-23T10:00:00Z",
      labels: { "bench-set": "scale-1" },
      managedFields: [{ manager: "bench", operation: "Update", fieldsV1: { "f:data": {} } }],
    },
    data: { value: `value-${i}` },
  };
}

/**
 * The API server for `--mode own`: lists the Referables (no status yet) and their ConfigMaps,
 * answers a status patch with a new version and echoes the Referable with that status on the
 * Referables' watch, as the API server does. `writes` counts the patches answered.
 */
function servingClient(n: number): Pick<KubeClient, "request" | "watch"> & { writes: number } {
  let version = 300_000;
  let echo: ((event: WatchEvent) => void) | undefined;
  const fake = {
    writes: 0,
    async request<T>(method: string, path: string, options: RequestOptions = {}): Promise<T> {
      if (method === "GET" && path.endsWith("/configmaps")) return page<T>(n, source, options);
      if (method === "GET" && path.endsWith("/referables"))
        return page<T>(n, (i) => referable(i, false), options);
      if (method === "POST" && path.endsWith("/events")) return {} as T;
      const patched = /\/referables\/bench-scale-r-(\d+)\/status$/.exec(path);
      if (method !== "PATCH" || !patched) throw new Error(`the fake serves no ${method} ${path}`);
      const ops = options.body as { path: string; value: unknown }[];
      const obj = referable(Number(patched[1]), false);
      obj.metadata.resourceVersion = String(++version);
      obj.status = ops.find((op) => op.path === "/status")!.value as Referable["status"];
      fake.writes++;
      const text = JSON.stringify(obj);
      // The echo comes over the watch after the answer, as from the API server.
      setTimeout(() => echo?.({ type: "MODIFIED", object: JSON.parse(text) as KubeObject }), 1);
      return (options.decode ? options.decode(text) : JSON.parse(text)) as T;
    },
    watch(path: string, _query: RequestOptions["query"], onEvent: (event: WatchEvent) => void): WatchStream {
      if (path.endsWith("/referables")) echo = onEvent;
      return silentWatch();
    },
  };
  return fake;
}

const discovery: KindResolver = {
  lookup: () => Promise.resolve(CONFIGMAPS),
  peek: () => CONFIGMAPS,
  invalidate: () => undefined,
};

/** The controller of `n` Referables in its measured state; the heap after a full GC, with a way out. */
async function cached(n: number): Promise<{ heap: number; stop: () => Promise<void> }> {
  if (mode === "own") return served(n);
  const controller = new ReferableController({
    client: pagedClient(n, (i) => referable(i)),
    resolver: { watch: () => ({ current: undefined, close: () => undefined }) },
    ...(mode === "other" && { shards: new ShardGate(16) }),
  });
  controller.startCache();
  await controller.whenSynced();
  gc!();
  return { heap: process.memoryUsage().heapUsed, stop: () => controller.stop() };
}

/** `--mode own`: every Referable served and its status written, the queue empty. */
async function served(n: number): Promise<{ heap: number; stop: () => Promise<void> }> {
  const fake = servingClient(n);
  // As main.ts builds it (metrics, Events, the resolver's source cache), over the fake.
  const { controller, resolver } = buildController({
    client: fake as unknown as KubeClient,
    discovery: discovery as never,
    identity: "bench",
    // No controller budget: the measure is the state, not the pace (each Referable keeps its gate).
    statusWriteBudget: 0,
  });
  controller.start();
  controller.setLeader(true);
  await controller.whenSynced();
  const deadline = performance.now() + 600_000;
  while (fake.writes < n || controller.unfinishedWork().unfinishedWorkSeconds > 0) {
    if (performance.now() > deadline) throw new Error(`${fake.writes} of ${n} statuses written in 600 s`);
    await new Promise((r) => setTimeout(r, 50));
  }
  // The last echoes in and their reconciles run (an echo of its own write queues nothing).
  await new Promise((r) => setTimeout(r, 500));
  gc!();
  return {
    heap: process.memoryUsage().heapUsed,
    stop: async () => {
      await controller.stop();
      await resolver.stop();
    },
  };
}

// A first round of a few warms up what is made once (compiled code, pools); then the measured one.
await (await cached(100)).stop();
gc();
const before = process.memoryUsage().heapUsed;
const measured = await cached(N);
if (typeof flags.snapshot === "string") writeHeapSnapshot(flags.snapshot);
process.stdout.write(
  `${JSON.stringify({ referables: N, mode, bytesPerReferable: Math.round((measured.heap - before) / N) })}\n`,
);
await measured.stop();
process.exit(0);
