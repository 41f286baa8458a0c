import { onlySpaceFrom, peekMetadataString, skipValue, UNREADABLE, walkObject } from "./json-peek.ts";

const referable = {
  apiVersion: "referable.dev/v1alpha1",
  kind: "Referable",
  metadata: {
    annotations: { resourceVersion: "from-an-annotation", 'a"b\\': "x" },
    creationTimestamp: "2026-11-25T00:00:00Z",
    generation: 1,
    managedFields: [{ fieldsV1: { "f:status": { "f:resourceVersion": {} } }, manager: "m" }],
    name: "r",
    resourceVersion: "12345",
    uid: "u",
  },
  spec: { source: { metadata: { resourceVersion: "spec" } } },
  status: { value: { metadata: { resourceVersion: "from-the-value" } }, sources: [{ resourceVersion: "9" }] },
};

/** What a full parse gives, as the peek should. */
const parsed = (text: string): unknown =>
  (JSON.parse(text) as { metadata?: { resourceVersion?: unknown } }).metadata?.resourceVersion;

describe("peekMetadataString", () => {
  it.each([
    ["a Referable as the API server writes it", JSON.stringify(referable)],
    ["with spaces and newlines", JSON.stringify(referable, null, 2)],
    ["metadata last", JSON.stringify({ status: referable.status, metadata: referable.metadata })],
    ["an escaped resourceVersion", JSON.stringify({ metadata: { resourceVersion: 'a"\\b\u00e9' } })],
    ["no resourceVersion", JSON.stringify({ metadata: { name: "r" } })],
    ["no metadata", JSON.stringify({ kind: "Status", status: { metadata: { resourceVersion: "1" } } })],
    ["an empty object", "{}"],
    ["empty metadata", '{"metadata":{}}'],
    ["two resourceVersions (the last counts)", '{"metadata":{"resourceVersion":"1","resourceVersion":"2"}}'],
    ["two metadata (the last counts)", '{"metadata":{"resourceVersion":"1"},"metadata":{"name":"n"}}'],
    [
      "numbers, booleans and null around it",
      '{"a":1.5e3,"b":true,"metadata":{"g":-1,"resourceVersion":"7","n":null}}',
    ],
  ])("reads what a parse reads: %s", (_name, text) => {
    expect(peekMetadataString(text, "resourceVersion")).toBe(parsed(text));
  });

  it("reads the metadata's own field, never one of that name elsewhere", () => {
    expect(peekMetadataString(JSON.stringify(referable), "resourceVersion")).toBe("12345");
  });

  it.each([
    ["a resourceVersion that is not a string", '{"metadata":{"resourceVersion":5}}'],
    ["metadata that is not an object", '{"metadata":"x"}'],
    ["an array", "[1]"],
    ["text cut short", JSON.stringify(referable).slice(0, 200)],
    ["an escaped key", '{"meta\\u0064ata":{"resourceVersion":"1"}}'],
    ["trailing text", '{"metadata":{"resourceVersion":"1"}} x'],
    ["not JSON", "<html>"],
  ])("gives up on %s (the caller then parses it)", (_name, text) => {
    expect(peekMetadataString(text, "resourceVersion")).toBe(UNREADABLE);
  });
});

describe("walkObject", () => {
  /** The members as the walk sees them: each key and its value parsed from the span skipValue finds. */
  function walk(text: string): Array<[string, unknown]> | -1 {
    const seen: Array<[string, unknown]> = [];
    const end = walkObject(text, 0, (key, at) => {
      const valueEnd = skipValue(text, at);
      if (valueEnd >= 0) seen.push([key, JSON.parse(text.slice(at, valueEnd))]);
      return valueEnd;
    });
    return end < 0 || !onlySpaceFrom(text, end) ? -1 : seen;
  }

  it.each([
    ["a Referable", JSON.stringify(referable)],
    ["pretty", JSON.stringify(referable, null, 2)],
    [
      "escapes and brackets in strings",
      JSON.stringify({ a: 'x\\"}]', b: ["\\", '\\"', "{"], c: { d: "\\\\" } }),
    ],
    ["numbers, booleans, null", '{"a":-1.5e-3,"b":true,"c":null,"d":[1,2]}'],
    ["empty", "{}"],
  ])("finds each member's value: %s", (_name, text) => {
    expect(walk(text)).toEqual(Object.entries(JSON.parse(text) as object));
  });

  it.each([
    ["not an object", "[1]"],
    ["an escaped key", '{"a\\u0062":1}'],
    ["a string left open", '{"a":"b}'],
    ["an object left open", '{"a":{"b":1}'],
    ["a missing colon", '{"a" 1}'],
    ["a missing comma", '{"a":1 "b":2}'],
  ])("refuses %s", (_name, text) => {
    expect(walk(text)).toBe(-1);
  });
});
