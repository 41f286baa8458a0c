import { describe, expect, it } from "@jest/globals";
import fc from "fast-check";
import { compileLabelSelector, type LabelSelector } from "./label-selector.ts";
import {
  keptLabels,
  LABEL_SET_POOL_MAX_SETS,
  LabelKeys,
  LabelSetPool,
  NO_LABEL_KEYS,
  UNSELECTABLE_VALUE,
} from "./label-keys.ts";

interface Case {
  reason: string;
  labels: unknown;
  keys: string[];
  want: Record<string, string> | undefined;
}

describe("keptLabels", () => {
  it.each<Case>([
    {
      reason: "no key kept: nothing, however many labels the object has",
      labels: { app: "web", tier: "gold" },
      keys: [],
      want: undefined,
    },
    {
      reason: "only the kept keys, with their values",
      labels: { app: "web", tier: "gold", other: "x" },
      keys: ["app", "tier"],
      want: { app: "web", tier: "gold" },
    },
    {
      reason: "a kept key the object lacks is absent, not empty",
      labels: { app: "web" },
      keys: ["tier"],
      want: undefined,
    },
    {
      reason: "a value longer than Kubernetes allows keeps one shared marker, never the value",
      labels: { app: "w".repeat(64) },
      keys: ["app"],
      want: { app: UNSELECTABLE_VALUE },
    },
    {
      reason: "a malformed or non-string value (an aggregated API's) keeps the marker",
      labels: { app: "-bad", tier: 3 },
      keys: ["app", "tier"],
      want: { app: UNSELECTABLE_VALUE, tier: UNSELECTABLE_VALUE },
    },
    {
      reason: "the empty value is a value",
      labels: { app: "" },
      keys: ["app"],
      want: { app: "" },
    },
    {
      reason: "constructor and prototype are ordinary label keys",
      labels: { constructor: "a", prototype: "b" },
      keys: ["constructor", "prototype", "toString"],
      want: { constructor: "a", prototype: "b" },
    },
    {
      reason: "labels that are not a map keep nothing",
      labels: ["app"],
      keys: ["app"],
      want: undefined,
    },
  ])("$reason", ({ labels, keys, want }) => {
    const got = keptLabels(labels, new LabelKeys(keys));
    expect(got === undefined ? undefined : { ...got }).toEqual(want);
  });

  it("keeps no prototype: an own __proto__ label from a decoded object is an ordinary key", () => {
    const labels = JSON.parse('{"__proto__":"x","app":"web"}') as Record<string, string>;
    const got = keptLabels(labels, new LabelKeys(["__proto__", "app"]))!;
    expect(Object.getPrototypeOf(got)).toBeNull();
    expect(Object.hasOwn(got, "__proto__")).toBe(true);
    expect(Object.keys(got).sort()).toEqual(["__proto__", "app"]);
  });

  it("keeps a copy: a later change to the object's label map changes nothing kept", () => {
    const keys = new LabelKeys(["app"]);
    const labels: Record<string, string> = { app: "web" };
    const got = keptLabels(labels, keys)!;
    labels.app = "changed";
    expect(got.app).toBe("web");
    expect(Object.isFrozen(got)).toBe(true);
  });

  it("does the same as the whole label set for every selector whose keys are kept (property)", () => {
    const key = fc.constantFrom("app", "tier", "team", "example.com/role", "constructor", "prototype");
    const value = fc.oneof(
      fc.constantFrom("", "web", "gold", "a-b.c_d"),
      fc.string({ minLength: 64, maxLength: 80 }),
      fc.constantFrom("-bad", "bad-", "with space"),
    );
    const selectorValue = fc.constantFrom("", "web", "gold", "a-b.c_d");
    const requirement = fc.oneof(
      fc.record({
        key,
        operator: fc.constantFrom("In" as const, "NotIn" as const),
        values: fc.array(selectorValue, { minLength: 1, maxLength: 3 }),
      }),
      fc.record({ key, operator: fc.constantFrom("Exists" as const, "DoesNotExist" as const) }),
    );
    const selector = fc.record({
      matchLabels: fc.dictionary(key, selectorValue, { maxKeys: 2 }),
      matchExpressions: fc.array(requirement, { maxLength: 3 }),
    });
    const labels = fc.dictionary(fc.oneof(key, fc.constantFrom("noise", "x/y")), value, { maxKeys: 6 });
    const extra = fc.array(key, { maxLength: 3 });
    fc.assert(
      fc.property(selector, labels, extra, (raw, objectLabels, more) => {
        const compiled = compileLabelSelector(raw as LabelSelector);
        const keys = new LabelKeys([...compiled.keys, ...more]);
        const pool = new LabelSetPool();
        // Twice through the pool: a hit must answer as the first decode did.
        for (let i = 0; i < 2; i++) {
          const kept = keptLabels(objectLabels, keys, pool);
          expect(compiled.matches(kept)).toBe(compiled.matches(objectLabels));
        }
      }),
      { numRuns: 2000 },
    );
  });
});

describe("keptLabels: the bytes one object keeps", () => {
  it("keeps the values past the cap as the marker: the key exists, no value matches", () => {
    const keys = new LabelKeys(["a", "b", "c"]);
    const labels = { a: "x".repeat(60), b: "y".repeat(60), c: "z" };
    // 61 bytes for a, 122 with b: b and c are past a cap of 100.
    expect({ ...keptLabels(labels, keys, undefined, 100) }).toEqual({
      a: "x".repeat(60),
      b: UNSELECTABLE_VALUE,
      c: UNSELECTABLE_VALUE,
    });
    const exists = compileLabelSelector({ matchExpressions: [{ key: "c", operator: "Exists" }] });
    const equals = compileLabelSelector({ matchLabels: { c: "z" } });
    const kept = keptLabels(labels, keys, undefined, 100);
    expect(exists.matches(kept)).toBe(true);
    expect(equals.matches(kept)).toBe(false);
  });

  it("keeps everything under the cap as it is", () => {
    const keys = new LabelKeys(["a", "b"]);
    expect({ ...keptLabels({ a: "1", b: "2" }, keys, undefined, 4) }).toEqual({ a: "1", b: "2" });
  });
});

describe("LabelSetPool", () => {
  it("shares equal kept sets, and tells apart sets made with different keys", () => {
    const pool = new LabelSetPool();
    const ab = new LabelKeys(["app", "tier"]);
    const a = keptLabels({ app: "web", tier: "gold", noise: "1" }, ab, pool);
    const b = keptLabels({ app: "web", tier: "gold", noise: "2" }, ab, pool);
    const c = keptLabels({ app: "web" }, ab, pool);
    const d = keptLabels({ app: "web" }, new LabelKeys(["app"]), pool);
    expect(b).toBe(a);
    expect(c).not.toBe(a);
    expect({ ...c }).toEqual({ app: "web" });
    expect(d).not.toBe(c);
  });

  it("holds at most its bound of sets, whatever the objects hold", () => {
    const pool = new LabelSetPool();
    const keys = new LabelKeys(["app"]);
    for (let i = 0; i < LABEL_SET_POOL_MAX_SETS * 3 + 7; i++) keptLabels({ app: `v${i}` }, keys, pool);
    expect(pool.size).toBeLessThanOrEqual(LABEL_SET_POOL_MAX_SETS);
    expect(pool.size).toBeGreaterThan(0);
  });

  it("does not pool a set whose key would be long, and still returns it right", () => {
    const pool = new LabelSetPool();
    const many = Array.from({ length: 40 }, (_, i) => `k${i}`);
    const keys = new LabelKeys(many);
    const labels = Object.fromEntries(many.map((k) => [k, "v".repeat(63)]));
    const got = keptLabels(labels, keys, pool)!;
    expect(pool.size).toBe(0);
    expect({ ...got }).toEqual(labels);
  });
});

describe("LabelKeys", () => {
  it("compares by content and orders its keys", () => {
    const a = new LabelKeys(["tier", "app", "app"]);
    expect(a.keys).toEqual(["app", "tier"]);
    expect(a.sameAs(new LabelKeys(["app", "tier"]))).toBe(true);
    expect(a.includesAll(["app"])).toBe(true);
    expect(a.includesAll(["team"])).toBe(false);
    expect(NO_LABEL_KEYS.size).toBe(0);
  });
});
