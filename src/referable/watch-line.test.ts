import type { KubeObject } from "../kube/client.ts";
import { projectReferable } from "./spec.ts";
import { sameSpecKept } from "./compact.ts";
import { METADATA, parseReferableEvent } from "./watch-line.ts";

function referable(overrides: Record<string, unknown> = {}, metadata: Record<string, unknown> = {}) {
  return {
    apiVersion: "referable.dev/v1alpha1",
    kind: "Referable",
    metadata: {
      annotations: { "kubectl.kubernetes.io/last-applied-configuration": '{"spec":{"a":"}\\"{"}}' },
      creationTimestamp: "2026-11-27T00:00:00Z",
      finalizers: ["referable.dev/export"],
      generation: 2,
      labels: { team: "a", "app.kubernetes.io/name": 'we"ird\\' },
      managedFields: [
        { fieldsV1: { "f:metadata": { "f:name": {} }, "f:spec": { 'k:{"a":"]"}': {} } }, manager: "m" },
        { fieldsV1: { "f:status": { "f:value": {} } }, manager: "referable", subresource: "status" },
      ],
      name: "r",
      ownerReferences: [{ apiVersion: "v1", kind: "ConfigMap", name: "x", uid: "o" }],
      resourceVersion: "42",
      uid: "u-1",
      ...metadata,
    },
    spec: {
      source: { apiVersion: "v1", kind: "ConfigMap", namespace: "a", name: "db", fieldPath: ".data.x" },
    },
    status: {
      observedGeneration: 2,
      conditions: [{ type: "Ready", status: "True", reason: "Available", lastTransitionTime: "t" }],
      value: { nested: ["}", "{", '"'], n: 1.5e3, t: true, z: null },
    },
    ...overrides,
  };
}

/** What the cache keeps of the object a full parse gives: the same members, the others gone. */
function expected(line: string): unknown {
  const event = JSON.parse(line) as { type: string; object: Record<string, unknown> };
  const { apiVersion, kind, spec, status } = event.object;
  const m = event.object.metadata as Record<string, unknown>;
  const metadata = Object.fromEntries([...METADATA].filter((k) => k in m).map((k) => [k, m[k]]));
  const object = Object.fromEntries(
    Object.entries({ apiVersion, kind, spec, status }).filter(([k]) => k in event.object),
  );
  return { type: event.type, object: { ...object, metadata } };
}

const none = () => undefined;
const line = (type: string, object: unknown, pretty = false) =>
  JSON.stringify({ type, object }, null, pretty ? 2 : undefined);

describe("parseReferableEvent", () => {
  it.each([
    ["a Referable as the API server sends it", line("MODIFIED", referable())],
    ["with spaces and newlines", line("ADDED", referable(), true)],
    ["a deletion", line("DELETED", referable({}, { deletionTimestamp: "2026-11-27T00:00:01Z" }))],
    [
      "escapes in the name and labels",
      line("MODIFIED", referable({}, { name: 'a\\"b\u00e9\n', labels: { "k\\": "\u2028" } })),
    ],
    [
      "no status, no spec",
      line("ADDED", { apiVersion: "referable.dev/v1alpha1", kind: "Referable", metadata: { name: "r" } }),
    ],
    ["empty metadata", line("ADDED", { metadata: {} })],
    ["the object first", `{"object":${JSON.stringify(referable())},"type":"MODIFIED"}`],
    ["members the reader does not know", line("MODIFIED", { ...referable(), extra: [1, { a: "]" }] })],
    ["a status of another shape", line("MODIFIED", referable({ status: "odd" }))],
    [
      "huge labels",
      line(
        "MODIFIED",
        referable(
          {},
          { labels: Object.fromEntries(Array.from({ length: 3000 }, (_, i) => [`k${i}`, "v".repeat(60)])) },
        ),
      ),
    ],
    [
      "huge managedFields",
      line(
        "MODIFIED",
        referable(
          {},
          {
            managedFields: Array.from({ length: 500 }, (_, i) => ({
              manager: `m${i}`,
              fieldsV1: { "f:x": {} },
            })),
          },
        ),
      ),
    ],
  ])("keeps what a full parse keeps: %s", (_name, text) => {
    expect(parseReferableEvent(text, none)).toEqual(expected(text));
  });

  it.each([
    ["not JSON", "{not json"],
    ["an ERROR event", JSON.stringify({ type: "ERROR", object: { kind: "Status", code: 410 } })],
    [
      "a BOOKMARK event",
      JSON.stringify({ type: "BOOKMARK", object: { metadata: { resourceVersion: "1" } } }),
    ],
    ["an array", "[1,2]"],
    ["no object", '{"type":"ADDED"}'],
    ["an object that is not one", '{"type":"ADDED","object":[]}'],
    ["metadata null", '{"type":"ADDED","object":{"metadata":null}}'],
    ["no metadata", '{"type":"ADDED","object":{"kind":"Referable"}}'],
    ["an escaped key (it may spell metadata)", '{"type":"ADDED","object":{"meta\\u0064ata":{"name":"x"}}}'],
    ["an escaped key in metadata", '{"type":"ADDED","object":{"metadata":{"n\\u0061me":"x"}}}'],
    ["two metadata", '{"type":"ADDED","object":{"metadata":{"name":"a"},"metadata":{"name":"b"}}}'],
    ["two names", '{"type":"ADDED","object":{"metadata":{"name":"a","name":"b"}}}'],
    ["two types", '{"type":"ADDED","type":"DELETED","object":{"metadata":{}}}'],
    ["a kept member JSON refuses", '{"type":"ADDED","object":{"metadata":{"name":tru}}}'],
    ["a truncated line", line("MODIFIED", referable()).slice(0, 300)],
    ["text after the event", `${line("MODIFIED", referable())} x`],
    ["a type that is not a string", '{"type":1,"object":{"metadata":{}}}'],
  ])("leaves the line to the full parse: %s", (_name, text) => {
    expect(parseReferableEvent(text, none)).toBeUndefined();
  });

  it("takes the cached spec for the same object at the same generation, and parses it otherwise", () => {
    const cachedSpec = { source: { name: "cached" } };
    const cached = { metadata: { name: "r", uid: "u-1", generation: 2 }, spec: cachedSpec } as KubeObject;
    const text = line("MODIFIED", referable());
    expect(parseReferableEvent(text, () => cached)!.object.spec).toBe(cachedSpec);
    const other = (metadata: Record<string, unknown>) =>
      parseReferableEvent(line("MODIFIED", referable({}, metadata)), () => cached)!.object.spec;
    expect(other({ generation: 3 })).toEqual(referable().spec);
    expect(other({ uid: "u-2" })).toEqual(referable().spec);
  });

  it("gives the cache the record a full parse gives", () => {
    const previous = projectReferable(
      referable({ status: undefined }) as KubeObject,
      undefined,
      undefined,
      true,
    );
    const text = line("MODIFIED", referable());
    const full = projectReferable(
      (JSON.parse(text) as { object: KubeObject }).object,
      undefined,
      previous,
      true,
    );
    const cheap = projectReferable(
      parseReferableEvent(text, () => previous)!.object,
      undefined,
      previous,
      true,
    );
    expect(cheap).toEqual(full);
    // A compact record's spec is made at each read: what it keeps is the previous one's shared spec.
    expect(sameSpecKept(previous, cheap)).toBe(true);
  });
});

describe("sameSpecKept", () => {
  const project = (obj: unknown, previous?: KubeObject, compact = true) =>
    projectReferable(obj as KubeObject, undefined, previous, compact);

  it("says the spec was kept only when it was", () => {
    const first = project(referable());
    // A status echo of the same generation keeps the shared spec.
    expect(sameSpecKept(first, project(referable(), first))).toBe(true);
    // A new generation with another source name: maybe changed.
    const renamed = referable(
      { spec: { source: { ...referable().spec.source, name: "other" } } },
      { generation: 3 },
    );
    expect(sameSpecKept(first, project(renamed, first))).toBe(false);
    // A record made whole (a bucket taken) against its compact one: maybe changed.
    expect(sameSpecKept(first, project(referable(), first, false))).toBe(false);
    const whole = project(referable(), undefined, false);
    expect(sameSpecKept(whole, project(referable(), whole, false))).toBe(true);
  });
});
