import { setImmediate as nextTurn } from "node:timers/promises";
import { REFERABLE_API_VERSION, type Referable, type ReferableStatus } from "../api/referable.ts";
import type { KubeClient, KubeObject, RequestOptions } from "../kube/client.ts";
import type { ResolutionResult } from "../resolver/types.ts";
import { ControllerMetrics } from "./metrics.ts";
import { ShardGate } from "../runtime/shard-gate.ts";
import { answerAsJson, silentWatch } from "../../test/harness/fake-kube.ts";
import type { ReferableCache } from "./cache.ts";
import { mayHaveChanged, ReferableController } from "./controller.ts";
import { desiredStatus } from "./status.ts";

const LIST = `/apis/${REFERABLE_API_VERSION}/referables`;
const SOURCE = { apiVersion: "v1", kind: "ConfigMap", namespace: "a", name: "db" };
const T_OLD = new Date("2026-01-01T00:00:00.000Z");
const available = (value: unknown, resourceVersion = "10"): ResolutionResult => ({
  ok: true,
  reason: "Available",
  value,
  source: { ...SOURCE, uid: "s1", resourceVersion },
});

function referable(name: string, status?: ReferableStatus): Referable {
  return {
    apiVersion: REFERABLE_API_VERSION,
    kind: "Referable",
    metadata: { name, uid: `uid-${name}`, generation: 1, resourceVersion: `rv-${name}` },
    spec: { source: { ...SOURCE, fieldPath: "data.host" } },
    ...(status && { status }),
  };
}

/** The status the controller writes for a Referable whose source reads `value`, as written long ago. */
function writtenLongAgo(obj: Referable, value: unknown): ReferableStatus {
  // Read at an older version of the source: a new owner reads a newer one, with the same value.
  return desiredStatus(obj, available(value, "9"), T_OLD)!;
}

/** The API server as the controller's client sees it: one list of `items`, silent watches, status patches recorded. */
function fakeClient(items: Referable[]) {
  const patches: Array<{ path: string; body: unknown }> = [];
  const client: Pick<KubeClient, "request" | "watch"> = {
    request: async <T>(method: string, path: string, options: RequestOptions = {}): Promise<T> => {
      if (method === "GET" && path === LIST)
        return answerAsJson<T>({ items, metadata: { resourceVersion: "1000" } }, options);
      if (method === "PATCH") {
        patches.push({ path, body: options.body });
        return { metadata: { resourceVersion: `${patches.length + 2000}` } } as T;
      }
      throw new Error(`unexpected ${method} ${path}`);
    },
    watch: () => silentWatch(),
  };
  return { client, patches };
}

/** A resolver whose every subscription reads `value` at once, counting subscriptions open. */
function fakeResolver(value: unknown) {
  const open = new Set<string>();
  let made = 0;
  return {
    open,
    made: () => made,
    watch: () => {
      const id = String(made++);
      open.add(id);
      return { current: available(value), close: () => void open.delete(id) };
    },
  };
}

/** What the controller's cache holds for `name` (the compact record is the point of these tests). */
function cached(controller: ReferableController, name: string): KubeObject | undefined {
  return (controller as unknown as { cache: ReferableCache }).cache.raw(name);
}

async function until(what: string, check: () => boolean, deadlineMs = 5000): Promise<void> {
  const end = Date.now() + deadlineMs;
  while (!check()) {
    if (Date.now() > end) throw new Error(`timed out waiting until ${what}`);
    await nextTurn();
  }
}

/** Reconciles finished (any outcome). */
async function reconciles(metrics: ControllerMetrics): Promise<number> {
  const { values } = await metrics.reconcileTotal.get();
  return values.reduce((sum, v) => sum + v.value, 0);
}

/** Waits until at least `n` reconciles have finished and none is running. */
async function reconciled(
  controller: ReferableController,
  metrics: ControllerMetrics,
  n: number,
): Promise<void> {
  const end = Date.now() + 5000;
  while ((await reconciles(metrics)) < n || controller.unfinishedWork().longestRunningProcessorSeconds > 0) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${n} reconciles`);
    await nextTurn();
  }
}

describe("ReferableController sharded: compact records of the Referables it does not serve", () => {
  const gate = new ShardGate(2);
  // Names in each of the two buckets.
  const names = Array.from({ length: 40 }, (_, i) => `r${i}`);
  const inBucket = (b: number) => names.filter((n) => gate.bucketOf(n) === b);

  /** A controller over `items`, serving `served` from the start (whole statuses cached). */
  async function started(items: Referable[], value: unknown, served: number[] = []) {
    const shards = new ShardGate(2);
    for (const bucket of served) shards.add(bucket);
    const { client, patches } = fakeClient(items);
    const resolver = fakeResolver(value);
    const metrics = new ControllerMetrics({ defaultMetrics: false });
    const controller = new ReferableController({
      client,
      resolver,
      shards,
      metrics,
      watchdogMs: 600_000,
      listBySlot: false,
    });
    controller.setLeader(true);
    controller.start();
    await controller.whenSynced();
    return { controller, shards, patches, resolver, metrics };
  }

  it("keeps a summary, not the status, of every Referable of a bucket it does not serve", async () => {
    const items = names.map((n) => referable(n));
    for (const obj of items) obj.status = writtenLongAgo(obj, "v");
    const { controller, resolver } = await started(items, "v");
    try {
      for (const name of names) {
        const obj = cached(controller, name)!;
        // A skeleton (no value, no messages), and the digest of the stored status.
        expect(obj.status).toEqual({
          observedGeneration: 1,
          conditions: [expect.not.objectContaining({ message: expect.anything() })],
        });
        expect(obj.digest).toEqual(expect.any(String));
        expect(obj.spec).toEqual(items[0]!.spec);
      }
      expect(resolver.made()).toBe(0);
      // The gauge of Ready reasons still counts them, from the skeleton.
      expect(controller.countByReason()).toEqual(new Map([["Available", names.length]]));
    } finally {
      await controller.stop();
    }
  });

  it("takes over a bucket of unchanged Referables without a status write, and writes a changed one from its cached version", async () => {
    const items = names.map((n) => referable(n));
    const changed = inBucket(0)[0]!;
    for (const obj of items) obj.status = writtenLongAgo(obj, obj.metadata.name === changed ? "old" : "v");
    const { controller, shards, patches, resolver, metrics } = await started(items, "v");
    try {
      shards.add(0);
      shards.add(1);
      await until("every Referable is subscribed", () => resolver.made() === names.length);
      await reconciled(controller, metrics, names.length);
      // One write, the changed one's, with the cached uid and resourceVersion as preconditions: no GET.
      expect(patches.map((p) => p.path)).toEqual([
        `/apis/${REFERABLE_API_VERSION}/referables/${changed}/status`,
      ]);
      expect(patches[0]!.body).toEqual([
        { op: "test", path: "/metadata/uid", value: `uid-${changed}` },
        { op: "replace", path: "/metadata/resourceVersion", value: `rv-${changed}` },
        expect.objectContaining({ op: "add", path: "/status" }),
      ]);
      // What is written keeps the stored Ready condition's lastTransitionTime (still True).
      const written = (patches[0]!.body as Array<{ value: ReferableStatus }>)[2]!.value;
      expect(written.value).toBe("v");
      expect(written.conditions?.[0]?.lastTransitionTime).toBe("2026-01-01T00:00:00Z");
    } finally {
      await controller.stop();
    }
  });

  it("drops a bucket's Referables to compact records when it gives the bucket back, and takes them again without writing", async () => {
    const items = names.map((n) => referable(n));
    // Served from the start: the whole status is cached.
    const served = items.map((obj) => ({ ...obj, status: writtenLongAgo(obj, "v") }));
    const { controller, shards, patches, resolver, metrics } = await started(served, "v", [0, 1]);
    try {
      await until("every Referable is subscribed", () => resolver.open.size === names.length);
      await reconciled(controller, metrics, names.length);
      for (const name of names) expect(cached(controller, name)!.status).toHaveProperty("value", "v");

      await shards.remove(0);
      for (const name of inBucket(0)) {
        expect(cached(controller, name)!.status).not.toHaveProperty("value");
        expect(cached(controller, name)!.digest).toEqual(expect.any(String));
      }
      for (const name of inBucket(1)) expect(cached(controller, name)!.status).toHaveProperty("value", "v");
      expect(resolver.open.size).toBe(inBucket(1).length);

      const before = await reconciles(metrics);
      shards.add(0);
      await until("bucket 0 is subscribed again", () => resolver.open.size === names.length);
      await reconciled(controller, metrics, before + inBucket(0).length);
      expect(patches).toEqual([]);
    } finally {
      await controller.stop();
    }
  });
});

describe("ReferableController sharded: a bucket taken over, changed first", () => {
  const gate = new ShardGate(2);
  const bucket0 = Array.from({ length: 40 }, (_, i) => `r${i}`).filter((n) => gate.bucketOf(n) === 0);
  // The last ones in the cache's order: changed first is not the cache's order.
  const changed = new Set(bucket0.slice(-3));
  const notReady = bucket0.at(-4)!;

  /** Each Referable reads a source of its own; the changed ones' sources are cached at a newer version than theirs. */
  function ownSource(name: string): Referable {
    const obj = referable(name);
    obj.spec = { source: { ...SOURCE, name: `src-${name}`, fieldPath: "data.host" } };
    obj.metadata.resourceVersion = "500";
    if (name !== notReady) obj.status = writtenLongAgo(obj, "v");
    return obj;
  }

  it("subscribes and reconciles first the Referables whose source is newer than their status, or not Ready", async () => {
    const items = bucket0.map(ownSource);
    const { client } = fakeClient(items);
    const subscribed: string[] = [];
    const looked: string[] = [];
    const resolver = {
      watch: (request: unknown) => {
        const name = (request as { name: string }).name.slice("src-".length);
        subscribed.push(name);
        return {
          get current() {
            looked.push(name);
            return available(changed.has(name) ? "new" : "v");
          },
          close: () => undefined,
        };
      },
      cachedVersion: ({ name }: { name: string }) => (changed.has(name.slice("src-".length)) ? "501" : "499"),
    };
    const shards = new ShardGate(2);
    const metrics = new ControllerMetrics({ defaultMetrics: false });
    // One worker: the order of the reconciles is the queue's.
    const controller = new ReferableController({
      client,
      resolver,
      shards,
      metrics,
      concurrency: 1,
      watchdogMs: 600_000,
      listBySlot: false,
    });
    controller.setLeader(true);
    controller.start();
    await controller.whenSynced();
    try {
      shards.add(0);
      await reconciled(controller, metrics, bucket0.length);
      const first = new Set([...changed, notReady]);
      const inOrder = bucket0.filter((n) => first.has(n));
      expect(subscribed.slice(0, first.size)).toEqual(inOrder);
      expect(looked.slice(0, first.size)).toEqual(inOrder);
      expect(new Set(looked)).toEqual(new Set(bucket0));
    } finally {
      await controller.stop();
    }
  });

  it("subscribes the unchanged rest a chunk per turn of the event loop from the next turn, and stops when the bucket is let go of", async () => {
    const names = Array.from({ length: 4000 }, (_, i) => `r${i}`).filter((n) => gate.bucketOf(n) === 0);
    const { client } = fakeClient(names.map(ownSource));
    let subscribed = 0;
    const resolver = {
      watch: () => {
        subscribed++;
        return { current: available("v"), close: () => undefined };
      },
      cachedVersion: () => "499",
    };
    const shards = new ShardGate(2);
    const controller = new ReferableController({
      client,
      resolver,
      shards,
      watchdogMs: 600_000,
      listBySlot: false,
    });
    controller.start();
    await controller.whenSynced();
    try {
      // The one without a status is subscribed first (not Ready), with the first chunk.
      const before = subscribed + (names.includes(notReady) ? 1 : 0);
      shards.add(0);
      // None of the rest in the turn that took the bucket (the first ones of every bucket taken
      // in that turn come before), then one chunk a turn: the loop is free for their reconciles.
      expect(subscribed - before).toBe(0);
      await nextTurn();
      expect(subscribed - before).toBe(200);
      await nextTurn();
      expect(subscribed - before).toBe(400);
      // Let go of (once its running reconciles are done, a chunk or two may pass meanwhile): the
      // pass stops where it is, short of the whole bucket.
      await shards.remove(0);
      const atRemoval = subscribed;
      for (let i = 0; i < 5; i++) await nextTurn();
      expect(subscribed).toBe(atRemoval);
      expect(subscribed - before).toBeLessThan(names.length);
      expect(names.length).toBeGreaterThan(1000);
    } finally {
      await controller.stop();
    }
  });

  const at = (resourceVersion: string, status?: ReferableStatus): Referable => ({
    ...referable("x"),
    metadata: { ...referable("x").metadata, resourceVersion },
    ...(status && { status }),
  });
  const ready = writtenLongAgo(referable("x"), "v");
  it.each([
    {
      reason: "a source cached at an older version: unchanged",
      obj: at("100", ready),
      cached: "99",
      want: false,
    },
    {
      reason: "a source cached at a newer version: changed",
      obj: at("100", ready),
      cached: "101",
      want: true,
    },
    { reason: "a longer number is newer", obj: at("99", ready), cached: "100", want: true },
    {
      reason: "the source not cached here (or its kind not watched)",
      obj: at("100", ready),
      cached: undefined,
      want: true,
    },
    { reason: "versions that are not numbers: cannot tell", obj: at("abc", ready), cached: "99", want: true },
    { reason: "no status yet", obj: at("100"), cached: "99", want: true },
    {
      reason: "not Ready",
      obj: at("100", { ...ready, conditions: [{ ...ready.conditions![0]!, status: "False" }] }),
      cached: "99",
      want: true,
    },
    {
      reason: "a spec not observed yet",
      obj: at("100", { ...ready, observedGeneration: 0 }),
      cached: "99",
      want: true,
    },
    {
      reason: "a selector: which objects it read, the cache cannot tell",
      obj: { ...at("100", ready), spec: { source: { apiVersion: "v1", kind: "ConfigMap", selector: {} } } },
      cached: "99",
      want: true,
    },
  ])("mayHaveChanged: $reason", ({ obj, cached, want }) => {
    expect(mayHaveChanged(obj, () => cached)).toBe(want);
  });
});
