import { ResolutionError } from "../../api/errors.ts";
import { ApiError } from "../../kube/client.ts";
import { ExportError } from "./errors.ts";
import type { ResolutionResult } from "../../resolver/types.ts";
import {
  conflictingKeys,
  EXPORT_FINALIZER,
  KeysOutput,
  newKeysMemory,
  type KeysOutputOptions,
  type KeysStep,
} from "./output.ts";
import type { Referable } from "../../api/referable.ts";

const value = (v: unknown): ResolutionResult => ({ ok: true, reason: "Available", value: v });

function referable(finalizers?: string[]): Referable {
  return {
    metadata: { name: "rf", uid: "u1", generation: 1, ...(finalizers ? { finalizers } : {}) },
    spec: { export: [{ kind: "ConfigMap", namespace: "team-b", name: "app", key: "K" }] },
  };
}

/** A client that answers each request with `answer(method, path)`, recording them. */
function fakeClient(answer: (method: string, path: string, body: unknown) => unknown) {
  const calls: string[] = [];
  return {
    calls,
    request: async <T>(method: string, path: string, options?: { body?: unknown }): Promise<T> => {
      calls.push(`${method} ${path}`);
      const got = answer(method, path, options?.body);
      if (got instanceof Error) throw got;
      return got as T;
    },
  };
}

/** The status a step asks for, as the reconciler writes it. */
function statusOf(state: KeysStep["state"], before: Referable["status"]): Referable["status"] {
  if (state === undefined) return before;
  if (state === null) return undefined;
  return {
    exports: state.exports,
    conditions: [
      {
        type: "Exported",
        status: state.status,
        reason: state.reason,
        message: state.message,
        lastTransitionTime: "",
      },
    ],
  };
}

/**
 * The output as the reconciler runs it for one Referable: its memory kept between calls, the
 * status each step asks for written back, and a step that asks for another look (the intent
 * recorded, the writes next) looked at again at once. Resolves with the last step.
 */
function exporter(options: KeysOutputOptions) {
  const output = new KeysOutput(options);
  const memory = newKeysMemory();
  let status: Referable["status"];
  return {
    get status() {
      return status;
    },
    sync: async (obj: Referable, result: ResolutionResult): Promise<KeysStep> => {
      let current = obj;
      let metadata: KeysStep["metadata"];
      for (let pass = 0; ; pass++) {
        const step = await output.write({ ...current, status }, result, memory);
        status = statusOf(step.state, status);
        if (step.metadata) {
          metadata = step.metadata;
          current = { ...current, metadata: { ...current.metadata, finalizers: step.metadata.finalizers } };
        }
        if (!step.thenRequeue || pass >= 3) return metadata && !step.metadata ? { ...step, metadata } : step;
      }
    },
  };
}

describe("KeysOutput", () => {
  it("adds the finalizer before writing any key, and goes on from the Referable it returns", async () => {
    const client = fakeClient((method, path) =>
      path.includes("/referables/")
        ? { metadata: { resourceVersion: "2", finalizers: [EXPORT_FINALIZER] } }
        : method === "GET"
          ? new ApiError("GET", "/x", 404, "NotFound", "not found")
          : { metadata: { uid: "cm", resourceVersion: "7" } },
    );
    const step = await exporter({ client }).sync(referable(), value("v"));
    expect(step).toMatchObject({
      state: { reason: "Exported" },
      metadata: { resourceVersion: "2", finalizers: [EXPORT_FINALIZER] },
    });
    expect(client.calls).toEqual([
      "PATCH /apis/referable.dev/v1alpha1/referables/rf",
      "GET /api/v1/namespaces/team-b/configmaps/app",
      "PATCH /api/v1/namespaces/team-b/configmaps/app",
    ]);
  });

  it("asks to look again, writing nothing, when the Referable changed since it was read", async () => {
    const client = fakeClient(() => new ApiError("PATCH", "/x", 422, "Invalid", "test failed"));
    const step = await exporter({ client }).sync(referable(), value("v"));
    expect(step).toMatchObject({ state: undefined, requeue: true });
    expect(client.calls).toEqual(["PATCH /apis/referable.dev/v1alpha1/referables/rf"]);
  });

  it("says what RBAC is missing when the finalizer cannot be added, and backs off", async () => {
    const forbidden = new ApiError("PATCH", "/x", 403, "Forbidden", "cannot patch referables");
    const client = fakeClient(() => forbidden);
    const output = exporter({ client, minRetryMs: 100, maxRetryMs: 250 });
    const waits: Array<number | undefined> = [];
    for (let i = 0; i < 3; i++) {
      const step = await output.sync(referable(), value("v"));
      expect(step.state).toMatchObject({ status: "False", reason: "ExportFailed" });
      expect(step.state?.message).toContain("needs patch on referables.referable.dev");
      waits.push(step.retryAfterMs);
    }
    expect(waits).toEqual([100, 200, 250]);
  });

  it("never writes a Secret without allowSecrets, and never reads one", async () => {
    const client = fakeClient(() => new Error("no request expected"));
    const obj = referable([EXPORT_FINALIZER]);
    obj.spec!.export = [{ kind: "Secret", namespace: "team-b", name: "creds", key: "K" }];
    const step = await exporter({ client }).sync(obj, value("v"));
    expect(step.state).toMatchObject({ status: "False", reason: "ExportForbidden" });
    expect(step.state?.message).toContain("--allow-secret-export");
    expect(client.calls).toEqual([]);
  });

  it("writes nothing and reads nothing again while the value stays the same", async () => {
    let rv = 1;
    const client = fakeClient((method) =>
      method === "GET"
        ? new ApiError("GET", "/x", 404, "NotFound", "not found")
        : { metadata: { uid: "cm", resourceVersion: String(rv++) } },
    );
    const output = exporter({ client, minWriteIntervalMs: 0 });
    const obj = referable([EXPORT_FINALIZER]);
    const first = await output.sync(obj, value({ host: "db" }));
    expect(first).toMatchObject({ state: { status: "True", reason: "Exported" } });
    expect(client.calls).toEqual([
      "GET /api/v1/namespaces/team-b/configmaps/app",
      "PATCH /api/v1/namespaces/team-b/configmaps/app",
    ]);
    const again = await output.sync(obj, value({ host: "db" }));
    expect(again).toEqual(first);
    expect(client.calls).toHaveLength(2);
    // A new value: one apply straight to the object it wrote before, no read.
    await output.sync(obj, value({ host: "db2" }));
    expect(client.calls.slice(2)).toEqual(["PATCH /api/v1/namespaces/team-b/configmaps/app"]);
  });

  it("writes a hot source's changes at most once per interval, and the last one always", async () => {
    let now = 1000;
    const client = fakeClient((method) =>
      method === "GET"
        ? new ApiError("GET", "/x", 404, "NotFound", "not found")
        : { metadata: { uid: "cm", resourceVersion: "1" } },
    );
    const output = exporter({ client, minWriteIntervalMs: 100, clock: () => now });
    const obj = referable([EXPORT_FINALIZER]);
    await output.sync(obj, value("v1"));
    const writes = () => client.calls.filter((c) => c.startsWith("PATCH")).length;
    expect(writes()).toBe(1);
    now += 30;
    // Held back: the status keeps what it says (undefined carries it over), and a retry is due.
    expect(await output.sync(obj, value("v2"))).toEqual({ state: undefined, retryAfterMs: 70 });
    now += 30;
    expect(await output.sync(obj, value("v3"))).toEqual({ state: undefined, retryAfterMs: 40 });
    expect(writes()).toBe(1);
    now += 40;
    expect(await output.sync(obj, value("v3"))).toMatchObject({ state: { reason: "Exported" } });
    expect(writes()).toBe(2);
  });

  it("removes the keys when there is no value, and says so", async () => {
    const client = fakeClient((method) =>
      method === "GET" ? new ApiError("GET", "/x", 404, "NotFound", "not found") : {},
    );
    const step = await exporter({ client }).sync(referable([EXPORT_FINALIZER]), {
      ok: false,
      error: new ResolutionError("SourceNotFound", "ConfigMap team-a/db does not exist"),
    });
    expect(step).toMatchObject({ state: { status: "False", reason: "NoValue", exports: [] } });
    // The object does not exist: nothing to remove, and nothing is created.
    expect(client.calls).toEqual(["GET /api/v1/namespaces/team-b/configmaps/app"]);
  });

  it("records the intent in the status before the first write into a target, and writes on the next look", async () => {
    const client = fakeClient((method) =>
      method === "GET"
        ? new ApiError("GET", "/x", 404, "NotFound", "not found")
        : { metadata: { uid: "cm", resourceVersion: "7" } },
    );
    const output = new KeysOutput({ client });
    const memory = newKeysMemory();
    const obj = referable([EXPORT_FINALIZER]);
    const intent = await output.write(obj, value("v"), memory);
    // Nothing written yet: the status first names the key, without a resourceVersion.
    expect(client.calls).toEqual([]);
    expect(intent).toMatchObject({
      thenRequeue: true,
      state: {
        status: "Unknown",
        reason: "Pending",
        exports: [{ kind: "ConfigMap", namespace: "team-b", name: "app", key: "K" }],
      },
    });
    expect(intent.state!.exports[0]!.resourceVersion).toBeUndefined();
    const written = await output.write(
      { ...obj, status: { exports: intent.state!.exports } },
      value("v"),
      memory,
    );
    expect(client.calls).toEqual([
      "GET /api/v1/namespaces/team-b/configmaps/app",
      "PATCH /api/v1/namespaces/team-b/configmaps/app",
    ]);
    expect(written.state).toMatchObject({
      reason: "Exported",
      exports: [{ kind: "ConfigMap", namespace: "team-b", name: "app", key: "K", resourceVersion: "7" }],
    });
  });

  it("keeps the record of a key whose write failed, so a later sweep still finds it", async () => {
    const client = fakeClient((method) =>
      method === "GET"
        ? { metadata: { uid: "cm", resourceVersion: "3" }, data: {} }
        : new ApiError("PATCH", "/x", 500, "InternalError", "etcd is away"),
    );
    const pending = [{ kind: "ConfigMap", namespace: "team-b", name: "app", key: "K" }];
    const obj = { ...referable([EXPORT_FINALIZER]), status: { exports: pending } };
    const step = await new KeysOutput({ client }).write(obj, value("v"), newKeysMemory());
    expect(step.state).toMatchObject({ reason: "ExportFailed", exports: pending });
  });

  it("with Secrets no longer allowed, removes the keys it wrote into a Secret before, and says why none is written", async () => {
    const owned = {
      metadata: {
        uid: "s1",
        resourceVersion: "5",
        annotations: { "referable.dev/created-by": "rf" },
        managedFields: [
          { manager: "referable.dev/rf", operation: "Apply", fieldsV1: { "f:data": { "f:K": {} } } },
        ],
      },
      data: { K: "dg==" },
    };
    const client = fakeClient((method) => (method === "GET" ? owned : {}));
    const obj = referable([EXPORT_FINALIZER]);
    obj.spec!.export = [{ kind: "Secret", namespace: "team-b", name: "creds", key: "K" }];
    obj.status = {
      exports: [{ kind: "Secret", namespace: "team-b", name: "creds", key: "K", resourceVersion: "5" }],
    };
    const step = await new KeysOutput({ client }).write(obj, value("v"), newKeysMemory());
    // Created by this Referable and holding nothing else: deleted, with preconditions.
    expect(client.calls).toEqual([
      "GET /api/v1/namespaces/team-b/secrets/creds",
      "DELETE /api/v1/namespaces/team-b/secrets/creds",
    ]);
    expect(step.state).toMatchObject({ reason: "ExportForbidden", exports: [] });
    expect(step.state?.message).toContain("--allow-secret-export");
  });

  it("with Secrets no longer allowed and no right to remove them, keeps the records and says so", async () => {
    const client = fakeClient(() => new ApiError("GET", "/x", 403, "Forbidden", "cannot get secrets"));
    const obj = referable([EXPORT_FINALIZER]);
    obj.spec!.export = [{ kind: "Secret", namespace: "team-b", name: "creds", key: "K" }];
    const records = [{ kind: "Secret", namespace: "team-b", name: "creds", key: "K", resourceVersion: "5" }];
    obj.status = { exports: records };
    const step = await new KeysOutput({ client }).write(obj, value("v"), newKeysMemory());
    expect(step.state).toMatchObject({ reason: "ExportForbidden", exports: records });
    expect(step.state?.message).toContain(
      "could not remove the keys written before --allow-secret-export was turned off",
    );
  });

  it("on deletion says why a key it wrote could not be removed, and keeps the finalizer", async () => {
    const client = fakeClient(() => new ApiError("GET", "/x", 403, "Forbidden", "cannot get secrets"));
    const obj = referable([EXPORT_FINALIZER]);
    obj.spec!.export = [{ kind: "Secret", namespace: "team-b", name: "creds", key: "K" }];
    obj.status = {
      exports: [{ kind: "Secret", namespace: "team-b", name: "creds", key: "K", resourceVersion: "5" }],
    };
    const memory = newKeysMemory();
    const wait = await new KeysOutput({ client, minRetryMs: 100 }).release(obj, memory);
    expect(wait).toBe(100);
    expect(client.calls).toEqual(["GET /api/v1/namespaces/team-b/secrets/creds"]);
    expect(memory.releaseProblem?.reason).toBe("ExportForbidden");
    expect(memory.releaseProblem?.message).toContain(`keeps its finalizer ${EXPORT_FINALIZER}`);
  });

  it("keeps the records of an object the write policy holds back, while another target reports a problem", async () => {
    let now = 1000;
    const client = fakeClient((method) =>
      method === "GET"
        ? { metadata: { uid: "cm", resourceVersion: "3" }, data: {} }
        : { metadata: { uid: "cm", resourceVersion: "4" } },
    );
    const output = new KeysOutput({ client, clock: () => now });
    const memory = newKeysMemory();
    const obj = referable([EXPORT_FINALIZER]);
    const records = [{ kind: "ConfigMap", namespace: "team-b", name: "app", key: "K", resourceVersion: "4" }];
    obj.spec!.export!.push({ kind: "Secret", namespace: "team-b", name: "creds", key: "K" });
    obj.status = { exports: records };
    await output.write(obj, value("v1"), memory);
    now += 10;
    const held = await output.write(obj, value("v2"), memory);
    expect(held.state).toMatchObject({ reason: "ExportForbidden", exports: records });
    expect(held.retryAfterMs).toBeGreaterThan(0);
  });
});

describe("KeysOutput and apply conflicts", () => {
  it("keeps a key another manager took as an intent only: no resourceVersion, no churn of intents", async () => {
    const client = fakeClient((method) =>
      method === "GET"
        ? { metadata: { uid: "cm", resourceVersion: "5" }, data: { K: "by-hand" } }
        : new ApiError(
            "PATCH",
            "/x",
            409,
            "Conflict",
            'Apply failed with 1 conflict: conflict with "kubectl-patch" using v1: .data.K',
            undefined,
            { causes: [{ reason: "FieldManagerConflict", field: ".data.K" }] },
          ),
    );
    const obj = referable([EXPORT_FINALIZER]);
    obj.status = {
      exports: [{ kind: "ConfigMap", namespace: "team-b", name: "app", key: "K", resourceVersion: "4" }],
    };
    const step = await new KeysOutput({ client }).write(obj, value("v"), newKeysMemory());
    expect(step.state).toMatchObject({ reason: "ExportConflict" });
    expect(step.state?.exports).toEqual([{ kind: "ConfigMap", namespace: "team-b", name: "app", key: "K" }]);
    expect(step.thenRequeue).toBeUndefined();
  });
});

describe("conflictingKeys", () => {
  const conflict = (...fields: string[]) =>
    new ApiError("PATCH", "/x", 409, "Conflict", "Apply failed", undefined, {
      causes: fields.map((field) => ({ reason: "FieldManagerConflict", field })),
    });
  it.each([
    {
      why: "one conflict, as the API server names it (a cause at .data.K)",
      err: new ExportError("ExportConflict", "another writer owns the key", {
        cause: conflict(".data.DB_HOST"),
      }),
      want: ["DB_HOST"],
    },
    {
      why: "several, keys with dots, the API error itself",
      err: conflict(".data.a.b", ".data.C_1"),
      want: ["a.b", "C_1"],
    },
    {
      why: "a conflict on another field is no key",
      err: conflict(".metadata.labels.app"),
      want: [],
    },
    {
      why: "the server's message is never read for keys",
      err: new ApiError("PATCH", "/x", 409, "Conflict", 'conflict with "x" using v1: .data.K'),
      want: [],
    },
  ])("$why", ({ err, want }) => {
    expect([...conflictingKeys(err)]).toEqual(want);
  });
});
