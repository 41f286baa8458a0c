import { jest } from "@jest/globals";
import { JSONPath } from "jsonpath-plus";
import { evaluateFieldPath } from "./index.ts";
import { jsonPathPlusCacheSize } from "./jsonpath-plus-adapter.ts";
import { FieldPathLimits } from "./limits.ts";

describe("jsonpath-plus's parse cache", () => {
  afterEach(() => jest.restoreAllMocks());

  it("stays bounded after 20,000 distinct JSONPaths", () => {
    // jsonpath-plus 11 keeps its parsed paths in a private module-level Map. Catch that Map as
    // it stores its first entry, so the test measures the real cache, not our own count of it.
    const marker = "$[0:1:123456789]";
    const caught: Map<unknown, unknown>[] = [];
    const originalSet = Map.prototype.set;
    jest.spyOn(Map.prototype, "set").mockImplementation(function (this: Map<unknown, unknown>, key, value) {
      if (key === marker) caught.push(this);
      return originalSet.call(this, key, value);
    });
    JSONPath.clearCache();
    evaluateFieldPath({ a: [1] }, "$.a[0:1:123456789]");
    jest.restoreAllMocks();
    expect(caught).toHaveLength(1);
    const [pathCache] = caught;

    const clear = jest.spyOn(JSONPath, "clearCache");
    const doc = { a: [1, 2, 3] };
    for (let i = 0; i < 20_000; i++) evaluateFieldPath(doc, `$.a[0:${i + 1}]`);

    expect(pathCache?.size).toBeLessThanOrEqual(FieldPathLimits.jsonPathPlusCacheSize);
    expect(jsonPathPlusCacheSize()).toBeLessThanOrEqual(FieldPathLimits.jsonPathPlusCacheSize);
    expect(clear.mock.calls.length).toBeGreaterThanOrEqual(
      20_000 / FieldPathLimits.jsonPathPlusCacheSize - 1,
    );
  });

  it("receives only selectors we build, never user text", () => {
    const seen: string[] = [];
    const original = JSONPath.toPathArray;
    jest.spyOn(JSONPath, "toPathArray").mockImplementation((expr: string) => {
      seen.push(expr);
      return original(expr);
    });
    JSONPath.clearCache();
    evaluateFieldPath({ a: [{ b: 1 }] }, "$.a[*].b");
    evaluateFieldPath({ a: [{ b: 1 }] }, "$..b");
    evaluateFieldPath({ a: [{ b: 1 }] }, "{.a[::2]}");
    evaluateFieldPath({ a: [{ b: 1 }] }, "$..[1:]");
    evaluateFieldPath({ a: [{ b: 1 }] }, "$.a..*");
    expect(new Set(seen)).toEqual(new Set(["$[*]", "$..", "$[::2]", "$..[1:]", "$..*"]));
  });
});
