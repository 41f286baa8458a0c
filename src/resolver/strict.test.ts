import { isResolutionError } from "../api/errors.ts";
import { resolveReferences, type ReferenceReader } from "./managed.ts";
import { compileRequest, type AnyReference } from "./request.ts";
import { createResolver, type ResolverOptions } from "./resolver.ts";
import { didYouMean } from "./strict.ts";

const cm = { apiVersion: "v1", kind: "ConfigMap", namespace: "a", fieldPath: "data.k" };

/** The InvalidSpec message compileRequest throws for `ref`, or "accepted". */
function outcome(ref: unknown): string {
  try {
    compileRequest(ref as AnyReference);
    return "accepted";
  } catch (err) {
    if (!isResolutionError(err) || err.reason !== "InvalidSpec") throw err;
    return err.message;
  }
}

describe("unknown keys in a reference or selector are InvalidSpec, naming the key and what was expected", () => {
  it.each<{ reason: string; ref: Record<string, unknown>; want: RegExp | "accepted" }>([
    {
      reason: "a typo of matchLabels is not a selector that matches everything",
      ref: { ...cm, matchLabel: { app: "web" } },
      want: /unknown key "matchLabel" in the selector: did you mean "matchLabels"\? \(expected: apiVersion, kind, namespace, matchLabels,/,
    },
    {
      reason: "a Kubernetes-style nested selector says where matchLabels go",
      ref: { ...cm, selector: { matchLabels: { app: "web" } } },
      want: /unknown key "selector" in the selector: matchLabels and matchExpressions sit at the top level/,
    },
    {
      reason: "a typo in a reference by name",
      ref: { ...cm, name: "x", fieldpath: "data.k" },
      want: /unknown key "fieldpath" in the reference: did you mean "fieldPath"\?/,
    },
    {
      reason: "a selector's field on a reference by name says it belongs to a selector",
      ref: { ...cm, name: "x", mode: "Multiple" },
      want: /unknown key "mode" in the reference: mode applies only to a selector/,
    },
    {
      reason: "a key far from every expected one lists the expected keys, with no guess",
      ref: { ...cm, name: "x", zzzzzz: 1 },
      want: /unknown key "zzzzzz" in the reference \(expected: apiVersion, kind, namespace, name, external,/,
    },
    {
      reason: "a typo in policy",
      ref: { ...cm, name: "x", policy: { resolutoin: "Optional" } },
      want: /unknown key "resolutoin" in the policy: did you mean "resolution"\? \(expected: resolve, resolution\)/,
    },
    {
      reason: "a typo in a requireConditions entry",
      ref: { ...cm, name: "x", requireConditions: [{ type: "Ready", stauts: "True" }] },
      want: /unknown key "stauts" in requireConditions\[0\]: did you mean "status"\?/,
    },
    {
      reason: "a typo in a matchExpressions entry",
      ref: { ...cm, matchExpressions: [{ key: "app", operater: "Exists" }] },
      want: /unknown key "operater" in matchExpressions\[0\]: did you mean "operator"\?/,
    },
    {
      reason: "a very long key is quoted cut short, so the message stays bounded",
      ref: { ...cm, name: "x", ["k".repeat(10_000)]: 1 },
      want: /unknown key "k{64}\.\.\." in the reference \(expected/,
    },
    {
      reason: "a selector with neither matchLabels nor matchExpressions is refused, not 'everything'",
      ref: { ...cm },
      want: /the selector has neither matchLabels nor matchExpressions: .*to match every ConfigMap write matchLabels: \{\}/,
    },
    {
      reason: "matchLabels: {} is the explicit 'every object'",
      ref: { ...cm, matchLabels: {} },
      want: "accepted",
    },
    {
      reason: "matchExpressions: [] is explicit too",
      ref: { ...cm, matchExpressions: [] },
      want: "accepted",
    },
    {
      reason: "every documented selector key is accepted",
      ref: {
        ...cm,
        matchLabels: { app: "web" },
        matchExpressions: [{ key: "tier", operator: "In", values: ["a"] }],
        mode: "Multiple",
        minMatch: 0,
        maxMatch: 3,
        sortByFieldPath: "metadata.name",
        requireConditions: [{ type: "Ready", status: "True" }],
        default: [],
        policy: { resolve: "Always", resolution: "Optional" },
        transform: "values",
      },
      want: "accepted",
    },
    {
      reason: "every documented reference key is accepted",
      ref: { ...cm, name: "x", requireConditions: [], default: 1, policy: {}, transform: "value" },
      want: "accepted",
    },
  ])("$reason", ({ ref, want }) => {
    const got = outcome(ref);
    if (want === "accepted") expect(got).toBe("accepted");
    else expect(got).toMatch(want);
  });

  it("names the field prefix when there is one (the controller's spec.source)", () => {
    expect(() => compileRequest({ ...cm, name: "x", nmae: "y" } as never, "spec.source")).toThrow(
      /unknown key "nmae" in spec.source: did you mean "name"\?/,
    );
  });
});

describe("unknown options are InvalidSpec too", () => {
  it("createResolver refuses an option it does not know, before connecting anywhere", () => {
    const options = { kubeConfig: {} as never, maxValueByte: 1 } as unknown as ResolverOptions;
    expect(() => createResolver(options)).toThrow(
      /unknown key "maxValueByte" in the options of createResolver: did you mean "maxValueBytes"\?/,
    );
  });

  it("createResolver refuses an unknown key of transformPool, before connecting anywhere", () => {
    const options = { kubeConfig: {} as never, transformPool: { timeout: 10 } } as unknown as ResolverOptions;
    expect(() => createResolver(options)).toThrow(
      /unknown key "timeout" in the transformPool option of createResolver/,
    );
  });

  it("resolveReferences refuses an unknown key in a field, before reading anything", async () => {
    const reader: ReferenceReader = {
      resolve: () => Promise.reject(new Error("must not be called")),
      resolveSelector: () => Promise.reject(new Error("must not be called")),
    };
    await expect(
      resolveReferences(reader, { spec: {} }, [
        { target: "spec.a", refs: "spec.aRefs", uniqe: true } as never,
      ]),
    ).rejects.toMatchObject({
      reason: "InvalidSpec",
      message: expect.stringMatching(
        /unknown key "uniqe" in fields\[0\] of resolveReferences: did you mean "unique"\?/,
      ),
    });
  });
});

describe("didYouMean", () => {
  it.each([
    { reason: "one letter missing", key: "matchLabel", want: 'did you mean "matchLabels"?' },
    { reason: "case only", key: "FieldPath", want: 'did you mean "fieldPath"?' },
    { reason: "two letters swapped", key: "knid", want: 'did you mean "kind"?' },
    { reason: "nothing close", key: "replicas", want: undefined },
  ])("$reason", ({ key, want }) =>
    expect(didYouMean(key, ["apiVersion", "kind", "fieldPath", "matchLabels"])).toBe(want),
  );
});
