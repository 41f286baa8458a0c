/**
 * Bucket assignment for sharding, as pure functions: which bucket a key belongs to, and which
 * buckets a replica should take or give back given what it sees of the others.
 *
 * - A key belongs to bucket `fnv1a32(utf8(key)) mod buckets` (FNV-1a, 32 bits: offset basis
 *   2166136261, prime 16777619). Stable across processes, versions and platforms: every replica
 *   computes the same bucket for a key without talking to the others.
 * - Each live replica holds between `floor(buckets / live)` and `ceil(buckets / live)` buckets
 *   once the assignment has settled. A replica above the ceiling gives back its extras; a replica
 *   below the floor takes free buckets first, and when none is free a replica above the floor
 *   gives back one, so a replica that joins is never left with none (while buckets >= live).
 * - Which free bucket a replica takes, and which of its own it gives back, follows rendezvous
 *   hashing (highest `fnv1a32(identity + "/" + bucket)` first): replicas prefer different
 *   buckets, so they rarely race for the same Lease, and a bucket tends to return to the replica
 *   that held it before.
 */

const FNV_OFFSET = 0x811c9dc5;
const FNV_PRIME = 0x01000193;
const encoder = new TextEncoder();

/** FNV-1a over the UTF-8 bytes of `text`, as an unsigned 32-bit integer. */
export function fnv1a32(text: string): number {
  // Object names are DNS subdomains, ASCII only: hashed without encoding (and allocating) them,
  // as the bucket of every Referable is computed at each scrape and each hand-over.
  let hash = FNV_OFFSET;
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i);
    if (code >= 0x80) return fnv1a32Utf8(text);
    hash ^= code;
    hash = Math.imul(hash, FNV_PRIME) >>> 0;
  }
  return hash >>> 0;
}

function fnv1a32Utf8(text: string): number {
  let hash = FNV_OFFSET;
  for (const byte of encoder.encode(text)) {
    hash ^= byte;
    hash = Math.imul(hash, FNV_PRIME) >>> 0;
  }
  return hash >>> 0;
}

/** The bucket of `key` among `buckets` (see the module comment). */
export function bucketOf(key: string, buckets: number): number {
  return fnv1a32(key) % buckets;
}

/** How much `identity` wants `bucket` (rendezvous hashing): higher is preferred. */
export function preference(identity: string, bucket: number): number {
  return fnv1a32(`${identity}/${bucket}`);
}

/** What one replica sees when it plans: the inputs of {@link planBuckets}. */
export interface BucketView {
  /** The number of buckets. */
  buckets: number;
  /** This replica. */
  identity: string;
  /** The live replicas, this one included (from their member Leases). */
  live: readonly string[];
  /**
   * The holder of each bucket's Lease while it is valid (renewed within its duration as this
   * replica saw it), indexed by bucket; undefined when the bucket is free (no Lease, released,
   * or expired).
   */
  holders: readonly (string | undefined)[];
  /** The buckets this replica holds and serves (not those it is giving back). */
  held: ReadonlySet<number>;
}

/** What a replica should do now: Leases to try to take, and held buckets to give back. */
export interface BucketPlan {
  acquire: number[];
  release: number[];
}

/** The fair share's bounds for `buckets` among `live` replicas. */
export function fairShare(buckets: number, live: number): { min: number; max: number } {
  const replicas = Math.max(1, live);
  return { min: Math.floor(buckets / replicas), max: Math.ceil(buckets / replicas) };
}

/** The buckets to take and give back now; see the module comment. Pure. */
export function planBuckets(view: BucketView): BucketPlan {
  const { identity, held } = view;
  const live = new Set(view.live).add(identity);
  const { min, max } = fairShare(view.buckets, live.size);
  const byPreference = (a: number, b: number) => preference(identity, b) - preference(identity, a) || a - b;
  const mine = [...held].sort(byPreference);
  if (mine.length > max) return { acquire: [], release: mine.slice(max).reverse() };

  const counts = new Map<string, number>([...live].map((replica) => [replica, 0]));
  const free: number[] = [];
  for (let bucket = 0; bucket < view.buckets; bucket++) {
    const holder = view.holders[bucket];
    if (holder === undefined) {
      if (!held.has(bucket)) free.push(bucket);
    } else if (counts.has(holder)) counts.set(holder, counts.get(holder)! + 1);
  }
  counts.set(identity, held.size);
  const starving = [...counts].some(([replica, count]) => replica !== identity && count < min);
  if (free.length === 0) {
    // Nothing free while another replica is below the floor: give one back for it to take.
    return starving && mine.length > min
      ? { acquire: [], release: [mine[mine.length - 1]!] }
      : { acquire: [], release: [] };
  }
  // Leave free buckets to a replica below the floor, once this one has reached it.
  const limit = starving ? min : max;
  const want = Math.max(0, limit - mine.length);
  return { acquire: free.sort(byPreference).slice(0, want), release: [] };
}
