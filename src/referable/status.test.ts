import { ResolutionError } from "../api/errors.ts";
import type { ResolutionResult } from "../resolver/types.ts";
import type { Referable, ReferableStatus } from "../api/referable.ts";
import { desiredStatus, readyCondition, releaseStatus, stableStringify, statusEquals } from "./status.ts";

const T0 = new Date("2026-01-01T00:00:00.000Z");
const T1 = new Date("2026-01-01T00:05:00.000Z");
const src = (rv: string, uid = "u1") => ({
  apiVersion: "v1",
  kind: "ConfigMap",
  namespace: "a",
  name: "db",
  uid,
  resourceVersion: rv,
});
const ok = (value: unknown, rv = "10", uid = "u1"): ResolutionResult => ({
  ok: true,
  reason: "Available",
  value,
  source: src(rv, uid),
});
const err = (
  reason: ConstructorParameters<typeof ResolutionError>[0],
  message = "why",
): ResolutionResult => ({
  ok: false,
  error: new ResolutionError(reason, message),
});

/** Mode Multiple's answer of two sources, each with its value. */
const twoValues: ResolutionResult = {
  ok: true,
  reason: "Available",
  values: [1, 2],
  sources: [src("1"), src("2", "u2")],
};

function obj(status?: Referable["status"], generation = 1): Referable {
  return { metadata: { name: "r", generation }, spec: {}, ...(status ? { status } : {}) };
}

describe("desiredStatus", () => {
  it("writes value, sources, observedGeneration and a Ready=True Available condition", () => {
    const s = desiredStatus(obj(), ok("arn:1"), T0)!;
    expect(s).toEqual({
      observedGeneration: 1,
      value: "arn:1",
      text: "arn:1",
      sources: [src("10")],
      conditions: [
        {
          type: "Ready",
          status: "True",
          reason: "Available",
          message: "",
          observedGeneration: 1,
          lastTransitionTime: "2026-01-01T00:00:00Z",
        },
      ],
    });
  });

  it.each([
    {
      reason: "an equal result later changes nothing, so nothing is written (restart writes nothing)",
      later: ok("arn:1", "10"),
      equal: true,
    },
    {
      reason: "a source update that leaves the value alone keeps the resourceVersion the value was read at",
      later: ok("arn:1", "11"),
      equal: true,
    },
    { reason: "a new value moves the resourceVersion", later: ok("arn:2", "12"), equal: false },
    {
      reason: "a re-created source (new uid) with the same value is a change of sources",
      later: ok("arn:1", "13", "u2"),
      equal: false,
    },
  ])("$reason", ({ later, equal }) => {
    const first = desiredStatus(obj(), ok("arn:1", "10"), T0)!;
    const second = desiredStatus(obj(first), later, T1)!;
    expect(statusEquals(first, second)).toBe(equal);
    expect(readyCondition(second)!.lastTransitionTime).toBe("2026-01-01T00:00:00Z");
  });

  it("moves lastTransitionTime only when the condition's status changes", () => {
    const first = desiredStatus(obj(), err("SourceNotFound"), T0)!;
    const second = desiredStatus(obj(first), err("FieldNotFound"), T1)!;
    expect(readyCondition(second)).toMatchObject({
      status: "False",
      reason: "FieldNotFound",
      lastTransitionTime: "2026-01-01T00:00:00Z",
    });
    const third = desiredStatus(obj(second), ok(1), T1)!;
    expect(readyCondition(third)).toMatchObject({
      status: "True",
      lastTransitionTime: "2026-01-01T00:05:00Z",
    });
  });

  it.each([
    {
      reason: "SourceNotFound" as const,
      keeps: false,
      why: "the source is gone: a consumer must not read its old value",
    },
    { reason: "FieldNotFound" as const, keeps: false, why: "the field is gone" },
    { reason: "SourceNotReady" as const, keeps: false, why: "requireConditions gate the value" },
    {
      reason: "Forbidden" as const,
      keeps: false,
      why: "a value the controller may no longer read (its policy or RBAC) is withdrawn",
    },
    { reason: "Pending" as const, keeps: true, why: "not having looked yet is no fact about the source" },
  ])("on $reason the value is kept=$keeps ($why)", ({ reason, keeps }) => {
    const first = desiredStatus(obj(), ok("arn:1"), T0)!;
    const next = desiredStatus(obj(first), err(reason), T1)!;
    if (reason === "Pending") {
      expect(next).toBeUndefined(); // nothing to write: the stored value stays
      return;
    }
    expect(next.value).toEqual(keeps ? "arn:1" : undefined);
    expect(next.sources).toBeUndefined();
    expect(readyCondition(next)).toMatchObject({ status: "False", reason });
  });

  it("withdraws values in mode Multiple on Forbidden too", () => {
    const many = desiredStatus(obj(), twoValues, T0)!;
    const refused = desiredStatus(obj(many), err("Forbidden"), T1)!;
    expect(refused.values).toBeUndefined();
    expect(refused.sources).toBeUndefined();
  });

  it.each([
    {
      why: "a forged value under an error is dropped",
      forged: (s: ReferableStatus): ReferableStatus => ({ ...s, value: "forged" }),
      result: err("Forbidden"),
    },
    {
      why: "a foreign condition is dropped",
      forged: (s: ReferableStatus): ReferableStatus => ({
        ...s,
        conditions: [...(s.conditions ?? []), { ...readyCondition(s)!, type: "Hacked" }],
      }),
      result: err("Forbidden"),
    },
    {
      why: "a changed lastTransitionTime is put back from what the controller wrote",
      forged: (s: ReferableStatus): ReferableStatus => ({
        ...s,
        conditions: [{ ...readyCondition(s)!, lastTransitionTime: "1999-01-01T00:00:00Z" }],
      }),
      result: err("Forbidden"),
    },
    {
      why: "a forged resourceVersion of a source is put back",
      forged: (s: ReferableStatus): ReferableStatus => ({
        ...s,
        sources: [{ ...s.sources![0]!, resourceVersion: "999" }],
      }),
      result: ok("arn:1", "11"),
    },
    {
      why: "while Pending, what the controller wrote is put back",
      forged: (s: ReferableStatus): ReferableStatus => ({ ...s, value: "forged" }),
      result: err("Pending"),
    },
  ])("given what it wrote itself, the controller puts back a forged status: $why", ({ forged, result }) => {
    const own = desiredStatus(obj(), result.ok ? ok("arn:1", "10") : err("Forbidden"), T0)!;
    const stored = forged(own);
    const next = desiredStatus(obj(stored), result, T1, own)!;
    expect(next).toEqual(own);
    expect(statusEquals(next, stored)).toBe(false);
  });

  it("escapes control and bidi characters in messages, so a message shows what it holds", () => {
    const next = desiredStatus(
      obj(),
      err("InvalidSpec", "fieldPath data.\u202eabc\n\u0007 does not parse"),
      T0,
    )!;
    expect(readyCondition(next)!.message).toBe("fieldPath data.\\u202eabc\\u000a\\u0007 does not parse");
  });

  it("writes nothing for Pending when a status for this generation exists, so a restart never flaps", () => {
    const first = desiredStatus(obj(), ok("arn:1"), T0)!;
    expect(desiredStatus(obj(first), err("Pending"), T1)).toBeUndefined();
  });

  it("writes Ready=Unknown Pending for a new object, and for a new generation drops the old value", () => {
    expect(readyCondition(desiredStatus(obj(), err("Pending"), T0))).toMatchObject({
      status: "Unknown",
      reason: "Pending",
    });
    const first = desiredStatus(obj(), ok("arn:1"), T0)!;
    const edited = desiredStatus(obj(first, 2), err("Pending"), T1)!;
    expect(edited.value).toBeUndefined();
    expect(edited.observedGeneration).toBe(2);
  });

  it("writes values and sources in Multiple mode, and nothing but the condition for Optional", () => {
    const many = desiredStatus(obj(), twoValues, T0)!;
    expect(many.values).toEqual([1, 2]);
    expect(many.sources).toHaveLength(2);
    const optional = desiredStatus(obj(many), { ok: true, reason: "Optional" }, T1)!;
    expect(optional).toEqual({
      observedGeneration: 1,
      conditions: [expect.objectContaining({ reason: "Optional", status: "True" })],
    });
  });
});

describe("status.text", () => {
  const many = (values: unknown[]): ResolutionResult => ({
    ok: true,
    reason: "Available",
    values,
    sources: values.map((_, i) => src(String(i), `u${i}`)),
  });
  it.each([
    { reason: "a string is its text as it is, not quoted", result: ok("db.internal"), want: "db.internal" },
    { reason: "a string that looks like JSON stays that string", result: ok('{"a":1}'), want: '{"a":1}' },
    { reason: "an empty string is an empty text, not absent", result: ok(""), want: "" },
    { reason: "a number is its JSON text, so a port reads as a string", result: ok(5432), want: "5432" },
    { reason: "a boolean is its JSON text", result: ok(false), want: "false" },
    {
      reason: "an object is its compact JSON text",
      result: ok({ host: "db", port: 1 }),
      want: '{"host":"db","port":1}',
    },
    { reason: "a list is its compact JSON text", result: ok(["a", 1]), want: '["a",1]' },
    { reason: "mode Multiple: the list of values as compact JSON", result: many([1, "b"]), want: '[1,"b"]' },
    { reason: "mode Multiple with no match: an empty list", result: many([]), want: "[]" },
    {
      reason: "resolution Optional with no value: no text",
      result: { ok: true, reason: "Optional" },
      want: undefined,
    },
    { reason: "an error withdraws the text with the value", result: err("SourceNotFound"), want: undefined },
  ] as Array<{ reason: string; result: ResolutionResult; want: string | undefined }>)(
    "$reason",
    ({ result, want }) => {
      const s = desiredStatus(obj(), result, T0)!;
      expect(s.text).toBe(want);
      if (want === undefined) expect("text" in s).toBe(false);
    },
  );

  it("is kept with the value while the controller has not looked yet (Pending of a known generation)", () => {
    const first = desiredStatus(obj(), ok(8080), T0)!;
    const edited = desiredStatus(
      { ...obj(first), metadata: { name: "r", generation: 1 } },
      err("Pending"),
      T1,
      {
        ...first,
        conditions: [],
      },
    )!;
    expect(edited).toMatchObject({ value: 8080, text: "8080" });
  });

  it("changes with the value, so an equal value writes nothing and a new one writes both", () => {
    const first = desiredStatus(obj(), ok(1), T0)!;
    expect(statusEquals(first, desiredStatus(obj(first), ok(1), T1))).toBe(true);
    expect(desiredStatus(obj(first), ok(2, "11"), T1)).toMatchObject({ value: 2, text: "2" });
  });
});

describe("stableStringify", () => {
  it("ignores key order", () => {
    expect(stableStringify({ b: 1, a: { d: 1, c: 2 } })).toBe(stableStringify({ a: { c: 2, d: 1 }, b: 1 }));
  });
});

describe("desiredStatus with spec.export", () => {
  const record = { kind: "ConfigMap", namespace: "b", name: "app", key: "K", resourceVersion: "7" };
  const exported = { exports: [record], status: "True" as const, reason: "Exported", message: "" };
  const exportedOf = (s: ReferableStatus | undefined) => s?.conditions?.find((c) => c.type === "Exported");

  it("adds the Exported condition beside Ready, and the records", () => {
    const s = desiredStatus(obj(), ok("v"), T0, undefined, exported)!;
    expect(s.exports).toEqual([record]);
    expect(exportedOf(s)).toEqual({
      type: "Exported",
      status: "True",
      reason: "Exported",
      message: "",
      observedGeneration: 1,
      lastTransitionTime: "2026-01-01T00:00:00Z",
    });
  });

  it("drops an Exported condition forged on a Referable that does not export, even when the step did not run", () => {
    const plain = desiredStatus(obj(), ok("v"), T0)!;
    const forged: ReferableStatus = {
      ...plain,
      conditions: [
        ...plain.conditions!,
        { ...plain.conditions![0]!, type: "Exported", reason: "Exported", status: "True" },
      ],
    };
    expect(exportedOf(desiredStatus(obj(forged), ok("v"), T1, undefined, undefined))).toBeUndefined();
  });

  it.each([
    {
      reason: "an equal export state later changes nothing (not even lastTransitionTime)",
      later: exported,
      want: { status: "True", lastTransitionTime: "2026-01-01T00:00:00Z" },
    },
    {
      reason: "the export step not run (not leading, nothing observed) carries the condition over",
      later: undefined,
      want: { status: "True", lastTransitionTime: "2026-01-01T00:00:00Z" },
    },
    {
      reason: "a new status moves lastTransitionTime",
      later: { exports: [], status: "False" as const, reason: "ExportConflict", message: "m" },
      want: { status: "False", lastTransitionTime: "2026-01-01T00:05:00Z" },
    },
    {
      reason: "null (no spec.export any more) drops the condition and the records",
      later: null,
      want: undefined,
    },
  ])("$reason", ({ later, want }) => {
    const first = desiredStatus(obj(), ok("v"), T0, undefined, exported)!;
    const next = desiredStatus(obj(first), ok("v"), T1, undefined, later)!;
    if (want === undefined) {
      expect(exportedOf(next)).toBeUndefined();
      expect(next.exports).toBeUndefined();
    } else expect(exportedOf(next)).toMatchObject(want);
    if (later === exported || later === undefined) expect(statusEquals(first, next)).toBe(true);
  });
});

describe("releaseStatus", () => {
  const ready = {
    type: "Ready",
    status: "True" as const,
    reason: "Available",
    message: "",
    lastTransitionTime: "2025-01-01T00:00:00Z",
  };
  const obj = (exported: ReferableStatus["conditions"]): Referable => ({
    metadata: { name: "rf", generation: 3 },
    status: {
      value: "v",
      exports: [{ kind: "Secret", namespace: "a", name: "s", key: "K" }],
      conditions: [ready, ...(exported ?? [])],
    },
  });
  const problem = { reason: "ExportForbidden", message: "the Referable keeps its finalizer: no access" };

  it.each([
    {
      why: "an Exported condition that was True becomes False now, saying why",
      before: [
        {
          type: "Exported",
          status: "True" as const,
          reason: "Exported",
          message: "",
          lastTransitionTime: "2025-01-01T00:00:00Z",
        },
      ],
      since: "2026-01-01T00:00:00Z",
    },
    {
      why: "one already False keeps its lastTransitionTime",
      before: [
        {
          type: "Exported",
          status: "False" as const,
          reason: "ExportFailed",
          message: "x",
          lastTransitionTime: "2025-06-01T00:00:00Z",
        },
      ],
      since: "2025-06-01T00:00:00Z",
    },
  ])("$why, and the rest of the status stays as stored", ({ before, since }) => {
    const next = releaseStatus(obj(before), problem, T0);
    expect(next.value).toBe("v");
    expect(next.exports).toEqual(obj(before).status!.exports);
    expect(next.conditions).toEqual([
      ready,
      { type: "Exported", status: "False", ...problem, observedGeneration: 3, lastTransitionTime: since },
    ]);
  });
});

describe("conditions are shared between the statuses of Referables that have equal ones", () => {
  it("gives two Referables Ready in the same second the same frozen condition and list", () => {
    const a = desiredStatus(obj(), ok("x"), T1)!;
    const b = desiredStatus(obj(), ok("y", "11", "u2"), T1)!;
    expect(b.conditions).toBe(a.conditions);
    expect(Object.isFrozen(a.conditions![0])).toBe(true);
    expect(a.value).toBe("x");
    expect(b.value).toBe("y");
  });

  it.each([
    { reason: "another second", other: () => desiredStatus(obj(), ok("x"), T0)! },
    { reason: "another generation", other: () => desiredStatus(obj(undefined, 2), ok("x"), T1)! },
    { reason: "another reason", other: () => desiredStatus(obj(), err("SourceNotFound"), T1)! },
  ])("keeps apart conditions that differ: $reason", ({ other }) => {
    const a = desiredStatus(obj(), ok("x"), T1)!;
    const b = other();
    expect(b.conditions![0]).not.toBe(a.conditions![0]);
    expect(statusEquals(a, b)).toBe(false);
  });

  it("does not pool a long message (a key of its size would cost what sharing saves)", () => {
    const long = "m".repeat(300);
    const a = desiredStatus(obj(), err("SourceNotFound", long), T1)!;
    const b = desiredStatus(obj(), err("SourceNotFound", long), T1)!;
    expect(b.conditions![0]).not.toBe(a.conditions![0]);
    expect(b.conditions).toEqual(a.conditions);
  });
});
