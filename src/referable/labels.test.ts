import type { Referable } from "../api/referable.ts";
import { slotOf } from "../runtime/slots.ts";
import { isGraphMember, labelPatch } from "./labels.ts";

function referable(name: string, spec: Referable["spec"], labels?: Record<string, string>): Referable {
  return {
    apiVersion: "referable.dev/v1alpha1",
    kind: "Referable",
    metadata: { name, ...(labels && { labels }) },
    spec,
  } as Referable;
}

const CONFIGMAP = { apiVersion: "v1", kind: "ConfigMap", namespace: "ns", name: "cm", fieldPath: "data.x" };
const notRead = () => false;

describe("the graph label's members", () => {
  it("a Referable that reads a ConfigMap and exports nothing, read by none, is no member", () => {
    expect(isGraphMember(referable("a", { source: CONFIGMAP }), notRead)).toBe(false);
  });

  it("(a) one that exports", () => {
    const obj = referable("a", {
      source: CONFIGMAP,
      export: [{ kind: "ConfigMap", namespace: "ns", name: "out", key: "k" }],
    } as Referable["spec"]);
    expect(isGraphMember(obj, notRead)).toBe(true);
  });

  it("(b) one that reads a Referable, by name or by selector", () => {
    const source = { apiVersion: "referable.dev/v1alpha1", kind: "Referable", fieldPath: "status.value" };
    expect(isGraphMember(referable("a", { source: { ...source, name: "b" } }), notRead)).toBe(true);
    expect(
      isGraphMember(
        referable("a", { source: { ...source, selector: { matchLabels: { x: "y" } } } }),
        notRead,
      ),
    ).toBe(true);
  });

  it("(c) one another Referable reads", () => {
    expect(isGraphMember(referable("a", { source: CONFIGMAP }), (name) => name === "a")).toBe(true);
  });
});

describe("labelPatch", () => {
  it("sets the slot of the name, and the graph label of a member", () => {
    expect(labelPatch(referable("a", { source: CONFIGMAP }), true)).toEqual({
      "referable.dev/slot": slotOf("a"),
      "referable.dev/graph": "true",
    });
  });

  it("puts back a slot someone changed, and removes the graph label of one no longer a member", () => {
    const obj = referable(
      "a",
      { source: CONFIGMAP },
      { "referable.dev/slot": "oops", "referable.dev/graph": "true" },
    );
    expect(labelPatch(obj, false)).toEqual({
      "referable.dev/slot": slotOf("a"),
      "referable.dev/graph": null,
    });
  });

  it("nothing when the labels are right", () => {
    const labels = { "referable.dev/slot": slotOf("a"), team: "x" };
    expect(labelPatch(referable("a", { source: CONFIGMAP }, labels), false)).toBeUndefined();
    expect(
      labelPatch(referable("a", { source: CONFIGMAP }, { ...labels, "referable.dev/graph": "true" }), true),
    ).toBeUndefined();
  });
});
