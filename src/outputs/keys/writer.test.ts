import { ApiError } from "../../kube/client.ts";
import { isExportError } from "./errors.ts";
import { takeOver } from "./takeover.ts";
import { readTarget, releaseObject, writeKey } from "./writer.ts";

const target = { kind: "ConfigMap", namespace: "b", name: "app", key: "K" } as const;
const options = { fieldManager: "referable.dev/rf" };

/** A ConfigMap as the API server returns it, with managedFields for each manager's keys. */
function configMap(managers: Record<string, string[]>, data: Record<string, string>, createdBy?: string) {
  return {
    apiVersion: "v1",
    kind: "ConfigMap",
    metadata: {
      name: "app",
      namespace: "b",
      uid: "u1",
      resourceVersion: "7",
      ...(createdBy ? { annotations: { "referable.dev/created-by": createdBy } } : {}),
      managedFields: Object.entries(managers).map(([manager, keys]) => ({
        manager,
        operation: manager.startsWith("referable.dev/") ? "Apply" : "Update",
        fieldsV1: { "f:data": Object.fromEntries(keys.map((k) => [`f:${k}`, {}])) },
      })),
    },
    data,
  };
}

function fakeClient(object: unknown) {
  const calls: Array<{ method: string; body: unknown }> = [];
  return {
    calls,
    request: async <T>(method: string, _path: string, opts?: { body?: unknown }): Promise<T> => {
      calls.push({ method, body: opts?.body });
      if (method === "GET") {
        if (object === undefined) throw new ApiError("GET", "/x", 404, "NotFound", "not found");
        return object as T;
      }
      return { metadata: { uid: "u1", resourceVersion: "8" } } as T;
    },
  };
}

describe("readTarget", () => {
  it("keeps the asked and owned keys, who owns what, and nothing else of the object", async () => {
    const client = fakeClient(
      configMap({ "referable.dev/rf": ["K"], helm: ["OTHER"] }, { K: "v", OTHER: "theirs" }, "rf"),
    );
    const state = await readTarget(client, target, ["K"], options);
    expect(state).toEqual({
      exists: true,
      uid: "u1",
      resourceVersion: "7",
      values: new Map([["K", "v"]]),
      owned: new Set(["K"]),
      managersOf: new Map([["K", new Set(["referable.dev/rf"])]]),
      managed: true,
      holdsOther: true,
      createdBy: "rf",
    });
  });
});

describe("takeOver", () => {
  const legacy = "referable.dev/legacy";
  const applies = (calls: Array<{ method: string; body: unknown }>) =>
    calls.filter((c) => c.method === "PATCH").map((c) => (c.body as { data?: unknown }).data ?? {});
  const cases: Array<{
    reason: string;
    managers: Record<string, string[]>;
    moved: boolean;
    force?: boolean;
    legacyKeeps?: Record<string, string>;
  }> = [
    {
      reason: "keys under the legacy manager move, forced only against it, and the legacy manager lets go",
      managers: { [legacy]: ["K"] },
      moved: true,
      force: true,
      legacyKeeps: {},
    },
    {
      reason:
        "a key another manager owns too is applied without force (a conflict is reported, never forced)",
      managers: { [legacy]: ["K"], kubectl: ["K"] },
      moved: true,
      force: false,
      legacyKeeps: {},
    },
    {
      reason: "the legacy manager keeps the keys of a name that collided with it",
      managers: { [legacy]: ["K", "THEIRS"] },
      moved: true,
      force: true,
      legacyKeeps: { THEIRS: "t" },
    },
    {
      reason: "nothing under the legacy manager: nothing is written",
      managers: { kubectl: ["K"] },
      moved: false,
    },
  ];
  it.each(cases)("$reason", async ({ managers, moved, force, legacyKeeps }) => {
    const object = configMap(managers, { K: "v", THEIRS: "t" });
    for (const m of (object.metadata as { managedFields: Array<{ operation: string; manager: string }> })
      .managedFields)
      m.operation = m.manager === "kubectl" ? "Update" : "Apply";
    const seen: Array<{ method: string; body: unknown; query?: unknown }> = [];
    const client = {
      request: async <T>(method: string, _path: string, opts?: { body?: unknown; query?: unknown }) => {
        seen.push({ method, body: opts?.body, query: opts?.query });
        return (method === "GET" ? object : { metadata: { uid: "u1", resourceVersion: "8" } }) as T;
      },
    };
    expect(await takeOver(client, target, { K: "v2" }, "rf", legacy, options)).toBe(moved);
    const patches = seen.filter((c) => c.method === "PATCH");
    if (!moved) return expect(patches).toEqual([]);
    expect(patches.map((p) => p.query)).toEqual([
      { fieldManager: options.fieldManager, force },
      { fieldManager: legacy, force: false },
    ]);
    expect(applies(patches)).toEqual([{ K: "v2" }, legacyKeeps]);
  });
});

describe("releaseObject", () => {
  const cases: Array<{ reason: string; object: unknown; want: string; method?: string }> = [
    {
      reason:
        "an object it created that holds only its keys is deleted, with uid and resourceVersion preconditions",
      object: configMap({ "referable.dev/rf": ["K"] }, { K: "v" }, "rf"),
      want: "deleted",
      method: "DELETE",
    },
    {
      reason: "an object it created that another manager wrote into is only released",
      object: configMap({ "referable.dev/rf": ["K"], kubectl: ["X"] }, { K: "v", X: "x" }, "rf"),
      want: "released",
      method: "PATCH",
    },
    {
      reason: "an object it did not create is only released, even when it holds nothing else",
      object: configMap({ "referable.dev/rf": ["K"] }, { K: "v" }),
      want: "released",
      method: "PATCH",
    },
    {
      reason: "an object created by another Referable is only released",
      object: configMap({ "referable.dev/rf": ["K"] }, { K: "v" }, "other"),
      want: "released",
      method: "PATCH",
    },
    {
      reason: "an object it owns nothing in is left alone",
      object: configMap({ helm: ["K"] }, { K: "v" }, "rf"),
      want: "absent",
    },
    { reason: "a missing object is left alone (a removal never creates)", object: undefined, want: "absent" },
  ];
  it.each(cases)("$reason", async ({ object, want, method }) => {
    const client = fakeClient(object);
    expect(await releaseObject(client, target, "rf", options)).toBe(want);
    const writes = client.calls.filter((c) => c.method !== "GET");
    expect(writes.map((c) => c.method)).toEqual(method ? [method] : []);
    if (method === "DELETE")
      expect(writes[0]!.body).toMatchObject({ preconditions: { uid: "u1", resourceVersion: "7" } });
    if (method === "PATCH")
      // The release applies nothing but the identity (and the uid, so a re-created object is not touched).
      expect(writes[0]!.body).toEqual({
        apiVersion: "v1",
        kind: "ConfigMap",
        metadata: { name: "app", namespace: "b", uid: "u1" },
      });
  });
});

describe("exportValue", () => {
  it("refuses an undefined value without a request, as not retryable", async () => {
    const client = fakeClient(undefined);
    const err = await writeKey(client, target, undefined, options).catch((e: unknown) => e);
    expect(isExportError(err) && err.retryable).toBe(false);
    expect(client.calls).toEqual([]);
  });

  it("applies the manager's other keys again with the new one, and creates with the annotation", async () => {
    const client = fakeClient(undefined);
    await writeKey(client, target, { a: 1 }, options);
    expect(client.calls[1]!.body).toEqual({
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: {
        name: "app",
        namespace: "b",
        labels: { "referable.dev/exported": "true" },
        annotations: { "referable.dev/created-by": "referable.dev/rf" },
      },
      data: { K: '{"a":1}' },
    });
    const existing = fakeClient(configMap({ "referable.dev/rf": ["J"] }, { J: "j", OTHER: "o" }));
    await writeKey(existing, target, "v", options);
    expect(existing.calls[1]!.body).toMatchObject({ metadata: { uid: "u1" }, data: { J: "j", K: "v" } });
  });
});
