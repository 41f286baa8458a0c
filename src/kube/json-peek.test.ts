import { peekMetadataString, UNREADABLE } from "./json-peek.ts";

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
