import { ResolutionError } from "../../errors.ts";
import { ApiError } from "../../kube/client.ts";
import type { ResolutionResult } from "../../resolver/types.ts";
import { EXPORT_FINALIZER, KeysOutput, newKeysMemory, type KeysOutputOptions } from "./output.ts";
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

/** The output as the old Exporter was used: one Referable, its memory kept between calls. */
function exporter(options: KeysOutputOptions) {
  const output = new KeysOutput(options);
  const memory = newKeysMemory();
  return { sync: (obj: Referable, result: ResolutionResult) => output.write(obj, result, memory) };
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
});
