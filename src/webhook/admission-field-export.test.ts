import { ResolutionError } from "../api/errors.ts";
import type { KindResolver, ResourceInfo } from "../kube/discovery.ts";
import { fieldExportPermissions } from "./admission-field-export.ts";
import type { AdmissionRequest } from "./admission-review.ts";

const served: Record<string, ResourceInfo> = {
  "apps/v1/Deployment": {
    group: "apps",
    version: "v1",
    resource: "deployments",
    kind: "Deployment",
    namespaced: true,
    verbs: [],
  },
  "x.io/v1/Object": {
    group: "x.io",
    version: "v1",
    resource: "objects",
    kind: "Object",
    namespaced: false,
    verbs: [],
  },
};
const discovery: KindResolver = {
  lookup: async (apiVersion, kind) => {
    if (apiVersion === "not a version") throw new ResolutionError("InvalidSpec", "bad apiVersion");
    const info = served[`${apiVersion}/${kind}`];
    if (!info) throw new ResolutionError("KindNotFound", `${kind} is not served`);
    return info;
  },
  invalidate: () => undefined,
};

const request = (exports: unknown[], old?: unknown[]): AdmissionRequest =>
  ({
    uid: "u",
    operation: old ? "UPDATE" : "CREATE",
    userInfo: { username: "erin" },
    object: { spec: { export: exports } },
    oldObject: old ? { spec: { export: old } } : undefined,
  }) as unknown as AdmissionRequest;

const field = (apiVersion: string, kind: string, name: string, namespace?: string) => ({
  apiVersion,
  kind,
  name,
  ...(namespace ? { namespace } : {}),
  fieldPath: "spec.x.y",
});

describe("fieldExportPermissions", () => {
  const cases: Array<{ reason: string; req: AdmissionRequest; want: unknown[] }> = [
    {
      reason: "patch of the named object, in its namespace, of the resource discovery serves; no create",
      req: request([field("apps/v1", "Deployment", "web", "team-b")]),
      want: [
        {
          verb: "patch",
          group: "apps",
          version: "v1",
          resource: "deployments",
          namespace: "team-b",
          name: "web",
        },
      ],
    },
    {
      reason: "a cluster-scoped kind is asked cluster-wide",
      req: request([field("x.io/v1", "Object", "o", "ignored")]),
      want: [{ verb: "patch", group: "x.io", version: "v1", resource: "objects", namespace: "", name: "o" }],
    },
    {
      reason: "a kind not served yet: every resource of its group there",
      req: request([field("later.io/v1", "Thing", "t", "team-b")]),
      want: [{ verb: "patch", group: "later.io", version: "v1", resource: "*", namespace: "team-b" }],
    },
    {
      reason: "an update asks for the targets it drops too, once each",
      req: request(
        [field("apps/v1", "Deployment", "web", "b")],
        [field("apps/v1", "Deployment", "old", "b"), field("apps/v1", "Deployment", "web", "b")],
      ),
      want: [
        { verb: "patch", group: "apps", version: "v1", resource: "deployments", namespace: "b", name: "web" },
        { verb: "patch", group: "apps", version: "v1", resource: "deployments", namespace: "b", name: "old" },
      ],
    },
    {
      reason: "key targets and an apiVersion that cannot be one are not this check's",
      req: request([
        { kind: "ConfigMap", namespace: "b", name: "c", key: "K" },
        field("not a version", "X", "x", "b"),
      ]),
      want: [],
    },
  ];
  it.each(cases)("$reason", async ({ req, want }) => {
    expect(await fieldExportPermissions(req, discovery)).toEqual(want);
  });

  it("throws what discovery cannot answer, so the webhook refuses", async () => {
    const failing: KindResolver = {
      lookup: async () => {
        throw new Error("connection refused");
      },
      invalidate: () => undefined,
    };
    await expect(
      fieldExportPermissions(request([field("apps/v1", "Deployment", "web", "b")]), failing),
    ).rejects.toThrow("connection refused");
  });
});
