import { isResolutionError } from "../errors.ts";
import { compileTransform, type TransformInput, type TransformShape } from "./index.ts";

const SINGLE: TransformShape = { mode: "Single", hasDefault: false };
const MULTIPLE: TransformShape = { mode: "Multiple", hasDefault: false };
const LIMITS = { maxValueBytes: 32 * 1024 };
const SOURCE = {
  apiVersion: "v1",
  kind: "ConfigMap",
  namespace: "team-a",
  name: "db",
  uid: "u-1",
  resourceVersion: "7",
};

function single(value: unknown): TransformInput {
  return { value, sources: [SOURCE] };
}

function run(
  text: string,
  shape: TransformShape,
  input: TransformInput,
  maxValueBytes = LIMITS.maxValueBytes,
) {
  try {
    return {
      ok: true as const,
      value: compileTransform(text, shape).evaluate(input, { maxValueBytes }).value,
    };
  } catch (err) {
    if (!isResolutionError(err)) throw err;
    return { ok: false as const, reason: err.reason, message: err.message };
  }
}

describe("a transform evaluates to JSON", () => {
  it.each([
    {
      reason: "string concatenation formats a URL",
      text: "'postgres://' + value + ':5432/app'",
      input: single("db.internal"),
      want: "postgres://db.internal:5432/app",
    },
    {
      reason: "base64.decode and string() read a Secret-style field",
      text: "string(base64.decode(value))",
      input: single(Buffer.from("s3cr3t").toString("base64")),
      want: "s3cr3t",
    },
    {
      reason: "base64.encode of bytes gives text",
      text: "base64.encode(bytes(value))",
      input: single("hi"),
      want: "aGk=",
    },
    {
      reason: "a whole JSON number is a CEL int, so int arithmetic works and maps back to a number",
      text: "value + 1",
      input: single(41),
      want: 42,
    },
    {
      reason: "a fractional JSON number is a double",
      text: "value * 2.0",
      input: single(1.25),
      want: 2.5,
    },
    {
      reason: "a map literal mixing value types builds an object",
      text: "{'host': value, 'port': 5432, 'tls': true}",
      input: single("db"),
      want: { host: "db", port: 5432, tls: true },
    },
    {
      reason: "the optional select ?. with orValue gives the fallback for a missing key",
      text: "value.?port.orValue(5432)",
      input: single({ host: "db" }),
      want: 5432,
    },
    {
      reason: "split, map, upperAscii and join, from the strings extension and macros",
      text: "value.split(',').map(s, s.trim().upperAscii()).join('-')",
      input: single("a, b,c"),
      want: "A-B-C",
    },
    {
      reason: "replace, as cel-go's strings extension names it",
      text: "value.replace('-', '_')",
      input: single("a-b-c"),
      want: "a_b_c",
    },
    {
      reason: "replace with a count replaces only that many",
      text: "value.replace('-', '_', 1)",
      input: single("a-b-c"),
      want: "a_b-c",
    },
    {
      reason: "format with %s and %d",
      text: "'%s:%d'.format([value.host, value.port])",
      input: single({ host: "db", port: 5432 }),
      want: "db:5432",
    },
    {
      reason: "format %s of a list and a map prints them as cel-go does: unquoted, keys sorted",
      text: "'%s %s'.format([value.list, value.map])",
      input: single({ list: ["a", 1, 2.5, null], map: { b: 2, a: "x" } }),
      want: "[a, 1, 2.5, null] {a: x, b: 2}",
    },
    {
      reason: "format rounds a tie to even, as Go does",
      text: "'%.0f %.1f'.format([2.5, 0.25])",
      input: single(null),
      want: "2 0.2",
    },
    {
      reason: "strings.quote escapes what is not printable",
      text: "strings.quote(value)",
      input: single('a"b\n'),
      want: '"a\\"b\\n"',
    },
    {
      reason: "format with a precision on %f",
      text: "'%.2f'.format([value])",
      input: single(1.5),
      want: "1.50",
    },
    {
      reason: "sources holds what status.sources lists",
      text: "sources[0].namespace + '/' + sources[0].name",
      input: single("x"),
      want: "team-a/db",
    },
    {
      reason: "bytes returned as they are map to base64 text, as protobuf's JSON mapping writes them",
      text: "bytes(value)",
      input: single("hi"),
      want: "aGk=",
    },
    {
      reason: "a JSON object with a __proto__ key stays a key",
      text: "value",
      input: single(JSON.parse('{"__proto__": {"x": 1}}')),
      want: JSON.parse('{"__proto__": {"x": 1}}'),
    },
  ])("$reason", ({ text, input, want }) => {
    expect(run(text, SINGLE, input)).toEqual({ ok: true, value: want });
  });

  it.each([
    { reason: "values.size() counts the values", text: "values.size()", want: 3 },
    { reason: "a list result stays a list", text: "values.map(v, v * 10)", want: [10, 20, 30] },
    { reason: "filter keeps the matching values", text: "values.filter(v, v > 1)", want: [2, 3] },
  ])("mode Multiple: $reason", ({ text, want }) => {
    expect(run(text, MULTIPLE, { values: [1, 2, 3], sources: [] })).toEqual({ ok: true, value: want });
  });

  it("binds default only when the request has one", () => {
    const shape = { mode: "Single" as const, hasDefault: true };
    expect(
      run("value == '' ? default : value", shape, { value: "", default: "fallback", sources: [] }),
    ).toEqual({
      ok: true,
      value: "fallback",
    });
  });
});

describe("a transform that cannot compile is InvalidSpec with its position", () => {
  it.each([
    {
      reason: "a parse error names the line and column",
      text: "value +",
      shape: SINGLE,
      want: ["does not parse", "line 1, column 8"],
    },
    {
      reason: "a type error is found before anything runs",
      text: "1 + 'a'",
      shape: SINGLE,
      want: ["does not type-check", "int + string"],
    },
    {
      reason: "values is not bound in mode Single, and the message says which is",
      text: "values.size()",
      shape: SINGLE,
      want: ["Unknown variable: values", "use value"],
    },
    {
      reason: "value is not bound in mode Multiple",
      text: "value",
      shape: MULTIPLE,
      want: ["Unknown variable: value", "mode Multiple binds values"],
    },
    {
      reason: "default is not bound without a default",
      text: "default",
      shape: SINGLE,
      want: ["Unknown variable: default", "only when the request sets a default"],
    },
    {
      reason: "matches() is refused: JavaScript regexes can backtrack without bound",
      text: "value.matches('^(a+)+$')",
      shape: SINGLE,
      want: ["matches() is not available"],
    },
    {
      reason: "a second line is counted in the position",
      text: "value\n  + ",
      shape: SINGLE,
      want: ["line 2"],
    },
    { reason: "an empty expression", text: "  ", shape: SINGLE, want: ["non-empty"] },
    {
      reason: "an expression over 4096 characters",
      text: "1+".repeat(2100) + "1",
      shape: SINGLE,
      want: ["over the limit of 4096"],
    },
  ])("$reason", ({ text, shape, want }) => {
    let caught: unknown;
    try {
      compileTransform(text, shape, "spec.transform");
    } catch (err) {
      caught = err;
    }
    expect(isResolutionError(caught) && caught.reason).toBe("InvalidSpec");
    const message = (caught as Error).message;
    expect(message.startsWith("spec.transform:")).toBe(true);
    for (const part of want) expect(message).toContain(part);
  });

  it("compiles each text once: the same text gives the same compiled transform", () => {
    const a = compileTransform("value + 'x'", SINGLE);
    const b = compileTransform("value + 'x'", SINGLE);
    expect(b).toBe(a);
  });

  it("a cached error names the field of the request that asked this time", () => {
    expect(() => compileTransform("value +", SINGLE, "a.transform")).toThrow(/^a\.transform:/);
    expect(() => compileTransform("value +", SINGLE, "b.transform")).toThrow(/^b\.transform:/);
  });
});

const many = (n: number) => Array.from({ length: n }, (_, i) => i);

describe("a transform that fails at run time is TransformFailed, never a throw or a hang", () => {
  it.each([
    {
      reason: "a missing key names the key and where",
      text: "value.port",
      shape: SINGLE,
      input: single({ host: "db" }),
      want: ["No such key: port", "column"],
    },
    {
      reason: "bad base64 is an error, not a shorter value",
      text: "string(base64.decode(value))",
      shape: SINGLE,
      input: single("the text!"),
      want: ["not base64"],
    },
    {
      reason: "a type error on the data",
      text: "value + 1",
      shape: SINGLE,
      input: single("text"),
      want: ["no such overload"],
    },
    {
      reason: "division by zero",
      text: "value / 0",
      shape: SINGLE,
      input: single(1),
      want: ["division by zero"],
    },
    {
      reason: "an empty optional must be ended with orValue",
      text: "value.?port",
      shape: SINGLE,
      input: single({}),
      want: ["empty optional"],
    },
    {
      reason: "a double that JSON cannot hold",
      text: "double(value) / 0.0",
      shape: SINGLE,
      input: single(1),
      want: ["Infinity"],
    },
    {
      reason: "nested comprehensions run out of the cost budget",
      text: "values.map(a, values.map(b, values.map(c, a + b + c)))",
      shape: MULTIPLE,
      input: { values: many(200), sources: [] },
      want: ["cost budget of 1000000"],
    },
    {
      reason: "doubling a string with cel.bind runs out of budget before memory",
      text: "cel.bind(a, value + value, cel.bind(b, a + a, cel.bind(c, b + b, cel.bind(d, c + c, cel.bind(e, d + d, cel.bind(f, e + e, cel.bind(g, f + f, cel.bind(h, g + g, h + h))))))))",
      shape: SINGLE,
      input: single("x".repeat(30000)),
      want: ["cost budget"],
    },
    {
      reason: "a budget error cannot be absorbed by ||",
      text: "values.exists(a, values.map(b, values.map(c, c)).size() < 0) || true",
      shape: MULTIPLE,
      input: { values: many(300), sources: [] },
      want: ["cost budget"],
    },
    {
      reason: "replace checks the size it would build before building it",
      text: "value.replace('', value)",
      shape: SINGLE,
      input: single("x".repeat(30000)),
      want: ["replace would build", "over the limit"],
    },
    {
      reason: "a result over maxValueBytes",
      text: "[value, value]",
      shape: SINGLE,
      input: single("x".repeat(20000)),
      want: ["result is over the limit of 32768 bytes of JSON (ValueTooLarge)"],
    },
    {
      reason: "an int beyond what a JSON number holds exactly",
      text: "9007199254740993",
      shape: SINGLE,
      input: single(1),
      want: ["2^53"],
    },
  ])("$reason", ({ text, shape, input, want }) => {
    const started = Date.now();
    const got = run(text, shape, input);
    expect(got.ok).toBe(false);
    if (got.ok) return;
    expect(got.reason).toBe("TransformFailed");
    for (const part of want) expect(got.message).toContain(part);
    // Bounded, not merely eventually failing: the budget stops it in well under a second.
    expect(Date.now() - started).toBeLessThan(5000);
  });

  it.each([
    { reason: "a conversion error", text: "int(value)", keeps: "int() type error" },
    {
      reason: "a map lookup keyed by the value quotes the key",
      text: "{'a': 1}[value]",
      keeps: "No such key",
    },
    { reason: "a list index by the value", text: "[1][value]", keeps: "No such key" },
    {
      reason: "a duration parse quotes part of the text",
      text: "duration(value)",
      keeps: "Invalid duration string",
    },
    {
      reason: "a key of the input is data too",
      text: "value[value.k]",
      keeps: "No such key",
      input: { k: "s3cr3t-token" },
    },
  ])("never puts the value read in a message: $reason", ({ text, keeps, input }) => {
    const got = run(text, SINGLE, single(input ?? "s3cr3t-token"));
    expect(got.ok).toBe(false);
    if (got.ok) return;
    expect(got.message).toContain(keeps);
    expect(got.message).not.toContain("cr3t");
  });

  it("keeps a key the expression itself names", () => {
    const got = run("value.missing", SINGLE, single({ present: "s3cr3t-token" }));
    expect(!got.ok && got.message).toContain("No such key: missing");
  });
});
