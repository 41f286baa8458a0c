import { ResolutionError, isResolutionError } from "../api/errors.ts";
import { resolveReferences, type ReferenceReader } from "./managed.ts";
import type { GenericReference, GenericSelector, ResolvedValue, ResolvedValues } from "./types.ts";

/** A reader over a fixed table: name → value; a missing name fails with SourceNotFound. */
function reader(
  values: Record<string, unknown>,
  selected: unknown[] = [],
): ReferenceReader & { calls: string[] } {
  const calls: string[] = [];
  return {
    calls,
    resolve: async (ref: GenericReference): Promise<ResolvedValue> => {
      calls.push(`resolve:${ref.name ?? "external"}`);
      if (ref.external !== undefined) return { reason: "Available", value: ref.external };
      if (!(ref.name! in values)) throw new ResolutionError("SourceNotFound", `${ref.name} does not exist`);
      return { reason: "Available", value: values[ref.name!] };
    },
    resolveSelector: async (sel: GenericSelector): Promise<ResolvedValues> => {
      calls.push(`select:${sel.mode}`);
      return {
        reason: "Available",
        values: sel.mode === "Single" ? selected.slice(0, 1) : selected,
        sources: [],
      };
    },
  };
}

const ref = (name: string, policy?: GenericReference["policy"]): GenericReference => ({
  apiVersion: "v1",
  kind: "ConfigMap",
  namespace: "a",
  name,
  fieldPath: "data.v",
  ...(policy ? { policy } : {}),
});

describe("resolveReferences", () => {
  it.each([
    {
      reason: "fooRef fills foo when foo is empty",
      obj: { spec: { arnRef: ref("x") } },
      want: { spec: { arnRef: ref("x"), arn: "X" } },
      changed: true,
      skipped: [] as string[],
    },
    {
      reason: "IfNotPresent (the default) never overwrites a value the user set",
      obj: { spec: { arnRef: ref("x"), arn: "user" } },
      want: { spec: { arnRef: ref("x"), arn: "user" } },
      changed: false,
      skipped: ["spec.arn"],
    },
    {
      reason: "Always re-resolves and overwrites",
      obj: { spec: { arnRef: ref("x", { resolve: "Always" }), arn: "stale" } },
      want: { spec: { arnRef: ref("x", { resolve: "Always" }), arn: "X" } },
      changed: true,
      skipped: [],
    },
    {
      reason: "a field without a ref or selector is left alone",
      obj: { spec: { other: 1 } },
      want: { spec: { other: 1 } },
      changed: false,
      skipped: [],
    },
  ])("$reason", async ({ obj, want, changed, skipped }) => {
    const input = structuredClone(obj);
    const result = await resolveReferences(reader({ x: "X" }), obj, [{ target: "spec.arn" }]);
    expect(result.object).toEqual(want);
    expect(result.changed).toBe(changed);
    expect(result.skipped).toEqual(skipped);
    expect(obj).toEqual(input); // never mutates the input
  });

  it("resolves a Single selector into a single target", async () => {
    const r = reader({}, ["first", "second"]);
    const result = await resolveReferences(
      r,
      { spec: { arnSelector: { apiVersion: "v1", kind: "ConfigMap", fieldPath: "data.v" } } },
      [{ target: "spec.arn" }],
    );
    expect(result.object).toMatchObject({ spec: { arn: "first" } });
    expect(r.calls).toEqual(["select:Single"]);
  });

  it("resolves a list of references in order, and a Multiple selector into a list", async () => {
    const byRefs = await resolveReferences(
      reader({ a: 1, b: 2 }),
      { spec: { idRefs: [ref("b"), ref("a")] } },
      [{ target: "spec.ids", refs: "spec.idRefs" }],
    );
    expect(byRefs.object).toMatchObject({ spec: { ids: [2, 1] } });
    const bySelector = await resolveReferences(
      reader({}, [7, 8]),
      { spec: { idSelector: { apiVersion: "v1", kind: "ConfigMap", fieldPath: "data.v" } } },
      [{ target: "spec.ids", refs: "spec.idRefs", selector: "spec.idSelector" }],
    );
    expect(bySelector.object).toMatchObject({ spec: { ids: [7, 8] } });
  });

  it.each([
    {
      reason: "a list mixing references by name and external values is refused",
      refs: [ref("a"), { apiVersion: "v1", kind: "ConfigMap", external: "lit" }],
      unique: false,
      message: "mixes references by name and external values",
    },
    {
      reason: "duplicate values are refused where the target must be unique",
      refs: [ref("a"), ref("a2")],
      unique: true,
      message: "duplicate values",
    },
  ])("$reason", async ({ refs, unique, message }) => {
    const err = await resolveReferences(reader({ a: 1, a2: 1 }), { spec: { idRefs: refs } }, [
      { target: "spec.ids", refs: "spec.idRefs", unique },
    ]).catch((e: unknown) => e);
    expect(isResolutionError(err)).toBe(true);
    expect(err).toMatchObject({ reason: "InvalidSpec", message: expect.stringContaining(message) });
  });

  it("compares values as JSON data, whatever the order of their keys", async () => {
    const always = ref("x", { resolve: "Always" });
    const same = await resolveReferences(
      reader({ x: { host: "db", port: 5432 } }),
      { spec: { arnRef: always, arn: { port: 5432, host: "db" } } },
      [{ target: "spec.arn" }],
    );
    expect({ changed: same.changed }).toEqual({ changed: false });
    const err = await resolveReferences(
      reader({ a: { host: "db", port: 1 }, b: { port: 1, host: "db" } }),
      { spec: { idRefs: [ref("a"), ref("b")] } },
      [{ target: "spec.ids", refs: "spec.idRefs", unique: true }],
    ).catch((e: unknown) => e);
    expect(err).toMatchObject({
      reason: "InvalidSpec",
      message: expect.stringContaining("duplicate values"),
    });
  });

  it("names the field a failure came from and keeps its reason and retryability", async () => {
    const err = await resolveReferences(reader({}), { spec: { arnRef: ref("missing") } }, [
      { target: "spec.arn" },
    ]).catch((e: unknown) => e);
    expect(err).toMatchObject({
      reason: "SourceNotFound",
      retryable: true,
      message: "spec.arnRef: missing does not exist",
    });
  });

  it("refuses prototype keys in field paths", async () => {
    await expect(resolveReferences(reader({}), {}, [{ target: "__proto__.polluted" }])).rejects.toThrow(
      "invalid field path",
    );
  });
});
