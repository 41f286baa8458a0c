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
