/**
 * Leader election against the real API server: one leader among candidates, hand-over on a
 * graceful stop, take-over only after the lease expires when a leader dies, and RBAC on leases.
 */
import {
  JITTER_FACTOR,
  LeaderElector,
  type LeaderElectionOptions,
} from "../../src/runtime/leader-election.ts";
import { isApiError, type KubeClient, type KubeObject } from "../../src/kube/client.ts";
import type { Logger } from "../../src/api/log.ts";
import {
  closeTestClients,
  openScope,
  serviceAccountToken,
  tokenClient,
  uniqueName,
  waitFor,
} from "../harness/kube.ts";
import { bindRole, createRole, serviceAccount } from "../harness/rbac.ts";

const LEASE_MS = 2000;
const RENEW_DEADLINE_MS = 1500;
const RETRY_MS = 300;
/** The longest a candidate waits between two tries. */
const MAX_RETRY_WAIT_MS = RETRY_MS * (1 + JITTER_FACTOR);
/** Slack for request latency and timer lateness on a loaded test machine. */
const TOLERANCE_MS = 500;

let admin: KubeClient;
let ns: string;
const electors: LeaderElector[] = [];

beforeAll(async () => {
  ({ admin, ns } = await openScope("leader"));
});
afterEach(async () => {
  await Promise.all(electors.splice(0).map((e) => e.stop()));
});
afterAll(closeTestClients);

interface LogEntry {
  level: string;
  fields: Record<string, unknown>;
  message: string;
}

/** A candidate and what its callbacks and logger saw. */
interface Candidate {
  elector: LeaderElector;
  done: Promise<void>;
  startedAt: number[];
  stoppedAt: number[];
  leaders: string[];
  signals: AbortSignal[];
  logs: LogEntry[];
}

function candidate(
  identity: string,
  lease: string,
  overrides: Partial<LeaderElectionOptions> = {},
): Candidate {
  const c: Omit<Candidate, "elector" | "done"> = {
    startedAt: [],
    stoppedAt: [],
    leaders: [],
    signals: [],
    logs: [],
  };
  const record =
    (level: string) =>
    (fields: Record<string, unknown>, message: string): void => {
      c.logs.push({ level, fields, message });
    };
  const logger: Logger = {
    debug: record("debug"),
    info: record("info"),
    warn: record("warn"),
    error: record("error"),
  };
  const elector = new LeaderElector({
    client: admin,
    namespace: ns,
    name: lease,
    identity,
    leaseDurationMs: LEASE_MS,
    renewDeadlineMs: RENEW_DEADLINE_MS,
    retryPeriodMs: RETRY_MS,
    logger,
    onStartedLeading: (signal) => {
      c.startedAt.push(Date.now());
      c.signals.push(signal);
    },
    onStoppedLeading: () => c.stoppedAt.push(Date.now()),
    onNewLeader: (leader) => c.leaders.push(leader),
    ...overrides,
  });
  electors.push(elector);
  return { ...c, elector, done: elector.run() };
}

interface LeaseSpec {
  holderIdentity?: string;
  leaseDurationSeconds?: number;
  acquireTime?: string;
  renewTime?: string;
  leaseTransitions?: number;
}

async function readLease(name: string): Promise<LeaseSpec> {
  const lease = await admin.request<KubeObject & { spec: LeaseSpec }>(
    "GET",
    `/apis/coordination.k8s.io/v1/namespaces/${ns}/leases/${name}`,
  );
  return lease.spec;
}

/** Starts two candidates and waits until one leads and the other has seen it. */
async function electOne(lease: string, leaderOverrides: Partial<LeaderElectionOptions> = {}) {
  const first = candidate("first", lease, leaderOverrides);
  await waitFor("the first candidate to lead", () => first.elector.isLeader);
  const second = candidate("second", lease);
  await waitFor("the standby to see the leader", () => second.leaders.includes("first"));
  return { leader: first, standby: second };
}

describe("leader election on a Lease", () => {
  it("elects exactly one of two candidates, and the other learns who leads", async () => {
    const lease = uniqueName("lease");
    const a = candidate("a", lease);
    const b = candidate("b", lease);
    const leader = await waitFor("a leader", () => (a.elector.isLeader ? a : b.elector.isLeader ? b : false));
    const standby = leader === a ? b : a;
    const leaderName = leader === a ? "a" : "b";
    await waitFor("the standby to see the leader", () => standby.leaders.includes(leaderName));

    // Let the leader renew twice, so the standby has had several tries at a lease that is held.
    const first = (await readLease(lease)).renewTime;
    let renewals = 0;
    let last = first;
    await waitFor("two renewals", async () => {
      const now = (await readLease(lease)).renewTime;
      if (now !== last) renewals++;
      last = now;
      return renewals >= 2;
    });

    expect({ leaderStarts: leader.startedAt.length, standbyStarts: standby.startedAt.length }).toEqual({
      leaderStarts: 1,
      standbyStarts: 0,
    });
    expect(standby.elector.isLeader).toBe(false);
    expect(standby.elector.leader).toBe(leaderName);
    expect(leader.leaders).toEqual([leaderName]);
    const spec = await readLease(lease);
    expect(spec).toMatchObject({ holderIdentity: leaderName, leaseDurationSeconds: 2, leaseTransitions: 0 });
    expect(spec.renewTime).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/);
  }, 30_000);

  it("hands over at once when the leader stops and releases the lease", async () => {
    const lease = uniqueName("lease");
    const { leader, standby } = await electOne(lease);
    const before = await readLease(lease);

    const stoppedAt = Date.now();
    await leader.elector.stop();
    expect(leader.signals[0]?.aborted).toBe(true);
    expect(leader.stoppedAt).toHaveLength(1);
    await expect(leader.done).resolves.toBeUndefined();

    await waitFor("the standby to take over", () => standby.elector.isLeader, { timeoutMs: LEASE_MS * 2 });
    const handOver = standby.startedAt[0]! - stoppedAt;
    // One try of the standby after the release, far sooner than waiting out the lease.
    expect(handOver).toBeLessThan(MAX_RETRY_WAIT_MS + TOLERANCE_MS);
    expect(handOver).toBeLessThan(LEASE_MS / 2);

    const after = await readLease(lease);
    expect(after).toMatchObject({ holderIdentity: "second", leaseTransitions: before.leaseTransitions! + 1 });
  }, 30_000);

  it("takes over from a leader that died only once its lease has expired", async () => {
    const lease = uniqueName("lease");
    // releaseOnCancel: false makes stop() a crash as far as the lease can tell.
    const { leader, standby } = await electOne(lease, { releaseOnCancel: false });
    await leader.elector.stop();
    const dead = await readLease(lease);
    expect(dead.holderIdentity).toBe("first");
    const lastRenewal = Date.parse(dead.renewTime!);

    await waitFor("the standby to take over", () => standby.elector.isLeader, { timeoutMs: LEASE_MS * 4 });
    const takeover = standby.startedAt[0]! - lastRenewal;
    // Not before the lease expired: the standby counts from when it saw the last renewal,
    // which cannot be earlier than the renewal itself (small slack for clock rounding).
    expect(takeover).toBeGreaterThanOrEqual(LEASE_MS - 50);
    // And promptly after: at most one try late to see the last renewal, and one to take over.
    expect(takeover).toBeLessThan(LEASE_MS + 2 * MAX_RETRY_WAIT_MS + TOLERANCE_MS);

    const after = await readLease(lease);
    expect(after).toMatchObject({ holderIdentity: "second", leaseTransitions: dead.leaseTransitions! + 1 });
    expect(leader.stoppedAt).toHaveLength(1);
  }, 30_000);

  it("never leads without RBAC on leases, surviving the 403s, and leads once a Role is bound", async () => {
    const lease = uniqueName("lease");
    const sa = uniqueName("elector");
    const token = await serviceAccountToken(admin, ns, sa);
    const c = candidate("rbac", lease, { client: tokenClient(token) });
    let ended = false;
    void c.done.then(() => (ended = true));

    const forbidden = await waitFor("a logged 403", () => c.logs.find((l) => l.fields.code === 403));
    expect(forbidden.level).toBe("warn");
    // Keep trying while forbidden: several more attempts, each refused, none crashing.
    await waitFor("more refused tries", () => c.logs.filter((l) => l.fields.code === 403).length >= 3);
    expect(c.elector.isLeader).toBe(false);
    expect(c.startedAt).toEqual([]);
    expect(ended).toBe(false);
    expect(c.logs.filter((l) => l.level === "warn" && l.fields.code === 403)).toHaveLength(1); // not once per try
    const missing = await readLease(lease).then(
      () => undefined,
      (err: unknown) => err,
    );
    expect(isApiError(missing, 404)).toBe(true);

    const leases = [
      { apiGroups: ["coordination.k8s.io"], resources: ["leases"], verbs: ["get", "create", "update"] },
    ];
    await createRole(admin, sa, leases, ns);
    await bindRole(admin, sa, sa, [serviceAccount(sa, ns)], ns, "Role");
    await waitFor("the candidate to lead once RBAC allows it", () => c.elector.isLeader, {
      timeoutMs: 15_000,
    });
    expect(c.startedAt).toHaveLength(1);
    expect((await readLease(lease)).holderIdentity).toBe("rbac");
    expect(c.logs.filter((l) => l.level === "error")).toEqual([]);
  }, 30_000);

  it("rejects timings that cannot work", () => {
    const base = {
      client: admin,
      namespace: ns,
      name: "x",
      identity: "x",
      onStartedLeading: () => undefined,
      onStoppedLeading: () => undefined,
    };
    expect(() => new LeaderElector({ ...base, leaseDurationMs: 1000, renewDeadlineMs: 1000 })).toThrow(
      /leaseDurationMs must be greater than renewDeadlineMs/,
    );
    expect(() => new LeaderElector({ ...base, renewDeadlineMs: 1000, retryPeriodMs: 900 })).toThrow(
      /renewDeadlineMs must be greater than 1.2 times retryPeriodMs/,
    );
    expect(() => new LeaderElector({ ...base, identity: "" })).toThrow(/non-empty identity/);
  });
});
