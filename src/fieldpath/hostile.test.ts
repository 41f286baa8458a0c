import { jest } from "@jest/globals";
import { isResolutionError } from "../api/errors.ts";
import { evaluateFieldPath } from "./index.ts";

/** Runs a path against `obj`; returns "InvalidSpec", "found", "missing" or another ResolutionError reason. */
function outcome(obj: unknown, path: string): string {
  try {
    return evaluateFieldPath(obj, path).found ? "found" : "missing";
  } catch (err) {
    if (isResolutionError(err)) return err.reason;
    throw err;
  }
}

/**
 * The bound these tests put on one evaluation: not a speed target (those are in the bench), but
 * "it finishes" against the exponential or unbounded work a hostile path could cause, which
 * takes seconds to forever. Generous, so a busy machine running other suites never trips it
 * (250 ms once did, on two cores running six suites).
 */
const FINISHES_MS = 2000;

function timed<T>(fn: () => T): { result: T; ms: number } {
  const start = performance.now();
  const result = fn();
  return { result, ms: performance.now() - start };
}

const FLAG = "__referableFieldPathPwned";
const globals = globalThis as Record<string, unknown>;
const doc = {
  a: [{ x: 1, type: "Ready" }, { x: 2 }],
  book: [{ price: 5 }, { price: 15 }],
  process: { exit: "no" },
};

describe("hostile paths: script injection", () => {
  const exit = jest.spyOn(process, "exit").mockImplementation((() => {
    throw new Error("process.exit was called");
  }) as never);
  afterAll(() => exit.mockRestore());
  afterEach(() => {
    expect(globals[FLAG]).toBeUndefined();
    expect(exit).not.toHaveBeenCalled();
  });

  const set = `globalThis.${FLAG}=1`;
  const cases: { path: string; reason: string }[] = [
    {
      path: "$..[?(@.constructor.constructor('return process')().exit())]",
      reason: "the classic sandbox escape",
    },
    { path: `$..[?(@.constructor.constructor('${set}')())]`, reason: "a Function constructor call" },
    { path: "$[(@.length-1)]", reason: "a script index" },
    { path: `$..[(${set})]`, reason: "a script index with a side effect" },
    { path: "{.a[?(@.x==process.exit())]}", reason: "a call on the right of ==" },
    { path: `$.a[?(@.x==(${set}))]`, reason: "an assignment on the right of ==" },
    { path: `$.a[?(@.type=="Ready" || (${set}))]`, reason: "a boolean operator smuggling a script" },
    { path: `$.a[?(@.type=="Ready")][?(${set})]`, reason: "a second filter that is pure script" },
    { path: `$[?(this.constructor.constructor("${set}")())]`, reason: "this in a filter" },
    { path: `status.conditions[?(@.type==${set})]`, reason: "script in the field-path syntax" },
    { path: `a[?(@.x==1)].constructor.constructor('${set}')()`, reason: "calls after a valid filter" },
    { path: "$..book[?(@.price<10)]", reason: "a comparison jsonpath-plus would evaluate as script" },
    { path: "$..book[?(@.price)]", reason: "an existence filter jsonpath-plus would evaluate as script" },
    { path: "$[?(@property === 'a')]", reason: "jsonpath-plus's @property" },
    { path: "$[?(@path)]", reason: "jsonpath-plus's @path" },
    { path: "$..@other()", reason: "jsonpath-plus's @other() callback" },
    { path: "$..*@string()", reason: "jsonpath-plus's type operators" },
    { path: "$.a^^", reason: "jsonpath-plus's parent operator is only a key here" },
    { path: "$.*~", reason: "jsonpath-plus's property-name operator" },
    { path: "$.`a", reason: "jsonpath-plus's backtick escape is only a key here" },
    { path: "$;@string();", reason: "jsonpath-plus's internal separators" },
    {
      path: "$['a'][?(@.x=='1')]['constructor']['constructor']",
      reason: "walking to Function through brackets",
    },
    { path: `$[?(@.x==1)]\u0000(${set})`, reason: "a NUL before a script" },
    { path: `{.a}{${set}}`, reason: "a second kubectl template" },
    { path: `{range .a[*]}{.x}{end}`, reason: "kubectl templates beyond one expression" },
  ];
  it.each(cases)("$path: $reason", ({ path }) => {
    const { result, ms } = timed(() => outcome(doc, path));
    expect(["InvalidSpec", "missing"]).toContain(result);
    expect(ms).toBeLessThan(FINISHES_MS);
  });
});

describe("hostile paths: prototype keys", () => {
  const cases: { path: string; obj: unknown; want: "missing" | "found"; reason: string }[] = [
    { path: "__proto__", obj: {}, want: "missing", reason: "no walking to Object.prototype" },
    { path: "constructor", obj: {}, want: "missing", reason: "no inherited constructor" },
    { path: "constructor.prototype", obj: {}, want: "missing", reason: "no prototype through constructor" },
    { path: "a.__proto__", obj: { a: {} }, want: "missing", reason: "nested __proto__" },
    { path: "__proto__.toString", obj: {}, want: "missing", reason: "no inherited methods" },
    {
      path: "a.length",
      obj: { a: [1, 2] },
      want: "missing",
      reason: "a list has no fields, not even length",
    },
    { path: "a.length", obj: { a: "str" }, want: "missing", reason: "a string has no fields" },
    { path: "[__proto__]", obj: {}, want: "missing", reason: "unquoted bracket" },
    { path: "['constructor']", obj: {}, want: "missing", reason: "quoted bracket" },
    { path: 'a[?(@.constructor=="x")]', obj: { a: [{}] }, want: "missing", reason: "inside a filter" },
    {
      path: "a[?(@.__proto__.x==1)]",
      obj: { a: [{}] },
      want: "missing",
      reason: "__proto__ inside a filter",
    },
    { path: "$.__proto__", obj: {}, want: "missing", reason: "JSONPath __proto__" },
    { path: "$.constructor.name", obj: {}, want: "missing", reason: "JSONPath constructor" },
    { path: "$['__proto__']", obj: {}, want: "missing", reason: "JSONPath bracket __proto__" },
    {
      path: "$..constructor",
      obj: { a: { b: [] } },
      want: "missing",
      reason: "descent never meets inherited keys",
    },
    { path: "$..prototype", obj: { a: {} }, want: "missing", reason: "descent and prototype" },
    {
      path: "$.*",
      obj: {},
      want: "missing",
      reason: "a wildcard on an empty object lists nothing inherited",
    },
    { path: "{.a.length}", obj: { a: [1] }, want: "missing", reason: "JSONPath length of a list" },
    {
      path: "__proto__.polluted",
      obj: JSON.parse('{"__proto__": {"polluted": 1}}'),
      want: "found",
      reason: "an own __proto__ key from JSON.parse is data",
    },
    {
      path: "$.constructor",
      obj: JSON.parse('{"constructor": "own"}'),
      want: "found",
      reason: "an own constructor key is data",
    },
    {
      path: "$..polluted",
      obj: JSON.parse('{"a": {"__proto__": {"polluted": 1}}}'),
      want: "found",
      reason: "descent into an own __proto__ key",
    },
  ];
  it.each(cases)("$path: $reason", ({ path, obj, want }) => {
    expect(outcome(obj, path)).toBe(want);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });

  it("never reads through an object with a non-plain prototype", () => {
    class Secretive {
      visible = 1;
    }
    expect(outcome({ a: new Secretive() }, "a.visible")).toBe("missing");
    expect(outcome({ a: new Map([["k", 1]]) }, "a.k")).toBe("missing");
    expect(outcome({ a: Object.assign(Object.create(null), { k: 1 }) }, "a.k")).toBe("found");
  });
});

describe("hostile paths: size, nesting, Unicode, numbers", () => {
  const cases: { path: string; obj?: unknown; want: string; reason: string }[] = [
    { path: "a.".repeat(50_000), want: "InvalidSpec", reason: "a 100k-character field path" },
    { path: "$" + "[0]".repeat(33_334), want: "InvalidSpec", reason: "a 100k-character JSONPath" },
    { path: "{".repeat(100_000), want: "InvalidSpec", reason: "100k opening braces" },
    { path: "[".repeat(1000), want: "InvalidSpec", reason: "deeply nested brackets" },
    { path: "$" + "[".repeat(1000), want: "InvalidSpec", reason: "deeply nested JSONPath brackets" },
    { path: "a" + "[?(@".repeat(200), want: "InvalidSpec", reason: "nested filter openings" },
    { path: "a" + "[0]".repeat(300), want: "InvalidSpec", reason: "more segments than the limit" },
    { path: "$" + "..a".repeat(300), want: "InvalidSpec", reason: "many recursive descents" },
    { path: "'".repeat(1000), want: "InvalidSpec", reason: "a wall of quotes" },
    { path: "a['" + "\\".repeat(1000), want: "InvalidSpec", reason: "a wall of backslashes" },
    { path: "a.😀", obj: { a: { "😀": 1 } }, want: "found", reason: "an emoji key" },
    { path: "$.a['😀']", obj: { a: { "😀": 1 } }, want: "found", reason: "an emoji key in JSONPath" },
    {
      path: "a.\u05d0\u05d1",
      obj: { a: { "\u05d0\u05d1": 1 } },
      want: "found",
      reason: "a right-to-left key",
    },
    { path: "a.\u202eb", obj: { a: { "\u202eb": 1 } }, want: "found", reason: "a bidi override in a key" },
    { path: "a.b\u0000c", want: "InvalidSpec", reason: "NUL in an unquoted name" },
    {
      path: "a['b\u0000c']",
      obj: { a: { "b\u0000c": 1 } },
      want: "found",
      reason: "NUL inside quotes is data",
    },
    { path: "a.\ud800", obj: { a: { "\ud800": 1 } }, want: "found", reason: "a lone surrogate" },
    { path: "$.\udc00x", obj: { "\udc00x": 1 }, want: "found", reason: "a lone low surrogate in JSONPath" },
    { path: "a[99999999999999999999]", want: "InvalidSpec", reason: "a huge index" },
    { path: "a[" + "9".repeat(1000) + "]", want: "InvalidSpec", reason: "a thousand-digit index" },
    { path: "$.a[-99999999999999999999]", want: "InvalidSpec", reason: "a huge negative JSONPath index" },
    { path: "$.a[0:9007199254740991:1]", obj: { a: [1, 2] }, want: "found", reason: "a huge slice end" },
    { path: "$.a[::1]", obj: { a: Array(5).fill(0) }, want: "found", reason: "a full slice" },
    { path: "a[?(@.x==" + "9".repeat(400) + ")]", want: "InvalidSpec", reason: "an infinite number literal" },
    {
      path: "a[?(@.x==1e308)]",
      obj: { a: [{ x: 1e308 }] },
      want: "found",
      reason: "a large finite number literal",
    },
  ];
  it.each(cases)("$reason", ({ path, obj, want }) => {
    const { result, ms } = timed(() => outcome(obj ?? { a: [{ x: 1 }] }, path));
    expect(result).toBe(want);
    expect(ms).toBeLessThan(FINISHES_MS);
  });

  it("counts positions in code points and escapes invisible characters in messages", () => {
    let message = "";
    try {
      evaluateFieldPath({}, "😀.\u202e[");
    } catch (err) {
      message = (err as Error).message;
    }
    expect(message).toContain("at position 5:"); // 😀 is one character, not two
    expect(message).toContain("\\u202e");
    expect(message).not.toContain("\u202e");
  });

  it("finishes quickly on a large object with the most expensive paths allowed", () => {
    const wide = {
      items: Array.from({ length: 2000 }, (_, i) => ({ name: `n${i}`, spec: { a: [i, { b: i }] } })),
    };
    for (const path of [
      "$..*",
      "$..b",
      "$..*..b",
      "$.items[*]..*",
      "$..[?(@.b==3)].b",
      '$.items[?(@.name=="n1999")].spec',
    ]) {
      const { result, ms } = timed(() => outcome(wide, path));
      expect(["found", "ValueTooLarge"]).toContain(result);
      expect(ms).toBeLessThan(2 * FINISHES_MS);
    }
  });
});
