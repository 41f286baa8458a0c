/**
 * spec.export into fields of existing objects, on the real control plane, by a controller running
 * as a ServiceAccount with the shipped RBAC (deploy/base) and kinds opted in with the rules of
 * deploy/examples/export-fields (its verbs, on this test's kinds):
 * - a CRD shaped like a Crossplane managed resource (`spec.forProvider` with typed fields): the
 *   value written with its JSON type, every other field kept, the Referable's own field manager in
 *   managedFields, the source followed, the field recorded in status.exports;
 * - a field another manager owns: ExportConflict naming it, never forced; a hand edit after the
 *   write: ExportConflict at the next read (within the reread interval);
 * - a missing object: TargetNotFound, nothing created; a value the schema refuses: ExportRejected
 *   with the server's status and reason code (never its message); a list index: refused at admission;
 * - IfNotPresent: fills, never overrides, keeps its first value, stays after the Referable goes;
 * - deleting the Referable releases the field (removed where only it owned it);
 * - a kind not opted in: ExportForbidden, and written by itself once opted in (a cluster-scoped
 *   second CRD shaped like provider-kubernetes' Object);
 * - a real Deployment's spec.template.metadata.annotations[...]: a new generation (a rollout) per change.
 * The webhook's refusal of an author who may not patch the target is in admission.test.ts.
 */
import { afterAll, beforeAll, describe, expect, it, jest } from "@jest/globals";
import { exportValue, isExportError, removeExport } from "../../src/index.ts";
import { isApiError, type KubeClient, type KubeObject } from "../../src/kube/client.ts";
import { controllerAccount, type ControllerAccount } from "../harness/controller-account.ts";
import {
  createReferable as createReferableAs,
  getReferable,
  REFERABLES,
  restartCountingWrites,
  startTestController,
  tearDownControllers,
  type TestController,
} from "../harness/controller.ts";
import { TASK_SPEC } from "../harness/datasync-task.ts";
import { exportedCondition, waitForExported as waitForExportedAs } from "../harness/export.ts";
import {
  adminClient,
  createNamespace,
  exportFieldsOptInRules,
  installTestCrd,
  testKubeConfig,
  tokenClient,
  uniqueName,
  waitFor,
} from "../harness/kube.ts";

jest.setTimeout(30_000);

const CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";

let admin: KubeClient;
let ctl: TestController;
/** The controller's ServiceAccount, with deploy/base's rules. */
let account: ControllerAccount;
let src: string;
let team: string;
/** The test's own API group: `tasks.<group>` (namespaced), `objects.<group>` (cluster-scoped). */
let group: string;
let taskApiVersion: string;
let controllerToken: string;
const cleanup: string[] = [];

/** A CRD shaped like a Crossplane managed resource (or, cluster-scoped, provider-kubernetes' Object). */
async function installCrd(kind: string, scope: "Namespaced" | "Cluster", spec: Record<string, unknown>) {
  const plural = `${kind.toLowerCase()}s`;
  const name = `${plural}.${group}`;
  await installTestCrd(admin, group, kind, scope, { version: "v1beta1", spec });
  cleanup.push(`${CRDS}/${name}`);
  await waitFor(`CRD ${name} to be served`, async () => {
    await admin.request("GET", `/apis/${group}/v1beta1/${plural}`);
    return true;
  });
}

beforeAll(async () => {
  admin = adminClient();
  src = await createNamespace(admin, "xfield-src");
  team = await createNamespace(admin, "xfield-team");
  for (const ns of [src, team]) cleanup.push(`/api/v1/namespaces/${ns}`);
  group = `datasync.${uniqueName("aws")}.example.org`;
  taskApiVersion = `${group}/v1beta1`;
  await installCrd("Task", "Namespaced", TASK_SPEC);
  await installCrd("Object", "Cluster", {
    type: "object",
    properties: {
      forProvider: {
        type: "object",
        properties: { manifest: { type: "object", "x-kubernetes-preserve-unknown-fields": true } },
      },
    },
  });
  // What deploy/base gives the controller, and the opt-in of Tasks and Deployments (not Objects).
  account = await controllerAccount(admin, "xfield-ctl", cleanup);
  await account.grant(exportFieldsOptInRules(group, ["tasks"]));
  await account.grant(exportFieldsOptInRules("apps", ["deployments"]));
  controllerToken = account.token;
  const controllerClient = account.client;
  await waitFor("the controller's RBAC to apply", async () => {
    await controllerClient
      .request("GET", `/apis/${group}/v1beta1/namespaces/${team}/tasks/none`)
      .catch((err: unknown) => {
        if (!isApiError(err, 404)) throw err;
      });
    return true;
  });
  ctl = await startTestController({ client: controllerClient, build: { fieldRereadMs: 1000 } });
}, 60_000);

afterAll(() => tearDownControllers(admin, [ctl], cleanup), 60_000);

const createReferable = (spec: Record<string, unknown>) =>
  createReferableAs(admin, spec, { shard: ctl.shard });

async function sourceConfigMap(value: string): Promise<{ name: string; ref: Record<string, unknown> }> {
  const name = uniqueName("src");
  await admin.request("POST", `/api/v1/namespaces/${src}/configmaps`, {
    body: { apiVersion: "v1", kind: "ConfigMap", metadata: { name }, data: { v: value } },
  });
  return { name, ref: { apiVersion: "v1", kind: "ConfigMap", namespace: src, name, fieldPath: "data.v" } };
}

async function setSource(name: string, value: string): Promise<void> {
  await admin.request("PATCH", `/api/v1/namespaces/${src}/configmaps/${name}`, {
    body: { data: { v: value } },
    contentType: "application/merge-patch+json",
  });
}

const taskPath = (name: string) => `/apis/${group}/v1beta1/namespaces/${team}/tasks/${name}`;

/** Creates a Task as `fieldManager` (a user's kubectl), with `forProvider`. */
async function createTask(forProvider: Record<string, unknown>, fieldManager = "kubectl-client-side-apply") {
  const name = uniqueName("task");
  await admin.request("POST", `/apis/${group}/v1beta1/namespaces/${team}/tasks`, {
    body: {
      apiVersion: taskApiVersion,
      kind: "Task",
      metadata: { name },
      spec: { forProvider, providerConfigRef: { name: "default" } },
    },
    query: { fieldManager },
  });
  return name;
}

const getTask = (name: string) =>
  admin.request<KubeObject & { spec: { forProvider: Record<string, unknown> } }>("GET", taskPath(name));

const taskTarget = (
  name: string,
  fieldPath = "spec.forProvider.sourceLocationArn",
  policy?: "Always" | "IfNotPresent",
) => ({
  apiVersion: taskApiVersion,
  kind: "Task",
  namespace: team,
  name,
  fieldPath,
  ...(policy ? { policy } : {}),
});

/** Waits until the Referable's Exported condition has `reason`; returns the condition, the status and the object. */
async function waitForExported(name: string, reason: string, timeoutMs = 10_000) {
  const view = await waitForExportedAs(admin, name, reason, undefined, timeoutMs);
  return { exported: exportedCondition(view)!, status: view.status, object: view.object };
}

const ARN_A = "arn:aws:datasync:eu-west-1:123456789012:location/loc-aaaa";
const ARN_B = "arn:aws:datasync:eu-west-1:123456789012:location/loc-bbbb";

describe("export into a field of a managed resource", () => {
  it("writes the value, keeps every other field, owns the field under its own manager, records it, and follows the source", async () => {
    const source = await sourceConfigMap(ARN_A);
    const task = await createTask({ destinationLocationArn: "arn:dest", name: "nightly" });
    const rf = await createReferable({ source: source.ref, export: [taskTarget(task)] });
    const { status } = await waitForExported(rf, "Exported");
    let obj = await getTask(task);
    expect(obj.spec.forProvider).toEqual({
      destinationLocationArn: "arn:dest",
      name: "nightly",
      sourceLocationArn: ARN_A,
    });
    expect((obj.spec as Record<string, unknown>).providerConfigRef).toEqual({ name: "default" });
    const managed = (obj.metadata?.managedFields ?? []) as Array<{
      manager: string;
      operation: string;
      fieldsV1: unknown;
    }>;
    const mine = managed.find((m) => m.manager === `referable.dev/${rf}`);
    expect(mine?.operation).toBe("Apply");
    expect(mine?.fieldsV1).toEqual({ "f:spec": { "f:forProvider": { "f:sourceLocationArn": {} } } });
    // The user's manager keeps its fields.
    expect(managed.find((m) => m.manager === "kubectl-client-side-apply")).toBeDefined();
    expect(status.exports).toEqual([
      expect.objectContaining({
        apiVersion: taskApiVersion,
        kind: "Task",
        namespace: team,
        name: task,
        fieldPath: "spec.forProvider.sourceLocationArn",
        resourceVersion: expect.any(String),
      }),
    ]);
    await setSource(source.name, ARN_B);
    obj = await waitFor("the field to follow the source", async () => {
      const t = await getTask(task);
      return t.spec.forProvider.sourceLocationArn === ARN_B ? t : undefined;
    });
    expect(obj.spec.forProvider.destinationLocationArn).toBe("arn:dest");
  });

  it("a field another manager owns is ExportConflict naming it, and never forced; so is a hand edit after the write", async () => {
    const source = await sourceConfigMap(ARN_A);
    const owned = await createTask({ sourceLocationArn: "arn:users-own" }, "platform-team");
    const rf = await createReferable({ source: source.ref, export: [taskTarget(owned)] });
    const { exported } = await waitForExported(rf, "ExportConflict");
    expect(exported.message).toContain('"platform-team"');
    expect(exported.message).toContain("spec.forProvider.sourceLocationArn");
    expect(exported.message).not.toContain(ARN_A);
    expect((await getTask(owned)).spec.forProvider.sourceLocationArn).toBe("arn:users-own");

    // Written first, then edited by hand: the editor owns the field now, and it stays theirs.
    const task = await createTask({ name: "t" });
    const rf2 = await createReferable({ source: source.ref, export: [taskTarget(task)] });
    await waitForExported(rf2, "Exported");
    await admin.request("PATCH", taskPath(task), {
      body: { spec: { forProvider: { sourceLocationArn: "arn:by-hand" } } },
      contentType: "application/merge-patch+json",
      query: { fieldManager: "kubectl-edit" },
    });
    const after = await waitForExported(rf2, "ExportConflict");
    expect(after.exported.message).toContain('"kubectl-edit"');
    expect((await getTask(task)).spec.forProvider.sourceLocationArn).toBe("arn:by-hand");
  });

  it("a missing object is TargetNotFound, and nothing is created", async () => {
    const source = await sourceConfigMap(ARN_A);
    const missing = uniqueName("task");
    const rf = await createReferable({ source: source.ref, export: [taskTarget(missing)] });
    const { exported } = await waitForExported(rf, "TargetNotFound");
    expect(exported.message).toContain(`Task ${team}/${missing} does not exist`);
    expect(
      await admin.request("GET", taskPath(missing)).catch((e: unknown) => (isApiError(e) ? e.statusCode : e)),
    ).toBe(404);
    // Ready is unaffected: status.value is published.
    expect((await getReferable(admin, rf)).reason).toBe("Available");
  });

  it("an object deleted after the write is TargetNotFound at the next read, and is not re-created", async () => {
    const source = await sourceConfigMap(ARN_A);
    const task = await createTask({ name: "t" });
    const rf = await createReferable({ source: source.ref, export: [taskTarget(task)] });
    await waitForExported(rf, "Exported");
    await admin.request("DELETE", taskPath(task));
    // Within the reread interval (1 s in this test; 30 s by default), with no change of the value.
    const { exported } = await waitForExported(rf, "TargetNotFound");
    expect(exported.message).toContain(`Task ${team}/${task} does not exist`);
    expect(
      await admin.request("GET", taskPath(task)).catch((e: unknown) => (isApiError(e) ? e.statusCode : e)),
    ).toBe(404);
  });

  it("a value the schema refuses is ExportRejected, with the API server's status and reason code, never its own words", async () => {
    const source = await sourceConfigMap("fast");
    const task = await createTask({ name: "t" });
    const rf = await createReferable({
      source: source.ref,
      export: [taskTarget(task, "spec.forProvider.options.bytesPerSecond")],
    });
    const { exported } = await waitForExported(rf, "ExportRejected");
    expect(exported.message).toContain(`the API server refused the value for Task ${team}/${task}`);
    // A type the schema refuses: server-side apply answers 500, with no reason code.
    expect(exported.message).toContain(": 500, the value's type does not fit the field's schema");
    // The server's own text (which names the type it expected) is not quoted: docs/api.md.
    expect(exported.message).not.toMatch(/integer|int64|expected/i);
    expect(exported.message).not.toContain("fast");
    expect((await getTask(task)).spec.forProvider.options).toBeUndefined();
  });

  it("refuses a list index, a status field and JSONPath at admission", async () => {
    const source = await sourceConfigMap(ARN_A);
    for (const [fieldPath, says] of [
      ["spec.forProvider.tags[0]", "must not hold a list index"],
      ["status.atProvider.arn", "must not be under status"],
      ["{.spec.forProvider.name}", "not JSONPath"],
      ["metadata.name", "only one label or annotation"],
    ] as const) {
      const err = await createReferable({ source: source.ref, export: [taskTarget("t", fieldPath)] }).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(isApiError(err, 422)).toBe(true);
      expect((err as Error).message).toContain(says);
    }
  });

  it("IfNotPresent fills an empty field once, never overrides it, keeps its first value, and leaves it when the Referable goes", async () => {
    const source = await sourceConfigMap(ARN_A);
    const empty = await createTask({ name: "t" });
    const set = await createTask({ sourceLocationArn: "arn:preset" });
    const rf = await createReferable({
      source: source.ref,
      export: [
        taskTarget(empty, "spec.forProvider.sourceLocationArn", "IfNotPresent"),
        taskTarget(set, "spec.forProvider.sourceLocationArn", "IfNotPresent"),
      ],
    });
    await waitForExported(rf, "Exported");
    expect((await getTask(empty)).spec.forProvider.sourceLocationArn).toBe(ARN_A);
    expect((await getTask(set)).spec.forProvider.sourceLocationArn).toBe("arn:preset");
    await setSource(source.name, ARN_B);
    await waitFor(
      "the new value to be read",
      async () => (await getReferable(admin, rf)).status.value === ARN_B,
    );
    // The fields are written before the status that shows the new value: they were looked at.
    expect((await getTask(empty)).spec.forProvider.sourceLocationArn).toBe(ARN_A);
    expect((await getTask(set)).spec.forProvider.sourceLocationArn).toBe("arn:preset");
    await admin.request("DELETE", `${REFERABLES}/${rf}`);
    await waitFor("the Referable to go", async () =>
      admin.request("GET", `${REFERABLES}/${rf}`).then(
        () => false,
        (e: unknown) => isApiError(e, 404),
      ),
    );
    expect((await getTask(empty)).spec.forProvider.sourceLocationArn).toBe(ARN_A);
  });

  it("deleting the Referable releases the field, and only it", async () => {
    const source = await sourceConfigMap(ARN_A);
    const task = await createTask({ destinationLocationArn: "arn:dest" });
    const rf = await createReferable({ source: source.ref, export: [taskTarget(task)] });
    await waitForExported(rf, "Exported");
    expect((await getReferable(admin, rf)).object.metadata?.finalizers).toContain(
      "referable.dev/export-fields",
    );
    await admin.request("DELETE", `${REFERABLES}/${rf}`);
    await waitFor("the Referable to go", async () =>
      admin.request("GET", `${REFERABLES}/${rf}`).then(
        () => false,
        (e: unknown) => isApiError(e, 404),
      ),
    );
    const obj = await getTask(task);
    expect(obj.spec.forProvider).toEqual({ destinationLocationArn: "arn:dest" });
    const managers = ((obj.metadata?.managedFields ?? []) as Array<{ manager: string }>).map(
      (m) => m.manager,
    );
    expect(managers).not.toContain(`referable.dev/${rf}`);
  });

  it("a value gone releases the field, it comes back with the value, and a field dropped from spec.export is released", async () => {
    const source = await sourceConfigMap(ARN_A);
    const task = await createTask({ name: "t" });
    const rf = await createReferable({ source: source.ref, export: [taskTarget(task)] });
    await waitForExported(rf, "Exported");
    await admin.request("DELETE", `/api/v1/namespaces/${src}/configmaps/${source.name}`);
    const gone = await waitForExported(rf, "NoValue");
    expect((await getTask(task)).spec.forProvider).toEqual({ name: "t" });
    // Still recorded: the Referable keeps naming the field it will write again.
    expect(gone.status.exports).toEqual([
      expect.objectContaining({ name: task, fieldPath: "spec.forProvider.sourceLocationArn" }),
    ]);
    await admin.request("POST", `/api/v1/namespaces/${src}/configmaps`, {
      body: { apiVersion: "v1", kind: "ConfigMap", metadata: { name: source.name }, data: { v: ARN_B } },
    });
    await waitFor(
      "the field to come back",
      async () => (await getTask(task)).spec.forProvider.sourceLocationArn === ARN_B,
    );
    await admin.request("PATCH", `${REFERABLES}/${rf}`, {
      body: { spec: { export: null } },
      contentType: "application/merge-patch+json",
    });
    await waitFor("the field to be released and the Referable to let go of it", async () => {
      const view = await getReferable(admin, rf);
      return (
        (await getTask(task)).spec.forProvider.sourceLocationArn === undefined &&
        view.status.exports === undefined &&
        !((view.object.metadata?.finalizers ?? []) as string[]).includes("referable.dev/export-fields")
      );
    });
    expect((await getTask(task)).spec.forProvider).toEqual({ name: "t" });
  });
});

describe("the library's exportValue and removeExport with a field target", () => {
  it("writes with the value's JSON type, keeps the manager's other field, writes nothing twice, never forces, and releases", async () => {
    const kc = testKubeConfig();
    const options = { fieldManager: "my-operator/arns" };
    const task = await createTask({ name: "t" });
    const target = taskTarget(task);
    expect(await exportValue(kc, target, ARN_A, options)).toMatchObject({ written: true });
    expect(
      await exportValue(kc, taskTarget(task, "spec.forProvider.options.bytesPerSecond"), 1024, options),
    ).toMatchObject({
      written: true,
    });
    expect(await exportValue(kc, target, ARN_A, options)).toMatchObject({ written: false });
    expect((await getTask(task)).spec.forProvider).toEqual({
      name: "t",
      sourceLocationArn: ARN_A,
      options: { bytesPerSecond: 1024 },
    });
    const conflict = await exportValue(kc, taskTarget(task, "spec.forProvider.name"), "mine", options).catch(
      (e: unknown) => e,
    );
    expect(isExportError(conflict) && conflict.reason).toBe("ExportConflict");
    expect((conflict as Error).message).toContain('"kubectl-client-side-apply"');
    expect(await removeExport(kc, target, options)).toBe(true);
    expect(await removeExport(kc, target, options)).toBe(false);
    expect((await getTask(task)).spec.forProvider).toEqual({ name: "t", options: { bytesPerSecond: 1024 } });
    const missing = await exportValue(kc, taskTarget(uniqueName("task")), ARN_A, options).catch(
      (e: unknown) => e,
    );
    expect(isExportError(missing) && missing.reason).toBe("TargetNotFound");
  });
});

describe("one owner per field", () => {
  it("among Referables naming one field, the first created owns it; the other is ExportConflict naming it, and takes over when it goes", async () => {
    const first = await sourceConfigMap(ARN_A);
    const second = await sourceConfigMap(ARN_B);
    const task = await createTask({ name: "t" });
    const suffix = uniqueName("owner");
    const a = await createReferableAs(
      admin,
      { source: first.ref, export: [taskTarget(task)] },
      { shard: ctl.shard, name: `a-${suffix}` },
    );
    await waitForExported(a, "Exported");
    // Created later (or in the same second, with a later name): never takes the field.
    const b = await createReferableAs(
      admin,
      { source: second.ref, export: [taskTarget(task)] },
      { shard: ctl.shard, name: `b-${suffix}` },
    );
    const { exported } = await waitForExported(b, "ExportConflict");
    expect(exported.message).toContain(`exported by the Referable ${a}, created first`);
    expect((await getTask(task)).spec.forProvider.sourceLocationArn).toBe(ARN_A);
    await admin.request("DELETE", `${REFERABLES}/${a}`);
    await waitForExported(b, "Exported");
    expect((await getTask(task)).spec.forProvider.sourceLocationArn).toBe(ARN_B);
  });
});

describe("a restart", () => {
  it("writes nothing: not the field, not the status; and still follows the source", async () => {
    const first = await startTestController({
      client: tokenClient(controllerToken),
      build: { fieldRereadMs: 1000 },
    });
    const source = await sourceConfigMap(ARN_A);
    const task = await createTask({ name: "t" });
    const rf = await createReferableAs(
      admin,
      { source: source.ref, export: [taskTarget(task)] },
      { shard: first.shard },
    );
    const before = await waitForExported(rf, "Exported");
    const taskBefore = await getTask(task);
    await first.stop();
    const restarted = await restartCountingWrites(controllerToken, first.shard, { fieldRereadMs: 1000 });
    const { writes } = restarted;
    try {
      expect(writes).toEqual([]);
      expect((await getTask(task)).metadata?.resourceVersion).toBe(taskBefore.metadata?.resourceVersion);
      expect((await getReferable(admin, rf)).object.metadata?.resourceVersion).toBe(
        before.object.metadata?.resourceVersion,
      );
      await setSource(source.name, ARN_B);
      await waitFor(
        "the field to follow",
        async () => (await getTask(task)).spec.forProvider.sourceLocationArn === ARN_B,
      );
      await admin.request("DELETE", `${REFERABLES}/${rf}`);
      await waitFor("the Referable to go", async () =>
        admin.request("GET", `${REFERABLES}/${rf}`).then(
          () => false,
          (e: unknown) => isApiError(e, 404),
        ),
      );
    } finally {
      await restarted.stop();
    }
  });
});

describe("opting a kind in", () => {
  it("a kind not opted in is ExportForbidden naming the opt-in; once opted in, the field is written by itself (a cluster-scoped object)", async () => {
    const source = await sourceConfigMap(ARN_A);
    const name = uniqueName("object");
    const objectPath = `/apis/${group}/v1beta1/objects/${name}`;
    await admin.request("POST", `/apis/${group}/v1beta1/objects`, {
      body: {
        apiVersion: taskApiVersion,
        kind: "Object",
        metadata: { name },
        spec: { forProvider: { manifest: { apiVersion: "v1", kind: "ConfigMap", data: { other: "x" } } } },
      },
    });
    cleanup.push(objectPath);
    const rf = await createReferable({
      source: source.ref,
      export: [
        {
          apiVersion: taskApiVersion,
          kind: "Object",
          name,
          fieldPath: "spec.forProvider.manifest.data[DB_HOST]",
        },
      ],
    });
    const { exported } = await waitForExported(rf, "ExportForbidden");
    expect(exported.message).toContain("deploy/examples/export-fields");
    // A Referable that never could write there is not kept by it when deleted.
    const never = await createReferable({
      source: source.ref,
      export: [
        {
          apiVersion: taskApiVersion,
          kind: "Object",
          name,
          fieldPath: "spec.forProvider.manifest.data[OTHER]",
        },
      ],
    });
    await waitForExported(never, "ExportForbidden");
    await admin.request("DELETE", `${REFERABLES}/${never}`);
    await waitFor("the Referable that never wrote to go", async () =>
      admin.request("GET", `${REFERABLES}/${never}`).then(
        () => false,
        (e: unknown) => isApiError(e, 404),
      ),
    );
    expect((await getReferable(admin, rf)).reason).toBe("Available");
    await account.grant(exportFieldsOptInRules(group, ["objects"]));
    await waitForExported(rf, "Exported", 20_000);
    const obj = await admin.request<{
      spec: { forProvider: { manifest: { data: Record<string, string> } } };
    }>("GET", objectPath);
    expect(obj.spec.forProvider.manifest.data).toEqual({ other: "x", DB_HOST: ARN_A });
  });
});

describe("export into a Deployment's pod template annotation", () => {
  it("writes the annotation, and each change rolls the Deployment out (a new generation)", async () => {
    const source = await sourceConfigMap("db-1.internal");
    const name = uniqueName("web");
    const path = `/apis/apps/v1/namespaces/${team}/deployments/${name}`;
    await admin.request("POST", `/apis/apps/v1/namespaces/${team}/deployments`, {
      body: {
        apiVersion: "apps/v1",
        kind: "Deployment",
        metadata: { name },
        spec: {
          replicas: 1,
          selector: { matchLabels: { app: name } },
          template: {
            metadata: { labels: { app: name }, annotations: { "example.com/team": "b" } },
            spec: { containers: [{ name: "app", image: "registry.example/app:1" }] },
          },
        },
      },
    });
    type Deployment = KubeObject & {
      spec: { template: { metadata: { annotations?: Record<string, string> } } };
    };
    const before = await admin.request<Deployment>("GET", path);
    const rf = await createReferable({
      source: source.ref,
      export: [
        {
          apiVersion: "apps/v1",
          kind: "Deployment",
          namespace: team,
          name,
          fieldPath: "spec.template.metadata.annotations[example.com/db-host]",
        },
      ],
    });
    await waitForExported(rf, "Exported");
    const first = await admin.request<Deployment>("GET", path);
    expect(first.spec.template.metadata.annotations).toEqual({
      "example.com/team": "b",
      "example.com/db-host": "db-1.internal",
    });
    expect(first.metadata!.generation).toBe((before.metadata!.generation as number) + 1);
    await setSource(source.name, "db-2.internal");
    const second = await waitFor("the annotation to follow", async () => {
      const d = await admin.request<Deployment>("GET", path);
      return d.spec.template.metadata.annotations?.["example.com/db-host"] === "db-2.internal"
        ? d
        : undefined;
    });
    expect(second.metadata!.generation).toBe((first.metadata!.generation as number) + 1);
  });
});
