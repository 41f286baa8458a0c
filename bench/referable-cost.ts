/**
 * Bytes the Referable controller's cache keeps per Referable it does not reconcile, measured
 * exactly and without an API server: the real ReferableController over a fake of our own client
 * interface that lists N Referables as the API server returns them (metadata with managedFields,
 * a spec over a ConfigMap, the status the controller writes), its cache only (no workers, so no
 * subscription). `--mode full`: one replica (every status cached whole); `--mode other`: sharded
 * (`--shards`), no bucket served, so every Referable is another replica's (a compact record).
 * The heap after a full GC with the cache synced, minus before, divided by N; the reference
 * graph and the key ownership are counted in. Run with --expose-gc. Prints one JSON line.
 */
import { numberFlag, parseOrExit } from "../src/cli.ts";
import { REFERABLE_API_VERSION, type Referable } from "../src/api/referable.ts";
import type { KubeClient, RequestOptions } from "../src/kube/client.ts";
import { ReferableController } from "../src/referable/controller.ts";
import { desiredStatus } from "../src/referable/status.ts";
import { ShardGate } from "../src/runtime/shard-gate.ts";
import { answerAsJson, silentWatch } from "../test/harness/fake-kube.ts";

const flags = parseOrExit({
  usage: "node --expose-gc bench/referable-cost.ts [options]",
  description: "Bytes the Referable cache keeps per Referable; prints one JSON line.",
  flags: {
    referables: { type: "string", valueName: "N", default: "20000", help: "Referables served" },
    mode: {
      type: "string",
      valueName: "MODE",
      default: "other",
      help: "full (one replica) or other (sharded, not served)",
    },
  },
});
const N = numberFlag(flags, "referables", 20_000);
const mode = flags.mode === "full" ? "full" : "other";

const gc = (globalThis as { gc?: () => void }).gc;
if (!gc) throw new Error("run with node --expose-gc");

function referable(i: number): Referable {
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

function client(n: number): Pick<KubeClient, "request" | "watch"> {
  return {
    async request<T>(_method: string, _path: string, options: RequestOptions = {}): Promise<T> {
      const start = Number(options.query?.continue ?? 0);
      const limit = Number(options.query?.limit ?? n);
      const items = Array.from({ length: Math.max(0, Math.min(limit, n - start)) }, (_, k) =>
        referable(start + k),
      );
      const next = start + limit < n ? String(start + limit) : undefined;
      return answerAsJson<T>({ metadata: { resourceVersion: "200000", continue: next }, items }, options);
    },
    watch: silentWatch,
  };
}

/** The controller's cache of `n` Referables, synced; the heap after a full GC, with a way out. */
async function cached(n: number): Promise<{ heap: number; stop: () => Promise<void> }> {
  const controller = new ReferableController({
    client: client(n),
    resolver: { watch: () => ({ current: undefined, close: () => undefined }) },
    ...(mode === "other" && { shards: new ShardGate(16) }),
  });
  controller.startCache();
  await controller.whenSynced();
  gc!();
  return { heap: process.memoryUsage().heapUsed, stop: () => controller.stop() };
}

// A first round of a few warms up what is made once (compiled code, pools); then the measured one.
await (await cached(100)).stop();
gc();
const before = process.memoryUsage().heapUsed;
const measured = await cached(N);
process.stdout.write(
  `${JSON.stringify({ referables: N, mode, bytesPerReferable: Math.round((measured.heap - before) / N) })}\n`,
);
await measured.stop();
process.exit(0);
