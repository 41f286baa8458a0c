/**
 * What the cluster holds beside the references, and what it costs the controller: unreferenced
 * ConfigMaps of about 1 MiB (the content scenario), and the largest label sets the API server
 * takes (the labels scenario).
 */
import { spawn } from "node:child_process";
import { join } from "node:path";
import { type ControlPlane, repoRoot } from "../test/harness/control-plane.ts";
import { type Cost, cost, samplePeaks, startController } from "./controller.ts";
import {
  createNamespace,
  deleteFixtures,
  deleteNamespace,
  type Fixture,
  makeNamedFixture,
  NS,
  setSource,
} from "./fixtures.ts";
import { log, RUN } from "./options.ts";
import { ReferableWatch } from "./referable-watch.ts";
import { type BenchClient, pool } from "./retry.ts";
import { until } from "./stats.ts";

/** The content scenario's figures. */
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

/** The scenario's watch closed, its fixture and namespace deleted. */
async function cleanUp(client: BenchClient, watch: ReferableWatch, fx: Fixture, ns: string): Promise<void> {
  watch.close();
  await deleteFixtures(client, fx.label);
  await deleteNamespace(client, ns);
}

/**
 * A cold start of the controller over the fixture `fx` (whose Referables `watch` follows), its
 * RSS and heap peaks sampled from its start until every Referable is Ready and `thenWhile` is
 * done; its steady cost after, then it is stopped. `readySeconds`: its start to every Referable
 * Ready; `seconds`: to the end of `thenWhile`.
 */
async function coldStart(
  plane: ControlPlane,
  watch: ReferableWatch,
  fx: Fixture,
  thenWhile: () => Promise<void>,
): Promise<{
  readySeconds: number;
  seconds: number;
  peak: { rssMiB: number; heapMiB: number };
  steady: Cost;
}> {
  const c = await startController(plane.kubeconfigPath, `bench-set=${fx.label}`);
  const peaks = samplePeaks(c);
  const n = fx.names.length;
  await until(`all ${n} Referables Ready`, () => (watch.readyCount() >= n ? true : undefined), 600_000);
  const readySeconds = (performance.now() - c.startedAt) / 1000;
  await thenWhile();
  const seconds = (performance.now() - c.startedAt) / 1000;
  const peak = await peaks.stop();
  const steady = await cost(c);
  await c.stop();
  return { readySeconds, seconds, peak, steady };
}

/** Bytes kept per unreferenced object, measured exactly in a process of its own (--expose-gc). */
async function projectionCost(): Promise<number> {
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
  await createNamespace(client, ns);
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

  const watch = new ReferableWatch(client, `bench-set=${fx.label}`);
  await watch.start();
  const {
    readySeconds: coldStartSeconds,
    peak,
    steady,
  } = await coldStart(plane, watch, fx, async () => {
    log(`cluster content: rewriting the ${objects} big ConfigMaps while the controller runs`);
    await pool(big, 4, (i) => write(i, 1));
  });
  await cleanUp(client, watch, fx, ns);
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

/** The labels scenario's figures. */
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
const LABEL_PREFIX = ["a", "b", "c"].map((c) => c.repeat(63)).join(".") + "." + "d".repeat(61);

/** The largest label set the API server takes (about 845 KB), distinct for each object. */
function largestLabels(object: number): Record<string, string> {
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
  const watch = new ReferableWatch(client, `bench-set=${fx.label}`);
  await watch.start();
  // The statuses are the last run's: a change that arrives says this controller listed its
  // sources (the ConfigMap kind whole, the labelled objects included).
  const follow = async (tag: string) => {
    const first = fx.sources[0]!;
    await setSource(client, first.kind, first.name, tag);
    await until(
      `${fx.names[0]} to follow its source`,
      () => (watch.latest.get(fx.names[0]!)?.value === tag ? true : undefined),
      600_000,
    );
  };
  const without = await coldStart(plane, watch, fx, () => follow("without"));
  const ns = `${NS}-labels`;
  await createNamespace(client, ns);
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
  const withThem = await coldStart(plane, watch, fx, () => follow("with"));
  await cleanUp(client, watch, fx, ns);
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
