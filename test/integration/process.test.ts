/**
 * The controller as the process users run (`node src/process/main.ts`) against the real API server:
 * flags and exit codes, a restart that writes nothing, two replicas with one leader and a
 * take-over when it dies, /metrics, the probes, and JSON logs that never carry a value.
 *
 * Each test has its own namespace (its ConfigMaps and its Lease) and its own shard: the
 * processes only see Referables labelled with it, so other test files' controllers and these
 * never touch each other's objects.
 */
import { execFileSync, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { delimiter, join } from "node:path";
import { helpText } from "../../src/process/config.ts";
import type { KubeClient, KubeObject } from "../../src/kube/client.ts";
import { itIf } from "../harness/availability.ts";
import { repoRoot } from "../harness/control-plane.ts";
import { SHARD_LABEL, waitForReason } from "../harness/controller.ts";
import {
  adminClient,
  closeTestClients,
  createConfigMap as createConfigMapIn,
  newShardScope,
  type ShardScope,
  uniqueName,
  waitFor,
  writeUnreachableKubeconfig,
} from "../harness/kube.ts";
import {
  type ControllerProcess,
  killAllProcesses,
  leaseArgs,
  type LogLine,
  metricValue,
  QUEUE,
  scopeArgs,
  startControllerProcess,
  TAKE_OVER_BOUND_MS,
  waitForIdle as waitForProcessIdle,
  waitForLeaderStatus as waitForProcessLeaderStatus,
  waitForOneLeader,
} from "../harness/process.ts";

const RF = "/apis/referable.dev/v1alpha1/referables";
/**
 * A Lease name other than the default, so the tests prove leader_election_master_status is
 * labelled with the configured id. Each test's Lease lives in its own namespace.
 */
const LEASE_ID = "referable-under-test";
const LEASE_ARGS = leaseArgs(LEASE_ID);
/** Deadline of every wait on a process. */
const WAIT_MS = 30_000;

let admin: KubeClient;

beforeAll(() => {
  admin = adminClient();
});
afterAll(async () => {
  await killAllProcesses();
  await closeTestClients();
});

/** A test's own namespace (ConfigMaps, Lease) and shard (Referables). */
type Scope = ShardScope;
const newScope = (prefix: string) => newShardScope(admin, prefix);
const waitForIdle = (p: ControllerProcess) => waitForProcessIdle(p, WAIT_MS);
const waitForLeaderStatus = (p: ControllerProcess, want: 0 | 1) =>
  waitForProcessLeaderStatus(p, want, WAIT_MS, { name: LEASE_ID });

/** Flags for a controller process of `scope`, with short leader-election timings. */
function controllerArgs(scope: Scope, identity: string, ...extra: string[]): string[] {
  return [...scopeArgs(scope, identity), ...LEASE_ARGS, ...extra];
}

const createConfigMap = (
  scope: Scope,
  name: string,
  data: Record<string, string>,
  labels?: Record<string, string>,
) => createConfigMapIn(admin, scope.ns, name, data, labels);

async function setConfigMapValue(scope: Scope, name: string, value: string): Promise<void> {
  await admin.request("PATCH", `/api/v1/namespaces/${scope.ns}/configmaps/${name}`, {
    body: { data: { v: value } },
    contentType: "application/merge-patch+json",
  });
}

/** A Referable of `scope` reading data.v of the ConfigMap `configMap` (or of those `selector` matches). */
async function createReferable(
  scope: Scope,
  name: string,
  source: { configMap: string } | { selector: Record<string, string> },
): Promise<void> {
  const spec =
    "configMap" in source
      ? {
          source: {
            apiVersion: "v1",
            kind: "ConfigMap",
            namespace: scope.ns,
            name: source.configMap,
            fieldPath: "data.v",
          },
        }
      : {
          source: {
            apiVersion: "v1",
            kind: "ConfigMap",
            namespace: scope.ns,
            selector: { matchLabels: source.selector },
            fieldPath: "data.v",
          },
          selection: { mode: "Multiple" },
        };
  await admin.request("POST", RF, {
    body: {
      apiVersion: "referable.dev/v1alpha1",
      kind: "Referable",
      metadata: { name, labels: { [SHARD_LABEL]: scope.shard } },
      spec,
    },
  });
}

/** What a test needs of one Referable as stored. */
interface Stored {
  reason: string | undefined;
  resourceVersion: string | undefined;
  value: unknown;
  values: unknown;
}

/** Every Referable of the shard, by name, in one LIST (cheaper than polling each). */
async function listShard(scope: Scope): Promise<Map<string, Stored>> {
  const list = await admin.request<{ items: KubeObject[] }>("GET", RF, {
    query: { labelSelector: `${SHARD_LABEL}=${scope.shard}` },
  });
  const out = new Map<string, Stored>();
  for (const item of list.items) {
    const status = (item.status ?? {}) as {
      value?: unknown;
      values?: unknown;
      conditions?: Array<{ type: string; reason: string }>;
    };
    out.set(item.metadata?.name ?? "", {
      reason: status.conditions?.find((c) => c.type === "Ready")?.reason,
      resourceVersion: item.metadata?.resourceVersion,
      value: status.value,
      values: status.values,
    });
  }
  return out;
}

/** Waits until every Referable in `want` has its reason, and returns the shard as stored then. */
async function waitForReasons(scope: Scope, want: Map<string, string>): Promise<Map<string, Stored>> {
  let last = new Map<string, Stored>();
  try {
    return await waitFor(
      `${want.size} Referables to reach their reasons`,
      async () => {
        last = await listShard(scope);
        return [...want].every(([name, reason]) => last.get(name)?.reason === reason) && last;
      },
      { timeoutMs: WAIT_MS, intervalMs: 200 },
    );
  } catch (err) {
    const wrong = [...want].filter(([name, reason]) => last.get(name)?.reason !== reason);
    throw new Error(
      `${(err as Error).message}; not there yet: ${wrong.map(([n, r]) => `${n} is ${last.get(n)?.reason} (want ${r})`).join(", ")}`,
    );
  }
}

/** A sample of the process's metrics, or undefined when absent. */
async function sample(p: ControllerProcess, name: string, labels: Record<string, string> = {}) {
  return metricValue(await p.metrics(), name, labels);
}

const writes = (text: string) => metricValue(text, "referable_status_writes_total", { result: "success" });

describe("flags", () => {
  it("--help prints every option with its default and exits 0", async () => {
    const p = await startControllerProcess(["--help"], { kubeconfig: false });
    expect(await p.waitForExit(WAIT_MS)).toEqual({ code: 0, signal: null });
    // Exactly the text config.test.ts checks option by option (defaults, environment variables,
    // headings in order, the count of options).
    expect(p.stdout()).toBe(`${helpText()}\n`);
    expect(p.stderr()).toBe("");
  }, 60_000);

  it("--version prints the package version and exits 0", async () => {
    const p = await startControllerProcess(["--version"], { kubeconfig: false });
    expect(await p.waitForExit(WAIT_MS)).toEqual({ code: 0, signal: null });
    const pkg = JSON.parse(await readFile(join(repoRoot, "package.json"), "utf8")) as { version: string };
    expect(p.stdout()).toBe(`referable-controller ${pkg.version} (node ${process.versions.node})\n`);
    expect(p.stderr()).toBe("");
  }, 60_000);

  const refused: Array<{ reason: string; args: string[]; stderr: string }> = [
    { reason: "an unknown flag", args: ["--no-such-flag"], stderr: 'unknown option "--no-such-flag"' },
    {
      reason: "a typo'd flag, with the flag meant",
      args: ["--leader-elction-id=x"],
      stderr: 'unknown option "--leader-elction-id": did you mean --leader-election-id?',
    },
    {
      reason: "an unknown log format",
      args: ["--log-format=pretty"],
      stderr: '--log-format (env REFERABLE_LOG_FORMAT): "pretty" is not json or text',
    },
    {
      reason: "a bad duration",
      args: ["--leader-election-lease-duration", "10x"],
      stderr: '--leader-election-lease-duration (env REFERABLE_LEASE_DURATION): "10x" is not a duration',
    },
    {
      reason: "a bad bind address (refused while parsing, not when listening)",
      args: ["--metrics-bind-address", "8080"],
      stderr: 'bind address "8080" is not of the form [host]:port',
    },
    {
      reason: "leader-election timing LeaderElector would refuse",
      args: [
        "--leader-elect",
        "--leader-election-renew-deadline=2s",
        "--leader-election-retry-period=1800ms",
      ],
      stderr: "--leader-election-renew-deadline (2000 ms) must be greater than 1.2 times",
    },
  ];
  it.each(refused)(
    "refuses $reason: exit 2 and a message naming it",
    async ({ args, stderr }) => {
      const p = await startControllerProcess(args, { kubeconfig: false });
      expect(await p.waitForExit(WAIT_MS)).toEqual({ code: 2, signal: null });
      expect(p.stderr()).toContain(stderr);
      expect(p.stdout()).toBe("");
    },
    60_000,
  );
});

describe("which cluster", () => {
  /** A KUBECONFIG list: first a file whose current-context points where nothing listens, then the test's. */
  async function kubeconfigList(): Promise<{ list: string; cleanup: () => Promise<void> }> {
    const dir = await mkdtemp(join(tmpdir(), "process-kubeconfig-"));
    const first = join(dir, "first");
    await writeUnreachableKubeconfig(first);
    const list = [join(dir, "missing"), first, process.env.REFERABLE_TEST_KUBECONFIG!].join(delimiter);
    return { list, cleanup: () => rm(dir, { recursive: true, force: true }) };
  }

  it("merges a KUBECONFIG list as kubectl does, and --context picks the test cluster's context", async () => {
    const { list, cleanup } = await kubeconfigList();
    try {
      const p = await startControllerProcess(
        [
          "--leader-elect=false",
          "--referable-selector",
          `${SHARD_LABEL}=${uniqueName("none")}`,
          "--context",
          "referable-test",
        ],
        { kubeconfig: false, env: { KUBECONFIG: list } },
      );
      await waitFor("/readyz to answer 200", async () => (await p.ready()) === 200, {
        timeoutMs: WAIT_MS,
        intervalMs: 50,
      });
      expect(await p.stop("SIGTERM")).toEqual({ code: 0, signal: null });
    } finally {
      await cleanup();
    }
  }, 60_000);

  it("refuses a --context no file defines: exit 2, naming the contexts there are", async () => {
    const { list, cleanup } = await kubeconfigList();
    try {
      const p = await startControllerProcess(["--kubeconfig", list, "--context", "staging"], {
        kubeconfig: false,
      });
      expect(await p.waitForExit(WAIT_MS)).toEqual({ code: 2, signal: null });
      expect(p.stdout()).toContain('has no context \\"staging\\" (it has: nowhere, referable-test)');
    } finally {
      await cleanup();
    }
  }, 60_000);
});

describe("restart", () => {
  it("a restart with nothing changed writes nothing, and the old leader releases its lease", async () => {
    const scope = await newScope("restart");
    const app = uniqueName("app");
    const want = new Map<string, string>();
    const available = Array.from({ length: 12 }, (_, i) => `${scope.shard}-available-${i}`);
    const missing = Array.from({ length: 7 }, (_, i) => `${scope.shard}-missing-${i}`);
    const multiple = `${scope.shard}-multiple`;
    await Promise.all(
      available.map((_, i) => createConfigMap(scope, `cm-${i}`, { v: `v${i}` }, i < 3 ? { app } : undefined)),
    );
    await Promise.all([
      ...available.map((name, i) => createReferable(scope, name, { configMap: `cm-${i}` })),
      ...missing.map((name, i) => createReferable(scope, name, { configMap: `absent-${i}` })),
      createReferable(scope, multiple, { selector: { app } }),
    ]);
    for (const name of available) want.set(name, "Available");
    for (const name of missing) want.set(name, "SourceNotFound");
    want.set(multiple, "Available");

    const first = await startControllerProcess(controllerArgs(scope, "first"));
    const before = await waitForReasons(scope, want);
    expect(before.get(multiple)?.values).toEqual(["v0", "v1", "v2"]);
    expect(before.get(available[5]!)?.value).toBe("v5");
    await waitForIdle(first);

    expect(await first.stop("SIGTERM")).toEqual({ code: 0, signal: null });
    const lease = await admin.request<KubeObject & { spec?: { holderIdentity?: string } }>(
      "GET",
      `/apis/coordination.k8s.io/v1/namespaces/${scope.ns}/leases/${LEASE_ID}`,
    );
    expect(lease.spec?.holderIdentity).toBe("");

    const second = await startControllerProcess(controllerArgs(scope, "second"));
    await waitForLeaderStatus(second, 1);
    await waitFor(
      "the new leader to reconcile every Referable",
      async () =>
        ((await sample(second, "controller_runtime_reconcile_total", { result: "success" })) ?? 0) >=
        want.size,
      { timeoutMs: WAIT_MS, intervalMs: 100 },
    );
    const idle = await waitForIdle(second);
    const versions = (m: Map<string, Stored>) =>
      [...want.keys()].map((name) => [name, m.get(name)?.resourceVersion]);
    expect(versions(await listShard(scope))).toEqual(versions(before));
    expect(writes(idle)).toBe(0);

    // Proof that the new leader was really running on resolved sources, not still Pending: a
    // change made now is written, and everything queued before it has been done by the time
    // the queue is idle again; still, only that one Referable was written.
    const canary = available[11]!;
    await setConfigMapValue(scope, "cm-11", "v11-changed");
    await waitForReason(admin, canary, "Available", (v) => v.status.value === "v11-changed", WAIT_MS);
    const after = await waitFor("the write to be counted", async () => {
      const text = await waitForIdle(second);
      return writes(text) === 1 && text;
    });
    expect(writes(after)).toBe(1);
    const others = (m: Map<string, Stored>) => versions(m).filter(([name]) => name !== canary);
    expect(others(await listShard(scope))).toEqual(others(before));

    expect(await second.stop("SIGTERM")).toEqual({ code: 0, signal: null });
  }, 150_000);
});

describe("replicas", () => {
  it("two replicas elect one leader; the standby writes nothing and takes over when the leader dies", async () => {
    const scope = await newScope("replicas");
    const names = [0, 1, 2].map((i) => `${scope.shard}-${i}`);
    await Promise.all(names.map((_, i) => createConfigMap(scope, `cm-${i}`, { v: `v${i}` })));
    await Promise.all(names.map((name, i) => createReferable(scope, name, { configMap: `cm-${i}` })));

    const a = await startControllerProcess(controllerArgs(scope, "replica-a"));
    const b = await startControllerProcess(controllerArgs(scope, "replica-b"));
    const [leader, standby] = await waitForOneLeader(a, b, WAIT_MS, { name: LEASE_ID });
    const statusOf = (p: ControllerProcess) => sample(p, "leader_election_master_status", { name: LEASE_ID });
    await waitForReasons(scope, new Map(names.map((name) => [name, "Available"])));
    // The standby has seen (and reconciled) every Referable too, only without writing.
    await waitFor(
      "the standby to reconcile every Referable",
      async () =>
        ((await sample(standby, "controller_runtime_reconcile_total", { result: "success" })) ?? 0) >=
        names.length,
      { timeoutMs: WAIT_MS, intervalMs: 100 },
    );
    expect(writes(await waitForIdle(standby))).toBe(0);
    expect(writes(await waitForIdle(leader))).toBeGreaterThanOrEqual(names.length);
    expect(await statusOf(standby)).toBe(0);
    expect(await statusOf(leader)).toBe(1);

    const killedAt = performance.now();
    expect(await leader.kill()).toEqual({ code: null, signal: "SIGKILL" });
    await waitForLeaderStatus(standby, 1);
    const tookOverMs = performance.now() - killedAt;
    expect(tookOverMs).toBeLessThan(TAKE_OVER_BOUND_MS);

    await setConfigMapValue(scope, "cm-1", "v1-after-failover");
    await waitForReason(
      admin,
      names[1]!,
      "Available",
      (v) => v.status.value === "v1-after-failover",
      WAIT_MS,
    );
    const after = await waitFor("the new leader to count its write", async () => {
      const text = await waitForIdle(standby);
      return writes(text) === 1 && text;
    });
    expect(writes(after)).toBe(1);
    expect(await standby.stop("SIGTERM")).toEqual({ code: 0, signal: null });
  }, 150_000);
});

describe("metrics and probes", () => {
  it("/metrics has controller-runtime, workqueue, client and referable series, with bounded labels", async () => {
    const scope = await newScope("metrics");
    const token = randomBytes(6).toString("hex");
    const values = [0, 1, 2].map((i) => `metric-value-${token}-${i}`);
    const available = values.map((_, i) => `${scope.shard}-ok-${i}`);
    const missing = [0, 1].map((i) => `${scope.shard}-gone-${i}`);
    const configMaps = values.map((_, i) => `cm-${token}-${i}`);
    await Promise.all(configMaps.map((cm, i) => createConfigMap(scope, cm, { v: values[i]! })));
    await Promise.all([
      ...available.map((name, i) => createReferable(scope, name, { configMap: configMaps[i]! })),
      ...missing.map((name, i) => createReferable(scope, name, { configMap: `absent-${token}-${i}` })),
    ]);

    const p = await startControllerProcess(controllerArgs(scope, "metrics"));
    await waitForReasons(
      scope,
      new Map([
        ...available.map((n) => [n, "Available"] as const),
        ...missing.map((n) => [n, "SourceNotFound"] as const),
      ]),
    );
    const changed = `metric-value-${token}-changed`;
    await setConfigMapValue(scope, configMaps[0]!, changed);
    await waitForReason(admin, available[0]!, "Available", (v) => v.status.value === changed, WAIT_MS);
    // The gauges are computed from the controller's cache, which catches up with the writes.
    const text = await waitFor("the metrics to settle", async () => {
      const t = await waitForIdle(p);
      const settled =
        metricValue(t, "referable_referables", { ready: "True", reason: "Available" }) === available.length &&
        (metricValue(t, "referable_propagation_seconds_count") ?? 0) > 0;
      return settled && t;
    });

    const reconciles = metricValue(text, "controller_runtime_reconcile_total", { controller: "referable" });
    const expectations: Array<[string, Record<string, string>, (v: number | undefined) => boolean]> = [
      ["controller_runtime_reconcile_total", { controller: "referable", result: "success" }, (v) => v! > 0],
      [
        "controller_runtime_reconcile_errors_total",
        { controller: "referable" },
        (v) => v! >= 0 && v! < reconciles!,
      ],
      [
        "controller_runtime_reconcile_time_seconds_count",
        { controller: "referable" },
        (v) => v === reconciles,
      ],
      ["controller_runtime_max_concurrent_reconciles", { controller: "referable" }, (v) => v === 16],
      ["workqueue_depth", QUEUE, (v) => v === 0],
      ["workqueue_adds_total", QUEUE, (v) => v! > 0],
      ["workqueue_retries_total", QUEUE, (v) => v! >= 0],
      ["workqueue_queue_duration_seconds_count", QUEUE, (v) => v! > 0],
      ["workqueue_work_duration_seconds_count", QUEUE, (v) => v! > 0],
      ["leader_election_master_status", { name: LEASE_ID }, (v) => v === 1],
      ["rest_client_requests_total", { code: "200", method: "GET" }, (v) => v! > 0],
      ["referable_referables", { ready: "True", reason: "Available" }, (v) => v === available.length],
      ["referable_referables", { ready: "False", reason: "SourceNotFound" }, (v) => v === missing.length],
      ["referable_referables", { ready: "Unknown", reason: "Pending" }, (v) => v === 0],
      ["referable_source_informers", {}, (v) => v! >= 1],
      ["referable_propagation_seconds_count", {}, (v) => v! > 0],
      [
        "referable_status_writes_total",
        { result: "success" },
        (v) => v! >= available.length + missing.length + 1,
      ],
      // Nobody but the controller wrote a status: nothing was put back.
      ["referable_status_repairs_total", {}, (v) => v === 0],
    ];
    const got = expectations.map(([name, labels, ok]) => {
      const value = metricValue(text, name, labels);
      return { name, labels, value, ok: value !== undefined && ok(value) };
    });
    expect(got.filter((g) => !g.ok)).toEqual([]);

    // No label value (nor anything else) names a Referable, a ConfigMap, the namespace or a value.
    for (const secret of [
      scope.shard,
      scope.ns,
      token,
      ...available,
      ...missing,
      ...configMaps,
      ...values,
      changed,
    ])
      expect({ secret, found: text.includes(secret) }).toEqual({ secret, found: false });
    expect(await p.stop("SIGTERM")).toEqual({ code: 0, signal: null });
  }, 120_000);

  it("/readyz is 200 once synced and /healthz 200 (leader election off, selector from the environment)", async () => {
    const scope = await newScope("probes");
    const p = await startControllerProcess(["--leader-elect=false"], {
      env: { REFERABLE_SELECTOR: `${SHARD_LABEL}=${scope.shard}` },
    });
    await waitFor("/readyz to answer 200", async () => (await p.ready()) === 200, {
      timeoutMs: WAIT_MS,
      intervalMs: 50,
    });
    expect(await p.healthy()).toBe(200);
    // Without leader election the process writes from the start and says it leads, under the
    // default Lease name since none was given.
    expect(await sample(p, "leader_election_master_status", { name: "referable-controller" })).toBe(1);
    await createConfigMap(scope, "cm", { v: "probe" });
    const name = `${scope.shard}-rf`;
    await createReferable(scope, name, { configMap: "cm" });
    await waitForReason(admin, name, "Available", (v) => v.status.value === "probe", WAIT_MS);
    expect(await p.stop("SIGTERM")).toEqual({ code: 0, signal: null });
  }, 90_000);
});

describe("logs", () => {
  it("are JSON lines with level and msg; status writes name the Referable; no value is ever logged", async () => {
    const scope = await newScope("logs");
    const token = randomBytes(6).toString("hex");
    const value = `distinctive-${token}`;
    const changed = `distinctive-changed-${token}`;
    const ok = `${scope.shard}-ok`;
    const gone = `${scope.shard}-gone`;
    await createConfigMap(scope, "cm", { v: value });
    await createReferable(scope, ok, { configMap: "cm" });
    await createReferable(scope, gone, { configMap: "absent" });

    const p = await startControllerProcess(controllerArgs(scope, "logs", "--log-level", "debug"));
    await waitForReasons(
      scope,
      new Map([
        [ok, "Available"],
        [gone, "SourceNotFound"],
      ]),
    );
    await setConfigMapValue(scope, "cm", changed);
    await waitForReason(admin, ok, "Available", (v) => v.status.value === changed, WAIT_MS);
    await p.waitForLog((l) => l.msg === "status written" && l.referable === ok && l.reason === "Available");
    const idle = await waitForIdle(p);
    expect(await p.stop("SIGTERM")).toEqual({ code: 0, signal: null });

    expect(p.unparsed()).toEqual([]);
    const logs = p.logs();
    const malformed = logs.filter((l) => typeof l.level !== "string" || typeof l.msg !== "string" || !l.msg);
    expect(malformed).toEqual([]);
    expect(logs.some((l) => l.msg === "stopped")).toBe(true);

    const statusLines = logs.filter((l: LogLine) => l.msg === "status written");
    expect(statusLines).toHaveLength(writes(idle)!);
    expect(statusLines.every((l) => l.referable === ok || l.referable === gone)).toBe(true);
    expect(new Set(statusLines.map((l) => l.referable))).toEqual(new Set([ok, gone]));

    const output = p.stdout() + p.stderr();
    expect({ value: output.includes(value), changed: output.includes(changed) }).toEqual({
      value: false,
      changed: false,
    });
  }, 90_000);

  // `npm start` on a terminal: script(1) gives the controller a pseudo-terminal as standard output.
  itIf(scriptMissing())(
    "on a terminal are readable lines (time, level, message, key=value), and Ctrl-C stops it gracefully",
    async () => {
      const scope = await newScope("tty");
      const token = randomBytes(6).toString("hex");
      const value = `tty-value-${token}`;
      const ok = `${scope.shard}-ok`;
      await createConfigMap(scope, "cm", { v: value });
      await createReferable(scope, ok, { configMap: "cm" });
      const command = [
        process.execPath,
        join(repoRoot, "src", "process", "main.ts"),
        `--kubeconfig=${process.env.REFERABLE_TEST_KUBECONFIG}`,
        "--metrics-bind-address=0",
        "--health-probe-bind-address=0",
        ...controllerArgs(scope, "tty"),
      ]
        .map((a) => `'${a.replace(/'/g, "'\\''")}'`)
        .join(" ");
      const child = spawn("script", ["-qefc", `exec ${command}`, "/dev/null"], {
        env: { PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: process.env.HOME ?? "/tmp", TERM: "dumb" },
        stdio: ["pipe", "pipe", "pipe"],
      });
      let output = "";
      child.stdout.setEncoding("utf8");
      child.stdout.on("data", (d: string) => (output += d));
      const exited = new Promise<number | null>((resolve) => child.once("close", (code) => resolve(code)));
      try {
        await waitFor("a status written line", () => output.includes(`status written  referable=${ok}`), {
          timeoutMs: WAIT_MS,
          intervalMs: 100,
        });
        child.stdin.write("\x03"); // Ctrl-C: the terminal sends SIGINT
        let timer: NodeJS.Timeout | undefined;
        const timeout = new Promise((r) => (timer = setTimeout(() => r("timed out"), WAIT_MS)));
        expect(await Promise.race([exited, timeout])).toBe(0);
        clearTimeout(timer);
      } finally {
        child.stdin.end();
        child.kill("SIGKILL");
      }
      // The terminal echoes the Ctrl-C as "^C" before the next line.
      const lines = output
        .split(/\r?\n/)
        .map((l) => l.replace(/^\^C/, ""))
        .filter((l) => l.trim());
      const readable = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z {2}(DEBUG|INFO |WARN |ERROR) {2}\S/;
      expect(lines.filter((l) => !readable.test(l))).toEqual([]);
      expect(lines.some((l) => /INFO {3}controller started {2}version=\S+ {2}leaderElect=true/.test(l))).toBe(
        true,
      );
      expect(lines.some((l) => l.includes("INFO   shutting down  why=SIGINT"))).toBe(true);
      expect(lines.some((l) => l.includes("stopped"))).toBe(true);
      expect(output.includes(value)).toBe(false);
    },
    90_000,
  );
});

/** Why the terminal test cannot run here: util-linux script(1) gives a process a pseudo-terminal. */
function scriptMissing(): string | undefined {
  try {
    execFileSync("script", ["--version"], { stdio: "ignore" });
    return undefined;
  } catch {
    return "script(1) from util-linux is not installed (it provides the pseudo-terminal)";
  }
}
