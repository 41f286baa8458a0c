import { compileRequest, type AnyReference, type CompiledRequest } from "./request.ts";

const byName = {
  apiVersion: "v1",
  kind: "ConfigMap",
  namespace: "team-a",
  name: "db",
  fieldPath: "data.url",
};

/** Every field of a compiled request, read as the resolver reads them. */
function fields(request: CompiledRequest): Record<string, unknown> {
  const keys = Object.keys(compileRequest({ ...byName, default: "x" })) as (keyof CompiledRequest)[];
  return Object.fromEntries(keys.map((k) => [k, request[k]]));
}

describe("a plain reference by name shares what it has in common with others of its path", () => {
  it("reads as the request of every field would, default aside", () => {
    const plain = fields(compileRequest({ ...byName, default: "x" }));
    const shared = fields(compileRequest(byName));
    expect(shared).toEqual({ ...plain, hasDefault: false, defaultValue: undefined });
    expect(shared).toMatchObject({
      target: "name",
      describe: "ConfigMap team-a/db",
      mode: "Single",
      minMatch: 1,
    });
  });

  it("shares the compiled path and extractors of another name reading the same path", () => {
    const a = compileRequest(byName);
    const b = compileRequest({ ...byName, name: "other", namespace: undefined });
    expect(b.extractors).toBe(a.extractors);
    expect(b.fieldPath).toBe(a.fieldPath);
    expect([b.name, b.namespace, b.describe]).toEqual(["other", undefined, "ConfigMap other"]);
  });

  it.each([
    {
      reason: "a default",
      ref: { ...byName, default: 1 },
      check: (r: CompiledRequest) => r.defaultValue === 1,
    },
    {
      reason: "Optional",
      ref: { ...byName, policy: { resolution: "Optional" } },
      check: (r: CompiledRequest) => r.resolution === "Optional",
    },
    {
      reason: "requireConditions",
      ref: { ...byName, requireConditions: [{ type: "Ready" }] },
      check: (r: CompiledRequest) => r.requireConditions.length === 1 && r.conditionsKey !== undefined,
    },
    {
      reason: "a transform",
      ref: { ...byName, transform: "value" },
      check: (r: CompiledRequest) => r.transform !== undefined,
    },
  ])("keeps what sets it apart: $reason", ({ ref, check }) => {
    expect(check(compileRequest(ref as AnyReference))).toBe(true);
  });
});
