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
 * What a replica has seen of the set's Leases, and how it judges the other members (one that
 * does not behave like a member is ignored after a lease duration), is shard-view.ts.
 *
 * A round is also made as soon as another replica's Lease would expire (as this replica saw it
 * last), rather than up to a retry period later: the buckets of a replica killed are taken the
 * moment its Leases may be taken, all in that round, which is what bounds a failover (the lease
 * duration after the last renewal seen, and the first writes of the new holder).
 *
 * Expiry is judged on this replica's own clock (see shard-view.ts); every write carries the
 * resourceVersion it read, so of two replicas racing for one bucket one wins. A replica takes nothing while a valid bucket Lease of another
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
import { leaseTimings, type Lease, type LeaseRecord } from "./leader-election.ts";
import { HeldBuckets } from "./held-buckets.ts";
import type { ShardGate } from "./shard-gate.ts";
import { jitter } from "../timing/backoff.ts";
import { sleep } from "../timing/sleep.ts";
import { LEASES, resourcePath } from "../kube/resource-path.ts";
import { ShardView } from "./shard-view.ts";
import {
  BUCKETS_ANNOTATION,
  leaseRecord,
  memberLeaseName,
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
  ROLE_LABEL,
  SHARD_SET_LABEL,
  SYNCING_ANNOTATION,
} from "./shard-leases.ts";

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
  /** The set's Leases as last seen, and the judgement of the other members. */
  private readonly view: ShardView;
  /** The buckets this replica holds, and their Leases. */
  private readonly buckets: HeldBuckets;
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
    this.view = new ShardView({
      name: options.name,
      identity: options.identity,
      memberName: this.memberName,
      buckets: options.gate.buckets,
      leaseDurationSeconds: this.leaseDurationSeconds,
      retryPeriodMs: this.retryPeriodMs,
      warnOnce: (kind, message) => this.warnOnce(kind, message),
    });
    this.buckets = new HeldBuckets({
      gate: this.gate,
      view: this.view,
      identity: this.identity,
      leaseDurationSeconds: this.leaseDurationSeconds,
      renewDeadlineMs: this.renewDeadlineMs,
      now: this.now,
      logger: this.logger,
      bucketName: (bucket) => `${options.name}-bucket-${bucket}-of-${options.gate.buckets}`,
      write: (name, current, record) => this.write(name, current, record),
      read: (name) =>
        this.client.request<Lease>("GET", this.lease(name), { timeoutMs: this.renewDeadlineMs }),
      notify: (call) => this.notify(call),
      failed: (verb, err) => this.failed(verb, err),
    });
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
    await this.buckets.stop();
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
      this.buckets.loseUnrenewed();
      return;
    }
    const joined = this.view.observe(leases, this.now());
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
    await Promise.all([this.renewMember(), first ? undefined : this.buckets.renew()]);
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
    return Math.min(jitter(this.retryPeriodMs, 0.1, random), this.view.untilExpiry(this.now()));
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

  private async renewMember(): Promise<void> {
    const seen = this.view.get(this.memberName);
    const record = leaseRecord(seen, this.identity, this.leaseDurationSeconds);
    const annotations = {
      [BUCKETS_ANNOTATION]: String(this.gate.buckets),
      [SYNCING_ANNOTATION]: String(this.syncing),
    };
    try {
      this.view.keep(await this.write(this.memberName, seen?.lease, record, annotations), true, this.now());
    } catch (err) {
      this.failed("member", err);
    }
  }

  /** Plans, starts the hand-overs (which drain in the background) and makes the acquisitions. */
  private async plan(): Promise<void> {
    const survey = this.view.survey(this.gate.held, this.buckets.leaving, this.now());
    for (const seen of survey.collect) this.collectMember(seen);
    const { live, waited, foreign } = survey;
    this.notify((o) => o.onMembers?.(new Set([...live, this.identity]).size));
    const plan = planBuckets({
      buckets: this.gate.buckets,
      identity: this.identity,
      live,
      holders: survey.holders,
      held: this.gate.held,
      stale: survey.stale,
      waiting: waited,
      orphaned: survey.orphaned,
    });
    for (const bucket of plan.release) this.buckets.handBack(bucket);
    if (foreign) {
      if (survey.yieldAll && this.gate.held.size > 0) {
        this.logger.warn(
          {},
          "replicas with fewer buckets serve this shard set: handing every bucket back to them",
        );
        for (const bucket of this.gate.held)
          if (!this.buckets.leaving.has(bucket)) this.buckets.handBack(bucket);
      }
      this.warnOnce(
        "foreign",
        "Leases of this shard set use another number of buckets: taking none until they are gone",
      );
      return;
    }
    await this.buckets.acquire(plan.acquire);
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
  private collectMember(seen: Seen): void {
    const preconditions = { resourceVersion: seen.lease.metadata?.resourceVersion };
    const name = seen.lease.metadata?.name ?? "";
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
