import type { InformerEvent } from "../informers/informer.ts";
import type { KubeObject } from "../kube/client.ts";
import { bucketOf } from "../runtime/buckets.ts";
import { ReferableCounts } from "./counts.ts";

function referable(name: string, status?: unknown): KubeObject {
  return { metadata: { name }, ...(status !== undefined && { status }) } as unknown as KubeObject;
}

const ready = (reason: unknown) => ({
  conditions: [
    { type: "Other", reason: "NotThis" },
    { type: "Ready", status: "True", reason },
  ],
});

/** What a scrape used to count by walking the cache. */
function recount(cache: Map<string, KubeObject>, buckets: number, served: Set<number>) {
  const reasons = new Map<string, number>();
  let owned = 0;
  for (const obj of cache.values()) {
    const c = (obj as { status?: { conditions?: Array<{ type?: string; reason?: unknown }> } }).status
      ?.conditions;
    const r = Array.isArray(c) ? c.find((x) => x?.type === "Ready")?.reason : undefined;
    const reason = typeof r === "string" ? r : "Pending";
    reasons.set(reason, (reasons.get(reason) ?? 0) + 1);
    if (served.has(bucketOf(obj.metadata!.name!, buckets))) owned++;
  }
  return { reasons, owned };
}

describe("ReferableCounts", () => {
  it("counts what a walk of the cache counts, through adds, changes and deletes", () => {
    const buckets = 8;
    const served = new Set([1, 4, 6]);
    const counts = new ReferableCounts({ buckets, bucketOf: (name) => bucketOf(name, buckets) });
    const cache = new Map<string, KubeObject>();
    const statuses = [
      undefined,
      ready("Available"),
      ready("SourceNotFound"),
      ready(7),
      { conditions: "odd" },
      {},
    ];
    // A fixed pseudo-random walk: the same every run.
    let seed = 7;
    const next = (n: number) => (seed = (seed * 1103515245 + 12345) % 2147483648) % n;
    for (let step = 0; step < 2000; step++) {
      const name = `r-${next(60)}`;
      const old = cache.get(name);
      let event: InformerEvent;
      if (old && next(4) === 0) {
        cache.delete(name);
        event = { type: "DELETED", object: referable(name), old };
      } else {
        const object = referable(name, statuses[next(statuses.length)]);
        cache.set(name, object);
        event = { type: old ? "MODIFIED" : "ADDED", object, old };
      }
      counts.apply(event);
    }
    // A delete of what was never cached changes nothing.
    counts.apply({ type: "DELETED", object: referable("never"), old: undefined });
    const expected = recount(cache, buckets, served);
    expect(counts.byReason()).toEqual(expected.reasons);
    expect(counts.inBuckets(served)).toBe(expected.owned);
    expect(counts.inBuckets(new Set([0, 1, 2, 3, 4, 5, 6, 7]))).toBe(cache.size);
  });

  it("counts by reason only when not sharded", () => {
    const counts = new ReferableCounts();
    counts.apply({ type: "ADDED", object: referable("a", ready("Available")), old: undefined });
    expect(counts.byReason()).toEqual(new Map([["Available", 1]]));
    expect(counts.inBuckets([0])).toBe(0);
  });
});
