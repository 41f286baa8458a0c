/**
 * What production does to a controller, done to it on a real control plane: the API server
 * killed and restarted, etcd compacted under a watch, a connection that goes silent, the
 * controller killed, the leader killed, and status writes that fail.
 *
 * These tests kill kube-apiserver and compact etcd, so they run on a control plane of their
 * own (never the one the other test files share). Its audit log records every status write
 * with its body, which is how "writes nothing" and "no write doubled" are counted: at the
 * server, including writes that change nothing.
 *
 * Correctness is judged by the oracle (test/harness/oracle.ts), which computes every
 * Referable's status from the cluster state on its own.
 */
import type { KubeClient, KubeObject } from "../../src/kube/client.ts";
import type { PrivateControlPlane } from "../harness/control-plane.ts";
import { SHARD_LABEL, waitForReason, createReferable as createReferableAs } from "../harness/controller.ts";
import {
  clientFor,
  startPrivatePlane,
  compactEtcd,
  etcdRevision,
  FlakyStatusClient,
  kubeconfigVia,
  readStatusWrites,
  ReferableRecorder,
  startInProcessController,
  STATUS_WRITE_AUDIT_POLICY,
  TcpProxy,
  type ProxiedConnection,
  type StatusWrite,
  type WriteFault,
} from "../harness/faults.ts";
import {
  cmSource,
  createConfigMap as createConfigMapIn,
  installTestCrd,
  newShardScope,
  type ShardScope,
  uniqueName,
  waitFor,
} from "../harness/kube.ts";
import { checkAll, describeMismatch, observeWorld, type Mismatch } from "../harness/oracle.ts";
import {
  type ControllerProcess,
  killAllProcesses,
  leaseArgs,
  logTime,
  metricValue,
  QUEUE,
  scopeArgs,
  startControllerProcess,
  TAKE_OVER_BOUND_MS,
  TOLERANCE_MS,
  waitForIdle as waitForProcessIdle,
  waitForLeaderStatus as waitForProcessLeaderStatus,
  waitForOneLeader,
} from "../harness/process.ts";

const RF = "/apis/referable.dev/v1alpha1/referables";
const WIDGET_GROUP = "faults.test.referable.dev";
/** Deadline of every wait: generous, for a loaded 2-core machine. */
const WAIT_MS = 60_000;
const LEASE_ARGS = leaseArgs();

let plane: PrivateControlPlane;
let admin: KubeClient;
let widgetApiVersion: string;

beforeAll(async () => {
  ({ plane, admin } = await startPrivatePlane("faults", { auditPolicy: STATUS_WRITE_AUDIT_POLICY }));
  widgetApiVersion = await installTestCrd(admin, WIDGET_GROUP, "Widget");
}, 180_000);

afterAll(async () => {
  await killAllProcesses();
  await admin?.close();
  await plane?.stop();
});

type Scope = ShardScope;
const newScope = (prefix: string) => newShardScope(admin, prefix);
const waitForIdle = (p: ControllerProcess) => waitForProcessIdle(p, WAIT_MS);
const waitForLeaderStatus = (p: ControllerProcess, want: 0 | 1) =>
  waitForProcessLeaderStatus(p, want, WAIT_MS);

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

const createConfigMap = (
  scope: Scope,
  name: string,
  data: Record<string, string>,
  labels?: Record<string, string>,
) => createConfigMapIn(admin, scope.ns, name, data, labels);

async function patchConfigMap(scope: Scope, name: string, body: unknown, timeoutMs = 10_000): Promise<void> {
  await admin.request("PATCH", `/api/v1/namespaces/${scope.ns}/configmaps/${name}`, {
    body,
    contentType: "application/merge-patch+json",
    timeoutMs,
  });
}

const setValue = (scope: Scope, name: string, v: string, timeoutMs?: number) =>
  patchConfigMap(scope, name, { data: { v } }, timeoutMs);

async function createReferable(scope: Scope, name: string, source: Record<string, unknown>, extra = {}) {
  await createReferableAs(admin, { source, ...extra }, { shard: scope.shard, name });
}

const selectorSource = (scope: Scope, app: string) => ({
  apiVersion: "v1",
  kind: "ConfigMap",
  namespace: scope.ns,
  selector: { matchLabels: { app } },
  fieldPath: "data.v",
});

async function listShard(scope: Scope): Promise<KubeObject[]> {
  const list = await admin.request<{ items: KubeObject[] }>("GET", RF, {
    query: { labelSelector: `${SHARD_LABEL}=${scope.shard}` },
  });
  return list.items;
}

/** What the oracle says is wrong with the shard's Referables now. */
async function verdict(scope: Scope): Promise<Mismatch[]> {
  const world = await observeWorld(admin, [
    { apiVersion: "v1", kind: "ConfigMap" },
    { apiVersion: widgetApiVersion, kind: "Widget" },
  ]);
  return checkAll(await listShard(scope), world);
}

/** Waits until the oracle finds nothing wrong with the shard (and it has `count` Referables). */
async function waitConverged(scope: Scope, count: number, timeoutMs = WAIT_MS): Promise<void> {
  let last: Mismatch[] = [];
  try {
    await waitFor(
      `the ${count} Referables of ${scope.shard} to match the oracle`,
      async () => {
        last = await verdict(scope);
        return last.length === 0 && (await listShard(scope)).length === count;
      },
      { timeoutMs, intervalMs: 200 },
    );
  } catch (err) {
    throw new Error(`${(err as Error).message}; still wrong: ${last.map(describeMismatch).join(" | ")}`);
  }
}

/** `resourceVersion` of each Referable of the shard, by name. */
async function versions(scope: Scope): Promise<Map<string, string | undefined>> {
  return new Map((await listShard(scope)).map((o) => [o.metadata!.name!, o.metadata?.resourceVersion]));
}

/** A controller process on the private control plane, scoped to `scope`. */
function startController(
  scope: Scope,
  identity: string,
  args: string[],
  kubeconfigPath = plane.kubeconfigPath,
): Promise<ControllerProcess> {
  return startControllerProcess(["--kubeconfig", kubeconfigPath, ...scopeArgs(scope, identity), ...args], {
    kubeconfig: false,
  });
}

async function sample(p: ControllerProcess, name: string, labels: Record<string, string> = {}) {
  return metricValue(await p.metrics(), name, labels) ?? NaN;
}

/** Successful status writes the audit log recorded for `names` since `since` (ms since the epoch). */
async function writesSince(since: number, names: ReadonlySet<string>): Promise<StatusWrite[]> {
  return (await readStatusWrites(plane.auditLogPath!)).filter(
    (w) => w.code === 200 && w.receivedAt >= since && names.has(w.referable),
  );
}

const countBy = <T>(items: readonly T[], key: (item: T) => string): Record<string, number> => {
  const counts: Record<string, number> = {};
  for (const item of items) counts[key(item)] = (counts[key(item)] ?? 0) + 1;
  return counts;
};

const unhandled = (p: ControllerProcess) =>
  p.logs().filter((l) => String(l.msg).includes("unhandled rejection")).length;

/**
 * A scope of its own (named after `prefix`) with `count` ConfigMaps cm-0, cm-1... holding
 * `value(i)`, the first `labelled` of them labelled `app`; a Referable of each
 * (`rf(cm)`), and `multi`, of all the labelled ones in Multiple mode. `names` holds them all.
 */
async function newConfigMapWorld(
  prefix: string,
  count: number,
  labelled: number,
  value: (i: number) => string,
) {
  const scope = await newScope(prefix);
  const app = uniqueName("app");
  const cms = Array.from({ length: count }, (_, i) => `cm-${i}`);
  await Promise.all(
    cms.map((cm, i) => createConfigMap(scope, cm, { v: value(i) }, i < labelled ? { app } : undefined)),
  );
  const rf = (cm: string) => `${scope.shard}-${cm}`;
  const multi = `${scope.shard}-multi`;
  await Promise.all([
    ...cms.map((cm) => createReferable(scope, rf(cm), cmSource(scope, cm))),
    createReferable(scope, multi, selectorSource(scope, app), { selection: { mode: "Multiple" } }),
  ]);
  return { scope, cms, rf, multi, names: new Set([...cms.map(rf), multi]) };
}

/** A loop of source changes, paced, that keeps going (and counting) through failures. */
function startWriter(change: (k: number) => Promise<void>) {
  const done: Array<{ k: number; at: number; ok: boolean }> = [];
  let running = true;
  const loop = (async () => {
    for (let k = 1; running; k++) {
      const at = Date.now();
      let ok = true;
      try {
        await change(k);
      } catch {
        ok = false;
      }
      done.push({ k, at, ok });
      // Pacing, so the writer does not starve the machine; not a synchronisation.
      await sleep(ok ? 40 : 150);
    }
  })();
  const okSince = (t: number) => done.filter((d) => d.ok && d.at >= t).length;
  const failedSince = (t: number) => done.filter((d) => !d.ok && d.at >= t).length;
  return {
    /** Waits (up to WAIT_MS) until `count` changes made from `since` on went through. */
    waitForOk: (what: string, count: number, since = Date.now()) =>
      waitFor(what, () => okSince(since) >= count, { timeoutMs: WAIT_MS }),
    /** Waits (up to WAIT_MS) until `count` changes tried from `since` on were refused. */
    waitForFailed: (what: string, count: number, since = Date.now()) =>
      waitFor(what, () => failedSince(since) >= count, { timeoutMs: WAIT_MS }),
    stop: async () => {
      running = false;
      await loop;
    },
  };
}

describe("the API server", () => {
  it("SIGKILLed and restarted on the same etcd while sources change: the controller reconnects, clears no value, and reflects every change", async () => {
    const scope = await newScope("apiserver");
    const app = uniqueName("app");
    const cms = [0, 1, 2, 3, 4, 5].map((i) => `cm-${i}`);
    const widgets = ["w-0", "w-1"];
    await Promise.all(
      cms.map((cm, i) => createConfigMap(scope, cm, { v: "0" }, i < 3 ? { app } : undefined)),
    );
    const widgetPath = `/apis/${widgetApiVersion}/namespaces/${scope.ns}/widgets`;
    await Promise.all(
      widgets.map((name) =>
        admin.request("POST", widgetPath, {
          body: { apiVersion: widgetApiVersion, kind: "Widget", metadata: { name }, spec: { size: 0 } },
        }),
      ),
    );
    const names = [
      ...cms.map((cm) => `${scope.shard}-${cm}`),
      ...widgets.map((w) => `${scope.shard}-${w}`),
      `${scope.shard}-multi`,
    ];
    await Promise.all([
      ...cms.map((cm) => createReferable(scope, `${scope.shard}-${cm}`, cmSource(scope, cm))),
      // A custom kind too: a restarting server answers 503 for it until its CRDs are loaded.
      ...widgets.map((w) =>
        createReferable(scope, `${scope.shard}-${w}`, {
          apiVersion: widgetApiVersion,
          kind: "Widget",
          namespace: scope.ns,
          name: w,
          fieldPath: "spec.size",
        }),
      ),
      createReferable(scope, `${scope.shard}-multi`, selectorSource(scope, app), {
        selection: { mode: "Multiple" },
      }),
    ]);

    // Without leader election: an outage longer than the renew deadline makes a leader exit by
    // design (as controller-runtime's do), and this test is about the watches, not the Lease.
    const p = await startController(scope, "apiserver", ["--leader-elect=false"]);
    await waitConverged(scope, names.length);
    const recorder = new ReferableRecorder(admin, scope.shard);
    await recorder.start();
    const markAt = Date.now();
    const logsBefore = p.logs().length;
    const errorsBefore = await sample(p, "referable_informer_restarts_total", { signal: "error" });

    // Sources keep changing before, during (refused while the server is down) and after the outage.
    const writer = startWriter(async (k) => {
      const i = k % (cms.length + widgets.length);
      if (i < cms.length) await setValue(scope, cms[i]!, String(k), 5_000);
      else
        await admin.request("PATCH", `${widgetPath}/${widgets[i - cms.length]}`, {
          body: { spec: { size: k } },
          contentType: "application/merge-patch+json",
          timeoutMs: 5_000,
        });
    });
    try {
      await writer.waitForOk("some changes before the outage", 10);
      const killedAt = Date.now();
      await plane.killApiServer();
      await writer.waitForFailed("changes refused during the outage", 3, killedAt);
      await plane.startApiServer();
      // Changes made now land while the controller is still backing off: for it, still the outage.
      await writer.waitForOk("changes after the restart", 20);
    } finally {
      await writer.stop();
    }
    await waitConverged(scope, names.length);
    await waitForIdle(p);
    await recorder.stop();

    // Every status written during the run (the audit log has each one, with its body) kept a
    // value, and so did every version a reader watching the Referables was shown.
    const ours = new Set(names);
    const valueless = (name: string, status: Record<string, unknown> | undefined) => {
      const ready = (status?.conditions as Array<{ type: string; reason: string }> | undefined)?.find(
        (c) => c.type === "Ready",
      );
      const values = status?.values as unknown[] | undefined;
      return (
        ready?.reason !== "Available" ||
        (name.endsWith("-multi") ? values?.length !== 3 : status?.value === undefined)
      );
    };
    const writes = await writesSince(markAt, ours);
    expect(writes.filter((w) => valueless(w.referable, w.status))).toEqual([]);
    expect(writes.length).toBeGreaterThan(0);
    const seen = recorder.seen.filter((s) => ours.has(s.name));
    expect(seen.filter((s) => valueless(s.name, s.status))).toEqual([]);
    expect(recorder.reconnects).toBeGreaterThanOrEqual(1);
    expect(seen.length).toBeGreaterThan(names.length);
    // And every status the controller wrote said Available (the log names each write's reason).
    const written = p
      .logs()
      .slice(logsBefore)
      .filter((l) => l.msg === "status written");
    expect(written.filter((l) => l.reason !== "Available")).toEqual([]);
    expect(written.length).toBeGreaterThan(0);
    // It noticed the outage, survived it, and no promise went unhandled.
    expect(await sample(p, "referable_informer_restarts_total", { signal: "error" })).toBeGreaterThan(
      errorsBefore,
    );
    expect(await p.ready()).toBe(200);
    expect(unhandled(p)).toBe(0);
    expect(await p.stop("SIGTERM")).toEqual({ code: 0, signal: null });
  }, 240_000);
});

describe("etcd compaction", () => {
  it("a watch resumed from a compacted resourceVersion gets 410 Gone: the controller relists, ends correct, and writes only what changed", async () => {
    const { scope, rf, multi, names } = await newConfigMapWorld("compaction", 8, 4, () => "0");

    // The controller talks through a proxy, so its connections can go dark; a short watchdog makes
    // it reopen its watches, from the resourceVersion it last saw, while they are dark.
    const proxy = await TcpProxy.start(plane.server);
    try {
      const kubeconfig = await kubeconfigVia(plane.kubeconfigPath, proxy.url, scope.shard);
      const p = await startController(
        scope,
        "compaction",
        ["--leader-elect=false", "--watch-watchdog=4s"],
        kubeconfig,
      );
      await waitConverged(scope, names.size);
      await waitForIdle(p);
      const before = await versions(scope);
      const expiredBefore = await sample(p, "referable_informer_restarts_total", { signal: "expired" });
      const writesBefore = await sample(p, "referable_status_writes_total", { result: "success" });
      const markAt = Date.now();
      const logsBefore = p.logs().length;

      proxy.freeze({ newConnections: true });
      // Unseen by the controller: three values change (cm-0 and cm-1 also feed the Multiple one),
      // one source changes without its value changing, one only gets an annotation, and a
      // crowd of unrelated objects moves the revision on.
      await Promise.all([
        setValue(scope, "cm-0", "1"),
        setValue(scope, "cm-1", "1"),
        setValue(scope, "cm-5", "1"),
        patchConfigMap(scope, "cm-2", { data: { other: "x" } }),
        patchConfigMap(scope, "cm-6", { metadata: { annotations: { touched: "yes" } } }),
        ...Array.from({ length: 20 }, (_, i) => createConfigMap(scope, `noise-${i}`, { n: String(i) })),
      ]);
      await compactEtcd(plane.etcdUrl, await etcdRevision(plane.etcdUrl));
      // A fresh API server has an empty watch cache, so it cannot serve the old resourceVersion
      // from memory either: it must answer 410, as etcd would.
      await plane.killApiServer();
      await plane.startApiServer();
      // Frozen connections stay dark until the controller's watchdog abandons them; only its
      // next watch, from the old resourceVersion, gets through.
      proxy.thaw({ destroyFrozen: false });

      await waitFor(
        "the controller to see 410 Gone",
        async () =>
          (await sample(p, "referable_informer_restarts_total", { signal: "expired" })) > expiredBefore,
        { timeoutMs: WAIT_MS, intervalMs: 200 },
      );
      await waitConverged(scope, names.size);
      const idle = await waitForIdle(p);

      const relisted = p
        .logs()
        .slice(logsBefore)
        .filter((l) => l.msg === "watch resourceVersion expired (410 Gone): relisting");
      expect(relisted.map((l) => l.path)).toContain("/api/v1/configmaps");
      const changed = [rf("cm-0"), rf("cm-1"), rf("cm-5"), multi].sort();
      expect(countBy(await writesSince(markAt, names), (w) => w.referable)).toEqual(
        Object.fromEntries(changed.map((n) => [n, 1])),
      );
      expect(metricValue(idle, "referable_status_writes_total", { result: "success" })! - writesBefore).toBe(
        changed.length,
      );
      const after = await versions(scope);
      const unchanged = [...names].filter((n) => !changed.includes(n));
      expect(unchanged.map((n) => [n, after.get(n)])).toEqual(unchanged.map((n) => [n, before.get(n)]));
      expect(unhandled(p)).toBe(0);
      expect(await p.stop("SIGTERM")).toEqual({ code: 0, signal: null });
    } finally {
      await proxy.close();
    }
  }, 240_000);
});

describe("a silent watch", () => {
  it("a connection that stops forwarding without closing is noticed by the watchdog and recovered within its window", async () => {
    const WATCHDOG_MS = 3_000;
    const scope = await newScope("silent");
    await createConfigMap(scope, "cm", { v: "before" });
    await createConfigMap(scope, "heartbeat", { beat: "0" });
    const rf = `${scope.shard}-rf`;
    await createReferable(scope, rf, cmSource(scope, "cm"));

    const proxy = await TcpProxy.start(plane.server);
    // A heartbeat keeps the ConfigMap watch busy, so while the network is healthy its watchdog
    // has no reason to fire; what fires it below is the freeze alone.
    const heartbeat = startWriter(async (k) => {
      await patchConfigMap(scope, "heartbeat", { data: { beat: String(k) } });
      await sleep(200);
    });
    try {
      const kubeconfig = await kubeconfigVia(plane.kubeconfigPath, proxy.url, scope.shard);
      const p = await startController(
        scope,
        "silent",
        ["--leader-elect=false", `--watch-watchdog=${WATCHDOG_MS}ms`],
        kubeconfig,
      );
      await waitForReason(admin, rf, "Available", (v) => v.status.value === "before", WAIT_MS);
      await waitForIdle(p);
      const watchdogBefore = await sample(p, "referable_informer_restarts_total", { signal: "watchdog" });
      const logsBefore = p.logs().length;

      // Freeze the connection the server is streaming the ConfigMap watch on (the heartbeat keeps
      // it streaming). Idle pooled connections are left alone: a request sent on one would hang
      // until its own timeout, which is not the watchdog's business.
      const streaming = (c: ProxiedConnection) =>
        c.streamingForMs > 1_000 && performance.now() - c.lastServerDataAt < 1_000;
      await waitFor("a streaming connection", () => proxy.connections.some(streaming));
      const frozenAt = performance.now();
      const frozen = proxy.freeze({ filter: streaming });
      expect(frozen).toBeGreaterThanOrEqual(1);
      await setValue(scope, "cm", "during-freeze");
      await waitForReason(admin, rf, "Available", (v) => v.status.value === "during-freeze", WAIT_MS);
      const recoveredMs = performance.now() - frozenAt;

      // The frozen watch had its last event delivered under a second before the freeze, so the
      // watchdog abandons it between 2 s and 3 s after; the change arrives on the new watch.
      expect(recoveredMs).toBeGreaterThanOrEqual(WATCHDOG_MS - 1_000);
      expect(recoveredMs).toBeLessThan(WATCHDOG_MS + TOLERANCE_MS);
      expect(proxy.withheldBytes).toBeGreaterThan(0); // the server did send; nothing arrived
      expect(await sample(p, "referable_informer_restarts_total", { signal: "watchdog" })).toBeGreaterThan(
        watchdogBefore,
      );
      const silent = p
        .logs()
        .slice(logsBefore)
        .filter((l) => l.msg === "watch was silent past the watchdog window: reopening");
      expect(silent.map((l) => [l.path, l.silentMs])).toContainEqual(["/api/v1/configmaps", WATCHDOG_MS]);
      expect(unhandled(p)).toBe(0);
      proxy.thaw();
      expect(await p.stop("SIGTERM")).toEqual({ code: 0, signal: null });
    } finally {
      await heartbeat.stop();
      await proxy.close();
    }
  }, 180_000);
});

describe("the controller process", () => {
  it("SIGKILLed and restarted: it converges, and writes nothing for Referables that were already right", async () => {
    const { scope, names } = await newConfigMapWorld("sigkill", 12, 3, (i) => `v${i}`);
    await Promise.all(
      [0, 1, 2].map((i) => {
        names.add(`${scope.shard}-absent-${i}`);
        return createReferable(scope, `${scope.shard}-absent-${i}`, cmSource(scope, `absent-${i}`));
      }),
    );

    const first = await startController(scope, "first", LEASE_ARGS);
    await waitConverged(scope, names.size);
    await waitForIdle(first);
    // Changes the first process may or may not write before it dies, then changes nobody sees.
    await Promise.all([0, 1, 2, 3].map((i) => setValue(scope, `cm-${i}`, `v${i}-changed`)));
    expect(await first.kill()).toEqual({ code: null, signal: "SIGKILL" });
    await Promise.all([setValue(scope, "cm-10", "v10-changed"), setValue(scope, "cm-11", "v11-changed")]);
    await createConfigMap(scope, "absent-0", { v: "now-here" });

    // What is already right, by the oracle, before the second process starts.
    const stale = new Set((await verdict(scope)).map((m) => m.name));
    for (const name of [`${scope.shard}-cm-10`, `${scope.shard}-cm-11`, `${scope.shard}-absent-0`])
      expect(stale).toContain(name);
    const right = [...names].filter((n) => !stale.has(n)).sort();
    const before = await versions(scope);
    const markAt = Date.now();

    const second = await startController(scope, "second", LEASE_ARGS);
    await waitForLeaderStatus(second, 1); // once the dead leader's Lease has expired
    await waitConverged(scope, names.size);
    const idle = await waitForIdle(second);

    expect(countBy(await writesSince(markAt, names), (w) => w.referable)).toEqual(
      Object.fromEntries([...stale].sort().map((n) => [n, 1])),
    );
    expect(metricValue(idle, "referable_status_writes_total", { result: "success" })).toBe(stale.size);
    const after = await versions(scope);
    expect(right.map((n) => [n, after.get(n)])).toEqual(right.map((n) => [n, before.get(n)]));
    expect(unhandled(second)).toBe(0);
    expect(await second.stop("SIGTERM")).toEqual({ code: 0, signal: null });
  }, 180_000);

  it("the leader SIGKILLed while sources change: the standby takes over in time, and no write is lost or doubled", async () => {
    const { scope, cms, rf, names } = await newConfigMapWorld("failover", 6, 6, () => "g0");

    const a = await startController(scope, "replica-a", LEASE_ARGS);
    const b = await startController(scope, "replica-b", LEASE_ARGS);
    const [leader, standby] = await waitForOneLeader(a, b, WAIT_MS);
    await waitConverged(scope, names.size);
    await Promise.all([waitForIdle(leader), waitForIdle(standby)]);
    const markAt = Date.now();

    // Every change writes a value never written before, so a doubled write shows as a value
    // written twice, whichever replica wrote it.
    const lastValue = new Map<string, string>();
    const writer = startWriter(async (k) => {
      const cm = cms[k % cms.length]!;
      await setValue(scope, cm, `g${k}`);
      lastValue.set(cm, `g${k}`);
    });
    let killedAt = 0;
    let tookOverMs = 0;
    try {
      await writer.waitForOk("changes before the failover", 20, markAt);
      killedAt = Date.now();
      const killedPerf = performance.now();
      expect(await leader.kill()).toEqual({ code: null, signal: "SIGKILL" });
      await waitForLeaderStatus(standby, 1);
      tookOverMs = performance.now() - killedPerf;
      await writer.waitForOk("changes after the failover", 20);
    } finally {
      await writer.stop();
    }
    await waitConverged(scope, names.size);
    await waitForIdle(standby);

    expect(tookOverMs).toBeLessThan(TAKE_OVER_BOUND_MS);
    // Nothing lost: every Referable shows the last value its source was given.
    const stored = new Map(
      (await listShard(scope)).map((o) => [o.metadata!.name!, o.status as { value?: unknown }]),
    );
    expect(cms.map((cm) => [cm, stored.get(rf(cm))?.value])).toEqual(
      cms.map((cm) => [cm, lastValue.get(cm)]),
    );
    // Nothing doubled: no value was written twice to the same Referable.
    const writes = await writesSince(markAt, names);
    const perValue = countBy(
      writes,
      (w) => `${w.referable} ${JSON.stringify(w.status?.value ?? w.status?.values)}`,
    );
    expect(Object.entries(perValue).filter(([, n]) => n > 1)).toEqual([]);
    expect(writes.length).toBeGreaterThan(names.size);
    // And nobody wrote while nobody led.
    const ledAt = logTime(await standby.waitForLog((l) => l.msg === "started leading"));
    expect(Number.isFinite(ledAt)).toBe(true);
    expect(writes.filter((w) => w.receivedAt > killedAt + 500 && w.receivedAt < ledAt)).toEqual([]);
    expect(unhandled(standby)).toBe(0);
    expect(await standby.stop("SIGTERM")).toEqual({ code: 0, signal: null });
  }, 180_000);
});

describe("status writes that fail", () => {
  it("409 conflicts, 5xx and connection resets are retried with a growing backoff until they succeed, never dropped", async () => {
    const scope = await newScope("writes");
    const name = (what: string) => `${scope.shard}-${what}`;
    const plan: Record<string, WriteFault[]> = {
      [name("conflict")]: ["conflict", "conflict", "conflict"],
      [name("server")]: ["internal", "unavailable", "internal", "unavailable"],
      [name("reset")]: ["reset", "reset", "reset"],
      [name("stubborn")]: [
        "unavailable",
        "conflict",
        "reset",
        "internal",
        "unavailable",
        "conflict",
        "reset",
        "internal",
        "unavailable",
        "conflict",
      ],
    };
    // The write reached the server, but its answer was lost: the retry must not be needed twice.
    const lost = name("lost");
    plan[lost] = ["reset-after-apply", "reset-after-apply"];
    const healthy = name("healthy");
    const client = clientFor(plane.kubeconfigPath);
    const flaky = new FlakyStatusClient(client, plan);
    const ipc = await startInProcessController({ client, writer: flaky, shard: scope.shard });
    try {
      // Warm the ConfigMap informer first, so each planned Referable's first result is final
      // and nothing but the backoff schedules its retries.
      await createConfigMap(scope, "cm-healthy", { v: "healthy" });
      await createReferable(scope, healthy, cmSource(scope, "cm-healthy"));
      await waitForReason(admin, healthy, "Available", (v) => v.status.value === "healthy", WAIT_MS);
      const planned = Object.keys(plan);
      await Promise.all(planned.map((n) => createConfigMap(scope, `cm-${n}`, { v: `value-of-${n}` })));
      await Promise.all(planned.map((n) => createReferable(scope, n, cmSource(scope, `cm-${n}`))));
      await waitConverged(scope, planned.length + 1);
      const metricsText = () => ipc.metrics.registry.metrics();
      await waitFor(
        "the controller to be idle",
        async () => {
          const text = await metricsText();
          return (
            metricValue(text, "workqueue_depth", QUEUE) === 0 &&
            metricValue(text, "controller_runtime_active_workers", { controller: "referable" }) === 0
          );
        },
        { timeoutMs: WAIT_MS },
      );
      // A later change, written after everything above, closes the window in which a retry
      // beyond the plan would have shown up.
      await setValue(scope, "cm-healthy", "healthy-2");
      await waitForReason(admin, healthy, "Available", (v) => v.status.value === "healthy-2", WAIT_MS);

      for (const [n, faults] of Object.entries(plan)) {
        const attempts = flaky.attempts.get(n) ?? [];
        if (n === lost) {
          // Applied at the first attempt: the retry finds the status right (or writes the same
          // status again, harmlessly) and stops; never more attempts than the plan allows.
          expect({ n, applied: attempts[0]?.outcome }).toEqual({ n, applied: "reset-after-apply" });
          expect(attempts.length).toBeLessThanOrEqual(faults.length + 1);
          continue;
        }
        // Exactly the planned failures and then one success: not given up, and not retried more.
        expect({ n, outcomes: attempts.map((a) => a.outcome) }).toEqual({ n, outcomes: [...faults, "ok"] });
        // Each retry waits at least the work queue's per-item backoff: 5 ms, doubling. The first
        // may come sooner: its ConfigMap was cached before anyone read it, so the first result is
        // pushed after a targeted read, and a push is new information, reconciled at once.
        const gaps = attempts.slice(1).map((a, i) => a.at - attempts[i]!.at);
        const short = gaps
          .map((gap, i) => ({ retry: i + 1, gap, min: 5 * 2 ** i }))
          .filter((g) => g.retry > 1 && g.gap < g.min);
        expect({ n, short }).toEqual({ n, short: [] });
      }
      // (Its first write may be a Pending status, before its kind was looked up.)
      const healthyOutcomes = flaky.attempts.get(healthy)?.map((a) => a.outcome) ?? [];
      expect(healthyOutcomes.length).toBeGreaterThanOrEqual(2);
      expect(healthyOutcomes.every((o) => o === "ok")).toBe(true);
      // Every failure was counted, and every one that threw was logged: none was silent.
      const injected = [...flaky.attempts.values()].flat().filter((a) => a.outcome !== "ok");
      const conflicts = injected.filter((a) => a.outcome === "conflict").length;
      const text = await metricsText();
      expect(metricValue(text, "referable_status_writes_total", { result: "conflict" })).toBe(conflicts);
      expect(metricValue(text, "referable_status_writes_total", { result: "error" })).toBe(
        injected.length - conflicts,
      );
      expect(metricValue(text, "workqueue_retries_total", QUEUE)).toBeGreaterThanOrEqual(injected.length);
      const warned = ipc.logger.lines.filter((l) => l.message === "reconcile failed; retrying with backoff");
      expect(warned.length).toBe(injected.length - conflicts);
    } finally {
      await ipc.stop();
      await client.close();
    }
  }, 180_000);
});
