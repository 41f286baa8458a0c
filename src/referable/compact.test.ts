import type { ReferableStatus } from "../api/referable.ts";
import { StringPool } from "../informers/projection.ts";
import { expandStatus, sameAsStored, statusDigest, summarizeStatus } from "./compact.ts";
import { statusEquals } from "./status.ts";

function status(overrides: Partial<ReferableStatus> = {}, since = "2026-01-01T00:00:00Z"): ReferableStatus {
  return {
    observedGeneration: 1,
    conditions: [
      {
        type: "Ready",
        status: "True",
        reason: "Available",
        message: "value observed",
        observedGeneration: 1,
        lastTransitionTime: since,
      },
    ],
    value: "v",
    text: "v",
    sources: [
      { apiVersion: "v1", kind: "ConfigMap", namespace: "a", name: "db", uid: "s1", resourceVersion: "9" },
    ],
    ...overrides,
  };
}

describe("statusDigest", () => {
  it("leaves out what a reconcile carries over or keeps: transition times, the version a source was read at", () => {
    const later = status({}, "2026-02-02T00:00:00Z");
    later.sources![0]!.resourceVersion = "12";
    expect(statusDigest(later)).toBe(statusDigest(status()));
  });

  it.each<[string, Partial<ReferableStatus>]>([
    ["the value", { value: "w", text: "w" }],
    ["the observed generation", { observedGeneration: 2 }],
    ["a condition's message", { conditions: [{ ...status().conditions![0]!, message: "other" }] }],
    ["the source read", { sources: [{ ...status().sources![0]!, uid: "s2" }] }],
  ])("tells apart statuses that differ in %s", (_what, overrides) => {
    expect(statusDigest(status(overrides))).not.toBe(statusDigest(status()));
  });
  it("takes any stored status without a throw", () => {
    for (const forged of [
      { conditions: "x", sources: 3 },
      { conditions: [null, "x"], sources: [[1]] },
    ])
      expect(statusDigest(forged as unknown as ReferableStatus)).toMatch(/^[A-Za-z0-9_-]{20}$/);
  });
});

describe("summarizeStatus", () => {
  it("keeps the digest, and a skeleton of the observed generation and the conditions without messages, shared", () => {
    const pool = new StringPool();
    const a = summarizeStatus(status(), 1, pool)!;
    const b = summarizeStatus(status({ value: "other" }), 1, pool)!;
    expect(a).toEqual({
      digest: statusDigest(status()),
      skeleton: {
        observedGeneration: 1,
        conditions: [
          {
            type: "Ready",
            status: "True",
            reason: "Available",
            observedGeneration: 1,
            lastTransitionTime: "2026-01-01T00:00:00Z",
          },
        ],
      },
    });
    expect(b.skeleton).toBe(a.skeleton);
    expect(Object.isFrozen(a.skeleton)).toBe(true);
    expect(b.digest).not.toBe(a.digest);
  });

  it.each<[string, unknown, number]>([
    ["lists exported keys", status({ exports: [] }), 1],
    [
      "has an Exported condition",
      status({ conditions: [{ ...status().conditions![0]!, type: "Exported" }] }),
      1,
    ],
    ["is of another generation (a spec change not observed yet)", status(), 2],
    ["is not an object", "forged", 1],
  ])("keeps the whole status of one that %s", (_why, stored, generation) => {
    expect(summarizeStatus(stored, generation, undefined)).toBeUndefined();
  });
});

describe("sameAsStored", () => {
  it("compares a status expanded from a summary by digest, any other field by field", () => {
    const summary = summarizeStatus(status(), 1, undefined)!;
    const stored = expandStatus(summary.skeleton, summary.digest);
    expect(stored.value).toBeUndefined();
    expect(sameAsStored(stored, status({}, "2026-03-03T00:00:00Z"), statusEquals)).toBe(true);
    expect(sameAsStored(stored, status({ value: "w", text: "w" }), statusEquals)).toBe(false);
    expect(sameAsStored(status(), status({}, "2026-03-03T00:00:00Z"), statusEquals)).toBe(false);
    expect(sameAsStored(status(), status(), statusEquals)).toBe(true);
  });
});
