/**
 * Sharding over Leases (knative.dev/pkg's buckets, with timebertt/kubernetes-controller-sharding's
 * drain before a hand-over): the keys fall into `buckets` buckets (see buckets.ts), each bucket is
 * a Lease, and every replica leads a fair share of them.
 *
 * Every `retryPeriodMs` (jittered) a replica makes one round ({@link ShardCoordinator.tick}):
 *
 * 1. it lists the Leases of its set (one LIST, by the label `referable.dev/shard-set`);
 * 2. it renews its member Lease `<name>-member-<fnv1a32(identity) in hex>`: the replicas whose
 *    member Lease is renewed are the live ones, and the fair share is counted among them;
 * 3. it renews each bucket it holds, `<name>-bucket-<i>-of-<buckets>`; a bucket it could not
 *    renew for `renewDeadlineMs`, or that names another holder, is lost: it stops serving it
 *    at once (no release: someone else may hold it);
 * 4. it plans ({@link planBuckets}): a bucket above its share is given back only after this
 *    replica stopped writing it ({@link ShardGate.remove}: stop admitting, wait for the running
 *    reconciles), then the Lease is released (holder "") for another to take at once; the free
 *    buckets (no Lease, released, or expired) are dealt out among the live replicas alike on
 *    every replica, and each takes all of its deal in the round, each with a write that carries
 *    the version read.
 *
 * A replica announces itself before its caches have synced ({@link ShardCoordinator.announce}):
 * its member Lease says it is syncing ({@link SYNCING_ANNOTATION}), it takes no bucket, and the
 * others take no more of the free buckets than their share counting it (planBuckets'
 * `waiting`). Replicas started together, whose caches sync seconds apart, so reach the fair deal
 * without the first taking every bucket and handing most of them over (a drain, and a second
 * pass over their Referables by the next holder). The buckets of a replica gone are not left
 * for one still syncing, and a replica syncing for a lease duration is not waited for.
 *
 * A member Lease that does not behave like a member is ignored after one lease duration (see
 * `judgeMembers`): one claiming another number of buckets that holds none of them, one that
 * serves but never takes a bucket dealt to it, one syncing for ever. Anyone who may write the
 * set's Leases can make one; none keeps a bucket unheld longer than a lease duration and a round.
 *
 * A round is also made as soon as another replica's Lease would expire (as this replica saw it
 * last), rather than up to a retry period later: the buckets of a replica killed are taken the
 * moment its Leases may be taken, all in that round, which is what bounds a failover (the lease
 * duration after the last renewal seen, and the first writes of the new holder).
 *
 * Expiry is judged as the leader election judges it (leader-election.ts): by how long ago this
 * replica last saw a Lease's record change, on its own clock, never by comparing the holder's
 * renewTime with ours; every write carries the resourceVersion it read, so of two replicas
 * racing for one bucket one wins. A replica takes nothing while a valid bucket Lease of another
 * number of buckets is held, or a member Lease of another number is younger than a lease
 * duration (a rollout that changes `--shards`): the two assignments would give one key two
 * buckets. Should both sides have taken buckets (each while the other held none), the side
 * with more buckets hands all of them back.
 *
 * On {@link ShardCoordinator.stop} (after the writers drained) every bucket is released and the
 * member Lease deleted, so the others rebalance at once. A member Lease left by a replica that
 * died is deleted by the others once it has been expired for five lease durations.
 */
import { asError } from "../api/errors.ts";
import { isApiError, type KubeClient } from "../kube/client.ts";
import { childLogger, silentLogger, type Logger } from "../api/log.ts";
import { planBuckets } from "./buckets.ts";
import { leaseTimings, microTime, recordOf, type Lease, type LeaseRecord } from "./leader-election.ts";
import type { ShardGate } from "./shard-gate.ts";
import { jitter } from "../timing/backoff.ts";
import { sleep } from "../timing/sleep.ts";
import { LEASES, resourcePath } from "../kube/resource-path.ts";
import {
  BUCKETS_ANNOTATION,
  leaseRecord,
  leaseValid,
  memberLeaseName,
  parseBucket,
  ROLE_LABEL,
  SHARD_SET_LABEL,
  SYNCING_ANNOTATION,
  writeLease,
  type Seen,
} from "./shard-leases.ts";
import type { ShardCoordinatorOptions, ShardObserver } from "./shard-options.ts";

export type { Handover, ShardCoordinatorOptions, ShardObserver } from "./shard-options.ts";
export {
  BUCKETS_ANNOTATION,
  memberLeaseName,
  parseBucket,
  ROLE_LABEL,
  SHARD_SET_LABEL,
  SYNCING_ANNOTATION,
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

/** Leads a fair share of the buckets; see the module comment. */
export class ShardCoordinator {
  private readonly client: Pick<KubeClient, "request">;
  private readonly namespace: string;
  private readonly collection: string;
  private readonly options: ShardCoordinatorOptions;
  private readonly gate: ShardGate;
  private readonly identity: string;
  private readonly memberName: string;
  private readonly leaseDurationSeconds: number;
  private readonly renewDeadlineMs: number;
  private readonly retryPeriodMs: number;
  private readonly logger: Logger;
  private readonly now: () => number;
  private readonly stopping = new AbortController();
  private running: Promise<void> | undefined;
  private readonly seen = new Map<string, Seen>();
  /** When each bucket this replica holds was last renewed. */
  private readonly renewedAt = new Map<number, number>();
  /** Buckets being given back (draining, then released), or lost and draining. */
  private readonly leaving = new Set<number>();
  /** Acquisitions and hand-overs under way, awaited by stop(). */
  private readonly pending = new Set<Promise<void>>();
  /** When each free bucket was first seen free (for the stale rule of planBuckets). */
  private readonly freeSince = new Map<number, number>();
  /** When each member seen syncing was first seen so (for the bound on waiting for it). */
  private readonly waitingSince = new Map<string, number>();
  /** When each Lease of the set was first seen (a member of another number is judged by it). */
  private readonly firstSeen = new Map<string, number>();
  /** When each member seen serving with no bucket while one was free was first seen so. */
  private readonly idleSince = new Map<string, number>();
  /** Announced but not serving yet: the caches are still syncing ({@link announce}). */
  private syncing = false;
  private rounds = 0;
  private lastFailure = "";
  /** Ends the wait between two rounds early (a round at once): set while the loop waits. */
  private wakeUp: AbortController | undefined;
  /** A round at once was asked for while a round ran: the loop does not wait after it. */
  private roundAtOnce = false;
  /** When the first round (the announcement) was made. */
  private announcedAt: number | undefined;
  /** When a member Lease not seen before last appeared (after the first round). */
  private joinedAt: number | undefined;
  /** The first deal was made: from then on a joining replica is rebalanced to, not waited for. */
  private settled = false;
  /** The round after the sync, when it is due later (a retry period after the announcement). */
  private wakeTimer: NodeJS.Timeout | undefined;

  constructor(options: ShardCoordinatorOptions) {
    if (!options.identity) throw new RangeError("sharding needs a non-empty identity");
    const timings = leaseTimings(options, (message) => new RangeError(`sharding: ${message}`));
    this.renewDeadlineMs = timings.renewDeadlineMs;
    this.retryPeriodMs = timings.retryPeriodMs;
    this.options = options;
    this.client = options.client;
    this.gate = options.gate;
    this.identity = options.identity;
    this.namespace = options.namespace;
    this.collection = resourcePath(LEASES, { namespace: options.namespace });
    this.memberName = memberLeaseName(options.name, options.identity);
    this.leaseDurationSeconds = timings.leaseDurationSeconds;
    this.now = options.now ?? (() => performance.now());
    this.logger = childLogger(options.logger ?? silentLogger, { shards: options.gate.buckets });
    this.syncing = options.syncing ?? false;
  }

  /**
   * Starts the rounds before the caches have synced: the member Lease says this replica is
   * syncing, and it takes no bucket until {@link run}. Optional: {@link run} alone announces too.
   */
  announce(): void {
    if (this.running) return;
    this.syncing = true;
    this.running = this.startRounds();
  }

  /**
   * The caches have synced: buckets are taken from the next round on, which (announced) starts
   * as soon as a retry period has passed since the announcement, rather than at the next
   * retry period's end: every second before a replica takes its deal is a second of its cold
   * start with no write (a replica of four at 20,000 Referables synced, then waited 0.1-2.8 s
   * for its round). Not sooner: replicas started together see each other's announcement within
   * a retry period, and one whose cache synced in a moment must not take every bucket first.
   */
  synced(): void {
    const was = this.syncing;
    this.syncing = false;
    if (!was || this.announcedAt === undefined) return;
    const wait = this.settleAt() - this.now();
    if (wait <= 0) return this.roundNow();
    this.wakeTimer = setTimeout(() => this.roundNow(), wait);
    this.wakeTimer.unref?.();
  }

  private roundNow(): void {
    this.wakeTimer = undefined;
    if (this.wakeUp) this.wakeUp.abort();
    else this.roundAtOnce = true;
  }

  /**
   * Makes rounds, taking buckets, until {@link stop} (after {@link announce}: from now on). Never
   * rejects; calling it again returns the same promise.
   */
  run(): Promise<void> {
    this.synced();
    this.running ??= this.startRounds();
    return this.running;
  }

  private startRounds(): Promise<void> {
    return this.loop().catch((err: unknown) => {
      this.logger.error(
        { err: asError(err).message },
        "sharding ended unexpectedly (a bug: please report it)",
      );
    });
  }

  /**
   * Stops making rounds, releases every bucket held (each after its reconciles finished) and
   * deletes the member Lease. Call it after the writers drained.
   */
  async stop(): Promise<void> {
    this.stopping.abort();
    clearTimeout(this.wakeTimer);
    await this.running;
    await Promise.all([...this.pending]);
    const held = [...this.gate.held];
    await Promise.all(held.map((bucket) => this.release(bucket)));
    await this.deleteMember();
  }

  /** One round (see the module comment); exposed for tests, which drive the rounds themselves. */
  async tick(): Promise<void> {
    let leases: Lease[];
    try {
      const list = await this.client.request<{ items?: Lease[] }>("GET", this.collection, {
        query: { labelSelector: `${SHARD_SET_LABEL}=${this.options.name}` },
        timeoutMs: this.renewDeadlineMs,
        // stop() need not wait out a slow list: what it releases, it reads again on a conflict.
        signal: this.stopping.signal,
      });
      leases = list.items ?? [];
    } catch (err) {
      this.failed("list", err);
      this.loseUnrenewed();
      return;
    }
    const joined = this.observe(leases);
    // The first round only announces this replica: the others' member Leases are seen before
    // any bucket is taken, so replicas that start together do not all take every bucket.
    // While the caches sync, likewise: the others leave this replica its share meanwhile. And
    // until no replica has joined for a retry period ({@link settleAt}).
    const now = this.now();
    this.announcedAt ??= now;
    if (joined && this.rounds > 0) this.joinedAt = now;
    this.settled ||= !this.syncing && this.rounds > 0 && now >= this.settleAt();
    this.rounds++;
    const first = !this.settled;
    // The member and the buckets at once: another replica then sees them renewed in the same
    // LIST (and, once this one is gone, expire in the same round) nearly always.
    await Promise.all([this.renewMember(), first ? undefined : this.renewBuckets()]);
    if (first) return;
    await this.plan();
  }

  private async loop(): Promise<void> {
    const stopped = this.stopping.signal;
    while (!stopped.aborted) {
      await this.tick();
      if (this.roundAtOnce) {
        this.roundAtOnce = false;
        continue;
      }
      // A little jitter only: a round renews the buckets held, and must come well within the
      // renew deadline (which is more than JITTER_FACTOR retry periods, as leader election asks).
      const wake = (this.wakeUp = new AbortController());
      await sleep(this.delay(), AbortSignal.any([stopped, wake.signal]));
      this.wakeUp = undefined;
    }
  }

  /**
   * How long {@link run} waits after a round: the retry period (jittered by up to a tenth more,
   * by `random`), or less when another replica's Lease would expire sooner. Exposed for tests.
   */
  delay(random = Math.random()): number {
    return Math.min(jitter(this.retryPeriodMs, 0.1, random), this.untilExpiry());
  }

  /**
   * How long until the first Lease held by another replica expires as this replica judges it
   * (+1 ms: valid means strictly before), so that the round that may take it runs then. At least
   * a twentieth of the retry period: a Lease expires once per renewal seen, so this adds at most
   * one round per Lease of a replica gone, never a busy loop.
   */
  private untilExpiry(now = this.now()): number {
    let first = Infinity;
    for (const seen of this.seen.values()) {
      const holder = seen.record.holderIdentity;
      if (!holder || holder === this.identity || !leaseValid(seen, now)) continue;
      first = Math.min(first, seen.changedAt + seen.record.leaseDurationSeconds * 1000 - now + 1);
    }
    return Math.max(this.retryPeriodMs / 20, first);
  }

  /**
   * When this replica may make its first deal: a retry period after its announcement, or after
   * the last replica it saw join since, whichever is later. Processes of one rollout start
   * seconds apart on a busy node (three in the integration test, 0.5-0.8 s apart at load 8):
   * each seen joining within a retry period of the one before is waited for, so the first does
   * not take every bucket and hand most of them over. At most a lease duration after the
   * announcement: a stream of replicas joining does not keep the set from serving.
   */
  private settleAt(): number {
    const announced = this.announcedAt ?? this.now();
    const quiet = Math.max(announced, this.joinedAt ?? announced) + this.retryPeriodMs;
    return Math.min(quiet, announced + this.leaseDurationSeconds * 1000);
  }

  /**
   * Keeps each Lease, restarting its expiry clock when its record changed; forgets those gone.
   * True when another replica's member Lease not seen before is among them.
   */
  private observe(leases: Lease[], now = this.now()): boolean {
    const names = new Set<string>();
    let joined = false;
    for (const lease of leases) {
      const name = lease.metadata?.name;
      if (!name) continue;
      names.add(name);
      if (
        !this.seen.has(name) &&
        name !== this.memberName &&
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

  private keep(lease: Lease, ours: boolean, now = this.now()): void {
    const name = lease.metadata?.name ?? "";
    const record = recordOf(lease);
    const raw = JSON.stringify(record);
    const before = this.seen.get(name);
    const changed = ours || before === undefined || before.raw !== raw;
    this.seen.set(name, { lease, record, raw, changedAt: changed ? now : before.changedAt });
  }

  private bucketName(bucket: number): string {
    return `${this.options.name}-bucket-${bucket}-of-${this.gate.buckets}`;
  }

  private async renewMember(): Promise<void> {
    const seen = this.seen.get(this.memberName);
    const record = leaseRecord(seen, this.identity, this.leaseDurationSeconds);
    const annotations = {
      [BUCKETS_ANNOTATION]: String(this.gate.buckets),
      [SYNCING_ANNOTATION]: String(this.syncing),
    };
    try {
      this.keep(await this.write(this.memberName, seen?.lease, record, annotations), true);
    } catch (err) {
      this.failed("member", err);
    }
  }

  /** Renews every bucket held (those being given back too: they are written until released). */
  private async renewBuckets(): Promise<void> {
    const held = [...new Set([...this.gate.held, ...this.leaving])].filter((b) => this.renewedAt.has(b));
    await Promise.all(
      held.map(async (bucket) => {
        const seen = this.seen.get(this.bucketName(bucket));
        if (!seen || seen.record.holderIdentity !== this.identity) return this.lose(bucket, "taken");
        try {
          const lease = await this.write(
            this.bucketName(bucket),
            seen.lease,
            leaseRecord(seen, this.identity, this.leaseDurationSeconds),
          );
          this.keep(lease, true);
          this.renewedAt.set(bucket, this.now());
        } catch (err) {
          this.failed("renew", err);
          if (this.now() - this.renewedAt.get(bucket)! > this.renewDeadlineMs)
            this.lose(bucket, "not renewed");
        }
      }),
    );
  }

  /** After a failed list: a bucket not renewed for the renew deadline is not served any more. */
  private loseUnrenewed(): void {
    for (const [bucket, at] of this.renewedAt)
      if (this.now() - at > this.renewDeadlineMs) this.lose(bucket, "not renewed");
  }

  /** Stops serving a bucket that may be someone else's now: no release. */
  private lose(bucket: number, why: string): void {
    this.renewedAt.delete(bucket);
    if (this.leaving.has(bucket) && !this.gate.held.has(bucket)) return; // already leaving
    this.logger.warn({ bucket, why }, "lost a bucket: no longer serving its Referables");
    this.notify((o) => o.onHandover?.("lost"));
    this.leaving.add(bucket);
    void this.gate.remove(bucket).finally(() => this.leaving.delete(bucket));
  }

  /** Plans, starts the hand-overs (which drain in the background) and makes the acquisitions. */
  private async plan(): Promise<void> {
    const now = this.now();
    const members: Member[] = [];
    const orphaned = new Set<number>();
    /** Valid bucket Leases of another number of buckets: their holder and that number. */
    const foreignBuckets: { holder: string; of: number }[] = [];
    const holders: (string | undefined)[] = new Array<string | undefined>(this.gate.buckets).fill(undefined);
    for (const [name, seen] of this.seen) {
      if (!leaseValid(seen, now) && seen.record.holderIdentity !== this.identity) {
        this.collectMember(name, seen, now);
        // A holder gone: its buckets are shared out at once, not left for a replica syncing.
        const bucket = seen.record.holderIdentity ? parseBucket(name, this.options.name) : undefined;
        if (bucket?.of === this.gate.buckets) orphaned.add(bucket.index);
        continue;
      }
      if (seen.lease.metadata?.labels?.[ROLE_LABEL] === "member") {
        if (name === this.memberName) continue;
        const annotations = seen.lease.metadata.annotations;
        members.push({
          identity: seen.record.holderIdentity,
          buckets: annotations?.[BUCKETS_ANNOTATION],
          syncing: annotations?.[SYNCING_ANNOTATION] === "true",
          since: this.firstSeen.get(name) ?? now,
        });
        continue;
      }
      const bucket = parseBucket(name, this.options.name);
      if (!bucket) continue;
      if (bucket.of !== this.gate.buckets) {
        foreignBuckets.push({ holder: seen.record.holderIdentity, of: bucket.of });
        continue;
      }
      const mine = seen.record.holderIdentity === this.identity;
      // Held in a previous life (a restart with the same identity) or expired: free to take.
      if (
        !leaseValid(seen, now) ||
        (mine && !this.gate.held.has(bucket.index) && !this.leaving.has(bucket.index))
      ) {
        orphaned.add(bucket.index); // held by this replica before a restart
        continue;
      }
      holders[bucket.index] = seen.record.holderIdentity;
    }
    const { live, waiting, foreign } = this.judgeMembers(members, holders, foreignBuckets, now);
    // A member syncing for too long is not waited for, nor counted live: it serves nothing.
    const waited = this.waitedFor(waiting, now);
    live.push(...waited);
    this.notify((o) => o.onMembers?.(new Set([...live, this.identity]).size));
    const plan = planBuckets({
      buckets: this.gate.buckets,
      identity: this.identity,
      live,
      holders,
      held: this.gate.held,
      stale: this.staleFree(holders, now),
      waiting: waited,
      orphaned,
    });
    for (const bucket of plan.release) this.handBack(bucket);
    if (foreign) {
      this.yieldTo(foreignBuckets, members);
      this.warnOnce(
        "foreign",
        "Leases of this shard set use another number of buckets: taking none until they are gone",
      );
      return;
    }
    const acquiring = plan.acquire.filter((bucket) => !this.leaving.has(bucket)).map((b) => this.acquire(b));
    for (const work of acquiring) this.track(work);
    await Promise.all(acquiring);
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
  private judgeMembers(
    members: readonly Member[],
    holders: readonly (string | undefined)[],
    foreignBuckets: readonly { holder: string; of: number }[],
    now: number,
  ): { live: string[]; waiting: Set<string>; foreign: boolean } {
    const limit = this.leaseDurationSeconds * 1000;
    const live: string[] = [];
    const waiting = new Set<string>();
    let foreign = foreignBuckets.length > 0;
    const holding = new Set(holders.filter((h): h is string => h !== undefined));
    const anyFree = holders.some((h, bucket) => h === undefined && !this.gate.held.has(bucket));
    const idle = new Set<string>();
    for (const m of members) {
      if (m.buckets !== String(this.gate.buckets)) {
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
      else this.warnOnce("idle", "a member Lease whose holder takes no bucket is ignored");
    }
    for (const identity of this.idleSince.keys()) if (!idle.has(identity)) this.idleSince.delete(identity);
    return { live, waiting, foreign };
  }

  /**
   * Two sets of replicas with different numbers of buckets both serving (each took its buckets
   * while the other held none, after a lease duration): the one with more buckets hands all of
   * its buckets back, so that one assignment is left. Only for bucket Leases whose holder's
   * member Lease claims their number: a replica, not a Lease written by anyone.
   */
  private yieldTo(
    foreignBuckets: readonly { holder: string; of: number }[],
    members: readonly Member[],
  ): void {
    if (this.gate.held.size === 0) return;
    const serving = foreignBuckets.some(
      (b) =>
        b.of < this.gate.buckets &&
        members.some((m) => m.identity === b.holder && m.buckets === String(b.of)),
    );
    if (!serving) return;
    this.logger.warn(
      {},
      "replicas with fewer buckets serve this shard set: handing every bucket back to them",
    );
    for (const bucket of this.gate.held) if (!this.leaving.has(bucket)) this.handBack(bucket);
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
    const limit = this.leaseDurationSeconds * 1000;
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
  private staleFree(holders: readonly (string | undefined)[], now: number): Set<number> {
    const stale = new Set<number>();
    holders.forEach((holder, bucket) => {
      if (holder !== undefined || this.gate.held.has(bucket)) {
        this.freeSince.delete(bucket);
        return;
      }
      const since = this.freeSince.get(bucket);
      if (since === undefined) this.freeSince.set(bucket, now);
      else if (now - since >= 2 * this.retryPeriodMs) stale.add(bucket);
    });
    return stale;
  }

  /** Gives a bucket back: stop admitting, drain, release; renewed meanwhile. */
  private handBack(bucket: number): void {
    this.logger.info({ bucket }, "handing a bucket over: draining it");
    this.leaving.add(bucket);
    this.track(this.release(bucket).finally(() => this.leaving.delete(bucket)));
  }

  private track(work: Promise<void>): void {
    const done = work.finally(() => this.pending.delete(done));
    this.pending.add(done);
  }

  /** Drains the bucket, then writes its Lease with no holder so that another takes it at once. */
  private async release(bucket: number): Promise<void> {
    await this.gate.remove(bucket);
    if (!this.renewedAt.delete(bucket)) return; // lost meanwhile: not ours to release
    const name = this.bucketName(bucket);
    const now = microTime(new Date());
    const released = (seen: Seen): LeaseRecord => ({
      ...seen.record,
      holderIdentity: "",
      leaseDurationSeconds: 1,
      acquireTime: now,
      renewTime: now,
    });
    try {
      let seen = this.seen.get(name);
      if (!seen) return;
      try {
        this.keep(await this.write(name, seen.lease, released(seen)), true);
      } catch (err) {
        if (!isApiError(err, 409)) throw err;
        const current = await this.client.request<Lease>("GET", this.lease(name), {
          timeoutMs: this.renewDeadlineMs,
        });
        this.keep(current, false);
        seen = this.seen.get(name)!;
        if (seen.record.holderIdentity !== this.identity) return;
        this.keep(await this.write(name, seen.lease, released(seen)), true);
      }
      this.notify((o) => o.onHandover?.("released"));
      this.logger.info({ bucket }, "released a bucket");
    } catch (err) {
      this.logger.warn({ bucket, err: asError(err).message }, "could not release a bucket; it will expire");
    }
  }

  /** Takes a free bucket; of several replicas racing for it, the resourceVersion lets one win. */
  private async acquire(bucket: number): Promise<void> {
    const name = this.bucketName(bucket);
    const seen = this.seen.get(name);
    const record = leaseRecord(seen, this.identity, this.leaseDurationSeconds);
    if (seen && seen.record.holderIdentity !== this.identity) record.leaseTransitions += 1;
    // Taken from another replica that stopped renewing it (not released): a takeover, timed
    // from the last renewal this replica saw.
    const from = seen?.record.holderIdentity;
    const takeover = from && from !== this.identity ? this.now() - seen!.changedAt : undefined;
    try {
      this.keep(await this.write(name, seen?.lease, record), true);
    } catch (err) {
      if (isApiError(err, 409)) this.logger.debug({ bucket }, "another replica took the bucket first");
      else this.failed("acquire", err);
      return;
    }
    // Served even when stop() began meanwhile: stop() awaits this, then releases every bucket served.
    this.renewedAt.set(bucket, this.now());
    // A takeover says from whom, and how long after the last renewal seen (for failover times).
    const fields =
      takeover === undefined
        ? { bucket }
        : { bucket, takenOverFrom: from, unrenewedSeconds: Number((takeover / 1000).toFixed(3)) };
    this.logger.info(fields, "took a bucket: serving its Referables");
    if (takeover !== undefined) this.notify((o) => o.onTakeover?.(takeover / 1000));
    this.notify((o) => o.onHandover?.("acquired"));
    this.gate.add(bucket);
  }

  /** Creates (when `current` is undefined) or updates a Lease of the set, guarded by its version. */
  private write(
    name: string,
    current: Lease | undefined,
    record: LeaseRecord,
    annotations?: Record<string, string>,
  ): Promise<Lease> {
    const role = name === this.memberName ? "member" : "bucket";
    const lease = { name, set: this.options.name, role, timeoutMs: this.renewDeadlineMs } as const;
    return writeLease(this.client, this.namespace, lease, current, record, annotations);
  }

  /** The API path of the Lease `name`. */
  private lease(name: string): string {
    return resourcePath(LEASES, { namespace: this.namespace, name });
  }

  /** Deletes the member Lease of a replica gone for five lease durations (guarded by its version). */
  private collectMember(name: string, seen: Seen, now: number): void {
    if (seen.lease.metadata?.labels?.[ROLE_LABEL] !== "member") return;
    if (seen.changedAt + 5 * Math.max(1, seen.record.leaseDurationSeconds) * 1000 > now) return;
    this.seen.delete(name);
    const preconditions = { resourceVersion: seen.lease.metadata?.resourceVersion };
    this.client
      .request("DELETE", this.lease(name), {
        body: { preconditions },
        timeoutMs: this.renewDeadlineMs,
      })
      .then(
        () =>
          this.logger.info(
            { member: seen.record.holderIdentity },
            "deleted the member Lease of a replica gone",
          ),
        (err: unknown) => this.logger.debug({ err: asError(err).message }, "could not delete a member Lease"),
      );
  }

  private async deleteMember(): Promise<void> {
    try {
      await this.client.request("DELETE", this.lease(this.memberName), {
        timeoutMs: this.renewDeadlineMs,
      });
    } catch (err) {
      if (!isApiError(err, 404)) this.failed("member", err);
    }
  }

  private failed(verb: string, err: unknown): void {
    if (this.stopping.signal.aborted) return;
    const code = isApiError(err) ? err.statusCode : 0;
    const kind = `${verb}:${code}`;
    const fields = { verb, code, err: asError(err).message };
    if (code === 409 || kind === this.lastFailure)
      this.logger.debug(fields, "a shard Lease request failed; retrying");
    else this.logger.warn(fields, "a shard Lease request failed; retrying");
    this.lastFailure = kind;
  }

  private warnOnce(kind: string, message: string): void {
    if (this.lastFailure === kind) return;
    this.lastFailure = kind;
    this.logger.warn({}, message);
  }

  private notify(call: (observer: ShardObserver) => void): void {
    const observer = this.options.observer;
    if (!observer) return;
    try {
      call(observer);
    } catch {
      // a metrics hook must not break sharding
    }
  }
}
