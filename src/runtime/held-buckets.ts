/**
 * The buckets one replica of a shard set holds (see shards.ts), and their Leases: it takes a
 * bucket with a write that carries the version read, renews each on every round, hands one back
 * only after it stopped writing it ({@link ShardGate.remove}: stop admitting, wait for the
 * running reconciles) and then releases its Lease (holder "") for another to take at once, and
 * stops serving at once a bucket it could not renew for the renew deadline, or that names
 * another holder (no release: someone else may hold it).
 */
import { asError } from "../api/errors.ts";
import { isApiError } from "../kube/client.ts";
import type { Logger } from "../api/log.ts";
import { microTime, type Lease, type LeaseRecord } from "./leader-election.ts";
import type { ShardGate } from "./shard-gate.ts";
import { leaseRecord, type Seen } from "./shard-leases.ts";
import type { ShardObserver } from "./shard-options.ts";
import type { ShardView } from "./shard-view.ts";

/** What {@link HeldBuckets} works with: the coordinator's gate, view, clock and requests. */
export interface HeldBucketsOptions {
  gate: ShardGate;
  view: ShardView;
  identity: string;
  leaseDurationSeconds: number;
  renewDeadlineMs: number;
  now: () => number;
  logger: Logger;
  /** The name of a bucket's Lease. */
  bucketName: (bucket: number) => string;
  /** Creates (when `current` is undefined) or updates a bucket's Lease, guarded by its version. */
  write: (name: string, current: Lease | undefined, record: LeaseRecord) => Promise<Lease>;
  /** Reads a Lease of the set again. */
  read: (name: string) => Promise<Lease>;
  /** Tells the observer, if any (never throws). */
  notify: (call: (observer: ShardObserver) => void) => void;
  /** Logs a failed request (quietly when it repeats). */
  failed: (verb: string, err: unknown) => void;
}

/** The buckets held; see the module comment. */
export class HeldBuckets {
  private readonly options: HeldBucketsOptions;
  /** When each bucket this replica holds was last renewed. */
  private readonly renewedAt = new Map<number, number>();
  /** Buckets being given back (draining, then released), or lost and draining. */
  private readonly gone = new Set<number>();
  /** Acquisitions and hand-overs under way, awaited by {@link stop}. */
  private readonly pending = new Set<Promise<void>>();

  constructor(options: HeldBucketsOptions) {
    this.options = options;
  }

  /** Buckets being given back (draining, then released), or lost and draining. */
  get leaving(): ReadonlySet<number> {
    return this.gone;
  }

  /** Renews every bucket held (those being given back too: they are written until released). */
  async renew(): Promise<void> {
    const { gate, view, identity, now } = this.options;
    const held = [...new Set([...gate.held, ...this.gone])].filter((b) => this.renewedAt.has(b));
    await Promise.all(
      held.map(async (bucket) => {
        const name = this.options.bucketName(bucket);
        const seen = view.get(name);
        if (!seen || seen.record.holderIdentity !== identity) return this.lose(bucket, "taken");
        try {
          const lease = await this.options.write(
            name,
            seen.lease,
            leaseRecord(seen, identity, this.options.leaseDurationSeconds),
          );
          view.keep(lease, true, now());
          this.renewedAt.set(bucket, now());
        } catch (err) {
          this.options.failed("renew", err);
          if (now() - this.renewedAt.get(bucket)! > this.options.renewDeadlineMs)
            this.lose(bucket, "not renewed");
        }
      }),
    );
  }

  /** After a failed list: a bucket not renewed for the renew deadline is not served any more. */
  loseUnrenewed(): void {
    for (const [bucket, at] of this.renewedAt)
      if (this.options.now() - at > this.options.renewDeadlineMs) this.lose(bucket, "not renewed");
  }

  /** Stops serving a bucket that may be someone else's now: no release. */
  private lose(bucket: number, why: string): void {
    this.renewedAt.delete(bucket);
    if (this.gone.has(bucket) && !this.options.gate.held.has(bucket)) return; // already leaving
    this.options.logger.warn({ bucket, why }, "lost a bucket: no longer serving its Referables");
    this.options.notify((o) => o.onHandover?.("lost"));
    this.gone.add(bucket);
    void this.options.gate.remove(bucket).finally(() => this.gone.delete(bucket));
  }

  /** Gives a bucket back: stop admitting, drain, release; renewed meanwhile. */
  handBack(bucket: number): void {
    this.options.logger.info({ bucket }, "handing a bucket over: draining it");
    this.gone.add(bucket);
    this.track(this.release(bucket).finally(() => this.gone.delete(bucket)));
  }

  /** Takes the free `buckets` not leaving, at once; resolves when every write answered. */
  async acquire(buckets: readonly number[]): Promise<void> {
    const acquiring = buckets.filter((bucket) => !this.gone.has(bucket)).map((b) => this.take(b));
    for (const work of acquiring) this.track(work);
    await Promise.all(acquiring);
  }

  /** Waits for the acquisitions and hand-overs under way, then releases every bucket held. */
  async stop(): Promise<void> {
    await Promise.all([...this.pending]);
    const held = [...this.options.gate.held];
    await Promise.all(held.map((bucket) => this.release(bucket)));
  }

  private track(work: Promise<void>): void {
    const done = work.finally(() => this.pending.delete(done));
    this.pending.add(done);
  }

  /** Drains the bucket, then writes its Lease with no holder so that another takes it at once. */
  private async release(bucket: number): Promise<void> {
    const { view, logger } = this.options;
    await this.options.gate.remove(bucket);
    if (!this.renewedAt.delete(bucket)) return; // lost meanwhile: not ours to release
    const name = this.options.bucketName(bucket);
    const now = microTime(new Date());
    const released = (seen: Seen): LeaseRecord => ({
      ...seen.record,
      holderIdentity: "",
      leaseDurationSeconds: 1,
      acquireTime: now,
      renewTime: now,
    });
    try {
      let seen = view.get(name);
      if (!seen) return;
      try {
        view.keep(await this.options.write(name, seen.lease, released(seen)), true, this.options.now());
      } catch (err) {
        if (!isApiError(err, 409)) throw err;
        view.keep(await this.options.read(name), false, this.options.now());
        seen = view.get(name)!;
        if (seen.record.holderIdentity !== this.options.identity) return;
        view.keep(await this.options.write(name, seen.lease, released(seen)), true, this.options.now());
      }
      this.options.notify((o) => o.onHandover?.("released"));
      logger.info({ bucket }, "released a bucket");
    } catch (err) {
      logger.warn({ bucket, err: asError(err).message }, "could not release a bucket; it will expire");
    }
  }

  /** Takes a free bucket; of several replicas racing for it, the resourceVersion lets one win. */
  private async take(bucket: number): Promise<void> {
    const { view, identity, logger, now, notify } = this.options;
    const name = this.options.bucketName(bucket);
    const seen = view.get(name);
    const record = leaseRecord(seen, identity, this.options.leaseDurationSeconds);
    if (seen && seen.record.holderIdentity !== identity) record.leaseTransitions += 1;
    // Taken from another replica that stopped renewing it (not released): a takeover, timed
    // from the last renewal this replica saw.
    const from = seen?.record.holderIdentity;
    const takeover = from && from !== identity ? now() - seen!.changedAt : undefined;
    try {
      view.keep(await this.options.write(name, seen?.lease, record), true, now());
    } catch (err) {
      if (isApiError(err, 409)) logger.debug({ bucket }, "another replica took the bucket first");
      else this.options.failed("acquire", err);
      return;
    }
    // Served even when stop() began meanwhile: stop() awaits this, then releases every bucket served.
    this.renewedAt.set(bucket, now());
    // A takeover says from whom, and how long after the last renewal seen (for failover times).
    const fields =
      takeover === undefined
        ? { bucket }
        : { bucket, takenOverFrom: from, unrenewedSeconds: Number((takeover / 1000).toFixed(3)) };
    logger.info(fields, "took a bucket: serving its Referables");
    if (takeover !== undefined) notify((o) => o.onTakeover?.(takeover / 1000));
    notify((o) => o.onHandover?.("acquired"));
    this.options.gate.add(bucket);
  }
}
