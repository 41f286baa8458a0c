import { bucketOf, fairShare, fnv1a32, planBuckets, preference, type BucketView } from "./buckets.ts";

describe("fnv1a32 and bucketOf", () => {
  it.each([
    { reason: "the offset basis for no bytes", text: "", want: 0x811c9dc5 },
    { reason: "the published test vector for 'a'", text: "a", want: 0xe40c292c },
    { reason: "the published test vector for 'foobar'", text: "foobar", want: 0xbf9cf968 },
    { reason: "UTF-8 bytes, not UTF-16 code units", text: "é", want: fnvOfBytes([0xc3, 0xa9]) },
  ])("$reason", ({ text, want }) => {
    expect(fnv1a32(text)).toBe(want);
  });

  it("puts a name in the same bucket every time, within range", () => {
    for (const name of ["a", "db-url", "x".repeat(253)]) {
      const bucket = bucketOf(name, 16);
      expect(bucket).toBe(bucketOf(name, 16));
      expect(bucket).toBeGreaterThanOrEqual(0);
      expect(bucket).toBeLessThan(16);
    }
  });

  it("spreads many names over the buckets roughly evenly", () => {
    const counts = new Array<number>(16).fill(0);
    for (let i = 0; i < 16_000; i++) counts[bucketOf(`referable-${i}`, 16)]! += 1;
    expect(Math.min(...counts)).toBeGreaterThan(800);
    expect(Math.max(...counts)).toBeLessThan(1200);
  });
});

/** FNV-1a of raw bytes, written out to check the UTF-8 encoding. */
function fnvOfBytes(bytes: number[]): number {
  let hash = 0x811c9dc5;
  for (const byte of bytes) hash = Math.imul(hash ^ byte, 0x01000193) >>> 0;
  return hash;
}

describe("fairShare", () => {
  it.each([
    { reason: "even split", buckets: 12, live: 3, want: { min: 4, max: 4 } },
    { reason: "uneven split", buckets: 16, live: 3, want: { min: 5, max: 6 } },
    { reason: "more replicas than buckets", buckets: 2, live: 3, want: { min: 0, max: 1 } },
    { reason: "no live replica counts as one", buckets: 4, live: 0, want: { min: 4, max: 4 } },
  ])("$reason", ({ buckets, live, want }) => {
    expect(fairShare(buckets, live)).toEqual(want);
  });
});

/** A view of `buckets` buckets, `holders` given as a compact string: "a" holds, "." free. */
function view(identity: string, live: string[], holders: string, held?: number[]): BucketView {
  const list = [...holders].map((c) => (c === "." ? undefined : c));
  const mine = held ?? list.flatMap((h, i) => (h === identity ? [i] : []));
  return { buckets: list.length, identity, live, holders: list, held: new Set(mine) };
}

describe("planBuckets", () => {
  const byPreference = (identity: string, buckets: number[]) =>
    [...buckets].sort((a, b) => preference(identity, b) - preference(identity, a) || a - b);

  it.each([
    {
      reason: "alone: takes every free bucket",
      view: view("a", ["a"], "...."),
      want: { acquire: 4, release: 0 },
    },
    {
      reason: "the others at the floor: takes up to the ceiling",
      view: view("a", ["a", "b", "c"], "......bbbbbccccc"),
      want: { acquire: 6, release: 0 },
    },
    {
      reason: "at its share already: nothing to do",
      view: view("a", ["a", "b", "c"], "aaaabbbbcccc"),
      want: { acquire: 0, release: 0 },
    },
    {
      reason: "above the ceiling (a replica joined): gives the extras back",
      view: view("a", ["a", "b", "c"], "aaaaaaaabbbb"),
      want: { acquire: 0, release: 4 },
    },
    {
      reason: "nothing free while another is below the floor: gives one back",
      view: view("a", ["a", "b", "c"], "aaaaabbbbbbc", [0, 1, 2, 3, 4]),
      want: { acquire: 0, release: 1 },
    },
    {
      reason: "at the floor while another starves: keeps what it has",
      view: view("a", ["a", "b", "c"], "aaaabbbbbbbc"),
      want: { acquire: 0, release: 0 },
    },
    {
      reason: "free buckets while another starves: stops at the floor, leaving the rest",
      view: view("a", ["a", "b", "c"], "aaa.........".replace(/\.{3}$/, "ccc")),
      want: { acquire: 1, release: 0 },
    },
    {
      reason: "a holder that is not live still counts while its Lease is valid",
      view: view("a", ["a", "b"], "ddddddbbbbbb"),
      want: { acquire: 0, release: 0 },
    },
    {
      reason: "more replicas than buckets: at most one each",
      view: view("a", ["a", "b", "c"], ".."),
      want: { acquire: 1, release: 0 },
    },
  ])("$reason", ({ view: v, want }) => {
    const plan = planBuckets(v);
    expect({ acquire: plan.acquire.length, release: plan.release.length }).toEqual(want);
    for (const bucket of plan.acquire) expect(v.holders[bucket]).toBeUndefined();
    for (const bucket of plan.release) expect(v.held.has(bucket)).toBe(true);
  });

  it.each([
    { reason: "all free, three starting together", live: ["a", "b", "c"], holders: "................" },
    {
      reason: "a replica of four killed: its four buckets",
      live: ["a", "b", "c"],
      holders: "aaaabbbb....cccc",
    },
    { reason: "two killed of four", live: ["a", "b"], holders: "..a.b..a.b..a.b." },
  ])("deals every free bucket to one live replica, within the fair share, in one round: $reason", (c) => {
    // Every replica plans on the same view: the deal is alike everywhere, so no two race.
    const v = (identity: string) => view(identity, c.live, c.holders);
    const plans = c.live.map((identity) => planBuckets(v(identity)));
    const taken = plans.flatMap((plan) => plan.acquire);
    const free = [...c.holders].flatMap((h, i) => (h === "." ? [i] : []));
    expect(taken.sort((x, y) => x - y)).toEqual(free);
    const { min, max } = fairShare(c.holders.length, c.live.length);
    c.live.forEach((identity, i) => {
      const count = v(identity).held.size + plans[i]!.acquire.length;
      expect(count).toBeGreaterThanOrEqual(min);
      expect(count).toBeLessThanOrEqual(max);
    });
  });

  it("takes a stale free bucket dealt to another, up to its share", () => {
    // Of the two free buckets, c is dealt none: it leaves them to a and b...
    const v = view("c", ["a", "b", "c"], "aabbcc..");
    expect(planBuckets(v).acquire).toEqual([]);
    // ...until they have stayed free for a while (a and b did not take them): then one, its ceiling.
    expect(planBuckets({ ...v, stale: new Set([6, 7]) }).acquire).toHaveLength(1);
  });

  it("gives back the buckets it prefers least", () => {
    const extras = planBuckets(view("a", ["a", "b"], "aaaaaaaa"));
    expect(extras.release).toEqual(byPreference("a", [0, 1, 2, 3, 4, 5, 6, 7]).slice(4).reverse());
  });

  it("settles three replicas that start together into shares of 5 or 6 of 16, none zero", () => {
    const live = ["r0", "r1", "r2"];
    const holders: (string | undefined)[] = new Array<string | undefined>(16).fill(undefined);
    // Rounds in turn, each replica seeing the others' Leases as they are, until nothing changes.
    for (let round = 0; round < 20; round++) {
      let changed = false;
      for (const identity of live) {
        const held = new Set(holders.flatMap((h, i) => (h === identity ? [i] : [])));
        const plan = planBuckets({ buckets: 16, identity, live, holders, held });
        for (const b of plan.release) holders[b] = undefined;
        for (const b of plan.acquire) if (holders[b] === undefined) holders[b] = identity;
        changed ||= plan.acquire.length + plan.release.length > 0;
      }
      if (!changed) break;
    }
    const counts = live.map((r) => holders.filter((h) => h === r).length);
    expect(counts.reduce((a, b) => a + b, 0)).toBe(16);
    for (const count of counts) expect([5, 6]).toContain(count);
  });

  describe("with replicas still syncing (waiting)", () => {
    const syncing = (v: BucketView, waiting: string[], orphaned: number[] = []): BucketView => ({
      ...v,
      waiting: new Set(waiting),
      orphaned: new Set(orphaned),
    });

    it.each([
      {
        reason: "the first of four synced: takes its share of four, not every bucket",
        view: syncing(view("a", ["a", "b", "c", "d"], "................"), ["b", "c", "d"]),
        want: { acquire: 4, release: 0 },
      },
      {
        reason: "two synced of four: each up to its share counting the two syncing",
        view: syncing(view("a", ["a", "b", "c", "d"], "....bbbb........"), ["c", "d"]),
        want: { acquire: 4, release: 0 },
      },
      {
        reason: "at its share counting one syncing: leaves the rest free for it",
        view: syncing(view("a", ["a", "b", "c"], "aaaabbbb...."), ["c"]),
        want: { acquire: 0, release: 0 },
      },
      {
        reason: "a replica gone's buckets (orphaned): dealt out among those that serve",
        view: syncing(view("a", ["a", "b", "c"], "aaaabbbb...."), ["c"], [8, 9, 10, 11]),
        want: { acquire: 2, release: 0 },
      },
      {
        reason: "holds every bucket when others start: gives none back before they serve",
        view: syncing(view("a", ["a", "b", "c", "d"], "aaaaaaaaaaaaaaaa"), ["b", "c", "d"]),
        want: { acquire: 0, release: 0 },
      },
      {
        reason: "no free buckets while one syncs: gives none back for it",
        view: syncing(view("a", ["a", "b", "c"], "aaaaaabbbbbb"), ["c"]),
        want: { acquire: 0, release: 0 },
      },
    ])("$reason", ({ view: v, want }) => {
      const plan = planBuckets(v);
      expect({ acquire: plan.acquire.length, release: plan.release.length }).toEqual(want);
    });

    it("takes a stale free bucket only within its share counting those syncing", () => {
      const v = syncing(view("a", ["a", "b", "c"], "aaaabbbb...."), ["c"]);
      expect(planBuckets({ ...v, stale: new Set([8, 9, 10, 11]) }).acquire).toEqual([]);
      // Orphaned and stale: within its share among those that serve (6 of 12).
      const orphaned = syncing(view("a", ["a", "b", "c"], "aaaabbbb...."), ["c"], [8, 9, 10, 11]);
      expect(planBuckets({ ...orphaned, stale: new Set([8, 9, 10, 11]) }).acquire).toHaveLength(2);
    });

    it("deals four replicas synced one after another their shares of 16 with no bucket given back", () => {
      const everyone = ["r0", "r1", "r2", "r3"];
      const holders: (string | undefined)[] = new Array<string | undefined>(16).fill(undefined);
      let released = 0;
      // r0 syncs first, then one more every few rounds; each round every synced replica plans.
      for (let round = 0; round < 20; round++) {
        const synced = everyone.slice(0, Math.min(4, 1 + Math.floor(round / 3)));
        for (const identity of synced) {
          const held = new Set(holders.flatMap((h, i) => (h === identity ? [i] : [])));
          const waiting = new Set(everyone.filter((r) => !synced.includes(r)));
          const plan = planBuckets({ buckets: 16, identity, live: everyone, holders, held, waiting });
          released += plan.release.length;
          for (const b of plan.release) holders[b] = undefined;
          for (const b of plan.acquire) if (holders[b] === undefined) holders[b] = identity;
        }
      }
      expect(released).toBe(0);
      expect(everyone.map((r) => holders.filter((h) => h === r).length)).toEqual([4, 4, 4, 4]);
    });
  });
});
