/**
 * What the cluster holds beside the references, and what it costs the controller: unreferenced
 * ConfigMaps of about 1 MiB (the content scenario), and the largest label sets the API server
 * takes (the labels scenario).
 */
import { spawn } from "node:child_process";
import { join } from "node:path";
import { type ControlPlane, repoRoot } from "../test/harness/control-plane.ts";
import { type Cost, cost, samplePeaks, startController } from "./controller.ts";
import { deleteFixtures, makeNamedFixture, NS, setSource } from "./fixtures.ts";
import { log, RUN } from "./options.ts";
import { ReferableWatch } from "./referable-watch.ts";
import { type BenchClient, pool } from "./retry.ts";
import { until } from "./stats.ts";

export interface ContentResult {
  refs: number;
  objects: number;
  objectBytes: number;
  coldStartSeconds: number;
  /** Highest RSS and heap sampled every 200 ms from start-up to the end of the rewrite. */
  peakRssMiB: number;
  peakHeapMiB: number;
  steady: Cost;
  /** Heap the source cache keeps per object nobody reads, from bench/projection-cost.ts. */
  bytesPerUnreferencedObject: number;
}

/** Bytes kept per unreferenced object, measured exactly in a process of its own (--expose-gc). */
export async function projectionCost(): Promise<number> {
  const script = join(repoRoot, "bench", "projection-cost.ts");
  const output = await new Promise<string>((resolve, reject) => {
    const child = spawn(
      process.execPath,
      ["--expose-gc", script, "--objects", "20000", "--data-bytes", "100000"],
      {
        stdio: ["ignore", "pipe", "inherit"],
      },
    );
    let text = "";
    child.stdout.on("data", (d: Buffer) => (text += d.toString()));
    child.on("exit", (code) =>
      code === 0 ? resolve(text) : reject(new Error(`projection-cost exited with ${code}`)),
    );
  });
  return (JSON.parse(output.trim()) as { bytesPerObject: number }).bytesPerObject;
}

/**
 * What the cluster holds beside the references: `refs` Referables over small sources, and
 * `objects` ConfigMaps of about 1 MiB in another namespace that nothing reads. The controller is
 * cold-started with them all in the cluster (its list pages through them), then every big
 * object is rewritten while it runs (its watch carries them).
 */
export async function runClusterContent(
  client: BenchClient,
  plane: ControlPlane,
  refs: number,
  objects: number,
): Promise<ContentResult> {
  log(`cluster content: ${refs} Referables, ${objects} unreferenced ConfigMaps of about 1 MiB`);
  const objectBytes = 1_000_000;
  const fx = await makeNamedFixture(client, refs);
  const ns = `${NS}-content`;
  await client.request("POST", "/api/v1/namespaces", {
    body: { apiVersion: "v1", kind: "Namespace", metadata: { name: ns } },
  });
  const big = Array.from({ length: objects }, (_, i) => i);
  const write = (i: number, round: number) =>
    client.request(
      round === 0 ? "POST" : "PUT",
      `/api/v1/namespaces/${ns}/configmaps${round === 0 ? "" : `/big-${i}`}`,
      {
        body: {
          apiVersion: "v1",
          kind: "ConfigMap",
          metadata: { name: `big-${i}` },
          data: { blob: String.fromCharCode(97 + ((i + round) % 26)).repeat(objectBytes) },
        },
        timeoutMs: 120_000,
      },
    );
  await pool(big, 4, (i) => write(i, 0));

  const selector = `bench-set=${fx.label}`;
  const watch = new ReferableWatch(client, selector);
  await watch.start();
  const c = await startController(plane.kubeconfigPath, selector);
  const peaks = samplePeaks(c);
  await until(`all ${refs} Referables Ready`, () => (watch.readyCount() >= refs ? true : undefined), 600_000);
  const coldStartSeconds = (performance.now() - c.startedAt) / 1000;
  log(`cluster content: rewriting the ${objects} big ConfigMaps while the controller runs`);
  await pool(big, 4, (i) => write(i, 1));
  const peak = await peaks.stop();
  const steady = await cost(c);
  await c.stop();
  watch.close();
  await deleteFixtures(client, fx.label);
  await client.request("DELETE", `/api/v1/namespaces/${ns}`, { timeoutMs: 300_000 });
  return {
    refs,
    objects,
    objectBytes,
    coldStartSeconds,
    peakRssMiB: peak.rssMiB,
    peakHeapMiB: peak.heapMiB,
    steady,
    bytesPerUnreferencedObject: await projectionCost(),
  };
}

export interface LabelsResult {
  refs: number;
  objects: number;
  /** Bytes of JSON of one object's labels. */
  labelBytes: number;
  /** A cold start without the labelled objects, then with them: steady cost after each. */
  without: Cost;
  with: Cost;
  /** Highest RSS sampled during the cold start with them. */
  peakRssMiB: number;
  coldStartSeconds: number;
}

/** The longest DNS-subdomain prefix a label key may have (253 characters). */
export const LABEL_PREFIX = ["a", "b", "c"].map((c) => c.repeat(63)).join(".") + "." + "d".repeat(61);

/** The largest label set the API server takes (about 845 KB), distinct for each object. */
export function largestLabels(object: number): Record<string, string> {
  const labels: Record<string, string> = {};
  for (let j = 0; j < 2190; j++)
    labels[`${LABEL_PREFIX}/${`o${object}-k${j}-`.padEnd(63, "x")}`] = `v${object}-${j}-`.padEnd(63, "y");
  return labels;
}

/**
 * Memory through labels (issue 21): `refs` Referables over small sources (so ConfigMaps are
 * watched cluster-wide), cold-started without and then with `objects` ConfigMaps in another
 * namespace carrying the largest label sets the API server takes, which nothing selects.
 */
export async function runLabels(
  client: BenchClient,
  plane: ControlPlane,
  refs: number,
  objects: number,
): Promise<LabelsResult> {
  log(`labels: ${refs} Referables, then ${objects} ConfigMaps of about 845 KB of labels`);
  const fx = await makeNamedFixture(client, refs, `${RUN}-labels`);
  const selector = `bench-set=${fx.label}`;
  const watch = new ReferableWatch(client, selector);
  await watch.start();
  const coldStart = async (tag: string) => {
    const c = await startController(plane.kubeconfigPath, selector);
    const peaks = samplePeaks(c);
    await until(
      `all ${refs} Referables Ready`,
      () => (watch.readyCount() >= refs ? true : undefined),
      600_000,
    );
    // The statuses are the last run's: a change that arrives says this controller listed its
    // sources (the ConfigMap kind whole, the labelled objects included).
    const first = fx.sources[0]!;
    await setSource(client, first.kind, first.name, tag);
    await until(
      `${fx.names[0]} to follow its source`,
      () => (watch.latest.get(fx.names[0]!)?.value === tag ? true : undefined),
      600_000,
    );
    const seconds = (performance.now() - c.startedAt) / 1000;
    const peak = await peaks.stop();
    const steady = await cost(c);
    await c.stop();
    return { seconds, peak, steady };
  };
  const without = await coldStart("without");
  const ns = `${NS}-labels`;
  await client.request("POST", "/api/v1/namespaces", {
    body: { apiVersion: "v1", kind: "Namespace", metadata: { name: ns } },
  });
  const all = Array.from({ length: objects }, (_, i) => i);
  await pool(all, 4, (i) =>
    client.request("POST", `/api/v1/namespaces/${ns}/configmaps`, {
      body: {
        apiVersion: "v1",
        kind: "ConfigMap",
        metadata: { name: `labels-${i}`, labels: largestLabels(i) },
        data: { note: "nothing reads this" },
      },
      timeoutMs: 120_000,
    }),
  );
  const withThem = await coldStart("with");
  watch.close();
  await deleteFixtures(client, fx.label);
  await client.request("DELETE", `/api/v1/namespaces/${ns}`, { timeoutMs: 300_000 });
  return {
    refs,
    objects,
    labelBytes: JSON.stringify(largestLabels(0)).length,
    without: without.steady,
    with: withThem.steady,
    peakRssMiB: withThem.peak.rssMiB,
    coldStartSeconds: withThem.seconds,
  };
}
