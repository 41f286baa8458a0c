/**
 * Bytes the source cache keeps per object nobody reads, measured exactly: the real
 * InformerSourceCache over a fake of our own client interface that serves N ConfigMaps of
 * realistic metadata (name, uid, resourceVersion, two labels, an annotation, managedFields) and
 * `--data-bytes` of data each; the heap after a full GC with the kind cached, minus before,
 * divided by N. Run with --expose-gc (bench/cluster-content.ts does). Prints one JSON line.
 */
import { numberFlag, parseOrExit } from "../src/process/cli.ts";
import type { KubeObject } from "../src/kube/client.ts";
import { InformerSourceCache } from "../src/informers/source-cache.ts";
import { syncedClaim } from "../test/harness/fake-kube.ts";
import { pagedClient } from "./paged-client.ts";

const flags = parseOrExit({
  usage: "node --expose-gc bench/projection-cost.ts [options]",
  description: "Bytes the source cache keeps per object nobody reads; prints one JSON line.",
  flags: {
    objects: { type: "string", valueName: "N", default: "20000", help: "ConfigMaps served" },
    "data-bytes": { type: "string", valueName: "N", default: "100000", help: "bytes of data in each" },
  },
});
const N = numberFlag(flags, "objects", 20_000);
const DATA = numberFlag(flags, "data-bytes", 100_000);

const gc = (globalThis as { gc?: () => void }).gc;
if (!gc) throw new Error("run with node --expose-gc");

function object(i: number): KubeObject {
  return {
    apiVersion: "v1",
    kind: "ConfigMap",
    metadata: {
      name: `tenant-settings-${i}`,
      namespace: `tenant-${i % 50}`,
      uid: `6f1c2a3e-${String(i).padStart(4, "0")}-4b5c-9d8e-0a1b2c3d4e5f`,
      resourceVersion: String(100_000 + i),
      creationTimestamp: "2026-11-23T10:00:00Z",
      labels: { "app.kubernetes.io/name": "grafana", team: `t${i % 7}` },
      annotations: { "kubectl.kubernetes.io/last-applied-configuration": "{}".padEnd(2000, " ") },
      managedFields: [{ manager: "kubectl", operation: "Apply", fieldsV1: { "f:data": {} } }],
    },
    data: { blob: String.fromCharCode(97 + (i % 26)).repeat(DATA) },
  };
}

const client = pagedClient(N, object);

/** Caches the kind, waits for its list, and returns the heap after a full GC, with a way out. */
async function cacheAll(): Promise<{ heap: number; kept: number; stop: () => Promise<void> }> {
  const cache = new InformerSourceCache({ client, lingerMs: 0 });
  const handle = await syncedClaim(cache);
  gc!();
  const heap = process.memoryUsage().heapUsed;
  return {
    heap,
    kept: [...handle.list()].length,
    stop: async () => {
      handle.release();
      await cache.stop();
    },
  };
}

// A first round warms up what is made once (compiled code, pools), then the measured round.
await (await cacheAll()).stop();
gc();
const before = process.memoryUsage().heapUsed;
const measured = await cacheAll();
process.stdout.write(
  `${JSON.stringify({ objects: measured.kept, dataBytes: DATA, bytesPerObject: Math.round((measured.heap - before) / measured.kept) })}\n`,
);
await measured.stop();
process.exit(0);
