/**
 * What the scenarios create: sources (ConfigMaps and Widgets, a CRD kind) and Referables over
 * them, labelled with their set (`bench-set`) so each scenario deletes its own.
 */
import { log, RUN } from "./run-id.ts";
import { type BenchClient, deleteAll, pool } from "./retry.ts";
import { SLOT_LABEL, slotOf } from "../src/runtime/slots.ts";

/** The namespace of the sources. */
export const NS = "bench";
/** The Referables' collection path. */
export const RF = "/apis/referable.dev/v1alpha1/referables";
/** The group of the Widget kind (a CRD the bench installs). */
export const WIDGET_GROUP = "bench.referable.dev";

/** The source of a Referable over ConfigMap `name` in the bench's namespace, reading `data.value`. */
export function configMapSource(name: string): Record<string, unknown> {
  return { apiVersion: "v1", kind: "ConfigMap", namespace: NS, name, fieldPath: "data.value" };
}

/** Creates namespace `name` (a scenario's own, deleted with {@link deleteNamespace}). */
export async function createNamespace(client: BenchClient, name: string): Promise<void> {
  await client.request("POST", "/api/v1/namespaces", {
    body: { apiVersion: "v1", kind: "Namespace", metadata: { name } },
  });
}

/** Deletes namespace `name`, waiting up to 5 minutes for the API server to answer. */
export async function deleteNamespace(client: BenchClient, name: string): Promise<void> {
  await client.request("DELETE", `/api/v1/namespaces/${name}`, { timeoutMs: 300_000 });
}

/**
 * `n` ConfigMaps `<label>-s<i>` holding v0 and a Referable `<label>-rf<i>` over each, labelled
 * `bench-set=<label>`; `extra(i)` adds to the Referable's spec (an export, an account).
 */
export async function makeConfigMapFixture(
  client: BenchClient,
  label: string,
  n: number,
  extra: (i: number) => Record<string, unknown> = () => ({}),
): Promise<number[]> {
  const labels = { "bench-set": label };
  const indexes = Array.from({ length: n }, (_, i) => i);
  await pool(indexes, 64, (i) => createSource(client, "ConfigMap", `${label}-s${i}`, "v0", labels));
  await pool(indexes, 64, (i) =>
    createReferable(client, `${label}-rf${i}`, labels, configMapSource(`${label}-s${i}`), extra(i)),
  );
  return indexes;
}

/** Referables and the sources they read, made together. */
export interface Fixture {
  label: string;
  /** Values of the batch label, when the fixture was made with one. */
  batches?: string[];
  names: string[];
  sources: Array<{ kind: "ConfigMap" | "Widget"; name: string }>;
}

/** The path of a source kind's collection, or of the source `name`. */
export function sourcePath(kind: "ConfigMap" | "Widget", name = ""): string {
  const base =
    kind === "ConfigMap"
      ? `/api/v1/namespaces/${NS}/configmaps`
      : `/apis/${WIDGET_GROUP}/v1/namespaces/${NS}/widgets`;
  return name ? `${base}/${name}` : base;
}

/** Creates a source holding `value` (a ConfigMap's data.value, a Widget's spec.value). */
export async function createSource(
  client: BenchClient,
  kind: "ConfigMap" | "Widget",
  name: string,
  value: string,
  labels: Record<string, string>,
) {
  const body =
    kind === "ConfigMap"
      ? { apiVersion: "v1", kind, metadata: { name, labels }, data: { value } }
      : { apiVersion: `${WIDGET_GROUP}/v1`, kind, metadata: { name, labels }, spec: { value } };
  await client.request("POST", sourcePath(kind), { body, timeoutMs: 120_000 });
}

/** Sets a source's value (a merge patch). */
export async function setSource(
  client: BenchClient,
  kind: "ConfigMap" | "Widget",
  name: string,
  value: string,
): Promise<void> {
  const body = kind === "ConfigMap" ? { data: { value } } : { spec: { value } };
  await client.request("PATCH", sourcePath(kind, name), {
    body,
    contentType: "application/merge-patch+json",
    timeoutMs: 120_000,
  });
}

/**
 * Creates a Referable over `source`, with `extra` beside it in its spec. It carries its slot
 * label (src/runtime/slots.ts), as every Referable does once a shard has served it: the cold
 * starts measure a cluster labelled already, not the one pass that labels an older one.
 */
export async function createReferable(
  client: BenchClient,
  name: string,
  labels: Record<string, string>,
  source: Record<string, unknown>,
  extra: Record<string, unknown> = {},
) {
  await client.request("POST", RF, {
    body: {
      apiVersion: "referable.dev/v1alpha1",
      kind: "Referable",
      metadata: { name, labels: { ...labels, [SLOT_LABEL]: slotOf(name) } },
      spec: { source, ...extra },
    },
    timeoutMs: 120_000,
  });
}

/** Objects of a fixture labelled alike for one deletecollection each (well inside the API server's 60 s). */
const BATCH = 2000;
const BATCH_LABEL = "bench-batch";

/**
 * Deletes a fixture's Referables and sources: by batch when it was made with batch labels, then
 * page by page whatever is left, every request retried (bench/retry.ts). A deletecollection of
 * 30,000 at once got the API server's 504 and ended a run before it printed anything.
 */
export async function deleteFixtures(
  client: BenchClient,
  label: string,
  batches?: readonly string[],
): Promise<void> {
  const t0 = performance.now();
  const left = await deleteAll(
    client,
    [RF, sourcePath("ConfigMap"), sourcePath("Widget")],
    `bench-set=${label}`,
    { concurrency: 64, ...(batches && { batchLabel: { key: BATCH_LABEL, values: batches } }) },
  );
  const seconds = (performance.now() - t0) / 1000;
  if (seconds > 10) log(`deleted ${label} in ${seconds.toFixed(0)} s (${left} one by one)`);
}

/**
 * N Referables, each over a source of its own: half ConfigMaps, half Widgets (a CRD kind). With
 * `batched`, every object also carries a batch label ({@link BATCH} objects each), so the fixture
 * is deleted in batches (the scale scenario; the size phases keep the labels they always had, so
 * their heap per Referable compares with earlier runs).
 */
export async function makeNamedFixture(
  client: BenchClient,
  n: number,
  label = `${RUN}-n${n}`,
  batched = false,
  /** Told after each object created (sources, then Referables): the scale scenario's progress. */
  onCreated?: (created: number, total: number) => void,
): Promise<Fixture> {
  let created = 0;
  const done = () => onCreated?.(++created, 2 * n);
  const labelsOf = (i: number): Record<string, string> =>
    batched ? { "bench-set": label, [BATCH_LABEL]: `b${Math.floor(i / BATCH)}` } : { "bench-set": label };
  const sources = Array.from({ length: n }, (_, i) => ({
    kind: (i % 2 ? "Widget" : "ConfigMap") as "ConfigMap" | "Widget",
    name: `${label}-s${i}`,
  }));
  const indexes = sources.map((_, i) => i);
  await pool(indexes, 64, async (i) => {
    await createSource(client, sources[i]!.kind, sources[i]!.name, "v0", labelsOf(i));
    done();
  });
  const names = sources.map((_, i) => `${label}-rf${i}`);
  await pool(indexes, 64, async (i) => {
    const name = names[i]!;
    const labels = labelsOf(i);
    const s = sources[i]!;
    await createReferable(client, name, labels, {
      apiVersion: s.kind === "ConfigMap" ? "v1" : `${WIDGET_GROUP}/v1`,
      kind: s.kind,
      namespace: NS,
      name: s.name,
      fieldPath: s.kind === "ConfigMap" ? "data.value" : "spec.value",
    });
    done();
  });
  const batches = batched ? Array.from({ length: Math.ceil(n / BATCH) }, (_, b) => `b${b}`) : undefined;
  return { label, names, sources, ...(batches && { batches }) };
}
