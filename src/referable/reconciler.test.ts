import {
  EXPORT_FINALIZER,
  FIELD_EXPORT_FINALIZER,
  type Referable,
  type ReferableStatus,
} from "../api/referable.ts";
import { ResolutionError } from "../api/errors.ts";
import type { KeysStep } from "../outputs/keys/output.ts";
import type { DesiredStatus, StatusOutcome } from "../outputs/status.ts";
import type { ResolutionResult } from "../resolver/types.ts";
import type { Result } from "../runtime/reconciler.ts";
import { ReferableReconciler } from "./reconciler.ts";
import { newState, ReferableStates } from "./state.ts";
import { desiredStatus } from "./status.ts";
import { Subscriptions } from "./subscriptions.ts";

const T0 = new Date("2026-01-01T00:00:00.000Z");
const SOURCE = { apiVersion: "v1", kind: "ConfigMap", namespace: "a", name: "db" };
const available = (value: unknown): ResolutionResult => ({
  ok: true,
  reason: "Available",
  value,
  source: { ...SOURCE, uid: "s1", resourceVersion: "10" },
});

function referable(overrides: Partial<Referable["metadata"]> = {}, spec: Referable["spec"] = {}): Referable {
  return {
    metadata: { name: "r", uid: "u1", generation: 1, resourceVersion: "100", ...overrides },
    spec: { source: { ...SOURCE, fieldPath: "data.host" }, ...spec },
  };
}

/** A case: the world the reconciler sees, and what it should do. */
interface Case {
  reason: string;
  /** The Referable in the cache; undefined: gone. */
  cached: Referable | undefined;
  /** The subscription's current result; undefined: none pushed yet. */
  current?: ResolutionResult;
  leading?: boolean;
  /** What the status output answers. @default written at resourceVersion 101 */
  statusAnswer?: StatusOutcome;
  /** What the key output answers. @default nothing to export */
  keysAnswer?: KeysStep;
  /** The cycle the graph reports for the Referable. */
  cycle?: string[];
  /** @default the reconciler's */
  pendingGraceMs?: number;
  want: {
    result: Result;
    /** The Ready reason of each status written, in order. */
    written: string[];
    /** The key output's calls. */
    keys?: string[];
  };
}

/** Fake outputs and a fake resolver around a real reconciler, recording what it asks of them. */
function harness(c: Case, leadership = { leading: c.leading ?? true }) {
  const written: ReferableStatus[] = [];
  /** Every status the status output was asked to write, written or not. */
  const asked: ReferableStatus[] = [];
  const keys: string[] = [];
  const forgotten: string[] = [];
  const states = new ReferableStates();
  const resolver = {
    watch: () => ({ current: c.current, close: () => undefined }),
  };
  const subscriptions = new Subscriptions(states, resolver, () => undefined);
  const reconciler = new ReferableReconciler({
    reader: { get: () => c.cached },
    states,
    track: (obj) => subscriptions.track(obj),
    cycles: { cycleOf: () => c.cycle, flush: () => undefined },
    leadership,
    status: {
      memory: () => ({ gate: undefined, admittedAt: undefined }),
      write: async (_owner: Referable, desired: DesiredStatus) => {
        const answer = c.statusAnswer ?? { result: "written", resourceVersion: "101" };
        asked.push(desired.status);
        if (answer.result === "written") written.push(desired.status);
        return answer;
      },
    },
    keys: {
      finalizing: (obj) => obj.metadata.deletionTimestamp !== undefined && !!obj.metadata.finalizers?.length,
      write: async () => {
        keys.push("write");
        return c.keysAnswer ?? { state: null, retryAfterMs: undefined };
      },
      release: async () => {
        keys.push("release");
        return c.keysAnswer?.retryAfterMs;
      },
    },
    events: { transition: () => undefined, forget: (uid) => void forgotten.push(uid) },
    now: () => T0,
    ...(c.pendingGraceMs !== undefined && { pendingGraceMs: c.pendingGraceMs }),
  });
  return { reconciler, written, asked, keys, forgotten, states };
}

const reasons = (statuses: ReferableStatus[]) =>
  statuses.map((s) => s.conditions?.find((x) => x.type === "Ready")?.reason ?? "none");

/** A reconciler that has written the status of a Referable with a value once. */
async function writtenOnce() {
  const c: Case = {
    reason: "",
    cached: referable(),
    current: available("v"),
    want: { result: {}, written: [] },
  };
  const h = harness(c);
  await h.reconciler.reconcile("r");
  return { c, h };
}

describe("ReferableReconciler", () => {
  describe("a Pending result (the source kind not listed yet)", () => {
    const pending: ResolutionResult = {
      ok: false,
      error: new ResolutionError("Pending", "waiting for the first list of ConfigMap objects to complete"),
    };

    it("is not written on a new Referable within the grace: its list's result comes first", async () => {
      const h = harness({
        reason: "",
        cached: referable(),
        current: pending,
        want: { result: {}, written: [] },
      });
      const result = await h.reconciler.reconcile("r");
      expect(h.written).toEqual([]);
      expect(result.requeueAfterMs).toBeGreaterThan(119_000);
      expect(result.requeueAfterMs).toBeLessThanOrEqual(120_000);
    });

    it("is written once the grace is over (a list that takes long still shows Pending)", async () => {
      const c: Case = {
        reason: "",
        cached: referable(),
        current: pending,
        pendingGraceMs: 0,
        want: { result: {}, written: [] },
      };
      const h = harness(c);
      expect(await h.reconciler.reconcile("r")).toEqual({});
      expect(reasons(h.written)).toEqual(["Pending"]);
    });

    it("is not held back for a non-leader (it writes nothing anyway)", async () => {
      const h = harness({
        reason: "",
        cached: referable(),
        current: pending,
        leading: false,
        want: { result: {}, written: [] },
      });
      expect(await h.reconciler.reconcile("r")).toEqual({});
    });

    it("over a status of the same generation: nothing written, nothing held back", async () => {
      const cached = referable();
      // The status an earlier reconcile wrote for the value "v" at this generation.
      cached.status = desiredStatus(cached, available("v"), T0);
      expect(cached.status).toMatchObject({ observedGeneration: 1, value: "v" });
      const h = harness({ reason: "", cached, current: pending, want: { result: {}, written: [] } });
      expect(await h.reconciler.reconcile("r")).toEqual({});
      expect(h.written).toEqual([]);
    });
  });

  const cases: Case[] = [
    {
      reason: "a Referable that is gone is forgotten, and nothing is written",
      cached: undefined,
      want: { result: {}, written: [] },
    },
    {
      reason: "before the subscription's first result there is nothing to say yet",
      cached: referable(),
      want: { result: {}, written: [] },
    },
    {
      reason: "the leader writes the value the subscription found, after the keys",
      cached: referable(),
      current: available("db.internal"),
      want: { result: {}, written: ["Available"], keys: ["write"] },
    },
    {
      reason: "a replica that does not lead computes but writes nothing, keys included",
      cached: referable(),
      current: available("db.internal"),
      leading: false,
      want: { result: {}, written: [], keys: [] },
    },
    {
      reason: "a status the write policy holds back is a requeue after its wait, never a sleep",
      cached: referable(),
      current: available("v"),
      statusAnswer: { result: "deferred", retryAfterMs: 40 },
      want: { result: { requeueAfterMs: 40 }, written: [], keys: ["write"] },
    },
    {
      reason: "a status that lost a race (409) is computed again, on the backoff",
      cached: referable(),
      current: available("v"),
      statusAnswer: { result: "conflict" },
      want: { result: { requeue: true }, written: [], keys: ["write"] },
    },
    {
      reason: "a key write due later asks to look again then, and the status is still written",
      cached: referable(),
      current: available("v"),
      keysAnswer: { state: undefined, retryAfterMs: 70 },
      want: { result: { requeueAfterMs: 70 }, written: ["Available"], keys: ["write"] },
    },
    {
      reason: "a Referable changed under the finalizer patch is looked at again, nothing written",
      cached: referable(),
      current: available("v"),
      keysAnswer: { state: undefined, retryAfterMs: undefined, requeue: true },
      want: { result: { requeue: true }, written: [], keys: ["write"] },
    },
    {
      reason: "once the status records the keys removed, another pass lets go of the finalizer",
      cached: referable({ finalizers: [EXPORT_FINALIZER] }),
      current: available("v"),
      keysAnswer: { state: null, retryAfterMs: undefined, thenRequeue: true },
      want: { result: { requeueAfterMs: 0 }, written: ["Available"], keys: ["write"] },
    },
    {
      reason: "a Referable being deleted with the finalizer has its keys released, on a backoff",
      cached: referable({ deletionTimestamp: "2026-01-01T00:00:00Z", finalizers: [EXPORT_FINALIZER] }),
      current: available("v"),
      keysAnswer: { state: undefined, retryAfterMs: 1000 },
      want: { result: { requeueAfterMs: 1000 }, written: [], keys: ["release"] },
    },
    {
      reason: "a Referable naming itself as its source is InvalidSpec, whatever the resolver says",
      cached: referable(
        {},
        { source: { apiVersion: "referable.dev/v1alpha1", kind: "Referable", name: "r" } },
      ),
      current: available("v"),
      want: { result: {}, written: ["InvalidSpec"], keys: ["write"] },
    },
    {
      reason: "a Referable on a cycle of Referables is InvalidSpec",
      cached: referable(),
      current: available("v"),
      cycle: ["r", "s", "r"],
      want: { result: {}, written: ["InvalidSpec"], keys: ["write"] },
    },
  ];

  it.each(cases)("$reason", async (c) => {
    const h = harness(c);
    const result = await h.reconciler.reconcile("r");
    expect({ result, written: reasons(h.written), keys: h.keys }).toEqual({
      result: c.want.result,
      written: c.want.written,
      keys: c.want.keys ?? [],
    });
  });

  it("reads through its own write until the cache shows it: a second look writes nothing", async () => {
    const { h } = await writtenOnce();
    // The cache still holds version 100, from which the status at 101 was written.
    expect(await h.reconciler.reconcile("r")).toEqual({});
    expect(h.written).toHaveLength(1);
  });

  it("puts back a status someone else changed, no sooner than the repair interval", async () => {
    const { c, h } = await writtenOnce();
    // Someone else writes a status: the cache moves on to a version the controller did not make.
    c.cached = {
      ...referable({ resourceVersion: "102" }),
      status: { observedGeneration: 1, value: "forged" },
    };
    const result = await h.reconciler.reconcile("r");
    expect(result.requeueAfterMs).toBeGreaterThan(0);
    expect(result.requeueAfterMs).toBeLessThanOrEqual(100);
    expect(h.written).toHaveLength(1);
  });

  it("a Referable that is gone takes its Events' memory with it", async () => {
    const { c, h } = await writtenOnce();
    c.cached = undefined;
    await h.reconciler.reconcile("r");
    expect({ forgotten: h.forgotten, state: h.states.get("r") }).toEqual({
      forgotten: ["u1"],
      state: undefined,
    });
  });

  it("says InvalidSpec for a spec that cannot be turned into a request", async () => {
    const c: Case = {
      reason: "",
      cached: { metadata: { name: "r", uid: "u1", generation: 1, resourceVersion: "1" }, spec: {} },
      want: { result: {}, written: [] },
    };
    const h = harness(c);
    await h.reconciler.reconcile("r");
    expect(h.written[0]?.conditions?.[0]).toMatchObject({
      reason: "InvalidSpec",
      message: new ResolutionError("InvalidSpec", "spec.source is required").message,
    });
  });

  describe("a status write held back by the write policy (a place in the budget reserved)", () => {
    /** A Referable whose first write was deferred: the status output answers "written" from now on. */
    async function deferredOnce(leadership?: { leading: boolean }) {
      const c: Case = {
        reason: "",
        cached: referable(),
        current: available("v"),
        statusAnswer: { result: "deferred", retryAfterMs: 40 },
        want: { result: {}, written: [] },
      };
      const h = harness(c, leadership);
      expect(await h.reconciler.reconcile("r")).toEqual({ requeueAfterMs: 40 });
      delete c.statusAnswer;
      return { c, h };
    }

    it("is written on the look after the wait as it was computed, not computed again", async () => {
      const { h } = await deferredOnce();
      expect(await h.reconciler.reconcile("r")).toEqual({});
      expect(h.asked).toHaveLength(2);
      // The very status computed before the wait: no second projection, no key step.
      expect(h.asked[1]).toBe(h.asked[0]);
      expect(h.written).toEqual([h.asked[0]]);
      expect(h.keys).toEqual(["write"]);
    });

    it("is held again when it must wait again, and still written once, as computed", async () => {
      const { c, h } = await deferredOnce();
      c.statusAnswer = { result: "deferred", retryAfterMs: 5 };
      expect(await h.reconciler.reconcile("r")).toEqual({ requeueAfterMs: 5 });
      delete c.statusAnswer;
      await h.reconciler.reconcile("r");
      expect(h.asked).toHaveLength(3);
      expect(new Set(h.asked).size).toBe(1);
      expect(h.written).toHaveLength(1);
      // Written: nothing is held any more, the next look computes (and finds nothing to write).
      await h.reconciler.reconcile("r");
      expect(h.asked).toHaveLength(3);
    });

    it.each([
      {
        reason: "a new result pushed meanwhile is computed and written: the last value always is",
        change: (_c: Case, h: ReturnType<typeof harness>) => {
          // The harness's subscription is a plain object: a push replaces its result.
          (h.states.get("r")!.subscription as { current: ResolutionResult }).current = available("w");
        },
        value: "w",
      },
      {
        reason: "a new version of the Referable meanwhile (a spec or label edit) is computed again",
        change: (c: Case) => {
          c.cached = referable({ resourceVersion: "150" });
        },
        value: "v",
      },
    ])("$reason", async ({ change, value }) => {
      const { c, h } = await deferredOnce();
      change(c, h);
      await h.reconciler.reconcile("r");
      expect(h.asked).toHaveLength(2);
      expect(h.asked[1]).not.toBe(h.asked[0]);
      expect(h.written).toEqual([h.asked[1]]);
      expect(h.written[0]?.value).toBe(value);
      expect(h.keys).toEqual(["write", "write"]);
    });

    it("is not written by a replica that stopped leading meanwhile", async () => {
      const leadership = { leading: true };
      const { h } = await deferredOnce(leadership);
      leadership.leading = false;
      expect(await h.reconciler.reconcile("r")).toEqual({});
      expect(h.written).toEqual([]);
    });
  });

  describe("a Referable being deleted that holds both finalizers", () => {
    /** A reconciler whose outputs record their calls; the key output's release answers `keysWait`. */
    function deleting(keysWait: number | undefined, tracked: boolean) {
      const calls: string[] = [];
      const states = new ReferableStates();
      const cached = referable({
        deletionTimestamp: "2026-01-01T00:00:00Z",
        finalizers: [FIELD_EXPORT_FINALIZER, EXPORT_FINALIZER],
      });
      if (tracked) states.set("r", newState(cached, "1", undefined));
      const holds = (obj: Referable, finalizer: string) =>
        obj.metadata.deletionTimestamp !== undefined &&
        (obj.metadata.finalizers?.includes(finalizer) ?? false);
      const reconciler = new ReferableReconciler({
        reader: { get: () => cached },
        states,
        track: () => {
          throw new Error("a Referable being deleted is not subscribed");
        },
        cycles: { cycleOf: () => undefined, flush: () => undefined },
        leadership: { leading: true },
        status: {
          memory: () => ({ gate: undefined, admittedAt: undefined }),
          write: async () => ({ result: "written", resourceVersion: "102" }),
        },
        keys: {
          finalizing: (obj) => holds(obj, EXPORT_FINALIZER),
          write: async () => ({ state: null, retryAfterMs: undefined }),
          release: async (obj) => {
            calls.push(`keys of ${obj.metadata.resourceVersion} [${obj.metadata.finalizers?.join()}]`);
            return keysWait;
          },
        },
        fields: {
          finalizing: (obj) => holds(obj, FIELD_EXPORT_FINALIZER),
          write: async () => ({ state: null, retryAfterMs: undefined }),
          release: async (_obj, _memory, removed) => {
            calls.push("fields");
            removed?.({ resourceVersion: "101", finalizers: [EXPORT_FINALIZER] });
            return undefined;
          },
        },
      });
      return { reconciler, calls };
    }

    it("lets go of its keys in the same pass as its fields' finalizer, not on that write's echo", async () => {
      const { reconciler, calls } = deleting(undefined, false);
      expect(await reconciler.reconcile("r")).toEqual({});
      expect(calls).toEqual(["fields", `keys of 101 [${EXPORT_FINALIZER}]`]);
    });

    it("reads through the finalizer it let go of until the cache shows it: a retry releases only the keys", async () => {
      const { reconciler, calls } = deleting(50, true);
      expect(await reconciler.reconcile("r")).toEqual({ requeueAfterMs: 50 });
      // The cache still shows the version before the removal (its echo not in yet).
      expect(await reconciler.reconcile("r")).toEqual({ requeueAfterMs: 50 });
      expect(calls).toEqual([
        "fields",
        `keys of 101 [${EXPORT_FINALIZER}]`,
        `keys of 101 [${EXPORT_FINALIZER}]`,
      ]);
    });
  });
});
