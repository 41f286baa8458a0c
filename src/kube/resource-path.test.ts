import { groupVersionPath, LEASES, resourcePath } from "./resource-path.ts";

const DEPLOYMENTS = { group: "apps", version: "v1", resource: "deployments" };
const CONFIGMAPS = { group: "", version: "v1", resource: "configmaps" };
const REFERABLES = { group: "referable.dev", version: "v1alpha1", resource: "referables" };

describe("resourcePath", () => {
  it.each([
    {
      reason: "a core collection across namespaces",
      resource: CONFIGMAPS,
      place: {},
      want: "/api/v1/configmaps",
    },
    {
      reason: "a group's collection in a namespace",
      resource: DEPLOYMENTS,
      place: { namespace: "team-a" },
      want: "/apis/apps/v1/namespaces/team-a/deployments",
    },
    {
      reason: "an object of a namespaced resource",
      resource: LEASES,
      place: { namespace: "kube-system", name: "referable" },
      want: "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/referable",
    },
    {
      reason: "a cluster-scoped object's subresource",
      resource: REFERABLES,
      place: { name: "db", subresource: "status" },
      want: "/apis/referable.dev/v1alpha1/referables/db/status",
    },
    {
      reason: "an empty namespace is no namespace (cluster-scoped)",
      resource: REFERABLES,
      place: { namespace: "", name: "db" },
      want: "/apis/referable.dev/v1alpha1/referables/db",
    },
    {
      reason: "every segment is encoded: a name cannot step into another path or add a query",
      resource: CONFIGMAPS,
      place: { namespace: "a/b", name: "x?watch=true#y" },
      want: "/api/v1/namespaces/a%2Fb/configmaps/x%3Fwatch%3Dtrue%23y",
    },
    {
      reason: "a percent sign is encoded too, so an encoded dot segment stays a name",
      resource: CONFIGMAPS,
      place: { namespace: "n", name: "%2e%2e" },
      want: "/api/v1/namespaces/n/configmaps/%252e%252e",
    },
  ])("$reason", ({ resource, place, want }) => {
    expect(resourcePath(resource, place)).toBe(want);
  });

  it.each([
    { reason: "a dot-dot name would lead to the collection", place: { namespace: "n", name: ".." } },
    { reason: "a dot namespace would drop a segment", place: { namespace: "." } },
    { reason: "an empty name would be the collection with a slash", place: { name: "" } },
  ])("refuses a segment that cannot be one: $reason", ({ place }) => {
    expect(() => resourcePath(CONFIGMAPS, place)).toThrow(/cannot be a segment of an API path/);
  });
});

describe("groupVersionPath", () => {
  it("names the core group by /api and any other by /apis", () => {
    expect([groupVersionPath("", "v1"), groupVersionPath("apps", "v1")]).toEqual([
      "/api/v1",
      "/apis/apps/v1",
    ]);
  });
});
