/**
 * Cost of one watch event of a Referable this replica does not serve (another shard's status
 * echo), step by step: the line's parse, the decode into a compact record, the graph and ownership;
 * and the status digest alone (a share of the decode: every listed Referable's and every echo's).
 *
 *   node bench/echo-cost.ts [--events 20000] [--managers 0]
 */
import { parseArgs } from "node:util";
import { StringPool } from "../src/informers/projection.ts";
import { projectReferable, readsOf } from "../src/referable/spec.ts";
import { ReferenceGraph } from "../src/referable/reference-graph.ts";
import type { KubeObject } from "../src/kube/client.ts";
import type { Referable } from "../src/api/referable.ts";
import { keysReversed as reversed } from "../test/harness/json.ts";

const { values } = parseArgs({
  options: { events: { type: "string", default: "20000" }, managers: { type: "string", default: "0" } },
});
const N = Number(values.events);
/** Managers besides the bench and the controller that wrote each Referable (each adds an entry to managedFields). */
const MANAGERS = Number(values.managers);

function event(i: number, rv: number): string {
  const name = `bench-scale-${i}`;
  const obj = {
    apiVersion: "referable.dev/v1alpha1",
    kind: "Referable",
    metadata: {
      creationTimestamp: "2026-11-27T22:40:00Z",
      generation: 1,
      labels: { "bench-set": "run-1-scale", team: `t${i % 7}` },
      managedFields: [
        {
          apiVersion: "referable.dev/v1alpha1",
          fieldsType: "FieldsV1",
          fieldsV1: {
            "f:metadata": { "f:labels": { ".": {}, "f:bench-set": {}, "f:team": {} } },
            "f:spec": {
              ".": {},
              "f:source": {
                ".": {},
                "f:apiVersion": {},
                "f:fieldPath": {},
                "f:kind": {},
                "f:name": {},
                "f:namespace": {},
              },
            },
          },
          manager: "bench",
          operation: "Update",
          time: "2026-11-27T22:40:00Z",
        },
        {
          apiVersion: "referable.dev/v1alpha1",
          fieldsType: "FieldsV1",
          fieldsV1: {
            "f:status": {
              ".": {},
              "f:conditions": {
                ".": {},
                'k:{"type":"Ready"}': {
                  ".": {},
                  "f:lastTransitionTime": {},
                  "f:message": {},
                  "f:observedGeneration": {},
                  "f:reason": {},
                  "f:status": {},
                  "f:type": {},
                },
              },
              "f:observedGeneration": {},
              "f:sources": {},
              "f:text": {},
              "f:value": {},
            },
          },
          manager: "referable",
          operation: "Update",
          subresource: "status",
          time: "2026-11-27T22:41:00Z",
        },
        ...Array.from({ length: MANAGERS }, (_, m) => ({
          apiVersion: "referable.dev/v1alpha1",
          fieldsType: "FieldsV1",
          fieldsV1: {
            "f:metadata": {
              "f:annotations": { ".": {}, [`f:example.com/tool-${m}`]: {} },
              "f:labels": { [`f:tool-${m}`]: {} },
            },
            "f:spec": { "f:source": { "f:fieldPath": {}, "f:name": {} }, "f:transform": {} },
          },
          manager: `tool-${m}`,
          operation: "Apply",
          time: "2026-11-27T22:40:00Z",
        })),
      ],
      name,
      resourceVersion: String(rv),
      ...(MANAGERS > 0 && {
        annotations: {
          "kubectl.kubernetes.io/last-applied-configuration": JSON.stringify({
            metadata: { name },
            spec: { source: { name: `src-${i % 500}` } },
          }),
        },
      }),
      uid: `0b5f0a4e-1c2d-4e5f-8a9b-${String(i).padStart(12, "0")}`,
    },
    spec: {
      source: {
        apiVersion: "v1",
        kind: "ConfigMap",
        namespace: "bench",
        name: `src-${i % 500}`,
        fieldPath: ".data.value",
      },
    },
    status: {
      conditions: [
        {
          lastTransitionTime: "2026-11-27T22:41:00Z",
          message: "resolved from ConfigMap bench/src",
          observedGeneration: 1,
          reason: "Resolved",
          status: "True",
          type: "Ready",
        },
      ],
      observedGeneration: 1,
      sources: [
        {
          apiVersion: "v1",
          kind: "ConfigMap",
          name: `src-${i % 500}`,
          namespace: "bench",
          resourceVersion: String(rv - 3),
        },
      ],
      text: `value-${i}`,
      value: `value-${i}`,
    },
  };
  return JSON.stringify({ type: "MODIFIED", object: obj });
}

const lines = Array.from({ length: N }, (_, i) => event(i, 1000 + i));
const pool = new StringPool();
const cache = new Map<string, KubeObject>();
// The cached records before the echo (its first version, no status).
for (let i = 0; i < N; i++) {
  const e = JSON.parse(event(i, 10 + i)) as { object: KubeObject };
  delete (e.object as { status?: unknown }).status;
  cache.set(e.object.metadata!.name!, projectReferable(e.object, pool, undefined, true));
}
const graph = new ReferenceGraph();
for (const r of cache.values())
  graph.set(r.metadata!.name!, r.metadata!.labels, readsOf(r as unknown as Referable));

/** CPU per event of `f` over every line, as the informer does it: one event at a time, the record cached. */
function time(label: string, f: (line: string) => KubeObject): void {
  let best = Infinity;
  for (let round = 0; round < 5; round++) {
    const t = process.cpuUsage();
    for (const line of lines) {
      const r = f(line);
      cache.set(r.metadata!.name!, r);
    }
    const u = process.cpuUsage(t);
    best = Math.min(best, (u.user + u.system) / N);
  }
  console.log(`${label}: ${best.toFixed(2)} µs CPU/event (best of 5)`);
}

const { parseReferableEvent } = await import("../src/referable/watch-line.ts");
const cached = (name: string) => cache.get(name);
const nameOf = (o: KubeObject) => o.metadata!.name!;
time("JSON.parse(line) + projectReferable(compact)", (line) => {
  const o = (JSON.parse(line) as { object: KubeObject }).object;
  return projectReferable(o, pool, cache.get(nameOf(o)), true);
});
time("parseReferableEvent(line) + projectReferable(compact)", (line) => {
  const o = parseReferableEvent(line, cached)!.object;
  return projectReferable(o, pool, cache.get(nameOf(o)), true);
});
time("JSON.parse(line) only", (line) => (JSON.parse(line) as { object: KubeObject }).object);
time("parseReferableEvent(line) only", (line) => parseReferableEvent(line, cached)!.object);

// The status digest alone (summarizeStatus's share): of the status as kube-apiserver writes it
// (keys sorted), and of the same status with its keys reversed at every level (what the
// controller builds is in no particular order: sorted first, whatever the path).
const { statusDigest } = await import("../src/referable/compact.ts");
const statuses = lines.map((line) => (JSON.parse(line) as { object: Referable }).object.status!);
const unsorted = statuses.map((s) => reversed(s) as typeof s);
for (const [label, list] of [
  ["statusDigest(status), keys as sent", statuses],
  ["statusDigest(status), keys reversed", unsorted],
] as const) {
  let best = Infinity;
  for (let round = 0; round < 5; round++) {
    const t = process.cpuUsage();
    for (const s of list) statusDigest(s);
    const u = process.cpuUsage(t);
    best = Math.min(best, (u.user + u.system) / N);
  }
  console.log(`${label}: ${best.toFixed(2)} µs CPU/status (best of 5)`);
}
console.log(`line length ${lines[0]!.length} chars`);
