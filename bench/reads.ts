/**
 * What a one-shot read costs through the library, in this process against the control plane:
 * `resolve()` answered from the warm cache, against `resolve(ref, { consistent: true })` (one
 * list request past the cache), for a name and for a selector; and how often a cached read made
 * right after a write still shows the old value (the race a consistent read closes).
 * `npm run bench -- --scenarios reads` (and `--quick`) prints it.
 */
import type { KubeConfig } from "@kubernetes/client-node";
import { createResolver, type GenericReference, type GenericSelector } from "../src/index.ts";
import type { KubeClient } from "../src/kube/client.ts";
import { stats } from "./stats.ts";

interface Latency {
  n: number;
  p50: number;
  p99: number;
  max: number;
}

/** The measurements of the reads scenario. */
export interface ReadsResult {
  /** Objects the selector matches. */
  selectorObjects: number;
  cachedResolve: Latency;
  consistentResolve: Latency;
  cachedSelector: Latency;
  consistentSelector: Latency;
  /** Writes each followed at once by a cached read and then a consistent one. */
  writes: number;
  /** Of those, how many cached reads still showed the value from before the write. */
  cachedStale: number;
  /** Of those, how many consistent reads did (must be 0). */
  consistentStale: number;
}

/** The figures results.json keeps of a read's latency (no p95: the shape it always had). */
function latency(samples: number[]): Latency {
  const { n, p50, p99, max } = stats(samples);
  return { n, p50, p99, max };
}

async function timed(n: number, call: () => Promise<unknown>): Promise<Latency> {
  const samples: number[] = [];
  for (let i = 0; i < n; i++) {
    const t = performance.now();
    await call();
    samples.push(performance.now() - t);
  }
  return latency(samples);
}

/** Runs the scenario in namespace `ns` (created and deleted here). */
export async function measureReads(
  client: KubeClient,
  kubeConfig: KubeConfig,
  ns: string,
  quick: boolean,
): Promise<ReadsResult> {
  const n = quick ? 50 : 500;
  const selectorObjects = quick ? 20 : 100;
  const writes = quick ? 20 : 200;
  await client.request("POST", "/api/v1/namespaces", {
    body: { apiVersion: "v1", kind: "Namespace", metadata: { name: ns } },
  });
  const resolver = createResolver({ kubeConfig });
  try {
    await resolver.start();
    const cm = (name: string, labels?: Record<string, string>) =>
      client.request("POST", `/api/v1/namespaces/${ns}/configmaps`, {
        body: { apiVersion: "v1", kind: "ConfigMap", metadata: { name, labels }, data: { v: "0" } },
      });
    await cm("one");
    for (let i = 0; i < selectorObjects; i++) await cm(`sel-${i}`, { bench: "reads" });
    const ref: GenericReference = {
      apiVersion: "v1",
      kind: "ConfigMap",
      namespace: ns,
      name: "one",
      fieldPath: "data.v",
    };
    const selector: GenericSelector = {
      apiVersion: "v1",
      kind: "ConfigMap",
      namespace: ns,
      matchLabels: { bench: "reads" },
      fieldPath: "data.v",
      mode: "Multiple",
    };
    // A subscription keeps the informer and its reads warm, as in a controller.
    const subs = [resolver.watch(ref, () => undefined), resolver.watch(selector, () => undefined)];
    await resolver.resolve(ref);
    await resolver.resolveSelector(selector);

    const cachedResolve = await timed(n, () => resolver.resolve(ref));
    const consistentResolve = await timed(n, () => resolver.resolve(ref, { consistent: true }));
    const cachedSelector = await timed(n, () => resolver.resolveSelector(selector));
    const consistentSelector = await timed(n, () => resolver.resolveSelector(selector, { consistent: true }));

    let cachedStale = 0;
    let consistentStale = 0;
    for (let i = 1; i <= writes; i++) {
      await client.request("PATCH", `/api/v1/namespaces/${ns}/configmaps/one`, {
        body: { data: { v: String(i) } },
        contentType: "application/merge-patch+json",
      });
      if ((await resolver.resolve(ref)).value !== String(i)) cachedStale++;
      if ((await resolver.resolve(ref, { consistent: true })).value !== String(i)) consistentStale++;
    }
    for (const s of subs) s.close();
    return {
      selectorObjects,
      cachedResolve,
      consistentResolve,
      cachedSelector,
      consistentSelector,
      writes,
      cachedStale,
      consistentStale,
    };
  } finally {
    await resolver.stop();
    await client.request("DELETE", `/api/v1/namespaces/${ns}`).catch(() => undefined);
  }
}

/** Prints the scenario's table. */
export function printReads(r: ReadsResult, p: (line: string) => void): void {
  const ms = (v: number) => (Number.isFinite(v) ? v.toFixed(2) : "-");
  p(`one-shot reads through the library (warm cache; selector over ${r.selectorObjects} objects):`);
  p("| read | calls | p50 ms | p99 ms | max ms |");
  p("|---|---:|---:|---:|---:|");
  const rows: Array<[string, Latency]> = [
    ["resolve, cached", r.cachedResolve],
    ["resolve, consistent", r.consistentResolve],
    ["resolveSelector, cached", r.cachedSelector],
    ["resolveSelector, consistent", r.consistentSelector],
  ];
  for (const [name, l] of rows) p(`| ${name} | ${l.n} | ${ms(l.p50)} | ${ms(l.p99)} | ${ms(l.max)} |`);
  p(
    `read right after a write (${r.writes} writes): cached showed the old value ${r.cachedStale} times, consistent ${r.consistentStale} times`,
  );
}
