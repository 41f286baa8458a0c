import { createHash } from "node:crypto";
import type { ReferableStatus } from "../api/referable.ts";
import { keysSorted, stableStringify } from "../api/stable-json.ts";
import { StringPool } from "../informers/projection.ts";
import {
  compactReferable,
  expandStatus,
  isCompactReferable,
  referableOf,
  sameAsStored,
  statusDigest,
  summarizeStatus,
  type CompactMeta,
} from "./compact.ts";
import { statusEquals } from "./status.ts";
import { keysReversed as reversed } from "../../test/harness/json.ts";

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
  it("is the same whatever the order of the keys: one out of order costs a sort, never a write or a missed one", () => {
    // As kube-apiserver writes a status (every object's keys sorted), and the same in reverse at
    // every level (what the controller builds is in no such order).
    const sent = JSON.parse(stableStringify(status())) as ReferableStatus;
    expect(keysSorted(sent)).toBe(true);
    const digest = statusDigest(sent);
    expect(statusDigest(reversed(sent) as ReferableStatus)).toBe(digest);
    expect(statusDigest(status())).toBe(digest);
    // The first 15 bytes of the SHA-256 of the sorted text, without what is left out.
    const { lastTransitionTime: _t, ...condition } = status().conditions![0]!;
    const { resourceVersion: _v, ...source } = status().sources![0]!;
    const text = stableStringify({ ...status(), conditions: [condition], sources: [source] });
    expect(digest).toBe(createHash("sha256").update(text).digest().subarray(0, 15).toString("base64url"));
    // An unsorted stored status, and a desired one in yet another order: no write.
    const summary = summarizeStatus(reversed(sent), 1, undefined)!;
    const stored = expandStatus(summary.skeleton, summary.digest);
    expect(sameAsStored(stored, status({}, "2026-03-03T00:00:00Z"), statusEquals)).toBe(true);
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

describe("compactReferable", () => {
  const meta = (name: string, overrides: Partial<CompactMeta> = {}): CompactMeta => ({
    name,
    uid: `uid-${name}`,
    resourceVersion: "123456",
    generation: 1,
    creationTimestamp: "2026-01-01T00:00:00Z",
    labels: { team: "a" },
    deletionTimestamp: undefined,
    finalizers: undefined,
    ...overrides,
  });
  const spec = (source: string) => ({
    source: { apiVersion: "v1", kind: "ConfigMap", namespace: "a", name: source, fieldPath: "data.v" },
  });

  it("reads as the Referable it stands for: one object, its metadata itself, its status the skeleton with the digest", () => {
    const summary = summarizeStatus(status(), 1, undefined)!;
    const record = compactReferable(meta("r1"), spec("db"), summary, undefined);
    expect(record.metadata).toBe(record);
    expect(record.metadata?.resourceVersion).toBe("123456");
    expect(record.spec).toEqual(spec("db"));
    expect(record.status).toBe(summary.skeleton);
    expect(record.digest).toBe(summary.digest);
    expect(isCompactReferable(record)).toBe(true);
    const whole = referableOf(record)!;
    expect(isCompactReferable(whole)).toBe(false);
    expect(whole).toEqual({
      apiVersion: "referable.dev/v1alpha1",
      kind: "Referable",
      metadata: {
        name: "r1",
        uid: "uid-r1",
        resourceVersion: "123456",
        generation: 1,
        creationTimestamp: "2026-01-01T00:00:00Z",
        labels: { team: "a" },
      },
      spec: spec("db"),
      status: summary.skeleton,
    });
    // Compared by digest, as a status expanded from a summary.
    expect(sameAsStored(whole.status, status({}, "2026-03-03T00:00:00Z"), statusEquals)).toBe(true);
    expect(sameAsStored(whole.status, status({ value: "w" }), statusEquals)).toBe(false);
    // JSON (a log, a test's diff) never loops through metadata.
    expect(JSON.parse(JSON.stringify(record))).toEqual({ ...whole, digest: summary.digest });
  });

  it("shares one frozen spec shape among records that differ in their source's name, and a spec of the same generation with the next version", () => {
    const a = compactReferable(meta("r1"), spec("db-1"), undefined, undefined);
    const b = compactReferable(meta("r2"), spec("db-2"), undefined, undefined);
    expect((b.spec as ReturnType<typeof spec>).source.name).toBe("db-2");
    const shapeOf = (r: object) => (r as unknown as { sharedSpec(): { shape: unknown } }).sharedSpec().shape;
    expect(shapeOf(b)).toBe(shapeOf(a));
    expect(Object.isFrozen(shapeOf(a))).toBe(true);
    // The next version of r1 (same uid and generation) keeps its spec, whatever it is given.
    const next = compactReferable(
      meta("r1", { resourceVersion: "123457" }),
      undefined,
      undefined,
      undefined,
      a,
    );
    expect(next.spec).toEqual(spec("db-1"));
    // Another generation, or another uid (deleted and made again), takes the new one.
    for (const changed of [{ generation: 2 }, { uid: "other" }])
      expect(compactReferable(meta("r1", changed), spec("db-9"), undefined, undefined, a).spec).toEqual(
        spec("db-9"),
      );
  });

  it("keeps what few records have, and resourceVersions that are no small decimal, as they are", () => {
    const record = compactReferable(
      meta("r1", { resourceVersion: "v-12", deletionTimestamp: "2026-02-02T00:00:00Z", finalizers: ["f"] }),
      { source: { apiVersion: "referable.dev/v1alpha1", kind: "Referable", selector: {} } },
      undefined,
      undefined,
    );
    expect(record.metadata).toMatchObject({
      resourceVersion: "v-12",
      deletionTimestamp: "2026-02-02T00:00:00Z",
      finalizers: ["f"],
    });
    expect(record.spec).toEqual({
      source: { apiVersion: "referable.dev/v1alpha1", kind: "Referable", selector: {} },
    });
    expect(referableOf(record)!.status).toBeUndefined();
    expect(
      compactReferable(meta("r2", { resourceVersion: "99999999999" }), undefined, undefined, undefined)
        .metadata?.resourceVersion,
    ).toBe("99999999999");
  });
});
