/** The export scenarios: a source write → an exported ConfigMap key, and → a managed resource's field. */
import type { ControlPlane } from "../test/harness/control-plane.ts";
import { TASK_SPEC } from "../test/harness/datasync-task.ts";
import {
  createNamespace,
  deleteFixtures,
  deleteNamespace,
  makeConfigMapFixture,
  NS,
  setSource,
} from "./fixtures.ts";
import { requestsByVerb, scrape, sumOf } from "./metrics.ts";
import { log, quick, RUN } from "./options.ts";
import {
  followTargets,
  type FollowedTargets,
  type ReferableWatch,
  timeStatusAndTarget,
  watchAndStart,
} from "./referable-watch.ts";
import { type BenchClient, pool } from "./retry.ts";
import { type Stats, stats, until } from "./stats.ts";

/** The export scenario's figures. */
export interface ExportResult {
  refs: number;
  /** Source write acknowledged → the Referable's status.value shows the value (its watch). */
  status: Stats;
  /** Source write acknowledged → the exported ConfigMap key holds the value (a watch of ConfigMaps). */
  exported: Stats;
}

/**
 * The rounds of both export scenarios: one source of the fixture `label` written at a time (the
 * round's), and for each write the time until the status shows the value and until the target
 * (`targetOf(i)` among `targets`) does, both seen through watches as a consumer sees them.
 */
async function exportRounds(
  client: BenchClient,
  watch: ReferableWatch,
  targets: FollowedTargets,
  label: string,
  n: number,
  rounds: number,
  targetOf: (i: number) => string,
  what: string,
): Promise<{ status: number[]; target: number[] }> {
  const samples = { status: [] as number[], target: [] as number[] };
  for (let round = 1; round <= rounds; round++) {
    const i = round % n;
    const value = `x${round}`;
    const seen = await timeStatusAndTarget(
      watch,
      `${label}-rf${i}`,
      targets,
      targetOf(i),
      value,
      () => setSource(client, "ConfigMap", `${label}-s${i}`, value),
      `${what} round ${round}`,
    );
    samples.status.push(seen.status);
    samples.target.push(seen.target);
  }
  return samples;
}

/** Waits (5 minutes at most) until every target of the fixture holds v0, the sources' first value. */
async function untilExported(targets: FollowedTargets, indexes: number[], targetOf: (i: number) => string) {
  await until(
    "every target to hold v0",
    () => (indexes.every((i) => targets.values.get(targetOf(i)) === "v0") ? true : undefined),
    300_000,
  );
}

/**
 * spec.export: `n` Referables over ConfigMaps of their own, each exporting into a ConfigMap of its
 * own in another namespace; timed by {@link exportRounds}.
 */
export async function runExport(client: BenchClient, plane: ControlPlane, n: number): Promise<ExportResult> {
  log(`export: ${n} Referables, each exporting its value into a ConfigMap key`);
  const label = `${RUN}-exp`;
  const exportNs = label;
  const targetOf = (i: number) => `${label}-out${i}`;
  await createNamespace(client, exportNs);
  const indexes = await makeConfigMapFixture(client, label, n, (i) => ({
    export: [{ kind: "ConfigMap", namespace: exportNs, name: targetOf(i), key: "VALUE" }],
  }));
  const keys = await followTargets(
    client,
    `/api/v1/namespaces/${exportNs}/configmaps`,
    (o) => (o.data as Record<string, string> | undefined)?.VALUE,
    "exported keys'",
  );
  const { watch, c } = await watchAndStart(client, plane, label);
  await untilExported(keys, indexes, targetOf);
  const samples = await exportRounds(client, watch, keys, label, n, quick ? 30 : 200, targetOf, "export");
  await c.stop();
  watch.close();
  keys.close();
  await deleteFixtures(client, label);
  await deleteNamespace(client, exportNs).catch(() => undefined);
  return { refs: n, status: stats(samples.status), exported: stats(samples.target) };
}

/** The field-export scenario's figures. */
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

/** A CRD shaped like a Crossplane managed resource (typed spec.forProvider fields), served; returns its path in NS. */
async function installTaskCrd(
  client: BenchClient,
  label: string,
): Promise<{ crd: string; tasks: string; group: string }> {
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
                properties: { spec: TASK_SPEC },
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
  return { crd, tasks, group };
}

/**
 * spec.export into fields: `n` Referables over ConfigMaps of their own, each writing its value
 * into spec.forProvider.sourceLocationArn of a Task of its own (a CRD shaped like a Crossplane
 * managed resource, typed fields); timed by {@link exportRounds}, with the writes the controller
 * made per change.
 */
export async function runFieldExport(
  client: BenchClient,
  plane: ControlPlane,
  n: number,
): Promise<FieldExportResult> {
  log(`field-export: ${n} Referables, each writing its value into a field of a managed-resource-shaped Task`);
  const label = `${RUN}-fld`;
  const labels = { "bench-set": label };
  const targetOf = (i: number) => `${label}-t${i}`;
  const { crd, tasks, group } = await installTaskCrd(client, label);
  await pool(
    Array.from({ length: n }, (_, i) => i),
    64,
    (i) =>
      client.request("POST", tasks, {
        body: {
          apiVersion: `${group}/v1beta1`,
          kind: "Task",
          metadata: { name: targetOf(i), labels },
          spec: { forProvider: { destinationLocationArn: "arn:dest" } },
        },
      }),
  );
  const indexes = await makeConfigMapFixture(client, label, n, (i) => ({
    export: [
      {
        apiVersion: `${group}/v1beta1`,
        kind: "Task",
        namespace: NS,
        name: targetOf(i),
        fieldPath: "spec.forProvider.sourceLocationArn",
      },
    ],
  }));
  const fields = await followTargets(
    client,
    tasks,
    (o) =>
      (o.spec as { forProvider?: { sourceLocationArn?: string } } | undefined)?.forProvider
        ?.sourceLocationArn,
    "Tasks'",
  );
  const { watch, c } = await watchAndStart(client, plane, label);
  await untilExported(fields, indexes, targetOf);
  // Settled: every status records its field (the intent write, then the field, then the status).
  await until(
    "field Referables to be Exported",
    () => (indexes.every((i) => watch.latest.get(`${label}-rf${i}`)?.value === "v0") ? true : undefined),
    300_000,
  );
  const before = await scrape(c);
  const rounds = quick ? 30 : 200;
  const samples = await exportRounds(client, watch, fields, label, n, rounds, targetOf, "field-export");
  const after = await scrape(c);
  const writes =
    sumOf(after, 'referable_export_writes_total{result="success"}') -
    sumOf(before, 'referable_export_writes_total{result="success"}');
  const gets = (requestsByVerb(after).get ?? 0) - (requestsByVerb(before).get ?? 0);
  await c.stop();
  watch.close();
  fields.close();
  await deleteFixtures(client, label);
  await client
    .request("DELETE", tasks, { query: { labelSelector: `bench-set=${label}` } })
    .catch(() => undefined);
  await client.request("DELETE", crd).catch(() => undefined);
  return {
    refs: n,
    status: stats(samples.status),
    field: stats(samples.target),
    writesPerChange: Number((writes / rounds).toFixed(2)),
    readsPerChange: Number((gets / rounds).toFixed(2)),
  };
}
