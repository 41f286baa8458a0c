import { MIN_NODE_VERSION, nodeVersionSupported } from "./node-version.ts";

describe("nodeVersionSupported", () => {
  const cases: Array<{ reason: string; version: string; want: boolean }> = [
    { reason: "the minimum itself", version: MIN_NODE_VERSION, want: true },
    { reason: "with the v prefix of process.version", version: "v22.19.0", want: true },
    { reason: "a later patch", version: "22.19.4", want: true },
    { reason: "a later minor", version: "22.20.0", want: true },
    { reason: "a later major with a lower minor", version: "24.1.0", want: true },
    { reason: "the minor before", version: "22.18.9", want: false },
    { reason: "Node 20, where undici fails on import", version: "v20.19.5", want: false },
    { reason: "a much older major with a high minor", version: "18.99.0", want: false },
  ];
  it.each(cases)("$version: $reason", ({ version, want }) => {
    expect(nodeVersionSupported(version)).toBe(want);
  });
});
