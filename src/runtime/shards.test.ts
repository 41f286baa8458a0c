/**
 * The hand-over state machine of {@link ShardCoordinator}, over a fake of our own small Lease
 * client (an in-memory store with resourceVersions and 409s) and a fake clock: the tests drive
 * the rounds themselves. The real API server's side is test/integration/sharding.test.ts.
 */
import { jest } from "@jest/globals";
import { ApiError, type KubeClient, type RequestOptions } from "../kube/client.ts";
import type { Lease } from "./leader-election.ts";
import { DONE, type Result } from "./reconciler.ts";
import { ShardGate } from "./shard-gate.ts";
import {
  BUCKETS_ANNOTATION,
  memberLeaseName,
  ROLE_LABEL,
  SHARD_SET_LABEL,
  ShardCoordinator,
  SYNCING_ANNOTATION,
} from "./shards.ts";

const NS = "/apis/coordination.k8s.io/v1/namespaces/ns/leases";
const SET = "rc";
const LEASE_MS = 3_000;
const RENEW_MS = 2_000;
const RETRY_MS = 500;
/** The wall clock's time when a world's fake clock reads 0. */
const EPOCH = Date.parse("2026-01-01T00:00:00Z");

/**
 * Only Date is faked: the coordinator stamps the records it writes (renewTime) with the wall
 * clock, and a replica judges another's Lease alive by its record changing. Left real, the
 * wall clock barely moves while the fake one moves a retry period per round, so two renewals
 * could carry the same millisecond, look like no renewal at all, and let a Lease expire a round
 * early. The wall clock follows the fake one instead, as both follow real time in production.
 */
beforeEach(() => {
  jest.useFakeTimers({
    doNotFake: [
      "hrtime",
      "nextTick",
      "performance",
      "queueMicrotask",
      "requestAnimationFrame",
      "cancelAnimationFrame",
      "requestIdleCallback",
      "cancelIdleCallback",
      "setImmediate",
      "clearImmediate",
      "setInterval",
      "clearInterval",
      "setTimeout",
      "clearTimeout",
    ],
    now: EPOCH,
  });
});
afterEach(() => {
  jest.useRealTimers();
});

/** Leases in memory, as the API server keeps them: a resourceVersion guards every write. */
class LeaseStore {
  readonly leases = new Map<string, Lease>();
  private version = 0;

  /** A client of the store; `down()` makes its requests fail as a partitioned replica's would. */
  client(): Pick<KubeClient, "request"> & { down: boolean } {
    const client = {
      down: false,
      request: <T>(method: string, path: string, options: RequestOptions = {}): Promise<T> =>
        client.down
          ? Promise.reject(new ApiError(method, path, 503, "ServiceUnavailable", "the network is down"))
          : Promise.resolve(this.handle(method, path, options) as T),
    };
    return client;
  }

  holder(name: string): string | undefined {
    return this.leases.get(name)?.spec?.holderIdentity as string | undefined;
  }

  private handle(method: string, path: string, options: RequestOptions): unknown {
    const name = path.startsWith(`${NS}/`) ? path.slice(NS.length + 1) : undefined;
    const body = structuredClone(options.body) as Lease;
    const conflict = () => new ApiError(method, path, 409, "Conflict", "the object has been modified");
    if (method === "GET" && name === undefined) {
      const [key, value] = String(options.query?.labelSelector).split("=");
      return { items: [...this.leases.values()].filter((l) => l.metadata?.labels?.[key!] === value) };
    }
    const current = name === undefined ? undefined : this.leases.get(name);
    if (method === "GET") {
      if (!current) throw new ApiError(method, path, 404, "NotFound", "not found");
      return structuredClone(current);
    }
    if (method === "POST") {
      const created = body.metadata?.name ?? "";
      if (this.leases.has(created)) throw new ApiError(method, path, 409, "AlreadyExists", "exists");
      return this.store(created, body);
    }
    if (!current) throw new ApiError(method, path, 404, "NotFound", "not found");
    if (method === "PUT") {
      if (body.metadata?.resourceVersion !== current.metadata?.resourceVersion) throw conflict();
      return this.store(name!, body);
    }
    if (method === "DELETE") {
      const want = (options.body as { preconditions?: { resourceVersion?: string } } | undefined)
        ?.preconditions;
      if (want?.resourceVersion && want.resourceVersion !== current.metadata?.resourceVersion)
        throw conflict();
      this.leases.delete(name!);
      return {};
    }
    throw new Error(`unexpected ${method} ${path}`);
  }

  private store(name: string, lease: Lease): Lease {
    lease.metadata = { ...lease.metadata, name, resourceVersion: String(++this.version) };
    this.leases.set(name, lease);
    return structuredClone(lease);
  }
}

/** A reconciler whose reconciles of chosen keys end only when the test says so. */
function blockingReconciler() {
  const blocked = new Map<string, () => void>();
  return {
    block: (key: string) => blocked.set(key, () => undefined),
    finish: (key: string) => blocked.get(key)?.(),
    reconcile: (key: string) =>
      blocked.has(key)
        ? new Promise<Result>((resolve) => blocked.set(key, () => resolve(DONE)))
        : Promise.resolve(DONE),
  };
}

interface Replica {
  identity: string;
  gate: ShardGate;
  coordinator: ShardCoordinator;
  client: ReturnType<LeaseStore["client"]>;
  handovers: string[];
  takeovers: number[];
}

/** A world of replicas sharing one store and one clock. */
function world(buckets: number) {
  const store = new LeaseStore();
  const clock = { now: 0 };
  const replicas: Replica[] = [];
  const replica = (identity: string, options: { buckets?: number; syncing?: boolean } = {}): Replica => {
    const gate = new ShardGate(options.buckets ?? buckets);
    const client = store.client();
    const handovers: string[] = [];
    const takeovers: number[] = [];
    const coordinator = new ShardCoordinator({
      client,
      namespace: "ns",
      name: SET,
      identity,
      gate,
      leaseDurationMs: LEASE_MS,
      renewDeadlineMs: RENEW_MS,
      retryPeriodMs: RETRY_MS,
      now: () => clock.now,
      ...(options.syncing && { syncing: true }),
      observer: {
        onHandover: (kind) => handovers.push(kind),
        onTakeover: (seconds) => takeovers.push(seconds),
      },
    });
    const r = { identity, gate, coordinator, client, handovers, takeovers };
    replicas.push(r);
    return r;
  };
  /** Moves the clock on `ms`. */
  const advance = (ms: number) => {
    clock.now += ms;
    jest.setSystemTime(EPOCH + clock.now);
  };
  /** One round of each replica given, in turn, then the clock moves on a retry period. */
  const round = async (...who: Replica[]) => {
    for (const r of who) await r.coordinator.tick();
    await flush();
    advance(RETRY_MS);
  };
  /** One round of each replica given, at once: each lists the Leases before any writes. */
  const together = async (...who: Replica[]) => {
    await Promise.all(who.map((r) => r.coordinator.tick()));
    await flush();
    advance(RETRY_MS);
  };
  const bucketLease = (b: number) => `${SET}-bucket-${b}-of-${buckets}`;
  const holders = () => Array.from({ length: buckets }, (_, b) => store.holder(bucketLease(b)) ?? "");
  return { store, clock, replica, advance, round, together, bucketLease, holders };
}

const flush = async () => {
  for (let i = 0; i < 5; i++) await new Promise<void>((resolve) => setImmediate(resolve));
};

const count = (holders: string[], identity: string) => holders.filter((h) => h === identity).length;

describe("ShardCoordinator", () => {
  it("announces itself first, then three replicas settle on four buckets of twelve each", async () => {
    const w = world(12);
    const [a, b, c] = [w.replica("a"), w.replica("b"), w.replica("c")];
    await w.round(a, b, c);
    expect({ buckets: w.holders().filter(Boolean).length, members: w.store.leases.size }).toEqual({
      buckets: 0,
      members: 3,
    });
    for (let i = 0; i < 6; i++) await w.round(a, b, c);
    const holders = w.holders();
    expect([a, b, c].map((r) => count(holders, r.identity))).toEqual([4, 4, 4]);
    for (const r of [a, b, c])
      expect([...r.gate.held].sort()).toEqual(
        holders.flatMap((h, i) => (h === r.identity ? [i] : [])).sort(),
      );
  });

  it("four replicas announced while their caches sync, synced rounds apart, reach four each with no hand-over", async () => {
    const w = world(16);
    const all = ["a", "b", "c", "d"].map((id) => w.replica(id, { syncing: true }));
    await w.round(...all);
    await w.round(...all);
    expect(w.holders().filter(Boolean)).toHaveLength(0);
    // One more synced every round (all within a lease duration of their announcement, the
    // longest a replica syncing is waited for): the first takes its share only, leaving the
    // others theirs.
    for (const r of all) {
      r.coordinator.synced();
      await w.round(...all);
      expect(r.gate.held.size).toBe(4);
    }
    const holders = w.holders();
    expect(all.map((r) => count(holders, r.identity))).toEqual([4, 4, 4, 4]);
    expect(all.flatMap((r) => r.handovers).filter((h) => h !== "acquired")).toEqual([]);
  });

  it("waits for replicas that join a retry period apart, so none is handed buckets over", async () => {
    const w = world(12);
    const [a, b, c] = [w.replica("a"), w.replica("b"), w.replica("c")];
    // b announces just before a's second round, c just before its third: each seen joining
    // within a retry period of the one before, so a deals only once c has been seen.
    await w.round(a);
    await w.round(b, a);
    await w.round(c, a, b);
    expect(w.holders().filter(Boolean)).toHaveLength(0);
    for (let i = 0; i < 4; i++) await w.round(a, b, c);
    const holders = w.holders();
    expect([a, b, c].map((r) => count(holders, r.identity))).toEqual([4, 4, 4]);
    expect([a, b, c].flatMap((r) => r.handovers).filter((h) => h !== "acquired")).toEqual([]);
  });

  it("deals at most a lease duration after its announcement, though replicas keep joining", async () => {
    const w = world(64);
    const a = w.replica("a");
    await w.round(a);
    const joining: Replica[] = [];
    let dealtAfterMs = -1;
    for (let i = 0; i < 2 * (LEASE_MS / RETRY_MS) && dealtAfterMs < 0; i++) {
      joining.push(w.replica(`j${i}`));
      await w.round(...joining.slice(-1), a, ...joining.slice(0, -1));
      if (a.gate.held.size > 0) dealtAfterMs = (i + 1) * RETRY_MS;
    }
    expect(dealtAfterMs).toBeGreaterThanOrEqual(LEASE_MS);
    expect(dealtAfterMs).toBeLessThanOrEqual(LEASE_MS + RETRY_MS);
  });

  it("a lone replica announced while syncing takes every bucket in the round after it synced", async () => {
    const w = world(8);
    const a = w.replica("a", { syncing: true });
    for (let i = 0; i < 3; i++) await w.round(a);
    expect(a.gate.held.size).toBe(0);
    a.coordinator.synced();
    await w.round(a);
    expect(a.gate.held.size).toBe(8);
  });

  it.each([
    {
      reason: "synced a retry period after its announcement: the round is made at once",
      syncedAfterMs: 300_000,
      want: 8,
    },
    {
      reason: "synced sooner: not before the others had a retry period to announce themselves",
      syncedAfterMs: 1_000,
      want: 0,
    },
  ])("makes its round after the sync early: $reason", async ({ syncedAfterMs, want }) => {
    // A retry period of five minutes: a round not made early comes long after the test's end.
    const store = new LeaseStore();
    const gate = new ShardGate(8);
    const clock = { now: 0 };
    const coordinator = new ShardCoordinator({
      client: store.client(),
      namespace: "ns",
      name: SET,
      identity: "a",
      gate,
      leaseDurationMs: 900_000,
      renewDeadlineMs: 600_000,
      retryPeriodMs: 300_000,
      now: () => clock.now,
    });
    coordinator.announce();
    for (let i = 0; i < 20 && store.leases.size === 0; i++) await flush();
    expect({ leases: store.leases.size, held: gate.held.size }).toEqual({ leases: 1, held: 0 });
    clock.now += syncedAfterMs;
    coordinator.synced();
    for (let i = 0; i < 20 && gate.held.size < want; i++) await flush();
    await flush();
    expect(gate.held.size).toBe(want);
    await coordinator.stop();
  });

  it("does not wait for a replica syncing longer than a lease duration", async () => {
    const w = world(8);
    const [a, b] = [w.replica("a"), w.replica("b", { syncing: true })];
    // a announced before b: it sees b join in its second round and deals a retry period later.
    for (let i = 0; i < 3; i++) await w.round(a, b);
    expect(a.gate.held.size).toBe(4);
    const rounds = LEASE_MS / RETRY_MS;
    for (let i = 0; i < rounds - 3; i++) await w.round(a, b);
    expect(a.gate.held.size).toBe(4);
    for (let i = 0; i < 4; i++) await w.round(a, b);
    expect(a.gate.held.size).toBe(8);
  });

  it("takes a killed replica's buckets at expiry even while another replica is still syncing", async () => {
    const w = world(12);
    const [a, b] = [w.replica("a"), w.replica("b")];
    for (let i = 0; i < 3; i++) await w.round(a, b);
    expect([a.gate.held.size, b.gate.held.size]).toEqual([6, 6]);
    // b is killed and c starts (its caches syncing): a takes b's buckets when they expire.
    const c = w.replica("c", { syncing: true });
    let rounds = 0;
    while (a.gate.held.size < 12) {
      await w.round(a, c);
      rounds++;
      expect(rounds * RETRY_MS).toBeLessThanOrEqual(LEASE_MS + RETRY_MS);
    }
    expect(c.gate.held.size).toBe(0);
  });

  it("hands a bucket over only after the reconcile running in it ended, then the newcomer takes it", async () => {
    const w = world(2);
    const a = w.replica("a");
    const work = blockingReconciler();
    const reconciler = a.gate.wrap(work);
    await w.round(a);
    await w.round(a);
    expect(w.holders()).toEqual(["a", "a"]);

    // A reconcile runs in every bucket of a's when b joins.
    const keys = [0, 1].map((bucket) => keyIn(a.gate, bucket));
    for (const key of keys) work.block(key);
    const running = keys.map((key) => reconciler.reconcile(key, new AbortController().signal));
    const b = w.replica("b");
    for (let i = 0; i < 4; i++) await w.round(b, a);
    // a gives one back (the ceiling is 1 each) but it drains first: still a's Lease, renewed.
    const leaving = [0, 1].find((bucket) => !a.gate.held.has(bucket))!;
    expect(leaving).toBeDefined();
    expect(w.holders()[leaving]).toBe("a");
    expect(b.gate.held.size).toBe(0);

    work.finish(keys[leaving]!);
    await Promise.all([running[leaving]]);
    await flush();
    expect(w.holders()[leaving]).toBe("");
    await w.round(b, a);
    expect(w.holders()[leaving]).toBe("b");
    expect(b.gate.held.has(leaving)).toBe(true);
    expect(a.handovers).toContain("released");
    work.finish(keys[1 - leaving]!);
    await Promise.all(running);
  });

  it("takes over a dead replica's buckets only once their Leases expired", async () => {
    const w = world(4);
    const [a, b] = [w.replica("a"), w.replica("b")];
    for (let i = 0; i < 4; i++) await w.round(a, b);
    expect([count(w.holders(), "a"), count(w.holders(), "b")]).toEqual([2, 2]);

    // a dies: it makes no more rounds. Until its Leases have gone unrenewed for their duration
    // (as b's clock measures it), b leaves them alone.
    const rounds = Math.floor(LEASE_MS / RETRY_MS) - 1;
    for (let i = 0; i < rounds; i++) await w.round(b);
    expect(count(w.holders(), "a")).toBe(2);
    for (let i = 0; i < 3; i++) await w.round(b);
    expect(w.holders()).toEqual(["b", "b", "b", "b"]);
    expect(b.gate.held.size).toBe(4);
  });

  it("shares a killed replica's buckets out among the survivors in the one round they may be taken", async () => {
    const w = world(16);
    const [a, b, c, d] = ["a", "b", "c", "d"].map((id) => w.replica(id)) as [
      Replica,
      Replica,
      Replica,
      Replica,
    ];
    for (let i = 0; i < 4; i++) await w.round(a, b, c, d);
    expect([a, b, c, d].map((r) => r.gate.held.size)).toEqual([4, 4, 4, 4]);
    const orphans = w.holders().flatMap((h, i) => (h === "d" ? [i] : []));

    // d is killed: a, b and c go on with their rounds, at the same moments (each lists before
    // any of them writes); none takes d's buckets while its Leases are valid, and in the first
    // round in which they have expired, all of them are taken, without a race lost.
    let rounds = 0;
    while (w.holders().some((h) => h === "d")) {
      await w.together(a, b, c);
      rounds++;
      expect(rounds * RETRY_MS).toBeLessThanOrEqual(LEASE_MS + RETRY_MS);
      const left = w.holders().filter((h) => h === "d").length;
      expect([0, orphans.length]).toContain(left);
    }
    expect(rounds * RETRY_MS).toBeGreaterThanOrEqual(LEASE_MS);
    for (const r of [a, b, c]) expect([5, 6]).toContain(r.gate.held.size);
    expect(w.holders().every((h) => ["a", "b", "c"].includes(h))).toBe(true);
    const takeovers = [a, b, c].flatMap((r) => r.takeovers);
    expect(takeovers).toHaveLength(orphans.length);
    for (const seconds of takeovers) expect(seconds * 1000).toBeGreaterThanOrEqual(LEASE_MS);
  });

  it("makes its next round when another replica's Lease expires, not a retry period later", async () => {
    const w = world(4);
    const [a, b] = [w.replica("a"), w.replica("b")];
    for (let i = 0; i < 4; i++) await w.round(a, b);
    // a's Leases were last seen renewed by b in the round before the clock moved on.
    const seenAt = w.clock.now - RETRY_MS;
    // a is killed. While its Leases are far from expiring, b waits a retry period...
    expect(b.coordinator.delay(0)).toBe(RETRY_MS);
    // ...but its round that makes them expire comes exactly then (+1 ms), and takes them.
    w.advance(LEASE_MS - RETRY_MS - 100);
    await b.coordinator.tick();
    const wait = b.coordinator.delay(0);
    expect(wait).toBe(seenAt + LEASE_MS + 1 - w.clock.now);
    expect(wait).toBeLessThan(RETRY_MS);
    expect(count(w.holders(), "a")).toBe(2);
    w.advance(wait);
    await b.coordinator.tick();
    await flush();
    expect(w.holders()).toEqual(["b", "b", "b", "b"]);
    expect(b.takeovers).toEqual([(LEASE_MS + 1) / 1000, (LEASE_MS + 1) / 1000]);
    // Nothing left to expire: back to the retry period.
    expect(b.coordinator.delay(0)).toBe(RETRY_MS);
  });

  it("stops serving a bucket it could not renew within the renew deadline, before anyone may take it", async () => {
    const w = world(2);
    const a = w.replica("a");
    await w.round(a);
    await w.round(a);
    expect(a.gate.held.size).toBe(2);
    a.client.down = true;
    const rounds = Math.ceil(RENEW_MS / RETRY_MS) + 1;
    for (let i = 0; i < rounds; i++) await w.round(a);
    expect(a.gate.held.size).toBe(0);
    expect(a.handovers.filter((h) => h === "lost")).toHaveLength(2);
    // Well before the Leases expire for anyone else.
    expect(rounds * RETRY_MS).toBeLessThan(LEASE_MS);
  });

  it("takes nothing while a live replica runs with another number of buckets", async () => {
    const w = world(4);
    const old = w.replica("old", { buckets: 8 });
    const a = w.replica("a");
    for (let i = 0; i < 3; i++) await w.round(old, a);
    expect(a.gate.held.size).toBe(0);
    const member = w.store.leases.get(memberLeaseName(SET, "old"));
    expect(member?.metadata?.annotations?.[BUCKETS_ANNOTATION]).toBe("8");
  });

  it("of two sets with different numbers of buckets that took buckets in the same round, the one with more hands them back", async () => {
    const w = world(4);
    const old = w.replica("old", { buckets: 8 });
    const a = w.replica("a");
    // Neither holds a bucket: after a lease duration each ignores the other's member Lease,
    // and, both listing before either writes, both take their buckets.
    for (let i = 0; i < LEASE_MS / RETRY_MS + 2 && (old.gate.held.size === 0 || a.gate.held.size === 0); i++)
      await w.together(old, a);
    expect([old.gate.held.size, a.gate.held.size]).toEqual([8, 4]);
    for (let i = 0; i < 4; i++) await w.together(old, a);
    expect([old.gate.held.size, a.gate.held.size]).toEqual([0, 4]);
    expect(old.handovers.filter((h) => h === "released")).toHaveLength(8);
  });

  it("a member Lease claiming another number of buckets, renewed for ever, is ignored after a lease duration", async () => {
    const w = world(4);
    const [a, b] = [w.replica("a"), w.replica("b")];
    for (let i = 0; i < 4; i++) await w.round(a, b);
    expect([a.gate.held.size, b.gate.held.size]).toEqual([2, 2]);
    const bogus = bogusMember(w.store, "bogus", { buckets: "8" });
    // Never counted in the share: a and b give nothing back for it.
    for (let i = 0; i < 3; i++) {
      await bogus.renew();
      await w.round(a, b);
    }
    expect([a.gate.held.size, b.gate.held.size]).toEqual([2, 2]);
    // b is killed (while the bogus Lease is still young): a takes b's buckets once they expire
    // and the bogus Lease is a lease duration old, within a lease duration and a round of that.
    let rounds = 0;
    while (a.gate.held.size < 4) {
      await bogus.renew();
      await w.round(a);
      expect(++rounds * RETRY_MS).toBeLessThanOrEqual(LEASE_MS + 2 * RETRY_MS);
    }
    expect([a, b].flatMap((r) => r.handovers).filter((h) => h !== "acquired")).toEqual([]);
  });

  it("a member Lease whose holder never takes the buckets dealt to it is ignored after a lease duration", async () => {
    const w = world(4);
    const bogus = bogusMember(w.store, "bogus", { buckets: "4" });
    const [a, b] = [w.replica("a"), w.replica("b")];
    let rounds = 0;
    while (a.gate.held.size + b.gate.held.size < 4) {
      await bogus.renew();
      await w.round(a, b);
      expect(++rounds * RETRY_MS).toBeLessThanOrEqual(LEASE_MS + 3 * RETRY_MS);
    }
    expect([a.gate.held.size, b.gate.held.size]).toEqual([2, 2]);
  });

  it("on stop, releases every bucket and deletes its member Lease", async () => {
    const w = world(3);
    const a = w.replica("a");
    await w.round(a);
    await w.round(a);
    expect(w.holders()).toEqual(["a", "a", "a"]);
    await a.coordinator.stop();
    expect(w.holders()).toEqual(["", "", ""]);
    expect(a.gate.held.size).toBe(0);
    expect(w.store.leases.has(memberLeaseName(SET, "a"))).toBe(false);
    const lease = w.store.leases.get(w.bucketLease(0));
    expect(lease?.metadata?.labels).toEqual({ [SHARD_SET_LABEL]: SET, [ROLE_LABEL]: "bucket" });
  });

  it("deletes the member Lease of a replica gone for five lease durations", async () => {
    const w = world(2);
    const [a, b] = [w.replica("a"), w.replica("b")];
    await w.round(a, b);
    const rounds = Math.ceil((6 * LEASE_MS) / RETRY_MS);
    for (let i = 0; i < rounds; i++) await w.round(b);
    expect(w.store.leases.has(memberLeaseName(SET, "a"))).toBe(false);
    expect(w.store.leases.has(memberLeaseName(SET, "b"))).toBe(true);
  });
});

/**
 * A member Lease written straight into the store, as anyone who may write the set's Leases could:
 * `renew()` writes it again (a new renewTime), as a replica's rounds would, with nothing behind it.
 */
function bogusMember(store: LeaseStore, identity: string, options: { buckets: string; syncing?: boolean }) {
  const client = store.client();
  const name = memberLeaseName(SET, identity);
  return {
    renew: async () => {
      const current = store.leases.get(name);
      const spec = {
        holderIdentity: identity,
        leaseDurationSeconds: LEASE_MS / 1000,
        renewTime: new Date().toISOString(),
      };
      const metadata = {
        name,
        labels: { [SHARD_SET_LABEL]: SET, [ROLE_LABEL]: "member" },
        annotations: {
          [BUCKETS_ANNOTATION]: options.buckets,
          [SYNCING_ANNOTATION]: String(options.syncing ?? false),
        },
      };
      if (current)
        await client.request("PUT", `${NS}/${name}`, {
          body: { ...current, metadata: { ...current.metadata, ...metadata }, spec },
        });
      else await client.request("POST", NS, { body: { metadata, spec } });
    },
  };
}

/** A key of `bucket`. */
function keyIn(gate: ShardGate, bucket: number): string {
  for (let i = 0; ; i++) if (gate.bucketOf(`key-${i}`) === bucket) return `key-${i}`;
}
