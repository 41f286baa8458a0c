/**
 * Leader election on a `coordination.k8s.io/v1` Lease, with the semantics of client-go's
 * `tools/leaderelection`:
 *
 * - a candidate tries every `retryPeriodMs` (jittered by up to 1.2 times more) to get the
 *   Lease; it creates an absent Lease, and takes a held one only once the holder has failed
 *   to renew it for `leaseDurationSeconds`;
 * - expiry is judged by the local clock: how long ago this process last saw the Lease's
 *   record change, never by comparing the holder's `renewTime` with our clock, so clock skew
 *   between holder and candidate cannot make a candidate take a live Lease;
 * - every write carries the resourceVersion it read, so of two racing candidates one wins and
 *   the other sees a 409 Conflict and tries again later;
 * - the leader renews every `retryPeriodMs`; when it cannot renew for `renewDeadlineMs`, or
 *   sees another holder, it stops leading: the signal given to `onStartedLeading` is aborted
 *   and `onStoppedLeading` is called. It does not campaign again: make a new elector (or exit,
 *   as controller-runtime does) to stand again.
 */
import { asError } from "../api/errors.ts";
import { isApiError, type KubeClient, type KubeObject } from "../kube/client.ts";
import { LEASES, resourcePath } from "../kube/resource-path.ts";
import { childLogger, silentLogger, type Logger } from "../api/log.ts";
import { jitter } from "../timing/backoff.ts";
import { sleep } from "../timing/sleep.ts";

/** client-go's `JitterFactor`: a candidate waits between `retryPeriod` and 2.2 times it. */
export const JITTER_FACTOR = 1.2;

/** Options for {@link LeaderElector}. */
export interface LeaderElectionOptions {
  /** Needs get, create and update on leases in `namespace`. */
  client: Pick<KubeClient, "request">;
  /** Namespace of the Lease. */
  namespace: string;
  /** Name of the Lease. */
  name: string;
  /** This candidate's identity, unique among candidates (e.g. the pod name). */
  identity: string;
  /**
   * How long candidates wait after the last renewal they saw before taking the Lease; written
   * to the Lease in whole seconds, rounded up. @default 15000
   */
  leaseDurationMs?: number;
  /** How long the leader keeps trying to renew before it stops leading. @default 10000 */
  renewDeadlineMs?: number;
  /** Time between tries, to acquire (jittered) and to renew. @default 2000 */
  retryPeriodMs?: number;
  /**
   * Whether {@link LeaderElector.stop} hands the Lease back (holder "" and a 1 s duration) so a
   * candidate takes over at once. Only safe when the work guarded by the Lease has stopped by
   * then. @default true
   */
  releaseOnCancel?: boolean;
  /** @default silentLogger */
  logger?: Logger;
  /** Called when this candidate becomes leader; `signal` aborts when it stops leading. Must not throw. */
  onStartedLeading(signal: AbortSignal): void;
  /** Called once after leading ends (never when this candidate did not lead). Must not throw. */
  onStoppedLeading(): void;
  /** Called with each new holder seen, this candidate included. @default none */
  onNewLeader?(identity: string): void;
}

/** Options that cannot work together, reported by the {@link LeaderElector} constructor. */
export class LeaderElectionConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "LeaderElectionConfigError";
  }
}

/** The timings of a Lease's holders and candidates, defaulted and checked. */
export interface LeaseTimings {
  /** Written to a Lease: the duration in whole seconds, rounded up. */
  leaseDurationSeconds: number;
  renewDeadlineMs: number;
  retryPeriodMs: number;
}

/**
 * Defaults the three timings (15 s, 10 s, 2 s) and checks client-go's rule between them,
 * lease duration > renew deadline > {@link JITTER_FACTOR} retry periods, once for leader
 * election and sharding; `fail` makes the error each caller throws.
 */
export function leaseTimings(
  options: Pick<LeaderElectionOptions, "leaseDurationMs" | "renewDeadlineMs" | "retryPeriodMs">,
  fail: (message: string) => Error,
): LeaseTimings {
  const leaseDurationMs = options.leaseDurationMs ?? 15_000;
  const renewDeadlineMs = options.renewDeadlineMs ?? 10_000;
  const retryPeriodMs = options.retryPeriodMs ?? 2_000;
  if (!(retryPeriodMs > 0)) throw fail("retryPeriodMs must be positive");
  if (!(leaseDurationMs > renewDeadlineMs))
    throw fail("leaseDurationMs must be greater than renewDeadlineMs");
  if (!(renewDeadlineMs > JITTER_FACTOR * retryPeriodMs))
    throw fail(`renewDeadlineMs must be greater than ${JITTER_FACTOR} times retryPeriodMs`);
  // Rounded up: a Lease that says it lasts less than we mean would let a candidate in early.
  return { leaseDurationSeconds: Math.ceil(leaseDurationMs / 1000), renewDeadlineMs, retryPeriodMs };
}

/** The fields of a Lease's spec that make client-go's `LeaderElectionRecord`. */
export interface LeaseRecord {
  holderIdentity: string;
  leaseDurationSeconds: number;
  acquireTime: string | undefined;
  renewTime: string | undefined;
  leaseTransitions: number;
}

/** A `coordination.k8s.io/v1` Lease as read. */
export type Lease = KubeObject & { spec?: Record<string, unknown> };

/** A `metav1.MicroTime` as the API server writes it: RFC 3339, UTC, six fractional digits. */
export function microTime(date: Date): string {
  return date.toISOString().replace(/\.(\d{3})Z$/, ".$1000Z");
}

/** The leader-election record of `lease` (missing fields empty or 0). */
export function recordOf(lease: Lease): LeaseRecord {
  const spec = lease.spec ?? {};
  const str = (v: unknown) => (typeof v === "string" ? v : undefined);
  const num = (v: unknown) => (typeof v === "number" && Number.isFinite(v) ? v : 0);
  return {
    holderIdentity: str(spec.holderIdentity) ?? "",
    leaseDurationSeconds: num(spec.leaseDurationSeconds),
    acquireTime: str(spec.acquireTime),
    renewTime: str(spec.renewTime),
    leaseTransitions: num(spec.leaseTransitions),
  };
}

/** Campaigns for a Lease and tells the caller when it leads; see the module comment. */
export class LeaderElector {
  private readonly client: Pick<KubeClient, "request">;
  private readonly leaseName: string;
  private readonly path: string;
  private readonly collection: string;
  private readonly identity: string;
  private readonly leaseDurationSeconds: number;
  private readonly renewDeadlineMs: number;
  private readonly retryPeriodMs: number;
  private readonly releaseOnCancel: boolean;
  private readonly logger: Logger;
  private readonly callbacks: Pick<
    LeaderElectionOptions,
    "onStartedLeading" | "onStoppedLeading" | "onNewLeader"
  >;
  private readonly stopping = new AbortController();
  private running: Promise<void> | undefined;
  /** The Lease as last read or written: its resourceVersion guards the next write. */
  private lease: Lease | undefined;
  private observed: LeaseRecord | undefined;
  private observedRaw = "";
  /** `performance.now()` when `observed` last changed. */
  private observedAt = 0;
  private reportedLeader = "";
  private leading = false;
  private lastFailure = "";

  constructor(options: LeaderElectionOptions) {
    if (!options.identity) throw new LeaderElectionConfigError("leader election needs a non-empty identity");
    if (!options.namespace || !options.name)
      throw new LeaderElectionConfigError("leader election needs the namespace and name of a lease");
    const timings = leaseTimings(options, (message) => new LeaderElectionConfigError(message));
    this.renewDeadlineMs = timings.renewDeadlineMs;
    this.retryPeriodMs = timings.retryPeriodMs;
    this.client = options.client;
    this.leaseName = options.name;
    this.collection = resourcePath(LEASES, { namespace: options.namespace });
    this.path = resourcePath(LEASES, { namespace: options.namespace, name: options.name });
    this.identity = options.identity;
    this.leaseDurationSeconds = timings.leaseDurationSeconds;
    this.releaseOnCancel = options.releaseOnCancel ?? true;
    this.logger = childLogger(options.logger ?? silentLogger, {
      lease: `${options.namespace}/${options.name}`,
      identity: options.identity,
    });
    this.callbacks = {
      onStartedLeading: options.onStartedLeading,
      onStoppedLeading: options.onStoppedLeading,
      onNewLeader: options.onNewLeader,
    };
  }

  /** Whether this candidate leads now. */
  get isLeader(): boolean {
    return this.leading;
  }

  /** The holder of the Lease as last seen, or undefined when none was seen. */
  get leader(): string | undefined {
    return this.observed?.holderIdentity || undefined;
  }

  /**
   * Campaigns, then leads until {@link stop} or until leadership is lost. Never rejects;
   * calling it again returns the same promise.
   */
  run(): Promise<void> {
    this.running ??= this.campaign().catch((err: unknown) => {
      this.logger.error({ err: asError(err).message }, "leader election ended unexpectedly");
    });
    return this.running;
  }

  /**
   * Stops campaigning or leading; when leading and `releaseOnCancel`, first hands the Lease
   * back. Resolves once the loops have ended and `onStoppedLeading` has been called.
   */
  async stop(): Promise<void> {
    this.stopping.abort();
    await this.running;
  }

  private async campaign(): Promise<void> {
    const stopped = this.stopping.signal;
    while (!stopped.aborted) {
      const acquired = await this.tryAcquireOrRenew(this.renewDeadlineMs);
      this.reportTransition();
      if (acquired) break;
      await sleep(jitter(this.retryPeriodMs, JITTER_FACTOR), stopped);
    }
    if (stopped.aborted) {
      // A write may have won the Lease just as stop() was called.
      if (this.holdsLease() && this.releaseOnCancel) await this.release();
      return;
    }

    const leadership = new AbortController();
    this.leading = true;
    this.logger.info({}, "started leading");
    this.call(() => this.callbacks.onStartedLeading(leadership.signal), "onStartedLeading");
    let lost = false;
    try {
      while (!stopped.aborted) {
        await sleep(this.retryPeriodMs, stopped);
        if (stopped.aborted) break;
        if (!(await this.renew())) {
          lost = true;
          break;
        }
      }
    } finally {
      this.leading = false;
      leadership.abort();
      if (lost) {
        this.logger.warn({}, "stopped leading: the lease was lost");
      } else {
        if (this.releaseOnCancel) await this.release();
        this.logger.info({ released: this.releaseOnCancel }, "stopped leading");
      }
      this.call(() => this.callbacks.onStoppedLeading(), "onStoppedLeading");
    }
  }

  /** One renewal round: tries every retry period until it succeeds or `renewDeadlineMs` passes. */
  private async renew(): Promise<boolean> {
    const deadline = performance.now() + this.renewDeadlineMs;
    for (;;) {
      const remaining = deadline - performance.now();
      if (remaining <= 0) return false;
      const renewed = await this.tryAcquireOrRenew(remaining);
      this.reportTransition();
      if (renewed) return true;
      if (this.stopping.signal.aborted) return true; // stop() ends leading, not a lost lease
      // Another holder took over (our lease expired as others saw it): waiting cannot help.
      if (this.observed && this.observed.holderIdentity !== this.identity) return false;
      await sleep(Math.min(this.retryPeriodMs, deadline - performance.now()), this.stopping.signal);
    }
  }

  /** client-go's `tryAcquireOrRenew`: true when this candidate holds the Lease afresh. */
  private async tryAcquireOrRenew(timeoutMs: number): Promise<boolean> {
    const now = new Date();
    const desired: LeaseRecord = {
      holderIdentity: this.identity,
      leaseDurationSeconds: this.leaseDurationSeconds,
      acquireTime: microTime(now),
      renewTime: microTime(now),
      leaseTransitions: 0,
    };
    const request = { signal: this.stopping.signal, timeoutMs };

    // Fast path of a leader: update the Lease it last wrote, without reading it first.
    if (this.holdsLease() && this.lease && this.observed) {
      desired.acquireTime = this.observed.acquireTime ?? desired.acquireTime;
      desired.leaseTransitions = this.observed.leaseTransitions;
      try {
        this.observe(await this.write(this.lease, desired, request), true);
        this.succeeded();
        return true;
      } catch (err) {
        this.logger.debug({ err: asError(err).message }, "renewing optimistically failed; reading the lease");
      }
    }

    let current: Lease;
    try {
      current = await this.client.request<Lease>("GET", this.path, request);
    } catch (err) {
      if (!isApiError(err, 404)) return this.failed("get", err);
      try {
        const created = await this.client.request<Lease>("POST", this.collection, {
          ...request,
          body: {
            apiVersion: "coordination.k8s.io/v1",
            kind: "Lease",
            metadata: { name: this.leaseName },
            spec: { ...desired },
          },
        });
        this.observe(created, true);
        this.succeeded();
        return true;
      } catch (createErr) {
        // 409 AlreadyExists: another candidate created it first; read it on the next try.
        return this.failed("create", createErr);
      }
    }

    this.observe(current, false);
    const record = this.observed!;
    if (record.holderIdentity && record.holderIdentity !== this.identity && this.observedValid()) {
      this.succeeded();
      return false;
    }
    if (record.holderIdentity === this.identity) {
      desired.acquireTime = record.acquireTime ?? desired.acquireTime;
      desired.leaseTransitions = record.leaseTransitions;
    } else {
      desired.leaseTransitions = record.leaseTransitions + 1;
    }
    try {
      this.observe(await this.write(current, desired, request), true);
      this.succeeded();
      return true;
    } catch (err) {
      // 409 Conflict: someone wrote since our read; the next try reads again.
      return this.failed("update", err);
    }
  }

  /** Hands the Lease back so that a candidate can take it at once. */
  private async release(): Promise<void> {
    if (!this.lease || !this.observed) return;
    const now = microTime(new Date());
    const released: LeaseRecord = {
      holderIdentity: "",
      leaseDurationSeconds: 1,
      acquireTime: now,
      renewTime: now,
      leaseTransitions: this.observed.leaseTransitions,
    };
    // Not the stop signal: it has fired, and the release must still reach the server.
    const request = { timeoutMs: this.renewDeadlineMs };
    try {
      try {
        this.observe(await this.write(this.lease, released, request), true);
      } catch (err) {
        // A renewal cut short by stop() may have landed after all: read the version, once.
        if (!isApiError(err, 409)) throw err;
        const current = await this.client.request<Lease>("GET", this.path, request);
        if (recordOf(current).holderIdentity !== this.identity) return;
        this.observe(await this.write(current, released, request), true);
      }
      this.logger.info({}, "released the lease");
    } catch (err) {
      this.logger.warn({ err: asError(err).message }, "could not release the lease; it will expire");
    }
  }

  private write(lease: Lease, record: LeaseRecord, request: { signal?: AbortSignal; timeoutMs: number }) {
    return this.client.request<Lease>("PUT", this.path, {
      ...request,
      body: { ...lease, spec: { ...lease.spec, ...record } },
    });
  }

  /** Keeps `lease` for its resourceVersion; restarts the expiry clock when its record changed. */
  private observe(lease: Lease, ours: boolean): void {
    this.lease = lease;
    const record = recordOf(lease);
    const raw = JSON.stringify(record);
    if (ours || raw !== this.observedRaw) {
      this.observed = record;
      this.observedRaw = raw;
      this.observedAt = performance.now();
    }
  }

  private observedValid(): boolean {
    if (!this.observed) return false;
    return this.observedAt + this.observed.leaseDurationSeconds * 1000 > performance.now();
  }

  /** Whether the last record seen names this candidate and has not expired. */
  private holdsLease(): boolean {
    return this.observed?.holderIdentity === this.identity && this.observedValid();
  }

  private reportTransition(): void {
    const holder = this.observed?.holderIdentity;
    if (!holder || holder === this.reportedLeader) return;
    this.reportedLeader = holder;
    this.logger.info({ leader: holder }, "new leader observed");
    const onNewLeader = this.callbacks.onNewLeader;
    if (onNewLeader) this.call(() => onNewLeader(holder), "onNewLeader");
  }

  private succeeded(): void {
    this.lastFailure = "";
  }

  /** Logs a failed request (a warning when the kind of failure changes, else debug); returns false. */
  private failed(verb: string, err: unknown): false {
    if (this.stopping.signal.aborted) return false;
    const code = isApiError(err) ? err.statusCode : 0;
    const fields = { verb, code, reason: isApiError(err) ? err.statusReason : undefined };
    const kind = `${verb}:${code}`;
    if (code === 409) {
      this.logger.debug(fields, "lost a race for the lease; retrying");
    } else if (kind !== this.lastFailure) {
      this.logger.warn(
        { ...fields, err: asError(err).message },
        "could not get or renew the lease; retrying",
      );
    } else {
      this.logger.debug(fields, "could not get or renew the lease; retrying");
    }
    this.lastFailure = kind;
    return false;
  }

  /** Calls a user callback; what it throws or rejects with is logged, never propagated. */
  private call(callback: () => unknown, name: string): void {
    const report = (err: unknown) =>
      this.logger.error({ callback: name, err: asError(err).message }, "leader election callback failed");
    try {
      const result = callback();
      if (result instanceof Promise) result.catch(report);
    } catch (err) {
      report(err);
    }
  }
}
