import { evaluateFieldPath } from "./index.ts";
import { expectPathError } from "../../test/harness/field-path.ts";

/** A managed resource as the API server would return it, with the awkward corners users hit. */
const source = {
  apiVersion: "datasync.aws.upbound.io/v1beta1",
  kind: "LocationS3",
  metadata: {
    name: "source-location",
    annotations: { "crossplane.io/external-name": "loc-07db7abfc326c50aa" },
    labels: { "app.kubernetes.io/name": "storage", tier: "backend" },
  },
  spec: {
    ports: [
      { name: "http", port: 80 },
      { name: "https", port: 443, nodePort: 30443 },
    ],
    features: [
      { name: "a", enabled: false },
      { name: "b", enabled: true },
    ],
    members: [
      { id: 1, metadata: { labels: { "app.kubernetes.io/name": "a" } } },
      { id: 2, metadata: { labels: { "app.kubernetes.io/name": "b" } } },
    ],
    words: ["alpha", "beta"],
    matrix: [
      [1, 2],
      [3, [4, 5]],
    ],
    replicas: 3,
    paused: false,
    empty: "",
    zero: 0,
    nothing: null,
    tags: { "0": "zero-key", "key.with.dots": "v" },
  },
  data: {
    "key.with.dots": "dotted",
    ".dockerconfigjson": "e30=",
    "it's": "single",
    'say "hi"': "double",
    "back\\slash": "backslash",
    "": "empty-key",
  },
  status: {
    atProvider: { arn: "arn:aws:datasync:us-east-2:111222333444:location/loc-07db7abfc326c50aa" },
    conditions: [
      { type: "Synced", status: "True" },
      { type: "Ready", status: "True", observedGeneration: 3 },
      { type: "Healthy", status: "False", observedGeneration: 2 },
    ],
    addresses: [
      { type: "Hostname", address: "node-1" },
      { type: "InternalIP", address: "10.0.0.1" },
      { type: "InternalIP", address: "10.0.0.2" },
    ],
  },
};

describe("field-path syntax: values", () => {
  const cases: { path: string; want: unknown; reason: string }[] = [
    {
      path: "status.atProvider.arn",
      want: source.status.atProvider.arn,
      reason: "the contract's dotted example",
    },
    { path: "spec.ports[0].port", want: 80, reason: "a list index, and a number stays a number" },
    {
      path: "metadata.annotations[crossplane.io/external-name]",
      want: "loc-07db7abfc326c50aa",
      reason: "an unquoted bracket key may hold dots and slashes (Crossplane)",
    },
    {
      path: "metadata.labels['app.kubernetes.io/name']",
      want: "storage",
      reason: "a single-quoted key with dots",
    },
    { path: 'data["key.with.dots"]', want: "dotted", reason: "a double-quoted key with dots" },
    { path: "data[.dockerconfigjson]", want: "e30=", reason: "an unquoted key that starts with a dot" },
    { path: "data['it\\'s']", want: "single", reason: "an escaped single quote inside single quotes" },
    { path: `data["it's"]`, want: "single", reason: "a single quote needs no escape inside double quotes" },
    { path: 'data["say \\"hi\\""]', want: "double", reason: "escaped double quotes inside double quotes" },
    { path: "data['back\\\\slash']", want: "backslash", reason: "an escaped backslash" },
    { path: "data['']", want: "empty-key", reason: "the empty key can be quoted" },
    { path: "spec.matrix[1][1][0]", want: 4, reason: "nested lists" },
    { path: "spec.matrix[1]", want: [3, [4, 5]], reason: "a list value stays a list" },
    { path: "metadata.labels", want: source.metadata.labels, reason: "an object value stays an object" },
    { path: "spec.paused", want: false, reason: "false is a value, not a miss" },
    { path: "spec.empty", want: "", reason: "the empty string is a value" },
    { path: "spec.zero", want: 0, reason: "zero is a value" },
    { path: "spec.nothing", want: null, reason: "an explicit null is a value" },
    { path: "spec.tags[0]", want: "zero-key", reason: "digits in brackets on a map are a key" },
    { path: "spec.tags.0", want: "zero-key", reason: "a dotted name may be digits, and is a key" },
    { path: "[metadata].name", want: "source-location", reason: "a path may start with a bracket" },
    { path: "['metadata']['name']", want: "source-location", reason: "every step may be quoted" },
    {
      path: 'status.conditions[?(@.type=="Ready")].status',
      want: "True",
      reason: "the contract's filter example",
    },
    {
      path: 'status.addresses[?(@.type=="InternalIP")].address',
      want: "10.0.0.1",
      reason: "a filter picks the first match, so the value is never a list by surprise",
    },
    {
      path: 'status.conditions[?(@.type!="Synced")].type',
      want: "Ready",
      reason: "!= picks the first item that differs",
    },
    {
      path: "status.conditions[?(@.observedGeneration==2)].type",
      want: "Healthy",
      reason: "a number literal",
    },
    { path: "spec.features[?(@.enabled==true)].name", want: "b", reason: "a boolean literal" },
    { path: "spec.features[?(@.enabled!=true)].name", want: "a", reason: "!= a boolean" },
    {
      path: "spec.ports[?(@.nodePort!=1)].name",
      want: "https",
      reason: "!= skips items that lack the field, as kubectl does",
    },
    {
      path: "status.conditions[?( @.type == 'Ready' )].observedGeneration",
      want: 3,
      reason: "spaces around the parts, and a single-quoted literal",
    },
    { path: `spec.ports[?(@['name']=="https")].port`, want: 443, reason: "a quoted key in the filter path" },
    {
      path: "spec.members[?(@.metadata.labels['app.kubernetes.io/name']==\"b\")].id",
      want: 2,
      reason: "a nested filter path with a quoted key holding dots and slashes",
    },
    { path: 'spec.words[?(@=="beta")]', want: "beta", reason: "@ alone compares the item itself" },
    {
      path: "spec.matrix[?(@[0]==3)][1][1]",
      want: 5,
      reason: "an index in the filter path, then more steps",
    },
  ];
  it.each(cases)("$path: $reason", ({ path, want }) => {
    expect(evaluateFieldPath(source, path)).toEqual({ found: true, value: want });
  });

  it("returns a reference into the object, not a copy", () => {
    const got = evaluateFieldPath(source, "spec.ports");
    expect(got.found && got.value).toBe(source.spec.ports);
  });
});

describe("field-path syntax: misses", () => {
  const cases: { path: string; missing: string; reason: string }[] = [
    {
      path: "status.atProvider.id",
      missing: `"status.atProvider" has no field "id"`,
      reason: "names the parent and the absent field",
    },
    {
      path: "nope",
      missing: `the object has no field "nope"`,
      reason: "a miss at the first step names the object",
    },
    {
      path: "spec.ports[5]",
      missing: `"spec.ports" has 2 items, no index 5`,
      reason: "an index out of range",
    },
    {
      path: "spec.ports.name",
      missing: `"spec.ports" is a list, not an object with a field "name"`,
      reason: "a name on a list",
    },
    {
      path: "spec.replicas.x",
      missing: `"spec.replicas" is a number, not an object`,
      reason: "a name on a number, saying the type but never the value",
    },
    { path: "spec.nothing.x", missing: `"spec.nothing" is null, not an object`, reason: "a name on null" },
    {
      path: "spec.words[0][1]",
      missing: `"spec.words[0]" is a string, not a list`,
      reason: "an index on a string",
    },
    {
      path: 'status.conditions[?(@.type=="Gone")].status',
      missing: `"status.conditions" has 3 items, none where @.type=="Gone"`,
      reason: "a filter that matches nothing",
    },
    {
      path: 'status.conditions[?(@.observedGeneration=="2")]',
      missing: `"status.conditions" has 3 items, none where @.observedGeneration=="2"`,
      reason: 'comparison is strict: the string "2" is not the number 2',
    },
    {
      path: 'metadata.labels[?(@.x=="y")]',
      missing: `"metadata.labels" is an object, not a list to filter`,
      reason: "a filter on a map",
    },
    {
      path: 'data["key"]',
      missing: `"data" has no field "key"`,
      reason: "a quoted key is a key",
    },
  ];
  it.each(cases)("$path: $reason", ({ path, missing }) => {
    expect(evaluateFieldPath(source, path)).toEqual({ found: false, missing });
  });

  it.each([
    { obj: undefined, reason: "no object at all" },
    { obj: "text", reason: "a string document" },
    { obj: [1, 2], reason: "a list document" },
  ])("misses on $reason", ({ obj }) => {
    expect(evaluateFieldPath(obj, "a.b").found).toBe(false);
  });
});

describe("field-path syntax: parse errors", () => {
  const cases: { path: string; position: number; expected: string; reason: string }[] = [
    {
      path: "spec.[0",
      position: 6,
      expected: `expected a field name, found "["`,
      reason: "a bracket right after a dot",
    },
    {
      path: "spec[0",
      position: 7,
      expected: `expected "]", found the end of the path`,
      reason: "an unclosed bracket",
    },
    {
      path: "",
      position: 1,
      expected: "expected a field name, found the end of the path",
      reason: "the empty path",
    },
    {
      path: ".status",
      position: 1,
      expected: `write a kubectl JSONPath as "{.status}"`,
      reason: "a leading dot hints at {}",
    },
    { path: "spec.", position: 6, expected: "expected a field name", reason: "a trailing dot" },
    { path: "spec..a", position: 6, expected: "expected a field name", reason: "two dots" },
    { path: "spec[]", position: 6, expected: "expected an index or a key", reason: "empty brackets" },
    {
      path: "spec[-1]",
      position: 6,
      expected: "an index of 0 or more",
      reason: "negative indexes are not allowed",
    },
    {
      path: "spec[99999999999999999999]",
      position: 6,
      expected: "expected an index of at most 9007199254740991",
      reason: "an index beyond the safe integers",
    },
    {
      path: "spec['a]",
      position: 9,
      expected: "a closing ' for the string opened at position 6",
      reason: "an unclosed quote",
    },
    {
      path: "spec['a\\x']",
      position: 9,
      expected: `expected \\\\, \\' or \\" after a backslash`,
      reason: "an unknown escape",
    },
    {
      path: "spec[0]x",
      position: 8,
      expected: `expected ".", "[" or the end of the path, found "x"`,
      reason: "text after ]",
    },
    { path: "spec ports", position: 5, expected: `found " "`, reason: "whitespace in a name" },
    {
      path: "a]",
      position: 2,
      expected: `expected ".", "[" or the end of the path, found "]"`,
      reason: "a stray ]",
    },
    {
      path: "a[b c]",
      position: 4,
      expected: `expected "]", found " "`,
      reason: "whitespace in an unquoted key",
    },
    {
      path: "a[?(@.x>1)]",
      position: 8,
      expected: `expected ".", "[", "==" or "!=", found ">"`,
      reason: "only == and !=",
    },
    {
      path: "a[?(@.x==)]",
      position: 10,
      expected: "expected a quoted string, a number, true or false",
      reason: "no literal",
    },
    {
      path: "a[?(@.x==foo)]",
      position: 10,
      expected: "a quoted string, a number, true or false",
      reason: "a bare word",
    },
    {
      path: "a[?(@.x==null)]",
      position: 10,
      expected: "a quoted string, a number, true or false",
      reason: "null is not a literal here",
    },
    { path: 'a[?(@.x=="y"]', position: 13, expected: `expected ")"`, reason: "an unclosed filter" },
    { path: 'a[?(@.x=="y")', position: 14, expected: `expected "]"`, reason: "a filter without ]" },
    {
      path: 'a[?(x=="y")]',
      position: 5,
      expected: `expected a field path that starts with "@"`,
      reason: "no @",
    },
    { path: 'a[?@.x=="y"]', position: 4, expected: `expected "("`, reason: "no parenthesis" },
    {
      path: "a[?(@.x==1e999)]",
      position: 10,
      expected: "expected a finite number",
      reason: "an infinite number",
    },
    {
      path: "a[?(@.x==01)]",
      position: 11,
      expected: `expected ")"`,
      reason: "numbers follow JSON (no leading zero)",
    },
    {
      path: "a[?(@.x)]",
      position: 8,
      expected: `expected ".", "[", "==" or "!="`,
      reason: "existence filters are not supported",
    },
    {
      path: "a[?(@.b[?(@.c==1)]==1)]",
      position: 9,
      expected: "a filter cannot hold another filter",
      reason: "nested filters",
    },
    {
      path: "a[?(@.x=='y' || @.z=='w')]",
      position: 14,
      expected: `expected ")", found "|"`,
      reason: "no boolean operators",
    },
  ];
  it.each(cases)("$path: $reason", ({ path, position, expected }) =>
    expectPathError(path, position, expected),
  );
});
