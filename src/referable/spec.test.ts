import type { Referable } from "../api/referable.ts";
import { exportObjectNode, exportScopeNode } from "./reference-graph.ts";
import { readsOf } from "./spec.ts";

const cm = (name: string, ns = "team") => exportObjectNode("ConfigMap", ns, name);
const referable = (spec: Referable["spec"]): Referable =>
  ({ apiVersion: "referable.dev/v1alpha1", kind: "Referable", metadata: { name: "r" }, spec }) as Referable;
const byName = (name: string, kind = "ConfigMap") => ({
  apiVersion: "v1",
  kind,
  namespace: "team",
  name,
  fieldPath: "data.v",
});
const bySelector = (selector: Record<string, unknown>) => ({
  apiVersion: "v1",
  kind: "ConfigMap",
  namespace: "team",
  selector,
  fieldPath: "data.v",
});
const into = (name: string, kind = "ConfigMap", namespace = "team") => ({ kind, namespace, name, key: "K" });

describe("readsOf: the reference graph's edges through exports", () => {
  it.each([
    {
      why: "a ConfigMap source by name reads that object",
      spec: { source: byName("x") },
      want: { object: cm("x"), objectName: "x" },
    },
    {
      why: "a Deployment source reads no exported object",
      spec: { source: { ...byName("x"), apiVersion: "apps/v1", kind: "Deployment" } },
      want: undefined,
    },
    {
      why: "the empty selector matches what export creates",
      spec: { source: bySelector({}) },
      want: { scope: exportScopeNode("ConfigMap", "team") },
    },
    {
      why: "a selector on the exported label alone matches what export creates",
      spec: { source: bySelector({ matchLabels: { "referable.dev/exported": "true" } }) },
      want: { scope: exportScopeNode("ConfigMap", "team") },
    },
    {
      why: "a selector that excludes a label export never sets still matches",
      spec: { source: bySelector({ matchExpressions: [{ key: "team", operator: "DoesNotExist" }] }) },
      want: { scope: exportScopeNode("ConfigMap", "team") },
    },
    {
      why: "a selector that needs a label export never sets does not count",
      spec: { source: bySelector({ matchLabels: { team: "a" } }) },
      want: undefined,
    },
    {
      why: "targets are writes, each object once, sorted",
      spec: { source: byName("x"), export: [into("z"), into("y"), { ...into("y"), key: "L" }] },
      want: {
        object: cm("x"),
        objectName: "x",
        writes: [
          { object: cm("y"), scope: exportScopeNode("ConfigMap", "team") },
          { object: cm("z"), scope: exportScopeNode("ConfigMap", "team") },
        ],
      },
    },
    {
      why: "a write into the object it reads is no edge (the key output refuses it)",
      spec: { source: byName("x"), export: [into("x")] },
      want: { object: cm("x"), objectName: "x" },
    },
    {
      why: "a write into the namespace its selector reads is no edge (the key output refuses it)",
      spec: { source: bySelector({}), export: [into("x"), into("x", "Secret")] },
      want: {
        scope: exportScopeNode("ConfigMap", "team"),
        writes: [
          { object: exportObjectNode("Secret", "team", "x"), scope: exportScopeNode("Secret", "team") },
        ],
      },
    },
  ])("$why", ({ spec, want }) => {
    expect(readsOf(referable(spec as Referable["spec"]))).toEqual(want);
  });
});
