/**
 * Issue 21's hostile transforms, in process: what the meter, the result sizing, `format`'s
 * bound and the admission estimate make of each. What the worker's limits make of the holes
 * the meter does not see is pool.test.ts's.
 */
import {
  DEEP_EQUALITY,
  FORMAT_BOMB,
  JSON_BOMB,
  PROTO_KEYS,
  SHARED_REFERENCES,
  SIZE_LOOP,
} from "../../test/fixtures/hostile-transforms.ts";
import { isResolutionError } from "../api/errors.ts";
import { compileTransform, DEFAULT_COST_BUDGET, type TransformShape } from "./index.ts";

const SINGLE: TransformShape = { mode: "Single", hasDefault: false };
const MULTIPLE: TransformShape = { mode: "Multiple", hasDefault: false };
const LIMITS = { maxValueBytes: 32 * 1024 };

function run(text: string, value: unknown, shape = SINGLE) {
  try {
    const input =
      shape.mode === "Single" ? { value, sources: [] } : { values: value as unknown[], sources: [] };
    return { ok: true as const, value: compileTransform(text, shape).evaluate(input, LIMITS).value };
  } catch (err) {
    if (!isResolutionError(err)) throw err;
    return { ok: false as const, reason: err.reason, message: err.message };
  }
}

describe("the meter charges work by the size of what a call is given", () => {
  const big = "x".repeat(30_000);
  it.each([
    {
      reason: "size() of a large string, 1,000 times",
      text: "[0,1,2,3,4,5,6,7,8,9].map(i, [0,1,2,3,4,5,6,7,8,9].map(j, [0,1,2,3,4,5,6,7,8,9].map(k, size(value)))).size()",
    },
    {
      reason: "contains() on a large string, 100 times",
      text: "[0,1,2,3,4,5,6,7,8,9].map(i, [0,1,2,3,4,5,6,7,8,9].map(j, value.contains(value))).size()",
    },
    {
      reason: "startsWith() with a large prefix, 1,000 times",
      text: "[0,1,2,3,4,5,6,7,8,9].map(i, [0,1,2,3,4,5,6,7,8,9].map(j, [0,1,2,3,4,5,6,7,8,9].map(k, value.startsWith(value)))).size()",
    },
    {
      reason: "indexOf() on a large string, 100 times",
      text: "[0,1,2,3,4,5,6,7,8,9].map(i, [0,1,2,3,4,5,6,7,8,9].map(j, value.indexOf(value))).size()",
    },
    {
      reason: "`in` a large list, 1,000 times",
      text: "cel.bind(l, value.split(''), [0,1,2,3,4,5,6,7,8,9].map(i, [0,1,2,3,4,5,6,7,8,9].map(j, [0,1,2,3,4,5,6,7,8,9].map(k, 'y' in l)))).size()",
    },
    {
      reason: "== of large strings, 1,000 times",
      text: "[0,1,2,3,4,5,6,7,8,9].map(i, [0,1,2,3,4,5,6,7,8,9].map(j, [0,1,2,3,4,5,6,7,8,9].map(k, value == value + ''))).size()",
    },
    {
      reason: "parsing JSON: one unit per byte parsed",
      text: "[0,1,2,3,4,5,6,7,8,9].map(i, [0,1,2,3,4,5,6,7,8,9].map(j, [0,1,2,3,4,5,6,7,8,9].map(k, bytes('[\"' + value + '\"]').json()))).size()",
    },
    { reason: "case 1: a JSON document of 200 KB parsed 200 times", text: JSON_BOMB },
    { reason: "case 2: size() of a 1 MiB string 10,000 times", text: SIZE_LOOP },
  ])("$reason", ({ text }) => {
    expect(run(text, big)).toEqual({
      ok: false,
      reason: "TransformFailed",
      message: `the transform exceeded its cost budget of ${DEFAULT_COST_BUDGET}: make it do less work`,
    });
  });
});

describe("a result is sized as it is built", () => {
  it.each([
    {
      reason: "case 4: 900 references to one 1 MiB string stop at the limit, as ValueTooLarge",
      text: SHARED_REFERENCES,
      want: "the transform's result is over the limit of 32768 bytes of JSON (ValueTooLarge): make it return less",
    },
    {
      reason: "references to one small string count each time they appear",
      text: "cel.bind(s, value + value, [0,1,2,3,4,5,6,7,8,9].map(i, [0,1,2,3,4,5,6,7,8,9].map(j, s)))",
      want: "(ValueTooLarge)",
    },
    {
      reason: "case 4: '%s'.format() of 900 references stops at its 1 MiB bound while it builds",
      text: FORMAT_BOMB,
      want: "format would build a string over the limit of 1048576 characters",
    },
  ])("$reason", ({ text, want }) => {
    const got = run(text, "x".repeat(200));
    expect(got).toMatchObject({ ok: false, reason: "TransformFailed" });
    expect(got.ok ? "" : got.message).toContain(want);
  });

  it("a result just under the limit is kept whole", () => {
    const got = run("value", "x".repeat(LIMITS.maxValueBytes - 2));
    expect(got).toEqual({ ok: true, value: "x".repeat(LIMITS.maxValueBytes - 2) });
    expect(run("value", "x".repeat(LIMITS.maxValueBytes - 1))).toMatchObject({ ok: false });
  });
});

describe("__proto__, constructor and prototype are ordinary keys", () => {
  it.each([
    {
      reason: "case 5: in a map literal",
      text: PROTO_KEYS,
      value: "v",
      want: '{"__proto__":"v","constructor":"c","prototype":"p"}',
    },
    {
      reason: "read from the value",
      text: "value",
      value: JSON.parse('{"__proto__":{"a":1},"constructor":2}'),
      want: '{"__proto__":{"a":1},"constructor":2}',
    },
    {
      reason: "read by key from the value",
      text: "[value['__proto__'], value.constructor, 'prototype' in value]",
      value: JSON.parse('{"__proto__":1,"constructor":2,"prototype":3}'),
      want: "[1,2,true]",
    },
    {
      reason: "as keys of a map built from a comprehension's values",
      text: "{'x': {'__proto__': value}}.x",
      value: 1,
      want: '{"__proto__":1}',
    },
  ])("$reason", ({ text, value, want }) => {
    const got = run(text, value);
    expect(got.ok).toBe(true);
    expect(JSON.stringify(got.ok ? got.value : undefined)).toBe(want);
  });
});

describe("the worst-case cost is estimated before anything runs", () => {
  it.each([
    { reason: "a URL from a value", text: "'postgres://' + value + ':5432/app'", shape: SINGLE, over: false },
    {
      reason: "a map literal of fields",
      text: "{'host': value.host, 'port': int(value.port)}",
      shape: SINGLE,
      over: false,
    },
    {
      reason: "a comprehension over the values",
      text: "values.map(v, v.upperAscii()).join(',')",
      shape: MULTIPLE,
      over: false,
    },
    {
      reason: "a filter then a map",
      text: "values.filter(v, v.startsWith('a')).map(v, v + '!')",
      shape: MULTIPLE,
      over: false,
    },
    { reason: "the parts of a split", text: "value.split(',').map(x, x.trim())", shape: SINGLE, over: false },
    {
      reason: "three nested comprehensions over the values",
      text: "values.map(a, values.map(b, values.map(c, a + b + c))).size()",
      shape: MULTIPLE,
      over: true,
    },
    { reason: "case 1: JSON parsed 200 times", text: JSON_BOMB, shape: SINGLE, over: true },
    { reason: "case 2: size() of 1 MiB 10,000 times", text: SIZE_LOOP, shape: SINGLE, over: true },
    {
      reason: "a hole of the model (deep equality) is not seen: the worker's deadline is its bound",
      text: DEEP_EQUALITY,
      shape: SINGLE,
      over: false,
    },
  ])("$reason", ({ text, shape, over }) => {
    const refusal = compileTransform(text, shape).overBudget(LIMITS);
    if (over)
      expect(refusal).toMatch(
        /its estimated worst-case cost is \d+, over the budget of 1000000 \(inputs of up to 32768 bytes/,
      );
    else expect(refusal).toBeUndefined();
  });

  it("scales with the size bound of the inputs", () => {
    const compiled = compileTransform("values.map(v, v.upperAscii()).join(',')", MULTIPLE);
    expect(compiled.estimateCost(64 * 1024)).toBeGreaterThan(compiled.estimateCost(32 * 1024));
  });
});
