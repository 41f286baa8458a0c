import type { JSONSchemaProps } from "./schemas.ts";
import { genericReferenceListSchema, genericReferenceSchema, genericSelectorSchema } from "./schemas.ts";
import type { ExternalReference, GenericSelector, NamedReference } from "./types.ts";

/** Every problem that would make the API server refuse the schema in a CRD, or leave a field undocumented. */
function structuralProblems(schema: JSONSchemaProps, path: string, isField: boolean): string[] {
  const problems: string[] = [];
  const anyJSON =
    schema["x-kubernetes-preserve-unknown-fields"] === true || schema["x-kubernetes-int-or-string"] === true;
  if (schema.type === undefined && !anyJSON) problems.push(`${path}: no type`);
  if (isField && !schema.description) problems.push(`${path}: no description`);
  if (schema.properties !== undefined && schema.additionalProperties !== undefined) {
    problems.push(`${path}: both properties and additionalProperties`);
  }
  if (
    (schema.properties !== undefined || schema.additionalProperties !== undefined) &&
    schema.type !== "object"
  ) {
    problems.push(`${path}: properties on a non-object`);
  }
  if (schema.type === "array" && schema.items === undefined) problems.push(`${path}: an array without items`);
  if (
    schema.type === "object" &&
    schema.properties === undefined &&
    schema.additionalProperties === undefined
  ) {
    if (!anyJSON) problems.push(`${path}: an object with no properties would be pruned empty`);
  }
  for (const name of schema.required ?? []) {
    if (schema.properties?.[name] === undefined) problems.push(`${path}: required ${name} has no schema`);
  }
  for (const key of schema["x-kubernetes-list-map-keys"] ?? []) {
    if (!schema.items?.required?.includes(key)) problems.push(`${path}: list-map key ${key} is not required`);
  }
  const declared = new Set(Object.keys(schema.properties ?? {}));
  const junctors = [...(schema.oneOf ?? []), ...(schema.anyOf ?? []), ...(schema.allOf ?? [])];
  if (schema.not !== undefined) junctors.push(schema.not);
  for (const junctor of junctors) {
    for (const key of ["type", "description", "default", "additionalProperties", "nullable"] as const) {
      if (junctor[key] !== undefined) problems.push(`${path}: ${key} inside oneOf/anyOf/allOf/not`);
    }
    for (const name of [...(junctor.required ?? []), ...Object.keys(junctor.properties ?? {})]) {
      if (!declared.has(name)) problems.push(`${path}: oneOf/anyOf/allOf/not names undeclared ${name}`);
    }
  }
  for (const rule of schema["x-kubernetes-validations"] ?? []) {
    if (!rule.message && !rule.messageExpression) problems.push(`${path}: rule ${rule.rule} has no message`);
  }
  for (const [name, child] of Object.entries(schema.properties ?? {})) {
    problems.push(...structuralProblems(child, `${path}.${name}`, true));
  }
  if (typeof schema.additionalProperties === "object") {
    problems.push(...structuralProblems(schema.additionalProperties, `${path}{*}`, false));
  }
  if (schema.items !== undefined) problems.push(...structuralProblems(schema.items, `${path}[*]`, false));
  return problems;
}

const schemas = [
  { name: "GenericReference", schema: genericReferenceSchema },
  { name: "GenericSelector", schema: genericSelectorSchema },
  { name: "GenericReferenceList", schema: genericReferenceListSchema },
];

describe("the exported schemas", () => {
  it.each(schemas)("$name is structural and documents every field", ({ name, schema }) => {
    const problems = structuralProblems(schema, name, true);
    if (problems.length > 0) throw new Error(`want a structural schema, got:\n  ${problems.join("\n  ")}`);
  });

  it.each(schemas)("$name is plain JSON, as a CRD manifest holds it", ({ schema }) => {
    expect(JSON.parse(JSON.stringify(schema))).toEqual(schema);
  });

  it.each(schemas)("$name cannot be changed by one consumer under another", ({ schema }) => {
    expect(Object.isFrozen(schema)).toBe(true);
    expect(() => {
      (schema as { description?: string }).description = "changed";
    }).toThrow(TypeError);
  });

  it("the walker finds what it looks for, so its silence means something", () => {
    const broken: JSONSchemaProps = {
      type: "object",
      properties: { a: { description: "no type" }, b: { type: "string" } },
      oneOf: [{ required: ["c"] }, { type: "string" }],
    };
    expect(structuralProblems(broken, "x", true)).toEqual([
      "x: no description",
      "x: oneOf/anyOf/allOf/not names undeclared c",
      "x: type inside oneOf/anyOf/allOf/not",
      "x.a: no type",
      "x.b: no description",
    ]);
  });
});

describe("the schemas have a field for every field of the TypeScript types, and no other", () => {
  // `satisfies Record<keyof T, true>` fails to compile when a type gains or loses a field.
  const referenceFields = {
    apiVersion: true,
    kind: true,
    name: true,
    namespace: true,
    external: true,
    fieldPath: true,
    requireConditions: true,
    default: true,
    policy: true,
    transform: true,
  } satisfies Record<keyof NamedReference | keyof ExternalReference, true>;
  const selectorFields = {
    apiVersion: true,
    kind: true,
    namespace: true,
    matchLabels: true,
    matchExpressions: true,
    fieldPath: true,
    mode: true,
    minMatch: true,
    maxMatch: true,
    sortByFieldPath: true,
    requireConditions: true,
    default: true,
    policy: true,
    transform: true,
  } satisfies Record<keyof GenericSelector, true>;

  it.each([
    { reason: "GenericReference", schema: genericReferenceSchema, fields: referenceFields },
    { reason: "GenericSelector", schema: genericSelectorSchema, fields: selectorFields },
  ])("$reason", ({ schema, fields }) => {
    expect(Object.keys(schema.properties ?? {}).sort()).toEqual(Object.keys(fields).sort());
  });
});

describe("the schemas state the contract's rules", () => {
  const ref = genericReferenceSchema;
  const sel = genericSelectorSchema;
  const rules = (s: JSONSchemaProps): string[] => (s["x-kubernetes-validations"] ?? []).map((r) => r.rule);
  const prop = (s: JSONSchemaProps, ...path: string[]): JSONSchemaProps => {
    let node = s;
    for (const p of path) {
      const next = p === "[*]" ? node.items : node.properties?.[p];
      if (next === undefined) throw new Error(`no ${path.join(".")}`);
      node = next;
    }
    return node;
  };

  it("exactly one of name and external, as a oneOf because CEL cannot see the untyped external", () => {
    expect(ref.oneOf).toEqual([{ required: ["name"] }, { required: ["external"] }]);
  });

  it.each([
    {
      reason: "fieldPath is required unless external (with exactly one of name and external)",
      got: () => rules(ref),
      want: "!has(self.name) || has(self.fieldPath)",
    },
    {
      reason: "minMatch is not above maxMatch when both are set",
      got: () => rules(sel),
      want: "!has(self.minMatch) || !has(self.maxMatch) || self.minMatch <= self.maxMatch",
    },
    {
      reason: "a list refuses a mix of external and name entries",
      got: () => rules(genericReferenceListSchema),
      want: "self.all(r, has(r.name)) || self.all(r, !has(r.name))",
    },
  ])("$reason", ({ got, want }) => {
    expect(got()).toContain(want);
  });

  it("no CEL rule names a field CEL cannot see (the API server refuses such a CRD)", () => {
    const all = [ref, sel, genericReferenceListSchema].flatMap(rules);
    for (const rule of all) expect(rule).not.toMatch(/\.(external|default)\b/);
  });

  it.each([
    { reason: "apiVersion", node: prop(ref, "apiVersion"), max: 253 },
    { reason: "kind", node: prop(ref, "kind"), max: 63 },
    { reason: "name", node: prop(ref, "name"), max: 253 },
    { reason: "namespace", node: prop(ref, "namespace"), max: 63 },
    { reason: "fieldPath of a reference", node: prop(ref, "fieldPath"), max: 1024 },
    { reason: "fieldPath of a selector", node: prop(sel, "fieldPath"), max: 1024 },
    { reason: "sortByFieldPath", node: prop(sel, "sortByFieldPath"), max: 1024 },
    { reason: "a label value", node: prop(sel, "matchExpressions", "[*]", "values", "[*]"), max: 63 },
  ])("$reason has maxLength $max", ({ node, max }) => {
    expect(node.maxLength).toBe(max);
  });

  it.each([
    { reason: "mode", node: prop(sel, "mode"), values: ["Single", "Multiple"] },
    { reason: "policy.resolve", node: prop(ref, "policy", "resolve"), values: ["Always", "IfNotPresent"] },
    {
      reason: "policy.resolution",
      node: prop(ref, "policy", "resolution"),
      values: ["Required", "Optional"],
    },
    {
      reason: "a selector operator",
      node: prop(sel, "matchExpressions", "[*]", "operator"),
      values: ["In", "NotIn", "Exists", "DoesNotExist"],
    },
  ])("$reason is an enum", ({ node, values }) => {
    expect(node.enum).toEqual(values);
  });

  it.each([
    { reason: "minMatch may be 0, so that no match is an empty list", node: prop(sel, "minMatch"), min: 0 },
    { reason: "maxMatch keeps at least one", node: prop(sel, "maxMatch"), min: 1 },
  ])("$reason", ({ node, min }) => {
    expect(node.type).toBe("integer");
    expect(node.minimum).toBe(min);
  });

  it.each([
    { reason: "external of a reference", node: prop(ref, "external") },
    { reason: "default of a reference", node: prop(ref, "default") },
    { reason: "default of a selector", node: prop(sel, "default") },
  ])("$reason holds any JSON", ({ node }) => {
    expect(node["x-kubernetes-preserve-unknown-fields"]).toBe(true);
    // A type would restrict it: `external: "arn:..."` and `default: {a: 1}` must both be accepted.
    expect(node.type).toBeUndefined();
  });

  it.each([
    { reason: "apiVersion of a core kind", pattern: prop(ref, "apiVersion").pattern, value: "v1", ok: true },
    {
      reason: "apiVersion of a group",
      pattern: prop(ref, "apiVersion").pattern,
      value: "datasync.aws.upbound.io/v1beta1",
      ok: true,
    },
    {
      reason: "apiVersion with a kind in it",
      pattern: prop(ref, "apiVersion").pattern,
      value: "apps/v1/Deployment",
      ok: false,
    },
    { reason: "a kind", pattern: prop(ref, "kind").pattern, value: "LocationS3", ok: true },
    { reason: "a kind with a dot", pattern: prop(ref, "kind").pattern, value: "apps.Deployment", ok: false },
    { reason: "a namespace", pattern: prop(ref, "namespace").pattern, value: "team-a", ok: true },
    { reason: "an uppercase namespace", pattern: prop(ref, "namespace").pattern, value: "Team-A", ok: false },
    {
      reason: "a prefixed label key",
      pattern: prop(sel, "matchExpressions", "[*]", "key").pattern,
      value: "app.kubernetes.io/name",
      ok: true,
    },
    {
      reason: "a label key name over 63 characters",
      pattern: prop(sel, "matchExpressions", "[*]", "key").pattern,
      value: "a".repeat(64),
      ok: false,
    },
    {
      reason: "an empty label value",
      pattern: prop(sel, "matchExpressions", "[*]", "values", "[*]").pattern,
      value: "",
      ok: true,
    },
    {
      reason: "a label value with a slash",
      pattern: (prop(sel, "matchLabels").additionalProperties as JSONSchemaProps).pattern,
      value: "a/b",
      ok: false,
    },
  ])("pattern: $reason is ok=$ok", ({ pattern, value, ok }) => {
    if (pattern === undefined) throw new Error("want a pattern");
    expect(new RegExp(pattern).test(value)).toBe(ok);
  });
});
