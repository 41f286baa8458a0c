/** The export scenarios: a source write → an exported ConfigMap key, and → a managed resource's field. */
import type { ControlPlane } from "../test/harness/control-plane.ts";
import { startController } from "./controller.ts";
import { createReferable, createSource, deleteFixtures, NS, setSource } from "./fixtures.ts";
import { requestsByVerb, scrape, sumOf } from "./metrics.ts";
import { log, quick, RUN } from "./options.ts";
import { ReferableWatch, timeStatusAndTarget } from "./referable-watch.ts";
import { type BenchClient, pool } from "./retry.ts";
import { type Stats, stats, until } from "./stats.ts";
import { reopeningWatch } from "./watch.ts";

export interface ExportResult {
  refs: number;
  /** Source write acknowledged → the Referable's status.value shows the value (its watch). */
  status: Stats;
  /** Source write acknowledged → the exported ConfigMap key holds the value (a watch of ConfigMaps). */
  exported: Stats;
}

/**
 * spec.export: `n` Referables over ConfigMaps of their own, each exporting into a ConfigMap of its
 * own in another namespace. One source written at a time; for each write, the time until the
 * status shows the value and until the exported key does, both seen through watches as a
 * consumer sees them.
 */
export async function runExport(client: BenchClient, plane: ControlPlane, n: number): Promise<ExportResult> {
  log(`export: ${n} Referables, each exporting its value into a ConfigMap key`);
  const label = `${RUN}-exp`;
  const labels = { "bench-set": label };
  const exportNs = label;
  await client.request("POST", "/api/v1/namespaces", {
    body: { apiVersion: "v1", kind: "Namespace", metadata: { name: exportNs } },
  });
  const indexes = Array.from({ length: n }, (_, i) => i);
  await pool(indexes, 64, (i) => createSource(client, "ConfigMap", `${label}-s${i}`, "v0", labels));
  await pool(indexes, 64, (i) =>
    createReferable(
      client,
      `${label}-rf${i}`,
      labels,
      { apiVersion: "v1", kind: "ConfigMap", namespace: NS, name: `${label}-s${i}`, fieldPath: "data.value" },
      { export: [{ kind: "ConfigMap", namespace: exportNs, name: `${label}-out${i}`, key: "VALUE" }] },
    ),
  );
  const keys = new Map<string, string | undefined>();
  const keyListeners = new Set<() => void>();
  const cms = `/api/v1/namespaces/${exportNs}/configmaps`;
  const list = await client.request<{ metadata: { resourceVersion: string } }>("GET", cms);
  const keyWatch = reopeningWatch(
    client,
    cms,
    {
      resourceVersion: list.metadata.resourceVersion,
      onReopen: (why) => log(`exported keys' watch reopened: ${why}`),
    },
    (e) => {
      if (e.type !== "ADDED" && e.type !== "MODIFIED") return;
      keys.set(e.object.metadata!.name!, (e.object.data as Record<string, string> | undefined)?.VALUE);
      for (const l of keyListeners) l();
    },
  );
  const watch = new ReferableWatch(client, `bench-set=${label}`);
  await watch.start();
  const c = await startController(plane.kubeconfigPath, `bench-set=${label}`);
  await until(
    "export Referables to export v0",
    () => (indexes.every((i) => keys.get(`${label}-out${i}`) === "v0") ? true : undefined),
    300_000,
  );
  const statusSamples: number[] = [];
  const exportedSamples: number[] = [];
  for (let round = 1; round <= (quick ? 30 : 200); round++) {
    const i = round % n;
    const value = `x${round}`;
    const seen = await timeStatusAndTarget(
      watch,
      `${label}-rf${i}`,
      { values: keys, listeners: keyListeners, name: `${label}-out${i}` },
      value,
      () => setSource(client, "ConfigMap", `${label}-s${i}`, value),
      `export round ${round}`,
    );
    statusSamples.push(seen.status);
    exportedSamples.push(seen.target);
  }
  await c.stop();
  watch.close();
  keyWatch.close();
  await deleteFixtures(client, label);
  await client.request("DELETE", `/api/v1/namespaces/${exportNs}`).catch(() => undefined);
  return { refs: n, status: stats(statusSamples), exported: stats(exportedSamples) };
}

export interface FieldExportResult {
  refs: number;
  /** Source write acknowledged → the Referable's status.value shows the value (its watch). */
  status: Stats;
  /** Source write acknowledged → the target's spec.forProvider field holds the value (a watch of the kind). */
  field: Stats;
  /** Target writes (applies) per source change, from referable_export_writes_total. */
  writesPerChange: number;
  /** API GETs per source change (the target read before the write). */
  readsPerChange: number;
}

/**
 * spec.export into fields: `n` Referables over ConfigMaps of their own, each writing its value
 * into spec.forProvider.sourceLocationArn of a Task of its own (a CRD shaped like a Crossplane
 * managed resource, typed fields). One source written at a time; for each write, the time until
 * the status shows the value and until the field does, both seen through watches, and the writes
 * the controller made per change.
 */
export async function runFieldExport(
  client: BenchClient,
  plane: ControlPlane,
  n: number,
): Promise<FieldExportResult> {
  log(`field-export: ${n} Referables, each writing its value into a field of a managed-resource-shaped Task`);
  const label = `${RUN}-fld`;
  const labels = { "bench-set": label };
  const group = `datasync.${label}.bench.referable.dev`;
  const crd = `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/tasks.${group}`;
  await client.request("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", {
    body: {
      apiVersion: "apiextensions.k8s.io/v1",
      kind: "CustomResourceDefinition",
      metadata: { name: `tasks.${group}` },
      spec: {
        group,
        scope: "Namespaced",
        names: { kind: "Task", plural: "tasks", singular: "task", listKind: "TaskList" },
        versions: [
          {
            name: "v1beta1",
            served: true,
            storage: true,
            schema: {
              openAPIV3Schema: {
                type: "object",
                properties: {
                  spec: {
                    type: "object",
                    properties: {
                      forProvider: {
                        type: "object",
                        properties: {
                          sourceLocationArn: { type: "string" },
                          destinationLocationArn: { type: "string" },
                        },
                      },
                    },
                  },
                },
              },
            },
          },
        ],
      },
    },
  });
  const tasks = `/apis/${group}/v1beta1/namespaces/${NS}/tasks`;
  await until(
    "the Task CRD to be served",
    async () =>
      await client
        .request("GET", tasks)
        .then(() => true)
        .catch(() => undefined),
    60_000,
  );
  const indexes = Array.from({ length: n }, (_, i) => i);
  await pool(indexes, 64, (i) =>
    client.request("POST", tasks, {
      body: {
        apiVersion: `${group}/v1beta1`,
        kind: "Task",
        metadata: { name: `${label}-t${i}`, labels },
        spec: { forProvider: { destinationLocationArn: "arn:dest" } },
      },
    }),
  );
  await pool(indexes, 64, (i) => createSource(client, "ConfigMap", `${label}-s${i}`, "v0", labels));
  await pool(indexes, 64, (i) =>
    createReferable(
      client,
      `${label}-rf${i}`,
      labels,
      { apiVersion: "v1", kind: "ConfigMap", namespace: NS, name: `${label}-s${i}`, fieldPath: "data.value" },
      {
        export: [
          {
            apiVersion: `${group}/v1beta1`,
            kind: "Task",
            namespace: NS,
            name: `${label}-t${i}`,
            fieldPath: "spec.forProvider.sourceLocationArn",
          },
        ],
      },
    ),
  );
  const fields = new Map<string, string | undefined>();
  const fieldListeners = new Set<() => void>();
  const list = await client.request<{ metadata: { resourceVersion: string } }>("GET", tasks);
  const taskWatch = client.watch(tasks, { resourceVersion: list.metadata.resourceVersion }, (e) => {
    if (e.type !== "ADDED" && e.type !== "MODIFIED") return;
    const spec = e.object.spec as { forProvider?: { sourceLocationArn?: string } } | undefined;
    fields.set(e.object.metadata!.name!, spec?.forProvider?.sourceLocationArn);
    for (const l of fieldListeners) l();
  });
  const watch = new ReferableWatch(client, `bench-set=${label}`);
  await watch.start();
  const c = await startController(plane.kubeconfigPath, `bench-set=${label}`);
  await until(
    "field Referables to write v0",
    () => (indexes.every((i) => fields.get(`${label}-t${i}`) === "v0") ? true : undefined),
    300_000,
  );
  // Settled: every status records its field (the intent write, then the field, then the status).
  await until(
    "field Referables to be Exported",
    () => (indexes.every((i) => watch.latest.get(`${label}-rf${i}`)?.value === "v0") ? true : undefined),
    300_000,
  );
  const before = await scrape(c);
  const statusSamples: number[] = [];
  const fieldSamples: number[] = [];
  const rounds = quick ? 30 : 200;
  for (let round = 1; round <= rounds; round++) {
    const i = round % n;
    const value = `x${round}`;
    const seen = await timeStatusAndTarget(
      watch,
      `${label}-rf${i}`,
      { values: fields, listeners: fieldListeners, name: `${label}-t${i}` },
      value,
      () => setSource(client, "ConfigMap", `${label}-s${i}`, value),
      `field-export round ${round}`,
    );
    statusSamples.push(seen.status);
    fieldSamples.push(seen.target);
  }
  const after = await scrape(c);
  const writes =
    sumOf(after, 'referable_export_writes_total{result="success"}') -
    sumOf(before, 'referable_export_writes_total{result="success"}');
  const gets = (requestsByVerb(after).get ?? 0) - (requestsByVerb(before).get ?? 0);
  await c.stop();
  watch.close();
  taskWatch.close();
  await deleteFixtures(client, label);
  await client
    .request("DELETE", tasks, { query: { labelSelector: `bench-set=${label}` } })
    .catch(() => undefined);
  await client.request("DELETE", crd).catch(() => undefined);
  return {
    refs: n,
    status: stats(statusSamples),
    field: stats(fieldSamples),
    writesPerChange: Number((writes / rounds).toFixed(2)),
    readsPerChange: Number((gets / rounds).toFixed(2)),
  };
}
