/**
 * The counts a metrics scrape reports of the Referable cache (Referables by their Ready reason,
 * and per bucket, for the Referables a shard serves), kept up to date from the cache's events
 * rather than counted at each scrape.
 *
 * Why: a scrape used to walk the whole cache twice, hashing every name to its bucket; at
 * 100,000 Referables that is milliseconds of CPU per scrape on every shard, most of it spent on
 * Referables the shard does not serve, and a scrape every 200 ms (the benchmark's RSS sampler)
 * made it a quarter of a shard's CPU in a cold start. An event changes the counts by at most
 * two entries; a name's bucket is computed once when it is added and once when it is deleted.
 *
 * Every change to the cache is an event (ADDED, MODIFIED with the object it replaced, DELETED
 * with the object removed), except a record put in place of the same version in another form
 * (Informer.replace), which keeps its name and its Ready reason.
 */
import { READY, type Condition, type Referable, type ReferableStatus } from "../api/referable.ts";
import type { InformerEvent } from "../informers/informer.ts";
import type { KubeObject } from "../kube/client.ts";

/** The reason a Referable without a Ready condition is counted under. */
const PENDING = "Pending";

/** Referables by Ready reason and by bucket, from the cache's events; see the module comment. */
export class ReferableCounts {
  private readonly reasons = new Map<string, number>();
  private readonly perBucket: Int32Array | undefined;
  private readonly bucketOf: ((name: string) => number) | undefined;

  /** `bucketOf` (sharded): counts per bucket too. */
  constructor(bucketOf?: { buckets: number; bucketOf(name: string): number }) {
    if (bucketOf) {
      this.perBucket = new Int32Array(bucketOf.buckets);
      this.bucketOf = (name) => bucketOf.bucketOf(name);
    }
  }

  /** Follows one event of the cache. */
  apply(event: InformerEvent): void {
    if (event.old !== undefined) this.count(event.old, -1);
    if (event.type !== "DELETED") this.count(event.object, 1);
  }

  /** Referables by their Ready reason (a copy: "Pending" without a Ready condition). */
  byReason(): Map<string, number> {
    return new Map(this.reasons);
  }

  /** How many Referables the buckets hold (0 when not counted per bucket). */
  inBuckets(buckets: Iterable<number>): number {
    let n = 0;
    if (this.perBucket) for (const b of buckets) n += this.perBucket[b] ?? 0;
    return n;
  }

  private count(obj: KubeObject, delta: 1 | -1): void {
    const reason = reasonOf(obj);
    const n = (this.reasons.get(reason) ?? 0) + delta;
    // Zero counts go: the map holds only the reasons in the cache (a status is the user's to write).
    if (n === 0) this.reasons.delete(reason);
    else this.reasons.set(reason, n);
    if (this.perBucket && this.bucketOf) this.perBucket[this.bucketOf(obj.metadata?.name ?? "")]! += delta;
  }
}

function reasonOf(obj: KubeObject): string {
  const status = (obj as unknown as Referable).status as ReferableStatus | undefined;
  // A status the API server let by in another shape counts as Pending, never a throw.
  if (!Array.isArray(status?.conditions)) return PENDING;
  const ready = status!.conditions!.find((c) => (c as Partial<Condition> | null)?.type === READY);
  return typeof ready?.reason === "string" ? ready.reason : PENDING;
}
