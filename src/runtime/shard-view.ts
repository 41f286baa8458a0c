/**
 * What one replica of a shard set (see shards.ts) has seen of the set's Leases, and how it judges
 * them for a deal: which buckets are held and by whom, which are free, and which other members
 * count in the fair share.
 *
 * Expiry is judged as the leader election judges it (leader-election.ts): by how long ago this
 * replica last saw a Lease's record change, on its own clock, never by comparing the holder's
 * renewTime with ours.
 *
 * A member Lease that does not behave like a member is ignored after one lease duration (see
 * {@link ShardView.judge}): one claiming another number of buckets that holds none of them, one
 * that serves but never takes a bucket dealt to it, one syncing for ever. Anyone who may write
 * the set's Leases can make one; none keeps a bucket unheld longer than a lease duration and a
 * round.
 */
import { recordOf, type Lease } from "./leader-election.ts";
import {
  BUCKETS_ANNOTATION,
  leaseValid,
  parseBucket,
  ROLE_LABEL,
  SYNCING_ANNOTATION,
  type Seen,
} from "./shard-leases.ts";

/** Another replica's member Lease, as one round sees it. */
interface Member {
  identity: string;
  /** Its number of buckets (the annotation; absent from an older version). */
  buckets: string | undefined;
  syncing: boolean;
  /** When this replica first saw its Lease. */
  since: number;
}

/** A valid bucket Lease of another number of buckets: its holder and that number. */
interface ForeignBucket {
  holder: string;
  of: number;
}

/** What a round's Leases say for the deal (planBuckets' inputs, and what keeps it from taking). */
export interface Survey {
  /** The other members counted in the fair share (the ones waited for among them). */
  live: string[];
  /** The members still syncing that the deal waits for (see {@link ShardView.judge}). */
  waited: Set<string>;
  /** The holder of each bucket of this number, when valid and not this replica's from before. */
  holders: (string | undefined)[];
  /** Buckets whose holder is gone (expired), or held by this replica before a restart. */
  orphaned: Set<number>;
  /** Free buckets seen free for two retry periods or more. */
  stale: Set<number>;
  /** Something of another number of buckets holds back this replica's taking. */
  foreign: boolean;
  /** Replicas of fewer buckets serve this set (see {@link fewerServing}): hand every bucket back to them. */
  yieldAll: boolean;
  /** The member Leases of replicas gone for five lease durations: to delete (forgotten here). */
  collect: Seen[];
}

/** Options for {@link ShardView}. */
export interface ShardViewOptions {
  /** The set's name (the prefix of its Lease names). */
  name: string;
  identity: string;
  /** This replica's member Lease. */
  memberName: string;
  buckets: number;
  leaseDurationSeconds: number;
  retryPeriodMs: number;
  /** Warns once for a kind of trouble until another is met. */
  warnOnce: (kind: string, message: string) => void;
}

/** The Leases of the set as this replica saw them last; see the module comment. */
export class ShardView {
  private readonly options: ShardViewOptions;
  private readonly seen = new Map<string, Seen>();
  /** When each free bucket was first seen free (for the stale rule of planBuckets). */
  private readonly freeSince = new Map<number, number>();
  /** When each member seen syncing was first seen so (for the bound on waiting for it). */
  private readonly waitingSince = new Map<string, number>();
  /** When each Lease of the set was first seen (a member of another number is judged by it). */
  private readonly firstSeen = new Map<string, number>();
  /** When each member seen serving with no bucket while one was free was first seen so. */
  private readonly idleSince = new Map<string, number>();

  constructor(options: ShardViewOptions) {
    this.options = options;
  }

  /** A Lease of the set as last seen. */
  get(name: string): Seen | undefined {
    return this.seen.get(name);
  }

  /**
   * Keeps each Lease, restarting its expiry clock when its record changed; forgets those gone.
   * True when another replica's member Lease not seen before is among them.
   */
  observe(leases: Lease[], now: number): boolean {
    const names = new Set<string>();
    let joined = false;
    for (const lease of leases) {
      const name = lease.metadata?.name;
      if (!name) continue;
      names.add(name);
      if (
        !this.seen.has(name) &&
        name !== this.options.memberName &&
        lease.metadata?.labels?.[ROLE_LABEL] === "member"
      )
        joined = true;
      this.keep(lease, false, now);
      if (!this.firstSeen.has(name)) this.firstSeen.set(name, now);
    }
    for (const name of this.seen.keys()) if (!names.has(name)) this.seen.delete(name);
    for (const name of this.firstSeen.keys()) if (!names.has(name)) this.firstSeen.delete(name);
    return joined;
  }

  /** Keeps one Lease; `ours` (this replica just wrote it) restarts its expiry clock. */
  keep(lease: Lease, ours: boolean, now: number): void {
    const name = lease.metadata?.name ?? "";
    const record = recordOf(lease);
    const raw = JSON.stringify(record);
    const before = this.seen.get(name);
    const changed = ours || before === undefined || before.raw !== raw;
    this.seen.set(name, { lease, record, raw, changedAt: changed ? now : before.changedAt });
  }

  /**
   * How long until the first Lease held by another replica expires as this replica judges it
   * (+1 ms: valid means strictly before), so that the round that may take it runs then. At least
   * a twentieth of the retry period: a Lease expires once per renewal seen, so this adds at most
   * one round per Lease of a replica gone, never a busy loop.
   */
  untilExpiry(now: number): number {
    let first = Infinity;
    for (const seen of this.seen.values()) {
      const holder = seen.record.holderIdentity;
      if (!holder || holder === this.options.identity || !leaseValid(seen, now)) continue;
      first = Math.min(first, seen.changedAt + seen.record.leaseDurationSeconds * 1000 - now + 1);
    }
    return Math.max(this.options.retryPeriodMs / 20, first);
  }

  /**
   * Reads the Leases seen into the deal's inputs; `held`: the buckets this replica serves,
   * `leaving`: those it is giving back or has lost (draining).
   */
  survey(held: ReadonlySet<number>, leaving: ReadonlySet<number>, now: number): Survey {
    const { identity, name: set, buckets } = this.options;
    const members: Member[] = [];
    const orphaned = new Set<number>();
    const foreignBuckets: ForeignBucket[] = [];
    const collect: Seen[] = [];
    const holders: (string | undefined)[] = new Array<string | undefined>(buckets).fill(undefined);
    for (const [name, seen] of this.seen) {
      if (!leaseValid(seen, now) && seen.record.holderIdentity !== identity) {
        if (this.gone(seen, now)) {
          this.seen.delete(name);
          collect.push(seen);
        }
        // A holder gone: its buckets are shared out at once, not left for a replica syncing.
        const bucket = seen.record.holderIdentity ? parseBucket(name, set) : undefined;
        if (bucket?.of === buckets) orphaned.add(bucket.index);
        continue;
      }
      if (seen.lease.metadata?.labels?.[ROLE_LABEL] === "member") {
        if (name === this.options.memberName) continue;
        const annotations = seen.lease.metadata.annotations;
        members.push({
          identity: seen.record.holderIdentity,
          buckets: annotations?.[BUCKETS_ANNOTATION],
          syncing: annotations?.[SYNCING_ANNOTATION] === "true",
          since: this.firstSeen.get(name) ?? now,
        });
        continue;
      }
      const bucket = parseBucket(name, set);
      if (!bucket) continue;
      if (bucket.of !== buckets) {
        foreignBuckets.push({ holder: seen.record.holderIdentity, of: bucket.of });
        continue;
      }
      const mine = seen.record.holderIdentity === identity;
      // Held in a previous life (a restart with the same identity) or expired: free to take.
      if (!leaseValid(seen, now) || (mine && !held.has(bucket.index) && !leaving.has(bucket.index))) {
        orphaned.add(bucket.index); // held by this replica before a restart
        continue;
      }
      holders[bucket.index] = seen.record.holderIdentity;
    }
    const { live, waiting, foreign } = this.judge(members, holders, held, foreignBuckets, now);
    // A member syncing for too long is not waited for, nor counted live: it serves nothing.
    const waited = this.waitedFor(waiting, now);
    live.push(...waited);
    return {
      live,
      waited,
      holders,
      orphaned,
      stale: this.staleFree(holders, held, now),
      foreign,
      yieldAll: foreign && fewerServing(foreignBuckets, members, buckets),
      collect,
    };
  }

  /** A member Lease of a replica gone for five lease durations. */
  private gone(seen: Seen, now: number): boolean {
    if (seen.lease.metadata?.labels?.[ROLE_LABEL] !== "member") return false;
    return seen.changedAt + 5 * Math.max(1, seen.record.leaseDurationSeconds) * 1000 <= now;
  }

  /**
   * Which of the other members count, and whether anything of another number of buckets keeps
   * this replica from taking buckets. A member Lease that does not behave like a member is
   * ignored after one lease duration, so a Lease anyone can write (a bogus one, renewed for ever)
   * cannot keep buckets unheld:
   * - one claiming another number of buckets is never counted in the share (it serves other
   *   buckets); it holds back this replica's taking for a lease duration from when it was first
   *   seen, and after that only while it holds a bucket Lease of its own number (a replica of a
   *   rollout that changes `--shards`, serving). Valid bucket Leases of another number always
   *   hold it back: two assignments would give one key two buckets;
   * - one that serves (not syncing) but holds no bucket while some bucket is free is not counted
   *   once that has lasted a lease duration (it is dealt buckets it never takes). It counts
   *   again as soon as it holds one, or nothing is free.
   */
  private judge(
    members: readonly Member[],
    holders: readonly (string | undefined)[],
    held: ReadonlySet<number>,
    foreignBuckets: readonly ForeignBucket[],
    now: number,
  ): { live: string[]; waiting: Set<string>; foreign: boolean } {
    const limit = this.options.leaseDurationSeconds * 1000;
    const live: string[] = [];
    const waiting = new Set<string>();
    let foreign = foreignBuckets.length > 0;
    const holding = new Set(holders.filter((h): h is string => h !== undefined));
    const anyFree = holders.some((h, bucket) => h === undefined && !held.has(bucket));
    const idle = new Set<string>();
    for (const m of members) {
      if (m.buckets !== String(this.options.buckets)) {
        const serving = foreignBuckets.some((b) => b.holder === m.identity && String(b.of) === m.buckets);
        if (serving || now - m.since < limit) foreign = true;
        continue;
      }
      if (m.syncing) {
        waiting.add(m.identity);
        continue;
      }
      if (holding.has(m.identity) || !anyFree) {
        live.push(m.identity);
        continue;
      }
      idle.add(m.identity);
      const since = this.idleSince.get(m.identity) ?? now;
      this.idleSince.set(m.identity, since);
      if (now - since < limit) live.push(m.identity);
      else this.options.warnOnce("idle", "a member Lease whose holder takes no bucket is ignored");
    }
    for (const identity of this.idleSince.keys()) if (!idle.has(identity)) this.idleSince.delete(identity);
    return { live, waiting, foreign };
  }

  /**
   * The members still syncing that the deal waits for: each for at most one lease duration
   * from when this replica first saw it syncing (a replica whose caches never sync, or a member
   * Lease nobody serves behind, must not hold its share of the buckets unserved: a bucket stays
   * free at most a lease duration and a round while a live replica could take it). A replica
   * whose first list takes longer is rebalanced to once it serves.
   */
  private waitedFor(waiting: ReadonlySet<string>, now: number): Set<string> {
    for (const member of this.waitingSince.keys()) if (!waiting.has(member)) this.waitingSince.delete(member);
    const limit = this.options.leaseDurationSeconds * 1000;
    const waited = new Set<string>();
    for (const member of waiting) {
      const since = this.waitingSince.get(member);
      if (since === undefined) this.waitingSince.set(member, now);
      if (since === undefined || now - since < limit) waited.add(member);
    }
    return waited;
  }

  /**
   * The free buckets seen free for two retry periods or more: dealt to a replica that did not
   * take them (it stopped, or sees otherwise), so any replica below its share may.
   */
  private staleFree(
    holders: readonly (string | undefined)[],
    held: ReadonlySet<number>,
    now: number,
  ): Set<number> {
    const stale = new Set<number>();
    holders.forEach((holder, bucket) => {
      if (holder !== undefined || held.has(bucket)) {
        this.freeSince.delete(bucket);
        return;
      }
      const since = this.freeSince.get(bucket);
      if (since === undefined) this.freeSince.set(bucket, now);
      else if (now - since >= 2 * this.options.retryPeriodMs) stale.add(bucket);
    });
    return stale;
  }
}

/**
 * Two sets of replicas with different numbers of buckets both serving (each took its buckets
 * while the other held none, after a lease duration): the one with more buckets hands all of
 * its buckets back, so that one assignment is left. Only for bucket Leases whose holder's
 * member Lease claims their number: a replica, not a Lease written by anyone.
 */
function fewerServing(
  foreignBuckets: readonly ForeignBucket[],
  members: readonly Member[],
  buckets: number,
): boolean {
  return foreignBuckets.some(
    (b) => b.of < buckets && members.some((m) => m.identity === b.holder && m.buckets === String(b.of)),
  );
}
