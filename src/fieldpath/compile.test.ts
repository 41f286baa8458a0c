import { type ResolutionError, isResolutionError } from "../api/errors.ts";
import { compiledPathCacheSize } from "./compile.ts";
import { FieldPathLimits, compileFieldPath, evaluateFieldPath, isJsonPath } from "./index.ts";

function thrown(fn: () => unknown): ResolutionError {
  try {
    fn();
  } catch (err) {
    if (isResolutionError(err)) return err;
    throw new Error(`expected a ResolutionError, got ${String(err)}`, { cause: err });
  }
  throw new Error("expected a ResolutionError, nothing was thrown");
}

describe("isJsonPath", () => {
  it.each([
    { path: "$.a", want: true, reason: "a JSONPath starts with $" },
    { path: "{.a}", want: true, reason: "kubectl's form starts with {" },
    { path: "status.value", want: false, reason: "the default syntax" },
    { path: "[a].b", want: false, reason: "a bracket first is still the default syntax" },
    { path: " $.a", want: false, reason: "only the first character decides" },
    { path: "", want: false, reason: "the empty path" },
  ])("$path: $reason", ({ path, want }) => {
    expect(isJsonPath(path)).toBe(want);
  });
});

describe("compileFieldPath", () => {
  it("reports the syntax and the source", () => {
    expect(compileFieldPath("a.b")).toMatchObject({ source: "a.b", syntax: "fieldPath" });
    expect(compileFieldPath("{.a.b}")).toMatchObject({ source: "{.a.b}", syntax: "jsonPath" });
  });

  it("returns the cached compiled path for the same string, and it is immutable", () => {
    const first = compileFieldPath("spec.cached[0]");
    expect(compileFieldPath("spec.cached[0]")).toBe(first);
    expect(Object.isFrozen(first)).toBe(true);
  });

  it("keeps the compiled-path cache bounded", () => {
    for (let i = 0; i < FieldPathLimits.compiledCacheSize + 100; i++) compileFieldPath(`spec.k${i}`);
    expect(compiledPathCacheSize()).toBeLessThanOrEqual(FieldPathLimits.compiledCacheSize);
  });

  it("evaluates the same compiled path against many objects", () => {
    const path = compileFieldPath("status.value");
    expect(path.evaluate({ status: { value: 1 } })).toEqual({ found: true, value: 1 });
    expect(path.evaluate({ status: { value: "two" } })).toEqual({ found: true, value: "two" });
    expect(path.evaluate({ status: {} })).toEqual({ found: false, missing: `"status" has no field "value"` });
  });

  it("refuses a non-string path with InvalidSpec (for JavaScript callers)", () => {
    const err = thrown(() => compileFieldPath(42 as unknown as string));
    expect(err.reason).toBe("InvalidSpec");
  });

  it("marks parse errors as not retryable", () => {
    const err = thrown(() => compileFieldPath("a["));
    expect(err).toMatchObject({ reason: "InvalidSpec", retryable: false });
  });
});

describe("limits", () => {
  it.each([
    { syntax: "field path", path: "a".repeat(FieldPathLimits.maxLength) },
    { syntax: "JSONPath", path: "$." + "a".repeat(FieldPathLimits.maxLength - 2) },
  ])("accepts a $syntax of exactly the maximum length", ({ path }) => {
    expect(evaluateFieldPath({}, path).found).toBe(false);
  });

  it("refuses a path one character over the maximum length, naming the limit", () => {
    const err = thrown(() => compileFieldPath("a".repeat(FieldPathLimits.maxLength + 1)));
    expect(err.reason).toBe("InvalidSpec");
    expect(err.message).toContain(`is 1025 characters long, over the limit of 1024`);
  });

  it.each([
    { syntax: "field path", path: (n: number) => "a" + ".a".repeat(n - 1) },
    { syntax: "JSONPath", path: (n: number) => "$" + ".a".repeat(n) },
    { syntax: "JSONPath filter", path: (n: number) => `$[?(@${".a".repeat(n - 1)}==1)]` },
  ])("accepts $syntax segments up to the limit and refuses one more", ({ path }) => {
    expect(() => compileFieldPath(path(FieldPathLimits.maxSegments))).not.toThrow();
    const err = thrown(() => compileFieldPath(path(FieldPathLimits.maxSegments + 1)));
    expect(err.reason).toBe("InvalidSpec");
    expect(err.message).toContain(`more than ${FieldPathLimits.maxSegments} segments`);
  });

  it("accepts the largest safe index and finds nothing there", () => {
    expect(evaluateFieldPath({ a: [1] }, `a[${Number.MAX_SAFE_INTEGER}]`).found).toBe(false);
    expect(evaluateFieldPath({ a: [1] }, `$.a[${Number.MAX_SAFE_INTEGER}]`).found).toBe(false);
  });

  it("fails with ValueTooLarge when a JSONPath selects more than the maximum number of values", () => {
    const many = { items: Array.from({ length: FieldPathLimits.maxJsonPathMatches }, (_, i) => ({ i })) };
    expect(evaluateFieldPath(many, "$.items[*].i")).toMatchObject({ found: true }); // exactly the limit
    for (const path of ["$.items[*].i", "$.items[*]", "$..i", "$..*", "$.items[0:]"]) {
      const err = thrown(() => evaluateFieldPath({ items: [...many.items, { i: -1 }] }, path));
      expect(err.reason).toBe("ValueTooLarge");
      expect(err.message).toContain(`selects more than ${FieldPathLimits.maxJsonPathMatches} values`);
    }
  });

  it("stops duplicating unions before they grow without bound", () => {
    const path = "$.a" + "[0,0,0,0,0,0,0,0]".repeat(6);
    const nested = { a: [[[[[[1]]]]]] };
    const err = thrown(() => evaluateFieldPath(nested, path));
    expect(err.reason).toBe("ValueTooLarge");
  });

  it("fails with ValueTooLarge, not a crash, when an object is too deep for a recursive descent", () => {
    let deep: unknown = { x: 1 };
    for (let i = 0; i < 100_000; i++) deep = { a: deep };
    const err = thrown(() => evaluateFieldPath(deep, "$..x"));
    expect(err.reason).toBe("ValueTooLarge");
    expect(err.message).toContain("nested too deeply");
  });

  it("walks deep objects with the field-path syntax without recursion", () => {
    let deep: unknown = { x: 1 };
    for (let i = 0; i < 100_000; i++) deep = { a: deep };
    expect(evaluateFieldPath(deep, "a.a.a.x")).toMatchObject({ found: false });
  });
});
