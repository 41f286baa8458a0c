import {
  describeFieldObject,
  mergeInto,
  nest,
  overlapping,
  parseFieldTarget,
  parseWritePath,
  valueAt,
} from "./target.ts";

describe("parseWritePath", () => {
  const ok: Array<{ reason: string; path: string; want: string[] }> = [
    {
      reason: "dotted names of a managed resource's spec",
      path: "spec.forProvider.sourceLocationArn",
      want: ["spec", "forProvider", "sourceLocationArn"],
    },
    {
      reason: "an unquoted map key may hold dots and slashes",
      path: "spec.template.metadata.annotations[example.com/db-host]",
      want: ["spec", "template", "metadata", "annotations", "example.com/db-host"],
    },
    { reason: "a quoted key of digits is a key, not an index", path: "data['0']", want: ["data", "0"] },
    {
      reason: "one annotation of metadata",
      path: "metadata.annotations[a.b/c]",
      want: ["metadata", "annotations", "a.b/c"],
    },
    {
      reason: "one label of metadata, dotted",
      path: "metadata.labels.team",
      want: ["metadata", "labels", "team"],
    },
  ];
  it.each(ok)("$reason", ({ path, want }) => expect(parseWritePath(path)).toEqual(want));

  const refused: Array<{ reason: string; path: string; says: string }> = [
    {
      reason: "a list index: a list item is owned by its merge key",
      path: "spec.forProvider.tags[0]",
      says: "list index ([0])",
    },
    { reason: "a filter", path: 'status.conditions[?(@.type=="Ready")].status', says: "filter" },
    { reason: "JSONPath", path: "{.spec.x}", says: "not JSONPath" },
    { reason: "JSONPath with $", path: "$.spec.x", says: "not JSONPath" },
    {
      reason: "status, written by the object's controller",
      path: "status.atProvider.arn",
      says: "under status",
    },
    {
      reason: "metadata other than a label or an annotation",
      path: "metadata.name",
      says: "one label or annotation",
    },
    { reason: "all annotations at once", path: "metadata.annotations", says: "one label or annotation" },
    { reason: "a whole top-level field", path: "spec", says: "inside spec" },
    { reason: "the kind", path: "kind.x", says: "not its kind" },
    { reason: "an empty path", path: "", says: "1 to 1024" },
    { reason: "a path that does not parse", path: "spec..x", says: "expected a field name" },
  ];
  it.each(refused)("refuses $reason", ({ path, says }) => {
    const got = parseWritePath(path);
    expect(typeof got).toBe("string");
    expect(got).toContain(says);
  });
});

describe("parseFieldTarget", () => {
  const base = {
    apiVersion: "datasync.aws.upbound.io/v1beta1",
    kind: "Task",
    namespace: "team-b",
    name: "t",
    fieldPath: "spec.forProvider.x",
  };
  it("defaults the policy to Always, and a cluster-scoped target's namespace to empty", () => {
    expect(parseFieldTarget(base, "e")).toMatchObject({
      policy: "Always",
      path: ["spec", "forProvider", "x"],
    });
    const { namespace: _, ...clusterScoped } = base;
    expect(parseFieldTarget(clusterScoped, "e")).toMatchObject({ namespace: "" });
  });
  const refused: Array<{ reason: string; raw: unknown; says: string }> = [
    {
      reason: "an apiVersion that cannot be one",
      raw: { ...base, apiVersion: "Not/A/Version" },
      says: "e.apiVersion",
    },
    { reason: "a kind that cannot be one", raw: { ...base, kind: "task-x" }, says: "e.kind" },
    { reason: "both a key and a fieldPath", raw: { ...base, key: "K" }, says: "not both" },
    { reason: "an unknown policy", raw: { ...base, policy: "Sometimes" }, says: "Always or IfNotPresent" },
    {
      reason: "a list index, with its place",
      raw: { ...base, fieldPath: "spec.x[3]" },
      says: "e.fieldPath must not hold a list index",
    },
    {
      reason: "a field under a Secret's stringData (never stored: written again for ever)",
      raw: { apiVersion: "v1", kind: "Secret", namespace: "b", name: "s", fieldPath: "stringData.token" },
      says: "e.fieldPath must not be under stringData",
    },
    {
      reason: "a stringData map key, saying what to use instead",
      raw: { apiVersion: "v1", kind: "Secret", namespace: "b", name: "s", fieldPath: "stringData[token]" },
      says: "name data.<key> with a base64 transform",
    },
  ];
  it.each(refused)("refuses $reason", ({ raw, says }) => expect(parseFieldTarget(raw, "e")).toContain(says));
  it("takes a Secret's data field, and a stringData field of another kind", () => {
    const secret = { apiVersion: "v1", kind: "Secret", namespace: "b", name: "s", fieldPath: "data.token" };
    expect(parseFieldTarget(secret, "e")).toMatchObject({ path: ["data", "token"] });
    expect(parseFieldTarget({ ...base, fieldPath: "stringData.token" }, "e")).toMatchObject({
      path: ["stringData", "token"],
    });
  });
});

describe("parseFieldTarget refuses every target that steers a controller (InvalidSpec, whatever the CRD let by)", () => {
  const target = (apiVersion: string, kind: string, fieldPath = "spec.x", namespace?: string) => ({
    apiVersion,
    kind,
    name: "n",
    fieldPath,
    ...(namespace !== undefined && { namespace }),
  });
  const refused: Array<{ reason: string; raw: unknown; says: string }> = [
    {
      reason: "the read pivot: spec.source.namespace of another Referable",
      raw: target("referable.dev/v1alpha1", "Referable", "spec.source.namespace"),
      says: "must not name a Referable of referable.dev/v1alpha1: no value is exported into such an object, because objects of the referable.dev group steer this controller",
    },
    {
      reason: "the write pivot: spec.export of another Referable",
      raw: target("referable.dev/v1alpha1", "Referable", "spec.export"),
      says: "objects of the referable.dev group steer this controller",
    },
    {
      reason: "any kind of the referable.dev group, at any version",
      raw: target("referable.dev/v1", "Other"),
      says: "referable.dev group",
    },
    {
      reason: "a RoleBinding",
      raw: target("rbac.authorization.k8s.io/v1", "RoleBinding", "roleRef.name", "team-a"),
      says: "RBAC objects",
    },
    {
      reason: "a ClusterRole",
      raw: target("rbac.authorization.k8s.io/v1", "ClusterRole", "metadata.labels.x"),
      says: "RBAC objects",
    },
    {
      reason: "a ValidatingWebhookConfiguration",
      raw: target("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration", "metadata.labels.x"),
      says: "admission configurations",
    },
    {
      reason: "a CustomResourceDefinition",
      raw: target("apiextensions.k8s.io/v1", "CustomResourceDefinition", "spec.scope"),
      says: "CustomResourceDefinitions",
    },
    {
      reason: "a Namespace",
      raw: target("v1", "Namespace", "metadata.labels[pod-security.kubernetes.io/enforce]"),
      says: "Namespaces decide",
    },
    {
      reason: "a Lease, which elects a controller's leader",
      raw: target("coordination.k8s.io/v1", "Lease", "spec.holderIdentity", "referable-system"),
      says: "Leases (coordination.k8s.io)",
    },
  ];
  it.each(refused)("refuses $reason", ({ raw, says }) => {
    const got = parseFieldTarget(raw, "spec.export[0]");
    expect(typeof got).toBe("string");
    expect(got).toContain(`spec.export[0] must not name`);
    expect(got).toContain(says);
  });
  const allowed: Array<{ reason: string; raw: unknown }> = [
    {
      reason: "a Deployment",
      raw: target("apps/v1", "Deployment", "spec.template.metadata.annotations[a]", "a"),
    },
    { reason: "a ConfigMap's field", raw: target("v1", "ConfigMap", "data.x", "a") },
    { reason: "a group that only ends like one refused", raw: target("notreferable.dev/v1", "Thing") },
    {
      reason: "an application's group under referable.dev (the examples' demo.referable.dev)",
      raw: target("datasync.demo.referable.dev/v1beta1", "Task"),
    },
    { reason: "a kind named like Namespace in another group", raw: target("example.org/v1", "Namespace") },
  ];
  it.each(allowed)("allows $reason", ({ raw }) => expect(typeof parseFieldTarget(raw, "e")).toBe("object"));
});

describe("nest, mergeInto, overlapping, valueAt", () => {
  it("builds one body for the fields of one object, keeping a key named __proto__", () => {
    const body = nest(["spec", "forProvider", "a"], "x");
    mergeInto(body, nest(["spec", "forProvider", "b"], 2));
    mergeInto(body, nest(["metadata", "annotations", "__proto__"], "p"));
    expect(JSON.parse(JSON.stringify(body))).toEqual({
      spec: { forProvider: { a: "x", b: 2 } },
      metadata: { annotations: { ["__proto__"]: "p" } },
    });
  });
  it("says when one path holds another", () => {
    expect(overlapping(["spec", "a"], ["spec", "a", "b"])).toBe(true);
    expect(overlapping(["spec", "a"], ["spec", "a"])).toBe(true);
    expect(overlapping(["spec", "a"], ["spec", "ab"])).toBe(false);
  });
  it("reads a value only through own fields", () => {
    expect(valueAt({ spec: { a: 0 } }, ["spec", "a"])).toEqual({ found: true, value: 0 });
    expect(valueAt({ spec: {} }, ["spec", "toString"])).toEqual({ found: false });
  });
  it("describes an object with its namespace, and a cluster-scoped one without", () => {
    expect(describeFieldObject({ apiVersion: "v1", kind: "Task", namespace: "b", name: "t" })).toBe(
      "Task b/t",
    );
    expect(describeFieldObject({ apiVersion: "v1", kind: "Object", namespace: "", name: "o" })).toBe(
      "Object o",
    );
  });
});
