import { jsonEqual, keysSorted, stableStringify } from "./stable-json.ts";

/** What jsonEqual must always answer: whether the sorted texts are the same. */
const byText = (a: unknown, b: unknown) => stableStringify(a) === stableStringify(b);

describe("jsonEqual", () => {
  const cases: Array<[string, unknown, unknown]> = [
    [
      "equal objects in another key order",
      { a: 1, b: [1, { c: "x", d: null }] },
      { b: [1, { d: null, c: "x" }], a: 1 },
    ],
    ["a different string", { a: "x" }, { a: "y" }],
    ["a missing member", { a: 1, b: 2 }, { a: 1 }],
    ["an extra member", { a: 1 }, { a: 1, b: 2 }],
    ["another key", { a: 1 }, { b: 1 }],
    ["arrays of other lengths", [1, 2], [1, 2, 3]],
    ["an array against an object", [1], { 0: 1 }],
    ["a number against its string", 1, "1"],
    ["null against an object", null, {}],
    ["0 and -0", { n: 0 }, { n: -0 }],
    ["NaN writes as null", { n: Number.NaN }, { n: null }],
    ["Infinity writes as null", [Infinity], [null]],
    ["an undefined member is left out", { a: 1, b: undefined }, { a: 1 }],
    ["an undefined member against a value", { a: 1, b: undefined }, { a: 1, b: 2 }],
    ["undefined in an array writes as null", [undefined], [null]],
    ["a function member is left out", { a: 1, f: () => 1 }, { a: 1 }],
    ["a Date writes as its ISO text", { t: new Date(0) }, { t: "1970-01-01T00:00:00.000Z" }],
    ["toJSON decides", { toJSON: () => [1] }, [1]],
    ["a __proto__ key is a member", JSON.parse('{"__proto__":1}'), {}],
    ["equal __proto__ keys", JSON.parse('{"__proto__":{"a":1}}'), JSON.parse('{"__proto__":{"a":1}}')],
    ["a Map writes as {}", new Map([[1, 2]]), {}],
    ["integer-like keys", { 10: "a", 9: "b", x: 1 }, { x: 1, 9: "b", 10: "a" }],
    ["both undefined", undefined, undefined],
    ["undefined against null", undefined, null],
    ["the same object", { a: [1] }, undefined],
  ];
  const same = cases[cases.length - 1]!;
  same[2] = same[1];

  it.each(cases)("answers as the texts: %s", (_name, a, b) => {
    expect(jsonEqual(a, b)).toBe(byText(a, b));
    expect(jsonEqual(b, a)).toBe(byText(b, a));
  });

  it("tells equal statuses from unequal ones", () => {
    const status = {
      observedGeneration: 1,
      conditions: [
        { type: "Ready", status: "True", reason: "Available", message: "", lastTransitionTime: "t" },
      ],
      value: { nested: ["a", 1, true, null] },
      sources: [{ kind: "ConfigMap", name: "c", uid: "u", resourceVersion: "1" }],
    };
    const copy = JSON.parse(JSON.stringify(status)) as typeof status;
    expect(jsonEqual(status, copy)).toBe(true);
    copy.value.nested[1] = 2;
    expect(jsonEqual(status, copy)).toBe(false);
  });

  it("answers as the texts for random JSON-like values", () => {
    // In 32-bit integers, the high bits taken: a product of doubles past 2^53 loses its low bits,
    // and with them every even-odd choice (every `rand(2)` was 0: no unequal pair was made).
    let seed = 7;
    const rand = (n: number) => ((seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) >>> 16) % n;
    const leaves = [null, 0, -0, 1, "1", "", true, false, Number.NaN, undefined, "a"];
    const value = (depth: number): unknown => {
      const pick = rand(depth > 2 ? 1 : 3);
      if (pick === 0) return leaves[rand(leaves.length)];
      if (pick === 1) return Array.from({ length: rand(3) }, () => value(depth + 1));
      const o: Record<string, unknown> = {};
      for (let i = rand(3); i > 0; i--) o[["a", "b", "1"][rand(3)]!] = value(depth + 1);
      return o;
    };
    let equal = 0;
    for (let i = 0; i < 5000; i++) {
      const a = value(0);
      const b = rand(2) ? value(0) : (JSON.parse(JSON.stringify(a ?? null)) as unknown);
      expect(jsonEqual(a, b)).toBe(byText(a, b));
      if (byText(a, b)) equal++;
    }
    // Both answers were exercised.
    expect(equal).toBeGreaterThan(500);
    expect(5000 - equal).toBeGreaterThan(500);
  });
});

/** stableStringify as it was before its fast path: every object's keys sorted, always. */
const sortedText = (value: unknown): string =>
  JSON.stringify(value, (_key, v: unknown) =>
    v === null || typeof v !== "object" || Array.isArray(v)
      ? v
      : Object.fromEntries(
          Object.keys(v)
            .sort()
            .map((k) => [k, (v as Record<string, unknown>)[k]]),
        ),
  );

describe("keysSorted", () => {
  const deep = (n: number): unknown => (n === 0 ? {} : { a: deep(n - 1) });
  it.each<[string, unknown, boolean]>([
    [
      "a status as kube-apiserver writes it",
      { conditions: [{ status: "True", type: "Ready" }], value: 1 },
      true,
    ],
    ["keys out of order at the top", { value: 1, conditions: [] }, false],
    ["keys out of order in an array's object", { conditions: [{ type: "Ready", status: "True" }] }, false],
    ["an undefined member (left out) out of order", { a: 1, b: 2, lastTransitionTime: undefined }, true],
    ["leaves of any kind JSON writes", [null, "x", 1, Number.NaN, true, undefined], true],
    ["one integer-like key, first as JSON.parse puts it", JSON.parse('{"b":1,"7":2}'), true],
    ["integer-like keys that sort otherwise than numerically", JSON.parse('{"10":1,"9":2}'), false],
    ["a __proto__ key", JSON.parse('{"__proto__":{"b":1,"a":2}}'), false],
    ["a Date (its toJSON decides)", { t: new Date(0) }, false],
    ["a function member (a toJSON could decide)", { toJSON: () => ({ b: 1, a: 2 }) }, false],
    ["a Map", new Map(), false],
    ["a bigint", { n: 1n }, false],
    ["deeper than 64", deep(70), false],
  ])("%s", (_reason, value, sorted) => {
    expect(keysSorted(value)).toBe(sorted);
  });
});

describe("stableStringify", () => {
  it("writes the same text as sorting every object's keys, whether they come sorted or not", () => {
    // In 32-bit integers (a product of doubles past 2^53 would lose its low bits, and with
    // them every even-odd choice), the high bits taken.
    let seed = 11;
    const rand = (n: number) => ((seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) >>> 16) % n;
    const leaves = [null, 0, 1, "1", "", true, Number.NaN, undefined, "a", () => 1, new Date(0)];
    const keys = ["a", "b", "c", "10", "9", "__proto__", "toJSON"];
    const value = (depth: number): unknown => {
      const pick = rand(depth > 3 ? 1 : 3);
      if (pick === 0) return leaves[rand(leaves.length)];
      if (pick === 1) return Array.from({ length: rand(3) }, () => value(depth + 1));
      const o: Record<string, unknown> = {};
      for (let i = rand(4); i > 0; i--)
        Object.defineProperty(o, keys[rand(keys.length)]!, {
          value: value(depth + 1),
          enumerable: true,
          configurable: true,
          writable: true,
        });
      return o;
    };
    let fast = 0;
    for (let i = 0; i < 5000; i++) {
      const v = value(0);
      // Half of them as kube-apiserver would send them: sorted, then read back by JSON.parse.
      const text = sortedText(v) as string | undefined; // undefined for undefined or a function
      const sent = rand(2) && text !== undefined ? (JSON.parse(text) as unknown) : v;
      expect(stableStringify(sent)).toBe(sortedText(sent));
      if (keysSorted(sent) && typeof sent === "object" && sent !== null) fast++;
    }
    expect(fast).toBeGreaterThan(1000); // the fast path was exercised
  });
});
