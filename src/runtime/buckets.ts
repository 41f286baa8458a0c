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
 * - The free buckets are dealt out: every replica computes the same deal from what it sees, each
 *   free bucket (in order) going to the live replica below the floor that prefers it most, or,
 *   once none is below the floor, to the one below the ceiling that prefers it most. A replica
 *   takes what is dealt to it, all in one round: the buckets of a replica that died are shared
 *   out among the survivors at once, without two of them racing for one Lease. A bucket dealt
 *   to a replica that has not taken it for a while (`stale`) is free to any replica below its
 *   share, as before the deal.
 * - A replica still syncing its caches (`waiting`) is live but takes nothing yet. It has its share
 *   reserved: the others take no more of the free buckets than their share counting it, so that
 *   replicas started together reach the fair deal without a bucket changing hands. The buckets of
 *   a replica gone (`orphaned`: a Lease that expired with a holder) are not left for it: they are
 *   dealt out among the replicas that serve, as the failover asks; nor does a replica give a
 *   bucket back for one still syncing (it could not serve it yet).
 * - Preference is rendezvous hashing (highest `fnv1a32(identity + "/" + bucket)` first):
 *   replicas prefer different buckets, and a bucket tends to return to the replica that held it
 *   before; a replica gives back the buckets it prefers least.
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
  /**
   * Free buckets seen free for a while (dealt to a replica that did not take them): any replica
   * below its share may take them. @default none
   */
  stale?: ReadonlySet<number>;
  /**
   * The live replicas still syncing their caches (not this one): counted in the share of the
   * free buckets that are not `orphaned`, dealt nothing. @default none
   */
  waiting?: ReadonlySet<string>;
  /**
   * Free buckets whose Lease expired with a holder (a replica gone): dealt out among the replicas
   * that serve, whether others are `waiting` or not. @default none
   */
  orphaned?: ReadonlySet<number>;
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
  const waiting = new Set([...(view.waiting ?? [])].filter((r) => r !== identity));
  const everyone = new Set(view.live).add(identity);
  // Those that serve (or will, this round): the hand-overs and the buckets of a replica gone.
  const live = new Set([...everyone].filter((r) => !waiting.has(r)));
  const { min, max } = fairShare(view.buckets, live.size);
  // The share of a free bucket nobody held, counting the replicas still syncing.
  const reserved = fairShare(view.buckets, everyone.size);
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
  const orphaned = (bucket: number) => waiting.size === 0 || view.orphaned?.has(bucket) === true;
  const share = (bucket: number) => (orphaned(bucket) ? { min, max } : reserved);
  const acquire = deal(free, counts, share).get(identity) ?? [];
  // Stale free buckets, by the rule before the deal: leave them to a replica below the floor
  // once this one has reached it (and their share to the replicas still syncing).
  const dealt = new Set(acquire);
  const extra = free.filter((b) => view.stale?.has(b) && !dealt.has(b)).sort(byPreference);
  let room = (starving ? min : max) - mine.length - acquire.length;
  let roomReserved = (starving ? reserved.min : reserved.max) - mine.length - acquire.length;
  for (const bucket of extra) {
    if (room <= 0) break;
    if (!orphaned(bucket)) {
      if (roomReserved <= 0) continue;
      roomReserved--;
    }
    room--;
    acquire.push(bucket);
  }
  return { acquire: acquire.sort(byPreference), release: [] };
}

/**
 * Deals `free` (ascending) among the replicas of `counts` (how many each holds): each bucket to
 * the replica below its `share(bucket).min` that prefers it most, or, when none is, to the one
 * below its `max` that does. The same inputs give every replica the same deal.
 */
function deal(
  free: readonly number[],
  counts: Map<string, number>,
  share: (bucket: number) => { min: number; max: number },
) {
  const dealt = new Map<string, number[]>();
  const replicas = [...counts.keys()].sort();
  for (const bucket of free) {
    const { min, max } = share(bucket);
    let best: string | undefined;
    for (const limit of [min, max]) {
      for (const replica of replicas)
        if (
          counts.get(replica)! < limit &&
          (best === undefined || preference(replica, bucket) > preference(best, bucket))
        )
          best = replica;
      if (best !== undefined) break;
    }
    if (best === undefined) continue; // every replica at its ceiling for this bucket
    counts.set(best, counts.get(best)! + 1);
    const mine = dealt.get(best);
    if (mine) mine.push(bucket);
    else dealt.set(best, [bucket]);
  }
  return dealt;
}
