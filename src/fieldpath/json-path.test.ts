import { evaluateFieldPath } from "./index.ts";
import { expectPathError } from "../../test/harness/field-path.ts";

const source = {
  metadata: {
    name: "node-1",
    annotations: { "crossplane.io/external-name": "ext-1" },
    labels: { "kubernetes.io/hostname": "node-1", "app.kubernetes.io/name": "storage" },
  },
  spec: {
    ports: [
      { name: "http", port: 80 },
      { name: "https", port: 443 },
      { name: "metrics", port: 9090 },
    ],
    replicas: 3,
    tags: { "0": "zero-key", "semi;colon": "s", "caret^": "c", "tilde~": "t", "%@%": "p" },
  },
  data: { "key.with.dots": "dotted", ".dockerconfigjson": "e30=" },
  status: {
    atProvider: { arn: "arn:aws:x" },
    conditions: [
      { type: "Synced", status: "True" },
      { type: "Ready", status: "True" },
    ],
    addresses: [
      { type: "Hostname", address: "node-1" },
      { type: "InternalIP", address: "10.0.0.1" },
      { type: "InternalIP", address: "10.0.0.2" },
    ],
  },
};

const tree = { a: { name: "x", b: [{ name: "y" }, { c: { name: "z" } }] } };

describe("JSONPath syntax: values", () => {
  const cases: { path: string; obj?: unknown; want: unknown; reason: string }[] = [
    { path: "$.status.atProvider.arn", want: "arn:aws:x", reason: "a plain JSONPath" },
    { path: "{.status.atProvider.arn}", want: "arn:aws:x", reason: "kubectl's {} form" },
    { path: "{$.status.atProvider.arn}", want: "arn:aws:x", reason: "kubectl's {} form with an explicit $" },
    {
      path: "{.metadata.labels.kubernetes\\.io/hostname}",
      want: "node-1",
      reason: "kubectl's backslash-escaped dot in a name",
    },
    {
      path: "$.metadata.annotations['crossplane.io/external-name']",
      want: "ext-1",
      reason: "a quoted key with dots and slashes",
    },
    {
      path: `$['metadata']["labels"]['app.kubernetes.io/name']`,
      want: "storage",
      reason: "bracket notation throughout, both quotes",
    },
    { path: "$.spec.replicas", want: 3, reason: "a number stays a number" },
    { path: "$.spec.ports[1].port", want: 443, reason: "an index" },
    { path: "$.spec.ports[-1].name", want: "metrics", reason: "a negative index counts from the end" },
    { path: "$.spec.ports[*].port", want: [80, 443, 9090], reason: "several results make a list" },
    { path: "{.spec.ports[*].name}", want: ["http", "https", "metrics"], reason: "kubectl's list form" },
    { path: "$.spec.ports.*.port", want: [80, 443, 9090], reason: "a dotted wildcard" },
    { path: "$.spec.ports[0:1].name", want: "http", reason: "a slice with one result yields that value" },
    { path: "$.spec.ports[::-1].port", want: [9090, 443, 80], reason: "a reversed slice" },
    { path: "$.spec.ports[-2:].port", want: [443, 9090], reason: "a slice from the end" },
    { path: "$.spec.ports[0,2].name", want: ["http", "metrics"], reason: "a union of indexes" },
    {
      path: "$.data['key.with.dots','.dockerconfigjson']",
      want: ["dotted", "e30="],
      reason: "a union of quoted names",
    },
    {
      path: '$.status.addresses[?(@.type=="InternalIP")].address',
      want: ["10.0.0.1", "10.0.0.2"],
      reason: "a JSONPath filter returns every match",
    },
    {
      path: '{.status.conditions[?(@.type=="Ready")].status}',
      want: "True",
      reason: "a filter with one match yields that value",
    },
    {
      path: "$.status.addresses[?(@.type!='Hostname')].address",
      want: ["10.0.0.1", "10.0.0.2"],
      reason: "!= in JSONPath",
    },
    { path: "$.spec.ports[?(@.port==443)].name", want: "https", reason: "a number literal in JSONPath" },
    {
      path: '$..[?(@.type=="InternalIP")].address',
      want: ["10.0.0.1", "10.0.0.2"],
      reason: "a filter under recursive descent",
    },
    { path: "$..name", obj: tree, want: ["x", "y", "z"], reason: "recursive descent, in document order" },
    { path: "$.a..name", obj: tree, want: ["x", "y", "z"], reason: "recursive descent below a field" },
    { path: "$.a.b..name", obj: tree, want: ["y", "z"], reason: "recursive descent below a list" },
    {
      path: "$..*",
      obj: { a: [1, { b: 2 }] },
      want: [[1, { b: 2 }], 1, { b: 2 }, 2],
      reason: "every descendant",
    },
    { path: "$..[0]", obj: { a: [1, 2], b: { c: [3] } }, want: [1, 3], reason: "an index under descent" },
    { path: "$..[1:]", obj: { a: [1, 2], b: { c: [3, 4] } }, want: [2, 4], reason: "a slice under descent" },
    { path: "$.spec.tags['semi;colon']", want: "s", reason: "a key with ; (jsonpath-plus would split it)" },
    { path: "$.spec.tags['caret^']", want: "c", reason: "a key with ^ (jsonpath-plus's parent operator)" },
    {
      path: "$.spec.tags.tilde~",
      want: "t",
      reason: "a key with ~ (jsonpath-plus's property-name operator)",
    },
    { path: "$.spec.tags['%@%']", want: "p", reason: "jsonpath-plus's internal escape text as a key" },
    { path: "$.spec.tags['0']", want: "zero-key", reason: "a quoted digit key" },
    { path: "$", obj: { a: 1 }, want: { a: 1 }, reason: "the root" },
    { path: "$.a\\😀b", obj: { "a😀b": 1 }, want: 1, reason: "an escaped emoji stays one character" },
    {
      path: "{.a\\\ud800}",
      obj: { "a\ud800": 1 },
      want: 1,
      reason: "an escaped lone surrogate never eats the }",
    },
    {
      path: "$.*",
      obj: { "*": 1, "..": { x: 2 }, $: 3 },
      want: [1, { x: 2 }, 3],
      reason: "keys spelled like operators are data to jsonpath-plus's wildcard",
    },
    { path: "$..x", obj: { "..": { x: 2 } }, want: 2, reason: "and to its descent" },
    { path: "$['*','..']", obj: { "*": 1, "..": 2 }, want: [1, 2], reason: "and can be named" },
    { path: "$[0]", obj: ["first"], want: "first", reason: "a list document" },
  ];
  it.each(cases)("$path: $reason", ({ path, obj, want }) => {
    expect(evaluateFieldPath(obj ?? source, path)).toEqual({ found: true, value: want });
  });
});

describe("JSONPath syntax: misses", () => {
  const cases: { path: string; missing: string; reason: string }[] = [
    {
      path: "$.status.nope",
      missing: `"$.status" has no field "nope"`,
      reason: "one value, one absent field",
    },
    {
      path: "{.status.nope}",
      missing: `"{.status}" has no field "nope"`,
      reason: "the {} form keeps its braces",
    },
    { path: "$.nope", missing: `the object has no field "nope"`, reason: "a miss at the first step" },
    {
      path: "$.spec.ports[*].nope",
      missing: `nothing matches ".nope" in "$.spec.ports[*]"`,
      reason: "several values, none with the field",
    },
    {
      path: "$.spec.ports[9]",
      missing: `"$.spec.ports" has 3 items, no index 9`,
      reason: "index out of range",
    },
    {
      path: "$.spec.tags[0]",
      missing: `"$.spec.tags" is an object, not a list`,
      reason: "a JSONPath index only selects list items",
    },
    {
      path: '$.status.conditions[?(@.type=="Gone")]',
      missing: `"$.status.conditions" has 2 items, none where @.type=="Gone"`,
      reason: "a filter without match",
    },
    {
      path: "$..nothingHere",
      missing: `nothing matches "..nothingHere" in the object`,
      reason: "descent without match",
    },
    {
      path: "$.spec.replicas[*]",
      missing: `nothing matches "[*]" in "$.spec.replicas"`,
      reason: "a wildcard on a number",
    },
    {
      path: "$.spec.ports[5:]",
      missing: `nothing matches "[5:]" in "$.spec.ports"`,
      reason: "an empty slice",
    },
  ];
  it.each(cases)("$path: $reason", ({ path, missing }) => {
    expect(evaluateFieldPath(source, path)).toEqual({ found: false, missing });
  });

  it.each([
    { obj: null, reason: "null" },
    { obj: 0, reason: "zero (jsonpath-plus answers undefined for a falsy document)" },
    { obj: "", reason: "the empty string" },
  ])("wildcards and descent on $reason find nothing", ({ obj }) => {
    for (const path of ["$[*]", "$..*", "$..a", "$[0:2]"])
      expect(evaluateFieldPath(obj, path).found).toBe(false);
  });
});

describe("JSONPath syntax: parse errors", () => {
  const cases: { path: string; position: number; expected: string; reason: string }[] = [
    { path: "$.", position: 3, expected: `expected a field name or "*"`, reason: "a trailing dot" },
    {
      path: "$a",
      position: 2,
      expected: `expected ".", "[" or the end of the path, found "a"`,
      reason: "no dot after $",
    },
    {
      path: "{.a",
      position: 4,
      expected: `expected "}", found the end of the path`,
      reason: "an unclosed {",
    },
    { path: "{}", position: 2, expected: `expected "$", "." or "[", found "}"`, reason: "empty braces" },
    { path: "{a}", position: 2, expected: `expected "$", "." or "["`, reason: "no dot inside braces" },
    {
      path: "{.a}{.b}",
      position: 4,
      expected: `the closing "}" as the last character, found "}"`,
      reason: "two templates",
    },
    {
      path: "$[",
      position: 3,
      expected: `"*", an index, a slice, a quoted name or a filter`,
      reason: "an unclosed [",
    },
    { path: "$[a]", position: 3, expected: "a quoted name", reason: "JSONPath brackets need quotes" },
    { path: "$[1:2:3:4]", position: 8, expected: `expected "]"`, reason: "at most three slice parts" },
    { path: "$['a' 'b']", position: 7, expected: `expected "," or "]"`, reason: "a union without comma" },
    { path: "$['a',]", position: 7, expected: "an index or a quoted name", reason: "a trailing comma" },
    { path: "$..", position: 4, expected: `a field name, "*" or "["`, reason: "a descent to nothing" },
    {
      path: "$.a..b..c..d",
      position: 10,
      expected: "at most 2 recursive descents",
      reason: "descents are bounded",
    },
    { path: "$[99999999999999999999]", position: 3, expected: "an index of at most", reason: "a huge index" },
    {
      path: "$[-99999999999999999999]",
      position: 3,
      expected: "an index of at most",
      reason: "a huge negative index",
    },
    {
      path: "$[0:99999999999999999999]",
      position: 5,
      expected: "an index of at most",
      reason: "a huge slice end",
    },
    {
      path: "$.a\\",
      position: 5,
      expected: "a character after the backslash",
      reason: "a trailing backslash",
    },
    { path: "$[?(@.price<10)]", position: 12, expected: `"==" or "!="`, reason: "only equality filters" },
    { path: "$.a[?(@.x)]", position: 10, expected: `"==" or "!="`, reason: "no existence filters" },
    { path: "$..book[(@.length-1)]", position: 9, expected: "a filter", reason: "no script index" },
    { path: "$.@string()", position: 3, expected: "a field name", reason: "no jsonpath-plus type operators" },
    { path: "$.a b", position: 4, expected: `found " "`, reason: "whitespace ends a name" },
  ];
  it.each(cases)("$path: $reason", ({ path, position, expected }) =>
    expectPathError(path, position, expected),
  );
});
