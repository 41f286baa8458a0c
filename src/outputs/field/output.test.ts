import type { ExportRecord, Referable } from "../../api/referable.ts";
import { ResolutionError } from "../../api/errors.ts";
import type { ResourceInfo } from "../../kube/discovery.ts";
import type { ResolutionResult } from "../../resolver/types.ts";
import { FieldOutput, newFieldsMemory } from "./output.ts";
import { FieldClaims } from "./ownership.ts";

const TASKS: ResourceInfo = {
  group: "datasync.aws.upbound.io",
  version: "v1beta1",
  resource: "tasks",
  kind: "Task",
  namespaced: true,
  verbs: ["get", "patch"],
};
const target = {
  apiVersion: "datasync.aws.upbound.io/v1beta1",
  kind: "Task",
  namespace: "b",
  name: "t",
  fieldPath: "spec.forProvider.sourceLocationArn",
};
const record = { ...target, resourceVersion: "1" };
const TASK_PATH = "/apis/datasync.aws.upbound.io/v1beta1/namespaces/b/tasks/t";

/** A Referable with the field finalizer, `created` as its creationTimestamp, and `recorded` in status.exports. */
function referable(name: string, created: string, recorded: boolean): Referable {
  return {
    metadata: {
      name,
      uid: `uid-${name}`,
      creationTimestamp: created,
      finalizers: ["referable.dev/export-fields"],
    },
    spec: { source: {}, export: [target] },
    status: recorded ? { exports: [record] } : {},
  };
}

const value = (v: unknown): ResolutionResult =>
  ({ ok: true, reason: "Available", value: v, source: undefined }) as unknown as ResolutionResult;
const none: ResolutionResult = { ok: false, error: new ResolutionError("SourceNotFound", "gone") };

/** A fake API server holding one Task; records every request. */
function fakeClient(task: Record<string, unknown>) {
  const calls: Array<{ method: string; path: string; body?: unknown; query?: unknown }> = [];
  return {
    calls,
    request: async <T>(method: string, path: string, options: { body?: unknown; query?: unknown } = {}) => {
      calls.push({ method, path, body: options.body, query: options.query });
      return (method === "GET" ? task : { metadata: { resourceVersion: "2" } }) as T;
    },
  };
}

function output(client: ReturnType<typeof fakeClient>, claims = new FieldClaims(undefined)) {
  return new FieldOutput({
    client,
    discovery: { lookup: async () => TASKS, invalidate: () => undefined },
    claims,
    minWriteIntervalMs: 0,
  });
}

const taskOwnedBy = (manager: string, operation: string, arn?: string) => ({
  metadata: {
    uid: "task-uid",
    resourceVersion: "1",
    managedFields: [
      { manager, operation, fieldsV1: { "f:spec": { "f:forProvider": { "f:sourceLocationArn": {} } } } },
    ],
  },
  spec: { forProvider: arn === undefined ? {} : { sourceLocationArn: arn } },
});

const SECRETS: ResourceInfo = {
  group: "",
  version: "v1",
  resource: "secrets",
  kind: "Secret",
  namespaced: true,
  verbs: ["get", "patch"],
};
const secretTarget = { apiVersion: "v1", kind: "Secret", namespace: "b", name: "s", fieldPath: "data.token" };

/** A Referable exporting into a field of a Secret, with `records` in status.exports. */
function secretReferable(records: ExportRecord[]): Referable {
  return {
    metadata: {
      name: "a",
      uid: "uid-a",
      creationTimestamp: "2026-01-01T00:00:00Z",
      finalizers: ["referable.dev/export-fields"],
    },
    spec: { source: {}, export: [secretTarget] },
    status: { exports: records },
  };
}

function secretOutput(client: ReturnType<typeof fakeClient>, allowSecrets?: boolean) {
  return new FieldOutput({
    client,
    discovery: { lookup: async () => SECRETS, invalidate: () => undefined },
    claims: new FieldClaims(undefined),
    minWriteIntervalMs: 0,
    ...(allowSecrets !== undefined && { allowSecrets }),
  });
}

describe("FieldOutput and Secrets", () => {
  const secret = {
    metadata: {
      uid: "s-uid",
      resourceVersion: "1",
      managedFields: [
        { manager: "referable.dev/a", operation: "Apply", fieldsV1: { "f:data": { "f:token": {} } } },
      ],
    },
    data: { token: "b2xk" },
  };

  it("without --allow-secret-export, a field of a Secret is ExportForbidden: no intent, no read, no write", async () => {
    const client = fakeClient(secret);
    const step = await secretOutput(client).write(secretReferable([]), value("c2VjcmV0"), newFieldsMemory());
    expect(client.calls).toEqual([]);
    expect(step.state).toMatchObject({ reason: "ExportForbidden", exports: [secretTarget] });
    expect(step.state?.message).toContain("--allow-secret-export");
  });

  it("without it, releases what it wrote there before the flag was turned off, and keeps the intent only", async () => {
    const client = fakeClient(secret);
    const step = await secretOutput(client).write(
      secretReferable([{ ...secretTarget, resourceVersion: "1" }]),
      value("c2VjcmV0"),
      newFieldsMemory(),
    );
    const patch = client.calls.find((c) => c.method === "PATCH")!;
    expect(JSON.parse(JSON.stringify(patch.body))).toEqual({
      apiVersion: "v1",
      kind: "Secret",
      metadata: { name: "s", namespace: "b", uid: "s-uid" },
    });
    expect(step.state).toMatchObject({ reason: "ExportForbidden", exports: [secretTarget] });
  });

  it("with it, writes the field", async () => {
    const client = fakeClient({ metadata: { uid: "s-uid", resourceVersion: "1" }, data: {} });
    const step = await secretOutput(client, true).write(
      secretReferable([secretTarget]),
      value("c2VjcmV0"),
      newFieldsMemory(),
    );
    expect(step.state?.reason).toBe("Exported");
    const patch = client.calls.find((c) => c.method === "PATCH")!;
    expect(JSON.parse(JSON.stringify(patch.body))).toMatchObject({ data: { token: "c2VjcmV0" } });
  });
});

describe("FieldOutput", () => {
  it.each([
    { reason: "the read pivot", fieldPath: "spec.source.namespace" },
    { reason: "the write pivot", fieldPath: "spec.export" },
  ])(
    "reports $reason (a field of another Referable) as InvalidSpec and sends nothing, whatever the CRD let by",
    async ({ fieldPath }) => {
      const client = fakeClient(taskOwnedBy("x", "Update"));
      const obj = referable("a", "2026-01-01T00:00:00Z", false);
      obj.spec!.export = [
        { apiVersion: "referable.dev/v1alpha1", kind: "Referable", name: "victim", fieldPath },
      ];
      const step = await output(client).write(obj, value("kube-system"), newFieldsMemory());
      expect(step.state).toMatchObject({ status: "False", reason: "InvalidSpec" });
      expect(step.state?.message).toContain(
        "spec.export[0] must not name a Referable of referable.dev/v1alpha1: no value is exported into such an object",
      );
      expect(client.calls).toEqual([]);
    },
  );

  it("records a new field in status.exports before any request to it (intent before write)", async () => {
    const client = fakeClient(taskOwnedBy("x", "Update"));
    const step = await output(client).write(
      referable("a", "2026-01-01T00:00:00Z", false),
      value("arn:a"),
      newFieldsMemory(),
    );
    expect(client.calls).toEqual([]);
    expect(step.state).toEqual({
      exports: [target],
      status: "Unknown",
      reason: "Pending",
      message: expect.stringContaining("before writing"),
    });
    expect(step.thenRequeue).toBe(true);
  });

  it("applies the field under the Referable's manager, with the uid read, not forced", async () => {
    const task = { metadata: { uid: "task-uid", resourceVersion: "1" }, spec: { forProvider: {} } };
    const c2 = fakeClient(task);
    const step = await output(c2).write(
      referable("a", "2026-01-01T00:00:00Z", true),
      value("arn:a"),
      newFieldsMemory(),
    );
    expect(step.state?.reason).toBe("Exported");
    const patch = c2.calls.find((c) => c.method === "PATCH")!;
    expect(patch.path).toBe(TASK_PATH);
    expect(patch.query).toEqual({ fieldManager: "referable.dev/a", force: false });
    expect(JSON.parse(JSON.stringify(patch.body))).toEqual({
      apiVersion: "datasync.aws.upbound.io/v1beta1",
      kind: "Task",
      metadata: { name: "t", namespace: "b", uid: "task-uid" },
      spec: { forProvider: { sourceLocationArn: "arn:a" } },
    });
  });

  it("a field another manager owns with another value is ExportConflict naming it, and nothing is written", async () => {
    const client = fakeClient(taskOwnedBy("platform-team", "Apply", "arn:theirs"));
    const step = await output(client).write(
      referable("a", "2026-01-01T00:00:00Z", true),
      value("arn:a"),
      newFieldsMemory(),
    );
    expect(step.state).toMatchObject({ status: "False", reason: "ExportConflict" });
    expect(step.state?.message).toContain('"platform-team"');
    expect(client.calls.filter((c) => c.method === "PATCH")).toEqual([]);
  });

  it("among two Referables naming one field, the later created is ExportConflict naming the first, and is asked to look again when the first is cached", async () => {
    const client = fakeClient({
      metadata: { uid: "task-uid", resourceVersion: "1" },
      spec: { forProvider: {} },
    });
    const enqueued: string[] = [];
    const claims = new FieldClaims((n) => enqueued.push(n));
    const out = output(client, claims);
    const a = referable("a", "2026-01-01T00:00:00Z", true);
    const b = referable("b", "2026-01-02T00:00:00Z", true);
    claims.follow(b);
    expect(enqueued).toEqual([]);
    claims.follow(a);
    expect(enqueued).toEqual(["b"]);
    const first = await out.write(a, value("arn:a"), newFieldsMemory());
    expect(first.state?.reason).toBe("Exported");
    const later = await out.write(b, value("arn:b"), newFieldsMemory());
    expect(later.state).toMatchObject({ reason: "ExportConflict" });
    expect(later.state?.message).toContain("exported by the Referable a, created first");
  });

  it("with no value, lets go of a field it owns (an apply without it), and says NoValue", async () => {
    const client = fakeClient(taskOwnedBy("referable.dev/a", "Apply", "arn:a"));
    const step = await output(client).write(
      referable("a", "2026-01-01T00:00:00Z", true),
      none,
      newFieldsMemory(),
    );
    expect(step.state).toMatchObject({ status: "False", reason: "NoValue" });
    const patch = client.calls.find((c) => c.method === "PATCH")!;
    expect(JSON.parse(JSON.stringify(patch.body))).toEqual({
      apiVersion: "datasync.aws.upbound.io/v1beta1",
      kind: "Task",
      metadata: { name: "t", namespace: "b", uid: "task-uid" },
    });
  });

  it("refuses a spec naming one field twice, or one inside another, keeping the records", async () => {
    const client = fakeClient({});
    const rf = referable("a", "2026-01-01T00:00:00Z", true);
    rf.spec!.export = [target, { ...target, fieldPath: "spec.forProvider" }];
    const step = await output(client).write(rf, value("arn:a"), newFieldsMemory());
    expect(step.state).toMatchObject({ reason: "InvalidSpec", exports: [record] });
    expect(client.calls).toEqual([]);
  });
});
