import { ResolutionError } from "../api/errors.ts";
import { compileRequest, type AnyReference } from "./request.ts";
import { compileTransform } from "../transform/index.ts";
import { applyTransform, type TransformRunner } from "./transform.ts";
import type { ResolutionResult, SourceRef } from "./types.ts";

const LIMITS = { maxValueBytes: 1024 };
/** Evaluates in this thread: the pool's own behaviour is src/transform/pool.test.ts's. */
const inProcess: TransformRunner = {
  evaluate: async (text, shape, input, limits) => compileTransform(text, shape).evaluate(input, limits),
};
const SRC: SourceRef = {
  apiVersion: "v1",
  kind: "ConfigMap",
  namespace: "a",
  name: "x",
  uid: "u1",
  resourceVersion: "1",
};
const SRC2: SourceRef = { ...SRC, name: "y", uid: "u2" };
const named = (extra: Partial<AnyReference>): AnyReference =>
  ({
    apiVersion: "v1",
    kind: "ConfigMap",
    namespace: "a",
    name: "x",
    fieldPath: "data.k",
    ...extra,
  }) as AnyReference;
const multiple = (extra: Partial<AnyReference>): AnyReference =>
  ({
    apiVersion: "v1",
    kind: "ConfigMap",
    namespace: "a",
    fieldPath: "data.k",
    matchLabels: {},
    mode: "Multiple",
    ...extra,
  }) as AnyReference;

describe("applyTransform", () => {
  it.each<{ reason: string; ref: AnyReference; result: ResolutionResult; want: unknown }>([
    {
      reason: "without a transform the result is unchanged",
      ref: named({}),
      result: { ok: true, reason: "Available", value: "v", source: SRC },
      want: { ok: true, reason: "Available", value: "v", source: SRC },
    },
    {
      reason: "an Available value is transformed and keeps its source",
      ref: named({ transform: "value + '!'" }),
      result: { ok: true, reason: "Available", value: "v", source: SRC },
      want: { ok: true, reason: "Available", value: "v!", source: SRC },
    },
    {
      reason: "a Defaulted value is the author's literal and is not transformed",
      ref: named({ transform: "value + '!'", default: "d" }),
      result: { ok: true, reason: "Defaulted", value: "d" },
      want: { ok: true, reason: "Defaulted", value: "d" },
    },
    {
      reason: "an Optional result has no value to transform",
      ref: named({ transform: "value + '!'", policy: { resolution: "Optional" } }),
      result: { ok: true, reason: "Optional" },
      want: { ok: true, reason: "Optional" },
    },
    {
      reason: "a failure stays the failure",
      ref: named({ transform: "value + '!'" }),
      result: { ok: false, error: new ResolutionError("SourceNotFound", "gone") },
      want: { ok: false, error: expect.objectContaining({ reason: "SourceNotFound" }) },
    },
    {
      reason: "mode Multiple: a list result is the values, with the same sources",
      ref: multiple({ transform: "values.map(v, v + '!')" }),
      result: { ok: true, reason: "Available", values: ["a", "b"], sources: [SRC, SRC2] },
      want: { ok: true, reason: "Available", values: ["a!", "b!"], sources: [SRC, SRC2] },
    },
    {
      reason: "mode Multiple: a single result is the value, computed from every source",
      ref: multiple({ transform: "values.join(',')" }),
      result: { ok: true, reason: "Available", values: ["a", "b"], sources: [SRC, SRC2] },
      want: { ok: true, reason: "Available", value: "a,b", sources: [SRC, SRC2] },
    },
    {
      reason: "a runtime error is TransformFailed, naming the source",
      ref: named({ transform: "value.missing" }),
      result: { ok: true, reason: "Available", value: {}, source: SRC },
      want: {
        ok: false,
        error: expect.objectContaining({
          reason: "TransformFailed",
          message: expect.stringContaining("ConfigMap a/x: the transform failed: No such key: missing"),
        }),
      },
    },
    {
      reason: "a result over maxValueBytes is TransformFailed, not ValueTooLarge",
      ref: named({ transform: "value + value" }),
      result: { ok: true, reason: "Available", value: "x".repeat(600), source: SRC },
      want: { ok: false, error: expect.objectContaining({ reason: "TransformFailed" }) },
    },
    {
      reason:
        "an expression whose worst-case cost with inputs of maxValueBytes is over the budget is InvalidSpec, never evaluated",
      ref: multiple({ transform: "values.map(a, values.map(b, values.map(c, a + b + c))).size()" }),
      result: { ok: true, reason: "Available", values: ["a"], sources: [SRC] },
      want: {
        ok: false,
        error: expect.objectContaining({
          reason: "InvalidSpec",
          message: expect.stringMatching(
            /transform: its estimated worst-case cost is \d+, over the budget of 1000000/,
          ),
        }),
      },
    },
  ])("$reason", async ({ ref, result, want }) => {
    expect(await applyTransform(compileRequest(ref), result, LIMITS, inProcess)).toEqual(want);
  });

  it("a runner that rejects with something else than a ResolutionError is TransformFailed, never a rejection", async () => {
    const broken: TransformRunner = { evaluate: () => Promise.reject(new Error("boom")) };
    const ref = named({ transform: "value + '!'" });
    const got = await applyTransform(
      compileRequest(ref),
      { ok: true, reason: "Available", value: "v", source: SRC },
      LIMITS,
      broken,
    );
    expect(got).toEqual({ ok: false, error: expect.objectContaining({ reason: "TransformFailed" }) });
  });

  it("a transform that does not compile makes the request InvalidSpec, named by its field", () => {
    expect(() => compileRequest(named({ transform: "value +" }), "spec")).toThrow(
      expect.objectContaining({
        reason: "InvalidSpec",
        message: expect.stringMatching(/^spec\.transform: does not parse/),
      }),
    );
  });
});
