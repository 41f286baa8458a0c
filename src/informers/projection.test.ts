import { describe, expect, it } from "@jest/globals";
import { pathMaySeeLabels } from "./projection.ts";

describe("pathMaySeeLabels", () => {
  it.each([
    { path: "data.v", want: false, reason: "a field outside metadata" },
    { path: "spec.ports[0].port", want: false, reason: "an index" },
    {
      path: "metadata.name",
      want: false,
      reason: "a field of metadata other than labels (sortByFieldPath's default)",
    },
    { path: "metadata.annotations[crossplane.io/external-name]", want: false, reason: "an annotation" },
    { path: "$.status.x", want: false, reason: "JSONPath to a field" },
    { path: "{.status.x}", want: false, reason: "kubectl-style JSONPath to a field" },
    { path: "metadata.labels.app", want: true, reason: "a label" },
    { path: "metadata.labels['app.kubernetes.io/name']", want: true, reason: "a label, bracketed" },
    { path: "metadata.managedFields", want: true, reason: "managedFields" },
    { path: "metadata", want: true, reason: "metadata whole" },
    { path: "$['metadata']", want: true, reason: "metadata whole, bracketed" },
    { path: "{.metadata}", want: true, reason: "metadata whole, kubectl style" },
    { path: "$", want: true, reason: "the whole object" },
    { path: "{$}", want: true, reason: "the whole object, kubectl style" },
    { path: "$..app", want: true, reason: "recursive descent reaches anything" },
    { path: "metadata[*]", want: true, reason: "a wildcard" },
    { path: "$.metadata[?(@.x)]", want: true, reason: "a filter" },
    { path: "metadata['lab\\u0065ls']", want: true, reason: "an escape may spell labels" },
  ])("$path: $reason", ({ path, want }) => {
    expect(pathMaySeeLabels(path)).toBe(want);
  });
});
