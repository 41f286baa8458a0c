import { describe, expect, it } from "@jest/globals";
import { ListStreamParser, type ListStreamOptions } from "./list-stream.ts";

/** Feeds `text` to a parser in chunks of `size` bytes; returns the items and the envelope. */
function parse(
  text: string,
  size: number,
  options: ListStreamOptions = {},
): { items: unknown[]; list: Record<string, unknown> } {
  const items: unknown[] = [];
  const parser = new ListStreamParser((item) => items.push(item), options);
  const bytes = Buffer.from(text, "utf8");
  for (let i = 0; i < bytes.length; i += size) parser.push(Buffer.from(bytes.subarray(i, i + size)));
  const list = parser.end();
  expect(parser.items).toBe(items.length);
  expect(parser.length).toBe(bytes.length);
  return { items, list };
}

const CHUNK_SIZES = [1, 2, 3, 7, 64, 1 << 20];

const tricky = {
  kind: "ConfigMapList",
  apiVersion: "v1",
  metadata: { resourceVersion: "42", continue: "abc" },
  items: [
    {
      metadata: { name: "a", labels: { app: "web", "x/y": "1" }, annotations: { q: 'say "}]' } },
      data: { v: "back\\slash\\", "]": "[", u: "é漢字🙂", esc: "\u0000\n\t" },
    },
    { metadata: { name: "b" }, spec: { items: [{ metadata: { labels: { deep: "kept" } } }], n: 1.5e3 } },
    {},
  ],
};

describe("ListStreamParser", () => {
  it.each(CHUNK_SIZES)(
    "hands out each item and the list without them as JSON.parse reads them, in chunks of %d",
    (size) => {
      const { items, list } = parse(JSON.stringify(tricky, null, size % 2 ? 1 : 0), size);
      expect(items).toEqual(tricky.items);
      expect(list).toEqual({ ...tricky, items: [] });
    },
  );

  it.each([
    { reason: "items before the list's metadata", text: '{"items":[{"a":1}],"metadata":{"continue":"c"}}' },
    { reason: "an empty page", text: '{"kind":"List","items":[],"metadata":{}}' },
    { reason: "no items at all (null)", text: '{"kind":"List","items":null}' },
    {
      reason: "a key named items that is not the list's",
      text: '{"metadata":{"items":[1]},"items":[{"b":2}]}',
    },
  ])("reads $reason", ({ text }) => {
    for (const size of CHUNK_SIZES) {
      const { items, list } = parse(text, size);
      const whole = JSON.parse(text) as { items: unknown[] | null };
      expect(items).toEqual(whole.items ?? []);
      expect(list).toEqual({ ...whole, items: whole.items === null ? null : [] });
    }
  });

  it.each(CHUNK_SIZES)(
    "keeps only the labels asked for and drops managedFields before parsing, in chunks of %d",
    (size) => {
      const list = {
        metadata: {},
        items: [
          {
            metadata: {
              name: "a",
              labels: { app: "web", "a/b": "1", junk: "x".repeat(300), ["k".repeat(300)]: "v", tier: "gold" },
              managedFields: [{ manager: "m", fieldsV1: { "f:metadata": { "f:labels": { "f:junk": {} } } } }],
            },
            spec: { template: { metadata: { labels: { junk: "stays: not the object's labels" } } } },
          },
          { metadata: { name: "b", labels: {} } },
          { metadata: { name: "c", labels: { junk: "1" } } },
        ],
      };
      // A key with an escape in its JSON is the key it decodes to.
      const text = JSON.stringify(list).replace('"a/b"', '"a\\u002fb"');
      const keys = ["app", "a/b", "tier"];
      const asked: string[] = [];
      const { items } = parse(text, size, {
        keepLabels: () => ({ keys, has: (key) => (asked.push(key), keys.includes(key)) }),
        dropManagedFields: () => true,
      });
      expect(items).toEqual([
        {
          metadata: { name: "a", labels: { app: "web", "a/b": "1", tier: "gold" }, managedFields: [] },
          spec: list.items[0]!.spec,
        },
        { metadata: { name: "b", labels: {} } },
        { metadata: { name: "c", labels: {} } },
      ]);
      // Only keys as long as a kept one become strings: the key of 300 characters never does.
      expect(asked).toEqual(["app", "a/b", "junk", "tier", "junk"]);
    },
  );

  it("leaves labels and managedFields alone unless asked", () => {
    const list = { items: [{ metadata: { labels: { a: "1" }, managedFields: [{ manager: "m" }] } }] };
    expect(parse(JSON.stringify(list), 5).items).toEqual(list.items);
  });

  it.each([
    { reason: "a body cut short", text: '{"items":[{"a":1}', error: /ended before its JSON did/ },
    { reason: "a body cut inside a string", text: '{"items":[{"a":"1', error: /ended before/ },
    { reason: "an empty body", text: "", error: /empty/ },
    { reason: "an item that is not an object", text: '{"items":[1]}', error: /not a JSON object/ },
    { reason: "a string item", text: '{"items":["x"]}', error: /not a JSON object/ },
    { reason: "a body that is not an object", text: "[1]", error: /not a JSON object/ },
    { reason: "more closed than opened", text: "{}}", error: /closes more than it opens/ },
    {
      reason: "an item over the bound",
      text: JSON.stringify({ items: [{ a: "x".repeat(100) }] }),
      error: /larger than 64 bytes/,
      options: { maxItemBytes: 64 },
    },
    {
      reason: "an envelope over the bound",
      text: JSON.stringify({ metadata: { a: "x".repeat(100) }, items: [] }),
      error: /besides its items are larger than 64 bytes/,
      options: { maxEnvelopeBytes: 64 },
    },
  ])("refuses $reason", ({ text, error, options }) => {
    expect(() => parse(text, 3, options)).toThrow(error);
  });

  it("counts dropped bytes against the item bound: a dropped label set is no way around it", () => {
    const text = JSON.stringify({ items: [{ metadata: { labels: { a: "x".repeat(100) } } }] });
    const none = () => ({ keys: [], has: () => false });
    expect(() => parse(text, 8, { keepLabels: none, maxItemBytes: 64 })).toThrow(/larger than 64/);
  });
});
