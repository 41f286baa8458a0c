import { ApiError } from "../../kube/client.ts";
import { isExportError } from "./errors.ts";
import { recordedObjects, sweepObject } from "./sweep.ts";
import type { TargetObject } from "./target.ts";

const object: TargetObject = { kind: "ConfigMap", namespace: "team-b", name: "app" };
const options = { fieldManager: "referable.dev/rf" };
const mine = { manager: "referable.dev/rf", operation: "Apply", fieldsV1: { "f:data": { "f:K": {} } } };

/** A fake of our client: GET answers `got`, every other request succeeds; all are recorded. */
function fakeClient(got: unknown) {
  const calls: Array<{ method: string; body?: unknown }> = [];
  return {
    calls,
    request: async <T>(method: string, _path: string, o?: { body?: unknown }): Promise<T> => {
      calls.push({ method, body: o?.body });
      if (method === "GET" && got instanceof Error) throw got;
      return (method === "GET" ? got : {}) as T;
    },
  };
}

const written = recordedObjects([{ ...object, key: "K", resourceVersion: "4" }]);
const intended = recordedObjects([{ ...object, key: "K" }]);

describe("sweepObject", () => {
  it.each([
    {
      why: "an object the Referable created that holds nothing else is deleted, with uid and resourceVersion preconditions",
      got: {
        metadata: {
          uid: "u",
          resourceVersion: "9",
          annotations: { "referable.dev/created-by": "rf" },
          managedFields: [mine],
        },
        data: { K: "v" },
      },
      want: "deleted",
      calls: ["GET", "DELETE"],
      body: { preconditions: { uid: "u", resourceVersion: "9" } },
    },
    {
      why: "an object it created that holds another writer's key is kept: only its fields are released",
      got: {
        metadata: {
          uid: "u",
          resourceVersion: "9",
          annotations: { "referable.dev/created-by": "rf" },
          managedFields: [mine, { manager: "kubectl", operation: "Update" }],
        },
        data: { K: "v", THEIRS: "x" },
      },
      want: "released",
      calls: ["GET", "PATCH"],
      body: { metadata: { name: "app", namespace: "team-b", uid: "u" } },
    },
    {
      why: "an object it did not create is never deleted",
      got: { metadata: { uid: "u", resourceVersion: "9", managedFields: [mine] }, data: { K: "v" } },
      want: "released",
      calls: ["GET", "PATCH"],
    },
    {
      why: "an object that holds nothing of it is left alone",
      got: {
        metadata: {
          uid: "u",
          resourceVersion: "9",
          managedFields: [{ manager: "kubectl", operation: "Update" }],
        },
      },
      want: "absent",
      calls: ["GET"],
    },
    {
      why: "an object that is gone needs nothing",
      got: new ApiError("GET", "/x", 404, "NotFound", "not found"),
      want: "absent",
      calls: ["GET"],
    },
    {
      why: "a refusal where only an intent was recorded is a key never written",
      got: new ApiError("GET", "/x", 403, "Forbidden", "cannot get configmaps"),
      recorded: intended,
      want: "never-written",
      calls: ["GET"],
    },
  ])("$why", async ({ got, want, calls, body, recorded }) => {
    const client = fakeClient(got);
    expect(await sweepObject(client, object, "rf", recorded ?? written, options)).toBe(want);
    expect(client.calls.map((c) => c.method)).toEqual(calls);
    if (body) expect(client.calls[1]!.body).toMatchObject(body);
  });

  it("a refusal where a key was written for sure is an ExportForbidden, to be reported and retried", async () => {
    const client = fakeClient(new ApiError("GET", "/x", 403, "Forbidden", "cannot get configmaps"));
    const err = await sweepObject(client, object, "rf", written, options).catch((e: unknown) => e);
    expect(isExportError(err) && err.reason).toBe("ExportForbidden");
  });
});

describe("recordedObjects", () => {
  it("tells objects written for sure (a resourceVersion recorded) from intents", () => {
    const r = recordedObjects([
      { kind: "ConfigMap", namespace: "a", name: "x", key: "K", resourceVersion: "1" },
      { kind: "Secret", namespace: "a", name: "y", key: "K" },
    ]);
    expect([...r.any].sort()).toEqual(["ConfigMap/a/x", "Secret/a/y"]);
    expect([...r.written]).toEqual(["ConfigMap/a/x"]);
  });
});
