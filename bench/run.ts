/**
 * `npm run bench`: propagation latency, scale and memory of the controller, measured against the
 * API server's own floor on this machine. Starts the real control plane, runs the controller as
 * a separate process, prints a table and writes bench/results.json.
 *
 *   npm run bench                      # sizes 100, 1000, 10000; rates 50 and 200 updates/s
 *   npm run bench -- --quick           # CI smoke: size 100, rate 50, short phases
 *   npm run bench -- --sizes 1000 --rates 50 --seconds 20
 *   npm run bench -- --quick --scenarios reads   # only the library's cached vs consistent reads
 *   npm run bench -- --quick --scenarios export   # source write → exported ConfigMap key
 *   npm run bench -- --quick --scenarios field-export   # source write → a managed resource's field
 *
 * Numbers go in the table, never in assertions.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { copyFile, mkdir, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { cpus, totalmem } from "node:os";
import { join } from "node:path";
import { KubeConfig } from "@kubernetes/client-node";
import { numberFlag, parseOrExit } from "../src/process/cli.ts";
import { statusPatch } from "../src/referable/status.ts";
import { WRITE_POLICY_DEFAULTS } from "../src/outputs/write-policy.ts";
import type { ReferableStatus } from "../src/api/referable.ts";
import { KubeClient, type KubeObject } from "../src/kube/client.ts";
import {
  repoRoot,
  SCALE_FLAGS,
  startControlPlane,
  type ControlPlane,
  type PrivateControlPlane,
} from "../test/harness/control-plane.ts";
import { installTestCrd } from "../test/harness/kube.ts";
import { freePort } from "../test/harness/ports.ts";
import { memoryMap } from "./memory-map.ts";
import { ControllerLogs, countLogLines, formatLogCounts, type LogCount } from "./controller-logs.ts";
import { measureReads, printReads, type ReadsResult } from "./reads.ts";
import { measureTransforms, printTransforms, type TransformResult } from "./transform.ts";
import { deleteAll, pool, RetryingClient, type BenchClient } from "./retry.ts";
import { reopeningWatch, type ReopeningWatch } from "./watch.ts";
import { apiServerMetrics, apiServerProfile } from "./apiserver-diag.ts";
import {
  printHostileLoad,
  runHostileLoad,
  type HostileLoadPhase,
  type HostileLoadSizes,
  type HostileLoadTools,
} from "./hostile-load.ts";

// ---------- options ----------

const ALL_SCENARIOS = "sizes,hot,fanout,selectors,content,labels,idle,reads,export,field-export,hostile";
/** Scenarios run only when named: the scale scenario takes most of an hour at its default size, accounts minutes of rest. */
const KNOWN_SCENARIOS = `${ALL_SCENARIOS},scale,accounts`;
const flags = parseOrExit({
  usage: "npm run bench -- [options]",
  description:
    "Measures propagation latency, scale and memory of the controller against the real control plane; prints a table and writes bench/results.json. Each size option's default is for a full run; --quick lowers it.",
  groups: ["Run", "Scenario sizes", "Controller"],
  flags: {
    quick: { type: "boolean", group: "Run", help: "CI smoke: small sizes, short phases" },
    scenarios: {
      type: "string",
      group: "Run",
      valueName: "LIST",
      default: ALL_SCENARIOS,
      help: "comma-separated scenarios to run",
    },
    out: {
      type: "string",
      group: "Run",
      valueName: "FILE",
      default: "bench/results.json",
      help: "where results go",
    },
    profile: { type: "boolean", group: "Run", help: "write a CPU profile of the controller process" },
    "heap-snapshots": {
      type: "boolean",
      group: "Run",
      help: "measure the live heap (after a full GC) from a heap snapshot of the controller wherever its memory is measured (sizes up to about 30,000 Referables)",
    },
    sizes: {
      type: "string",
      group: "Scenario sizes",
      valueName: "LIST",
      default: "100,1000,10000 (quick: 100)",
      help: "Referables per size phase",
    },
    rates: {
      type: "string",
      group: "Scenario sizes",
      valueName: "LIST",
      default: "50,200 (quick: 50)",
      help: "source updates a second per phase",
    },
    seconds: {
      type: "string",
      group: "Scenario sizes",
      valueName: "N",
      default: "10 (quick: 3)",
      help: "length of each phase",
    },
    "fan-out": {
      type: "string",
      group: "Scenario sizes",
      valueName: "N",
      default: "1000 (quick: 100)",
      help: "Referables reading one source",
    },
    "selector-objects": {
      type: "string",
      group: "Scenario sizes",
      valueName: "N",
      default: "10000 (quick: 1000)",
      help: "objects a selector scenario's selectors match among",
    },
    "selector-refs": {
      type: "string",
      group: "Scenario sizes",
      valueName: "N",
      default: "1000 (quick: 100)",
      help: "Referables with selectors",
    },
    "content-refs": {
      type: "string",
      group: "Scenario sizes",
      valueName: "N",
      default: "1000 (quick: 100)",
      help: "Referables of the cluster-content scenario",
    },
    "content-objects": {
      type: "string",
      group: "Scenario sizes",
      valueName: "N",
      default: "400 (quick: 20)",
      help: "unreferenced ConfigMaps of about 1 MiB beside them",
    },
    "label-refs": {
      type: "string",
      group: "Scenario sizes",
      valueName: "N",
      default: "100 (quick: 20)",
      help: "Referables of the labels scenario",
    },
    "label-objects": {
      type: "string",
      group: "Scenario sizes",
      valueName: "N",
      default: "150 (quick: 30)",
      help: "ConfigMaps with the largest label sets the API server takes, selected by nothing",
    },
    "hot-periods": {
      type: "string",
      group: "Scenario sizes",
      valueName: "LIST",
      default: "200,50,20",
      help: "ms between rewrites of the hot source, one phase each",
    },
    "hot-updates": {
      type: "string",
      group: "Scenario sizes",
      valueName: "N",
      default: "200 (quick: 40)",
      help: "rewrites per hot phase",
    },
    "idle-seconds": {
      type: "string",
      group: "Scenario sizes",
      valueName: "N",
      default: "60 (quick: 10)",
      help: "how long the settled controller is watched doing nothing",
    },
    "idle-referables": {
      type: "string",
      group: "Scenario sizes",
      valueName: "N,...",
      default: "1",
      help: "Referables of the idle scenario, one run each (leader election on and off); issue 39's target is for 1",
    },
    "hostile-label-referables": {
      type: "string",
      group: "Scenario sizes",
      valueName: "N",
      default: "160 (quick: 40)",
      help: "hostile load attacks: Referables naming 96 label keys each",
    },
    "hostile-label-objects": {
      type: "string",
      group: "Scenario sizes",
      valueName: "N",
      default: "40 (quick: 10)",
      help: "hostile load attacks: a tenant's ConfigMaps carrying every one of those keys",
    },
    "hostile-transforms": {
      type: "string",
      group: "Scenario sizes",
      valueName: "N",
      default: "150 (quick: 30)",
      help: "hostile load attacks: Referables whose transforms run to the time limit",
    },
    "hostile-read-referables": {
      type: "string",
      group: "Scenario sizes",
      valueName: "N",
      default: "100 (quick: 20)",
      help: "hostile load attacks: Referables with 16 field targets each, 15 missing",
    },
    "export-refs": {
      type: "string",
      group: "Scenario sizes",
      valueName: "N",
      default: "100 (quick: 20)",
      help: "Referables exporting into ConfigMap keys",
    },
    "account-refs": {
      type: "string",
      group: "Scenario sizes",
      valueName: "N",
      default: "1000 (quick: 100)",
      help: "Referables of the accounts scenario (--scenarios accounts), each naming one of --accounts ServiceAccounts",
    },
    accounts: {
      type: "string",
      group: "Scenario sizes",
      valueName: "N",
      default: "10",
      help: "ServiceAccounts the accounts scenario's Referables share",
    },
    "account-rest-seconds": {
      type: "string",
      group: "Scenario sizes",
      valueName: "N",
      default: "150 (quick: 70)",
      help: "how long the accounts scenario counts SubjectAccessReviews at rest (over 60 s: answers expire after 60)",
    },
    referables: {
      type: "string",
      group: "Scenario sizes",
      valueName: "N",
      default: "100000 (quick: 1000)",
      help: "Referables of the scale scenario (--scenarios scale)",
    },
    shards: {
      type: "string",
      group: "Scenario sizes",
      valueName: "N",
      default: "4",
      help: "controller processes of the scale scenario's sharded phase",
    },
    buckets: {
      type: "string",
      group: "Scenario sizes",
      valueName: "N",
      default: "16",
      help: "buckets (--shards=N of each controller) of the scale scenario's sharded phase",
    },
    "scale-phases": {
      type: "string",
      group: "Scenario sizes",
      valueName: "LIST",
      default: "single,sharded,failover",
      help: "phases of the scale scenario: single (floor, one replica), sharded (floor, --shards processes), failover (kill -9 of one shard; needs sharded)",
    },
    "scale-heap-mib": {
      type: "string",
      group: "Controller",
      valueName: "MIB",
      default: "referables / 100, at least 256",
      help: "heap cap of the scale scenario's single replica",
    },
    "scale-shard-heap-mib": {
      type: "string",
      group: "Controller",
      valueName: "MIB",
      default: "--scale-heap-mib",
      help: "heap cap of each shard of the scale scenario (a cap, not a target: RSS is compared with the 256 MiB target either way)",
    },
    "controller-log-level": {
      type: "string",
      group: "Controller",
      valueName: "LEVEL",
      default: "warn",
      help: "--log-level of the controller processes (info: a timeline of each one's start in bench/logs/)",
    },
    "plane-cpus": {
      type: "string",
      group: "Machine",
      valueName: "LIST",
      default: "any",
      help: "CPUs (taskset's list, e.g. 0-1) of kube-apiserver and etcd: on a machine with cores to spare, the shards on others, as on a cluster's nodes",
    },
    "client-cpus": {
      type: "string",
      group: "Machine",
      valueName: "LIST",
      default: "any",
      help: "CPUs (taskset's list, e.g. 2-5) of the clients: the bench (the floor's writer) and every controller it starts",
    },
    "controller-node-options": {
      type: "string",
      group: "Controller",
      valueName: "OPTIONS",
      default: "deploy/'s NODE_OPTIONS",
      help: "NODE_OPTIONS of the controller process (give it with =, as it starts with --)",
    },
  },
});
function arg(name: string): string | undefined {
  const value = flags[name];
  return typeof value === "string" ? value : undefined;
}
/** A number flag, or exits naming the flag (a typo'd number must not run an hour-long benchmark). */
function num(name: string, fallback: number): number {
  return numberFlag(flags, name, fallback);
}
/** A comma-separated list of numbers, or exits naming the flag. */
function numbers(name: string, fallback: string): number[] {
  const list = (arg(name) ?? fallback).split(",").map(Number);
  if (list.some((n) => !Number.isFinite(n) || n <= 0)) {
    process.stderr.write(
      `--${name}: ${JSON.stringify(arg(name))} is not a comma-separated list of positive numbers\n`,
    );
    process.exit(2);
  }
  return list;
}
const quick = flags.quick === true;
const sizes = numbers("sizes", quick ? "100" : "100,1000,10000");
const rates = numbers("rates", quick ? "50" : "50,200");
const phaseSeconds = num("seconds", quick ? 3 : 10);
const fanOut = num("fan-out", quick ? 100 : 1000);
const selectorObjects = num("selector-objects", quick ? 1000 : 10000);
const selectorRefs = num("selector-refs", quick ? 100 : 1000);
/** The cluster-content scenario: Referables, and unreferenced ConfigMaps of about 1 MiB beside them. */
const contentRefs = num("content-refs", quick ? 100 : 1000);
const contentObjects = num("content-objects", quick ? 20 : 400);
/** The labels scenario: Referables, and ConfigMaps with the largest label sets the API server takes. */
const labelRefs = num("label-refs", quick ? 20 : 100);
const labelObjects = num("label-objects", quick ? 30 : 150);
/** The hot-source scenario: one source rewritten every this many ms, each period a phase. */
const hotPeriods = numbers("hot-periods", "200,50,20");
const hotUpdates = num("hot-updates", quick ? 40 : 200);
/** The idle scenario: how long the settled controller is watched doing nothing. */
const idleSeconds = num("idle-seconds", quick ? 10 : 60);
const idleReferables = numbers("idle-referables", "1");
const out = arg("out") ?? join(repoRoot, "bench", "results.json");
/** The export scenario: Referables, each exporting its value into a ConfigMap key of its own. */
const exportRefs = num("export-refs", quick ? 20 : 100);
/** The accounts scenario: Referables sharing ServiceAccounts, and how long reviews are counted at rest. */
const accountRefs = num("account-refs", quick ? 100 : 1000);
const accountCount = num("accounts", 10);
const accountRestSeconds = num("account-rest-seconds", quick ? 70 : 150);
const hostileLoadSizes: HostileLoadSizes = {
  rounds: quick ? 20 : 60,
  labelReferables: num("hostile-label-referables", quick ? 40 : 160),
  labelKeysEach: 96,
  labelObjects: num("hostile-label-objects", quick ? 10 : 40),
  transformReferables: num("hostile-transforms", quick ? 30 : 150),
  rewriteSeconds: 31,
  readReferables: num("hostile-read-referables", quick ? 20 : 100),
};
/** The scale scenario: Referables, shards (processes) and buckets (`--shards=N`). */
const scaleReferables = num("referables", quick ? 1000 : 100_000);
const scaleShards = num("shards", 4);
const scaleBuckets = num("buckets", 16);
const scaleHeapMiB = arg("scale-heap-mib") === undefined ? undefined : num("scale-heap-mib", 256);
const scaleShardHeapMiB =
  arg("scale-shard-heap-mib") === undefined ? undefined : num("scale-shard-heap-mib", 256);
const SCALE_PHASES = ["single", "sharded", "failover"] as const;
type ScalePhaseName = (typeof SCALE_PHASES)[number];
const scalePhases = new Set((arg("scale-phases") ?? SCALE_PHASES.join(",")).split(",").filter(Boolean));
for (const ph of scalePhases)
  if (!(SCALE_PHASES as readonly string[]).includes(ph)) {
    process.stderr.write(
      `--scale-phases: unknown phase ${JSON.stringify(ph)}; the phases are ${SCALE_PHASES.join(",")}\n`,
    );
    process.exit(2);
  }
if (scalePhases.has("failover") && !scalePhases.has("sharded")) {
  process.stderr.write("--scale-phases: failover kills one of the shards, so it needs sharded too\n");
  process.exit(2);
}
const scalePhase = (name: ScalePhaseName) => scalePhases.has(name);
/** Which scenarios run: sizes (with propagation), hot, fanout, selectors, content, labels, idle, reads, export, field-export, hostile (and scale and accounts, only when named). @default all but scale and accounts */
const scenarios = new Set((arg("scenarios") ?? ALL_SCENARIOS).split(","));
for (const s of scenarios) {
  if (!KNOWN_SCENARIOS.split(",").includes(s)) {
    process.stderr.write(
      `--scenarios: unknown scenario ${JSON.stringify(s)}; the scenarios are ${KNOWN_SCENARIOS}\n`,
    );
    process.exit(2);
  }
}
/** Scenarios that run the controller process (and so need its idle baseline). */
const controllerScenarios = [
  "sizes",
  "hot",
  "fanout",
  "selectors",
  "content",
  "labels",
  "idle",
  "export",
  "field-export",
  "accounts",
  "hostile",
  "scale",
].filter((s) => scenarios.has(s));
const profile = flags.profile === true;
/** Heap snapshots of the controller (they force a full GC): the live heap, not heap used. */
const heapSnapshots = flags["heap-snapshots"] === true;
const SNAPSHOT_DIR = join(repoRoot, "bench", "heap");
/**
 * NODE_OPTIONS of the controller process. The default is the one deploy/base/deployment.yaml
 * ships, so the numbers are those of the shipped configuration.
 */
const controllerLogLevel = arg("controller-log-level") ?? "warn";
const controllerNodeOptions =
  arg("controller-node-options") ?? "--max-old-space-size=256 --max-semi-space-size=4";
/** Where the control plane and the clients run (--plane-cpus, --client-cpus): any CPU unless given. */
const planeCpus = arg("plane-cpus");
const clientCpus = arg("client-cpus");

/**
 * Pins every thread `pid` has now to `cpus` (taskset's list); threads made later inherit the set
 * of the thread that makes them. A list taskset refuses fails the run before anything is measured.
 */
async function pinTo(pid: number, cpus: string): Promise<void> {
  await new Promise<void>((resolve, reject) => {
    const child = spawn("taskset", ["-a", "-p", "-c", cpus, String(pid)], {
      stdio: ["ignore", "ignore", "pipe"],
    });
    let err = "";
    child.stderr.on("data", (d: Buffer) => (err += d.toString()));
    child.on("error", reject);
    child.on("exit", (code) =>
      code === 0
        ? resolve()
        : reject(new Error(`taskset -c ${cpus} of ${pid} failed (${code}): ${err.trim()}`)),
    );
  });
}

/** The controller's NODE_OPTIONS with the heap cap `mib` in place of its own (the scale phases' caps). */
function withHeapCap(options: string, mib: number): string {
  const rest = options.split(/\s+/).filter((o) => o !== "" && !o.startsWith("--max-old-space-size="));
  return [`--max-old-space-size=${mib}`, ...rest].join(" ");
}
const log = (line: string) => process.stderr.write(`[bench] ${line}\n`);
const RUN = `r${Date.now().toString(36)}`;
/** Each controller's log file, under bench/logs/<RUN>/. */
const controllerLogs = new ControllerLogs(join(repoRoot, "bench"), RUN);
const NS = "bench";
const RF = "/apis/referable.dev/v1alpha1/referables";
const WIDGET_GROUP = "bench.referable.dev";

// ---------- small tools ----------

async function until<T>(
  what: string,
  probe: () => Promise<T | undefined> | T | undefined,
  timeoutMs: number,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
}

interface Stats {
  n: number;
  p50: number;
  p95: number;
  p99: number;
  max: number;
}

function stats(samples: number[]): Stats {
  const s = [...samples].sort((a, b) => a - b);
  return {
    n: s.length,
    p50: percentile(s, 50),
    p95: percentile(s, 95),
    p99: percentile(s, 99),
    max: s[s.length - 1] ?? NaN,
  };
}

const ms = (v: number) => (Number.isFinite(v) ? v.toFixed(1) : "-");
const mib = (bytes: number) => (bytes / 1024 / 1024).toFixed(1);

// ---------- the controller process ----------

interface Controller {
  proc: ChildProcess;
  metricsPort: number;
  startedAt: number;
  /** Its standard output (the JSON log lines) and standard error (controller-logs.ts). */
  logPath: string;
  stop(): Promise<void>;
}

/**
 * Compiles src/ once, so the controller runs as in production (`node dist/process/main.js`), not
 * through Node's type stripping, which costs memory and start-up time of its own.
 */
let compiled: Promise<string> | undefined;
function compiledMain(): Promise<string> {
  compiled ??= (async () => {
    // As in the image: dist/ beside package.json (src/api/version.ts reads ../../package.json).
    const root = join(repoRoot, "bench", ".dist");
    const dir = join(root, "dist");
    await mkdir(root, { recursive: true });
    await copyFile(join(repoRoot, "package.json"), join(root, "package.json"));
    const tsc = join(repoRoot, "node_modules", "typescript", "bin", "tsc");
    await new Promise<void>((resolve, reject) => {
      const child = spawn(
        process.execPath,
        [tsc, "-p", join(repoRoot, "tsconfig.build.json"), "--outDir", dir],
        { stdio: "inherit" },
      );
      child.on("exit", (code) => (code === 0 ? resolve() : reject(new Error(`tsc exited with ${code}`))));
    });
    return join(dir, "process", "main.js");
  })();
  return compiled;
}

/** Controller processes running now: a bench stopped by a signal ends them (no orphans polling a dead API server). */
const liveControllers = new Set<ChildProcess>();

async function startController(
  kubeconfig: string,
  selector: string,
  extraArgs: readonly string[] = ["--leader-elect=false"],
  nodeOptions = controllerNodeOptions,
  /** Until /readyz: the controller lists every Referable first (100,000 take minutes on a loaded machine). */
  readyTimeoutMs = 60_000,
): Promise<Controller> {
  const [metricsPort, probePort] = [await freePort(), await freePort()];
  const args = [
    ...(profile ? ["--cpu-prof", `--cpu-prof-dir=${join(repoRoot, "bench", "profiles")}`] : []),
    ...(heapSnapshots ? ["--heapsnapshot-signal=SIGUSR2", `--diagnostic-dir=${SNAPSHOT_DIR}`] : []),
    await compiledMain(),
    `--kubeconfig=${kubeconfig}`,
    ...extraArgs,
    `--referable-selector=${selector}`,
    `--log-level=${controllerLogLevel}`,
    `--metrics-bind-address=127.0.0.1:${metricsPort}`,
    `--health-probe-bind-address=127.0.0.1:${probePort}`,
  ];
  const startedAt = performance.now();
  // The log lines (standard output) and standard error into a file of its own, kept after the run.
  const logFile = controllerLogs.open();
  let proc: ChildProcess;
  try {
    // taskset execs node: the child's pid is the controller's.
    const [command, argv] = clientCpus
      ? ["taskset", ["-c", clientCpus, process.execPath, ...args]]
      : [process.execPath, args];
    proc = spawn(command, argv, {
      stdio: ["ignore", logFile.fd, logFile.fd],
      // MALLOC_ARENA_MAX as the image sets it (Dockerfile), unless the run sets its own.
      env: { MALLOC_ARENA_MAX: "1", ...process.env, NODE_OPTIONS: nodeOptions },
    });
  } finally {
    logFile.close();
  }
  liveControllers.add(proc);
  proc.once("exit", () => liveControllers.delete(proc));
  await until(
    "the controller's /readyz",
    async () => {
      if (proc.exitCode !== null || proc.signalCode !== null)
        throw new Error(`the controller exited (${proc.exitCode ?? proc.signalCode}) before it was ready`);
      return (await fetch(`http://127.0.0.1:${probePort}/readyz`).catch(() => undefined))?.status === 200
        ? true
        : undefined;
    },
    readyTimeoutMs,
  );
  return {
    proc,
    metricsPort,
    startedAt,
    logPath: logFile.path,
    stop: async () => {
      if (proc.exitCode !== null || proc.signalCode !== null) return; // exited, or was killed
      const exited = new Promise((r) => proc.once("exit", r));
      proc.kill("SIGTERM");
      await exited;
    },
  };
}

async function scrape(c: Controller): Promise<Map<string, number>> {
  const text = await (await fetch(`http://127.0.0.1:${c.metricsPort}/metrics`)).text();
  const values = new Map<string, number>();
  for (const line of text.split("\n")) {
    if (!line || line.startsWith("#")) continue;
    const i = line.lastIndexOf(" ");
    values.set(line.slice(0, i), Number(line.slice(i + 1)));
  }
  return values;
}

function sumOf(
  metrics: Map<string, number>,
  prefix: string,
  filter: (key: string) => boolean = () => true,
): number {
  let total = 0;
  for (const [key, value] of metrics) if (key.startsWith(prefix) && filter(key)) total += value;
  return total;
}

/** A counter summed over the replicas (series starting with `prefix`), per Referable of `n`. */
function perReferable(metrics: Map<string, number>[], prefix: string, n: number): number {
  return Number((metrics.reduce((total, m) => total + sumOf(m, prefix), 0) / n).toFixed(2));
}

/** Requests by verb from rest_client_request_duration_seconds_count{verb}. */
function requestsByVerb(metrics: Map<string, number>): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [key, value] of metrics) {
    const m = /^rest_client_request_duration_seconds_count\{verb="([a-z]+)"\}$/.exec(key);
    if (m) out[m[1]!] = value;
  }
  return out;
}

// ---------- watching Referables ----------

/** Ready: a Ready condition with a reason other than Pending. */
/** The Ready reason of the scale floor's statuses (not Ready: the cold start after it writes every one). */
const FLOOR_REASON = "BenchFloor";
const isReady = (reason: string | undefined) => !!reason && reason !== "Pending" && reason !== FLOOR_REASON;

/** A target the export benches follow: its values by name, and the listeners told of a change. */
interface FollowedTarget {
  values: Map<string, string | undefined>;
  listeners: Set<() => void>;
  name: string;
}

/**
 * One round of the export benches: writes the source, then waits (60 s at most) until both the
 * Referable's status.value and the target hold the value; each latency from the write's ack.
 */
async function timeStatusAndTarget(
  watch: ReferableWatch,
  referable: string,
  target: FollowedTarget,
  value: string,
  write: () => Promise<unknown>,
  round: string,
): Promise<{ status: number; target: number }> {
  let statusAt = 0;
  let targetAt = 0;
  const done = new Promise<void>((resolve) => {
    const check = () => {
      const now = performance.now();
      if (!statusAt && watch.latest.get(referable)?.value === value) statusAt = now;
      if (!targetAt && target.values.get(target.name) === value) targetAt = now;
      if (statusAt && targetAt) {
        off();
        target.listeners.delete(check);
        resolve();
      }
    };
    const off = watch.onChange(check);
    target.listeners.add(check);
  });
  await write();
  const acked = performance.now();
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([
    done,
    new Promise((_, reject) => {
      timer = setTimeout(() => reject(new Error(`${round}: not seen within 60 s`)), 60_000);
    }),
  ]).finally(() => clearTimeout(timer));
  // A watch event may be handled before the PATCH's own response: that is a latency of 0.
  return { status: Math.max(0, statusAt - acked), target: Math.max(0, targetAt - acked) };
}

/**
 * One watch on this run's Referables, remembering of each what the bench reads (its value,
 * Ready reason, uid, resourceVersion; the whole status only when asked: 100,000 of them are
 * the bench's heap) and how many are Ready, counted as events come (a poll of a count must not walk 100,000
 * entries every 50 ms).
 */
class ReferableWatch {
  readonly latest = new Map<
    string,
    { value: unknown; values: unknown; reason: string | undefined; rv: string; uid: string; status?: unknown }
  >();
  private ready = 0;
  private stream: ReopeningWatch | undefined;
  private listeners = new Set<(name: string) => void>();
  private readonly client: BenchClient;
  private readonly selector: string;
  private readonly keepStatus: boolean;
  constructor(client: BenchClient, selector: string, keepStatus = true) {
    this.client = client;
    this.selector = selector;
    this.keepStatus = keepStatus;
  }

  /** Lists page by page (a list of 100,000 in one response takes the API server past its deadline). */
  private async list(): Promise<string> {
    let token: string | undefined;
    for (;;) {
      const page = await this.client.request<{
        metadata: { resourceVersion: string; continue?: string };
        items: KubeObject[];
      }>("GET", RF, {
        query: { labelSelector: this.selector, limit: 5000, ...(token ? { continue: token } : {}) },
        timeoutMs: 120_000,
      });
      for (const item of page.items) this.record(item);
      token = page.metadata.continue || undefined;
      if (!token) return page.metadata.resourceVersion;
    }
  }

  async start(): Promise<void> {
    const resourceVersion = await this.list();
    this.stream = reopeningWatch(
      this.client,
      RF,
      {
        resourceVersion,
        query: { labelSelector: this.selector },
        relist: () => this.list(),
        onReopen: (why) => log(`Referable watch reopened: ${why}`),
      },
      (e) => {
        if (e.type === "ADDED" || e.type === "MODIFIED") this.record(e.object);
        if (e.type === "DELETED") this.forget(e.object.metadata!.name!);
      },
    );
  }

  private record(obj: KubeObject): void {
    const status = (obj.status ?? {}) as {
      value?: unknown;
      values?: unknown;
      conditions?: Array<{ type: string; reason: string }>;
    };
    const name = obj.metadata!.name!;
    const reason = status.conditions?.find((c) => c.type === "Ready")?.reason;
    const before = this.latest.get(name);
    this.ready += Number(isReady(reason)) - Number(isReady(before?.reason));
    this.latest.set(name, {
      value: status.value,
      values: status.values,
      reason,
      rv: obj.metadata!.resourceVersion!,
      uid: obj.metadata!.uid!,
      ...(this.keepStatus && { status }),
    });
    for (const l of this.listeners) l(name);
  }

  private forget(name: string): void {
    this.ready -= Number(isReady(this.latest.get(name)?.reason));
    this.latest.delete(name);
  }

  onChange(listener: (name: string) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  readyCount(): number {
    return this.ready;
  }

  close(): void {
    this.stream?.close();
  }
}

// ---------- fixtures ----------

interface Fixture {
  label: string;
  /** Values of the batch label, when the fixture was made with one. */
  batches?: string[];
  names: string[];
  sources: Array<{ kind: "ConfigMap" | "Widget"; name: string }>;
}

function sourcePath(kind: "ConfigMap" | "Widget", name = ""): string {
  const base =
    kind === "ConfigMap"
      ? `/api/v1/namespaces/${NS}/configmaps`
      : `/apis/${WIDGET_GROUP}/v1/namespaces/${NS}/widgets`;
  return name ? `${base}/${name}` : base;
}

async function createSource(
  client: BenchClient,
  kind: "ConfigMap" | "Widget",
  name: string,
  value: string,
  labels: Record<string, string>,
) {
  const body =
    kind === "ConfigMap"
      ? { apiVersion: "v1", kind, metadata: { name, labels }, data: { value } }
      : { apiVersion: `${WIDGET_GROUP}/v1`, kind, metadata: { name, labels }, spec: { value } };
  await client.request("POST", sourcePath(kind), { body, timeoutMs: 120_000 });
}

async function setSource(
  client: BenchClient,
  kind: "ConfigMap" | "Widget",
  name: string,
  value: string,
): Promise<void> {
  const body = kind === "ConfigMap" ? { data: { value } } : { spec: { value } };
  await client.request("PATCH", sourcePath(kind, name), {
    body,
    contentType: "application/merge-patch+json",
    timeoutMs: 120_000,
  });
}

async function createReferable(
  client: BenchClient,
  name: string,
  labels: Record<string, string>,
  source: Record<string, unknown>,
  extra: Record<string, unknown> = {},
) {
  await client.request("POST", RF, {
    body: {
      apiVersion: "referable.dev/v1alpha1",
      kind: "Referable",
      metadata: { name, labels },
      spec: { source, ...extra },
    },
    timeoutMs: 120_000,
  });
}

/** Objects of a fixture labelled alike for one deletecollection each (well inside the API server's 60 s). */
const BATCH = 2000;
const BATCH_LABEL = "bench-batch";

/**
 * Deletes a fixture's Referables and sources: by batch when it was made with batch labels, then
 * page by page whatever is left, every request retried (bench/retry.ts). A deletecollection of
 * 30,000 at once got the API server's 504 and ended a run before it printed anything.
 */
async function deleteFixtures(
  client: BenchClient,
  label: string,
  batches?: readonly string[],
): Promise<void> {
  const t0 = performance.now();
  const left = await deleteAll(
    client,
    [RF, sourcePath("ConfigMap"), sourcePath("Widget")],
    `bench-set=${label}`,
    { concurrency: 64, ...(batches && { batchLabel: { key: BATCH_LABEL, values: batches } }) },
  );
  const seconds = (performance.now() - t0) / 1000;
  if (seconds > 10) log(`deleted ${label} in ${seconds.toFixed(0)} s (${left} one by one)`);
}

/**
 * N Referables, each over a source of its own: half ConfigMaps, half Widgets (a CRD kind). With
 * `batched`, every object also carries a batch label ({@link BATCH} objects each), so the fixture
 * is deleted in batches (the scale scenario; the size phases keep the labels they always had, so
 * their heap per Referable compares with earlier runs).
 */
async function makeNamedFixture(
  client: BenchClient,
  n: number,
  label = `${RUN}-n${n}`,
  batched = false,
  /** Told after each object created (sources, then Referables): the scale scenario's progress. */
  onCreated?: (created: number, total: number) => void,
): Promise<Fixture> {
  let created = 0;
  const done = () => onCreated?.(++created, 2 * n);
  const labelsOf = (i: number): Record<string, string> =>
    batched ? { "bench-set": label, [BATCH_LABEL]: `b${Math.floor(i / BATCH)}` } : { "bench-set": label };
  const sources = Array.from({ length: n }, (_, i) => ({
    kind: (i % 2 ? "Widget" : "ConfigMap") as "ConfigMap" | "Widget",
    name: `${label}-s${i}`,
  }));
  const indexes = sources.map((_, i) => i);
  await pool(indexes, 64, async (i) => {
    await createSource(client, sources[i]!.kind, sources[i]!.name, "v0", labelsOf(i));
    done();
  });
  const names = sources.map((_, i) => `${label}-rf${i}`);
  await pool(indexes, 64, async (i) => {
    const name = names[i]!;
    const labels = labelsOf(i);
    const s = sources[i]!;
    await createReferable(client, name, labels, {
      apiVersion: s.kind === "ConfigMap" ? "v1" : `${WIDGET_GROUP}/v1`,
      kind: s.kind,
      namespace: NS,
      name: s.name,
      fieldPath: s.kind === "ConfigMap" ? "data.value" : "spec.value",
    });
    done();
  });
  const batches = batched ? Array.from({ length: Math.ceil(n / BATCH) }, (_, b) => `b${b}`) : undefined;
  return { label, names, sources, ...(batches && { batches }) };
}

// ---------- measurements ----------

interface Floor {
  watchDelivery: Stats;
  statusPatch: Stats;
  p50: number;
  p99: number;
}

/** The floor: write ack → a plain watch sees it, plus one status patch round trip. */
async function measureFloor(client: BenchClient, samples: number): Promise<Floor> {
  const labels = { "bench-set": `${RUN}-floor` };
  await createSource(client, "ConfigMap", `${RUN}-floor`, "v0", labels);
  await createReferable(client, `${RUN}-floor`, labels, {
    apiVersion: "v1",
    kind: "ConfigMap",
    namespace: NS,
    name: `${RUN}-floor`,
    fieldPath: "data.value",
  });
  const list = await client.request<{ metadata: { resourceVersion: string } }>(
    "GET",
    sourcePath("ConfigMap"),
    { query: { limit: 1 } },
  );
  const seen = new Map<string, number>();
  let waiter: ((v: string) => void) | undefined;
  const stream = reopeningWatch(
    client,
    sourcePath("ConfigMap"),
    {
      resourceVersion: list.metadata.resourceVersion,
      query: { fieldSelector: `metadata.name=${RUN}-floor` },
      onReopen: (why) => log(`floor watch reopened: ${why}`),
    },
    (e) => {
      const v = (e.object.data as { value?: string } | undefined)?.value;
      if (v) {
        seen.set(v, performance.now());
        waiter?.(v);
      }
    },
  );
  const delivery: number[] = [];
  const patch: number[] = [];
  try {
    for (let i = 1; i <= samples; i++) {
      const value = `f${i}`;
      const arrived = new Promise<void>((resolve) => {
        waiter = (v) => v === value && resolve();
      });
      await setSource(client, "ConfigMap", `${RUN}-floor`, value);
      const acked = performance.now();
      await arrived;
      delivery.push(Math.max(0, seen.get(value)! - acked));
      const t0 = performance.now();
      await client.request("PATCH", `${RF}/${RUN}-floor/status`, {
        body: [{ op: "add", path: "/status", value: { value, observedGeneration: 1 } }],
        contentType: "application/json-patch+json",
      });
      patch.push(performance.now() - t0);
    }
  } finally {
    stream.close();
  }
  const w = stats(delivery);
  const p = stats(patch);
  return { watchDelivery: w, statusPatch: p, p50: w.p50 + p.p50, p99: w.p99 + p.p99 };
}

/** Quantile estimate from the delta of a Prometheus histogram's buckets (the bucket's upper bound, ms). */
function histogramQuantile(
  before: Map<string, number>,
  after: Map<string, number>,
  name: string,
  q: number,
  labels = "",
): number {
  const buckets: Array<[number, number]> = [];
  for (const [key, value] of after) {
    // prom-client writes `le` first: name_bucket{le="0.1",verb="patch"}
    const m = new RegExp(`^${name}_bucket\\{le="([^"]+)"${labels ? `,${labels}` : ""}\\}$`).exec(key);
    if (m) buckets.push([m[1] === "+Inf" ? Infinity : Number(m[1]), value - (before.get(key) ?? 0)]);
  }
  buckets.sort((a, b) => a[0] - b[0]);
  const total = buckets[buckets.length - 1]?.[1] ?? 0;
  if (!total) return NaN;
  return (buckets.find(([, count]) => count >= q * total)?.[0] ?? Infinity) * 1000;
}

interface Propagation {
  /** Inside the controller: its subscription's push → status written (histogram bucket bounds, ms). */
  controllerP50: number;
  controllerP99: number;
  /** Largest work-queue depth sampled during the phase. */
  maxQueueDepth: number;
  /** The controller's status patch round trips in the phase (bucket bounds, ms). */
  patchP50: number;
  patchP99: number;
  rate: number;
  updates: number;
  seen: number;
  latency: Stats;
  statusWrites: number;
  requests: Record<string, number>;
}

/** Updates random sources at `rate`/s for `seconds`; latency is write ack → Referable watch sees the value. */
async function measurePropagation(
  client: BenchClient,
  c: Controller,
  fx: Fixture,
  watch: ReferableWatch,
  rate: number,
  seconds: number,
): Promise<Propagation> {
  // An update is measured from its write's acknowledgement to the Referable watch showing the
  // value; the watch can win the race against reading the response, which counts as 0 ms.
  const pending = new Map<string, { value: string; ackedAt?: number; seenAt?: number }>();
  const latencies: number[] = [];
  const settle = (name: string) => {
    const p = pending.get(name);
    if (p?.ackedAt === undefined || p.seenAt === undefined) return;
    latencies.push(Math.max(0, p.seenAt - p.ackedAt));
    pending.delete(name);
  };
  const off = watch.onChange((name) => {
    const p = pending.get(name);
    if (p && p.seenAt === undefined && watch.latest.get(name)?.value === p.value) {
      p.seenAt = performance.now();
      settle(name);
    }
  });
  const before = await scrape(c);
  let maxQueueDepth = 0;
  const sampler = setInterval(() => {
    void scrape(c).then(
      (m) =>
        (maxQueueDepth = Math.max(
          maxQueueDepth,
          m.get('workqueue_depth{name="referable",controller="referable"}') ?? 0,
        )),
      () => undefined,
    );
  }, 250);
  const total = Math.round(rate * seconds);
  const interval = 1000 / rate;
  const start = performance.now();
  const writes: Promise<void>[] = [];
  let seq = 0;
  let failedWrites = 0;
  for (let i = 0; i < total; i++) {
    const due = start + i * interval;
    const wait = due - performance.now();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    // A source not already in flight, so each measured update is unambiguous.
    let idx = Math.floor(Math.random() * fx.names.length);
    for (let tries = 0; pending.has(fx.names[idx]!) && tries < 20; tries++)
      idx = Math.floor(Math.random() * fx.names.length);
    const name = fx.names[idx]!;
    if (pending.has(name)) continue;
    const value = `u${++seq}-${RUN}`;
    const s = fx.sources[idx]!;
    const entry: { value: string; ackedAt?: number; seenAt?: number } = { value };
    pending.set(name, entry);
    writes.push(
      setSource(client, s.kind, s.name, value).then(
        () => {
          entry.ackedAt = performance.now();
          settle(name);
        },
        // Out of retries: reported, and the update left out of the figures (never unhandled).
        (err: unknown) => {
          failedWrites++;
          pending.delete(name);
          log(`an update of ${s.name} failed: ${(err as Error).message.slice(0, 200)}`);
        },
      ),
    );
  }
  await Promise.all(writes);
  if (failedWrites) log(`${failedWrites} of ${seq} updates failed and are not counted`);
  await until("the last updates to propagate", () => (pending.size === 0 ? true : undefined), 30_000).catch(
    () => log(`${pending.size} updates never propagated`),
  );
  off();
  clearInterval(sampler);
  const after = await scrape(c);
  const req = requestsByVerb(after);
  const reqBefore = requestsByVerb(before);
  const requests: Record<string, number> = {};
  for (const verb of Object.keys(req)) requests[verb] = (req[verb] ?? 0) - (reqBefore[verb] ?? 0);
  const writesOf = (m: Map<string, number>) => sumOf(m, 'referable_status_writes_total{result="success"}');
  return {
    rate,
    updates: seq,
    seen: latencies.length,
    latency: stats(latencies),
    statusWrites: writesOf(after) - writesOf(before),
    requests,
    controllerP50: histogramQuantile(before, after, "referable_propagation_seconds", 0.5),
    controllerP99: histogramQuantile(before, after, "referable_propagation_seconds", 0.99),
    maxQueueDepth,
    patchP50: histogramQuantile(before, after, "rest_client_request_duration_seconds", 0.5, 'verb="patch"'),
    patchP99: histogramQuantile(before, after, "rest_client_request_duration_seconds", 0.99, 'verb="patch"'),
  };
}

interface Cost {
  rssMiB: number;
  heapMiB: number;
  /** V8's committed heap, and memory held outside it (buffers), to tell where RSS goes. */
  heapTotalMiB: number;
  externalMiB: number;
  watches: number;
  informers: number;
  /** CPU (user + system) the process used since it started, from /proc: robust to load from others. */
  cpuSeconds: number;
  /** With --heap-snapshots: the heap reachable after a full GC (the snapshot's objects), MiB. */
  liveHeapMiB?: number;
  /** V8's heap spaces, used / committed MiB each (`v8.getHeapSpaceStatistics()` as prom-client reads it). */
  heapSpacesMiB: Record<string, { used: number; committed: number }>;
}

/** `used / committed` MiB of each V8 heap space, from prom-client's nodejs_heap_space_size_* series. */
function heapSpaces(m: Map<string, number>): Record<string, { used: number; committed: number }> {
  const out: Record<string, { used: number; committed: number }> = {};
  for (const [key, value] of m) {
    const found = /^nodejs_heap_space_size_(used|total)_bytes\{space="([a-z_]+)"\}$/.exec(key);
    if (!found) continue;
    const space = (out[found[2]!] ??= { used: 0, committed: 0 });
    space[found[1] === "used" ? "used" : "committed"] = Number(mib(value));
  }
  return out;
}

/**
 * The live heap of `c`: it writes a heap snapshot on SIGUSR2 (which runs a full GC first); the
 * sum of its objects' sizes is what is reachable. The file is deleted once read.
 */
async function liveHeapMiB(c: Controller): Promise<number> {
  await mkdir(SNAPSHOT_DIR, { recursive: true });
  const before = new Set(await readdir(SNAPSHOT_DIR));
  c.proc.kill("SIGUSR2");
  const file = await until(
    "the controller's heap snapshot",
    async () => {
      const fresh = (await readdir(SNAPSHOT_DIR)).find((f) => !before.has(f) && f.endsWith(".heapsnapshot"));
      if (!fresh) return undefined;
      // Written in one go when complete: it parses once the process has closed it.
      try {
        return { name: fresh, snapshot: JSON.parse(await readFile(join(SNAPSHOT_DIR, fresh), "utf8")) };
      } catch {
        return undefined;
      }
    },
    300_000,
  );
  await rm(join(SNAPSHOT_DIR, file.name), { force: true });
  const { snapshot, nodes } = file.snapshot as {
    snapshot: { meta: { node_fields: string[] } };
    nodes: number[];
  };
  const fields = snapshot.meta.node_fields;
  const size = fields.indexOf("self_size");
  let total = 0;
  for (let i = size; i < nodes.length; i += fields.length) total += nodes[i]!;
  return Number(mib(total));
}

async function cost(c: Controller): Promise<Cost> {
  // Let a GC settle the heap before reading it.
  await new Promise((r) => setTimeout(r, 1000));
  const m = await scrape(c);
  return {
    rssMiB: Number(mib(m.get("process_resident_memory_bytes") ?? NaN)),
    heapMiB: Number(mib(m.get("nodejs_heap_size_used_bytes") ?? NaN)),
    heapTotalMiB: Number(mib(m.get("nodejs_heap_size_total_bytes") ?? NaN)),
    externalMiB: Number(mib(m.get("nodejs_external_memory_bytes") ?? NaN)),
    heapSpacesMiB: heapSpaces(m),
    watches: m.get("referable_watches_open") ?? NaN,
    informers: m.get("referable_source_informers") ?? NaN,
    cpuSeconds: await cpuSeconds(c.proc.pid!).catch(() => NaN),
    ...(heapSnapshots && { liveHeapMiB: await liveHeapMiB(c) }),
  };
}

// ---------- scenarios ----------

interface SizeResult {
  n: number;
  setupSeconds: number;
  coldStartSeconds: number;
  cost: Cost;
  bytesPerReferable: number;
  /** With --heap-snapshots: the live heap over the idle controller's, per Referable. */
  liveBytesPerReferable?: number;
  propagation: Propagation[];
  restart: { coldStartSeconds: number; statusWrites: number; reconciles: number };
}

async function runSize(
  client: BenchClient,
  plane: ControlPlane,
  n: number,
  baselineHeapMiB: number,
  baselineLiveMiB?: number,
): Promise<SizeResult> {
  log(`size ${n}: creating ${n} sources and ${n} Referables`);
  const t0 = performance.now();
  const fx = await makeNamedFixture(client, n);
  const setupSeconds = (performance.now() - t0) / 1000;
  const selector = `bench-set=${fx.label}`;
  const watch = new ReferableWatch(client, selector);
  await watch.start();

  log(`size ${n}: cold start`);
  let c = await startController(plane.kubeconfigPath, selector);
  await until(`all ${n} Referables Ready`, () => (watch.readyCount() >= n ? true : undefined), 600_000);
  const coldStartSeconds = (performance.now() - c.startedAt) / 1000;
  const settled = await cost(c);
  const coldMetrics = await scrape(c);
  log(
    `size ${n}: cold start ${coldStartSeconds.toFixed(1)} s, CPU ${settled.cpuSeconds} s, ${sumOf(coldMetrics, 'referable_status_writes_total{result="success"}')} status writes, requests ${JSON.stringify(requestsByVerb(coldMetrics))}`,
  );

  const propagation: Propagation[] = [];
  for (const rate of rates) {
    log(`size ${n}: ${rate} updates/s for ${phaseSeconds} s`);
    propagation.push(await measurePropagation(client, c, fx, watch, rate, phaseSeconds));
  }

  log(`size ${n}: restart with nothing changed`);
  const rvs = new Map([...watch.latest].map(([k, v]) => [k, v.rv]));
  await c.stop();
  c = await startController(plane.kubeconfigPath, selector);
  const reconciled = await until(
    "every Referable reconciled after the restart",
    async () => {
      const m = await scrape(c);
      const done = m.get('controller_runtime_reconcile_total{controller="referable",result="success"}') ?? 0;
      return done >= n ? m : undefined;
    },
    600_000,
  );
  const restartSeconds = (performance.now() - c.startedAt) / 1000;
  const restartWrites = sumOf(reconciled, 'referable_status_writes_total{result="success"}');
  let changed = 0;
  for (const [k, v] of watch.latest) if (rvs.get(k) !== v.rv) changed++;
  if (changed) log(`size ${n}: ${changed} Referables changed resourceVersion across the restart`);
  await c.stop();
  watch.close();
  await deleteFixtures(client, fx.label);
  return {
    n,
    setupSeconds,
    coldStartSeconds,
    cost: settled,
    bytesPerReferable: Math.round(((settled.heapMiB - baselineHeapMiB) * 1024 * 1024) / n),
    ...(settled.liveHeapMiB !== undefined &&
      baselineLiveMiB !== undefined && {
        liveBytesPerReferable: Math.round(((settled.liveHeapMiB - baselineLiveMiB) * 1024 * 1024) / n),
      }),
    propagation,
    restart: {
      coldStartSeconds: restartSeconds,
      statusWrites: restartWrites,
      reconciles:
        reconciled.get('controller_runtime_reconcile_total{controller="referable",result="success"}') ?? 0,
    },
  };
}

interface FanOutResult {
  n: number;
  /** Source write ack → every Referable shows the value, per round. */
  samples: Stats;
  /**
   * The floor: the same n status writes (the controller's JSON patch, with its uid and
   * resourceVersion preconditions) sent straight from here, `concurrency` at a time.
   */
  writeFloor: Array<{ concurrency: number; ms: number }>;
}

async function runFanOut(client: BenchClient, plane: ControlPlane, n: number): Promise<FanOutResult> {
  log(`fan-out: one source read by ${n} Referables`);
  const label = `${RUN}-fan`;
  const labels = { "bench-set": label };
  await createSource(client, "ConfigMap", label, "v0", labels);
  const names = Array.from({ length: n }, (_, i) => `${label}-rf${i}`);
  await pool(names, 64, (name) =>
    createReferable(client, name, labels, {
      apiVersion: "v1",
      kind: "ConfigMap",
      namespace: NS,
      name: label,
      fieldPath: "data.value",
    }),
  );
  const watch = new ReferableWatch(client, `bench-set=${label}`);
  await watch.start();
  const c = await startController(plane.kubeconfigPath, `bench-set=${label}`);
  await until("fan-out Referables Ready", () => (watch.readyCount() >= n ? true : undefined), 300_000);
  const samples: number[] = [];
  for (let round = 1; round <= (quick ? 3 : 5); round++) {
    const value = `fan-${round}`;
    const remaining = new Set(names);
    const done = new Promise<void>((resolve) => {
      const off = watch.onChange((name) => {
        if (watch.latest.get(name)?.value === value) remaining.delete(name);
        if (remaining.size === 0) {
          off();
          resolve();
        }
      });
    });
    await setSource(client, "ConfigMap", label, value);
    const acked = performance.now();
    await done;
    samples.push(performance.now() - acked);
  }
  await c.stop();

  // The floor: how fast this API server takes the same n status writes, the controller's own
  // patch with its preconditions, with nothing else to do (no watch to follow, no value to read).
  const writeFloor: FanOutResult["writeFloor"] = [];
  let round = 0;
  for (const concurrency of [8, 16, 32]) {
    round++;
    const t0 = performance.now();
    await pool(names, concurrency, async (name) => {
      const seen = watch.latest.get(name)!;
      await client.request("PATCH", `${RF}/${name}/status`, {
        body: statusPatch(
          seen.uid,
          { ...(seen.status as ReferableStatus), value: `floor-${round}` },
          seen.rv,
        ),
        contentType: "application/json-patch+json",
        timeoutMs: 120_000,
      });
    });
    writeFloor.push({ concurrency, ms: performance.now() - t0 });
    // Let the watch catch up, so the next round's preconditions hold.
    await until(
      "the floor's writes to show",
      () => (names.every((name) => watch.latest.get(name)?.value === `floor-${round}`) ? true : undefined),
      60_000,
    );
  }
  watch.close();
  await deleteFixtures(client, label);
  return { n, samples: stats(samples), writeFloor };
}

interface HotResult {
  periodMs: number;
  updates: number;
  /** Values that status.value showed (each value is distinct; one skipped was coalesced). */
  shown: number;
  /** Per update: its write's ack → status.value shows it or a later value. */
  latency: Stats;
  statusWrites: number;
}

/**
 * One source rewritten every `periodMs`, one write after the other (each waits for the previous
 * one's ack, so the API server applies them in order), read by one Referable. Measures the share
 * of values that status.value shows and how long until it shows each value or a later one.
 */
async function runHotSource(client: BenchClient, plane: ControlPlane): Promise<HotResult[]> {
  const label = `${RUN}-hot`;
  const labels = { "bench-set": label };
  await createSource(client, "ConfigMap", label, "v0", labels);
  await createReferable(client, label, labels, {
    apiVersion: "v1",
    kind: "ConfigMap",
    namespace: NS,
    name: label,
    fieldPath: "data.value",
  });
  const watch = new ReferableWatch(client, `bench-set=${label}`);
  await watch.start();
  const c = await startController(plane.kubeconfigPath, `bench-set=${label}`);
  await until("the hot Referable Ready", () => (watch.readyCount() >= 1 ? true : undefined), 60_000);
  const results: HotResult[] = [];
  for (const periodMs of hotPeriods) {
    log(`hot source: one write every ${periodMs} ms, ${hotUpdates} writes`);
    const prefix = `hot${periodMs}-`;
    const ackedAt: number[] = [];
    const seenAt: number[] = [];
    const shown = new Set<number>();
    let latestSeen = -1;
    const off = watch.onChange(() => {
      const value = watch.latest.get(label)?.value;
      if (typeof value !== "string" || !value.startsWith(prefix)) return;
      const j = Number(value.slice(prefix.length));
      shown.add(j);
      const now = performance.now();
      for (let k = latestSeen + 1; k <= j; k++) seenAt[k] = now;
      latestSeen = Math.max(latestSeen, j);
    });
    const before = await scrape(c);
    const start = performance.now();
    for (let k = 0; k < hotUpdates; k++) {
      const wait = start + k * periodMs - performance.now();
      if (wait > 0) await new Promise((r) => setTimeout(r, wait));
      await setSource(client, "ConfigMap", label, `${prefix}${k}`);
      ackedAt[k] = performance.now();
    }
    await until(
      "the last hot value to show",
      () => (latestSeen === hotUpdates - 1 ? true : undefined),
      30_000,
    ).catch(() => log(`hot source: the last value never showed (latest ${latestSeen})`));
    off();
    const after = await scrape(c);
    const writesOf = (m: Map<string, number>) => sumOf(m, 'referable_status_writes_total{result="success"}');
    const latencies: number[] = [];
    for (let k = 0; k < hotUpdates; k++)
      if (seenAt[k] !== undefined) latencies.push(Math.max(0, seenAt[k]! - ackedAt[k]!));
    results.push({
      periodMs,
      updates: hotUpdates,
      shown: shown.size,
      latency: stats(latencies),
      statusWrites: writesOf(after) - writesOf(before),
    });
  }
  await c.stop();
  watch.close();
  await deleteFixtures(client, label);
  return results;
}

interface IdleResult {
  referables: number;
  seconds: number;
  /** CPU (user + system) the controller used while nothing changed, per minute. */
  cpuSecondsPerMinute: number;
  rssMiB: number;
  leaderElection: boolean;
}

/** The process's user + system CPU seconds, from /proc (Linux). */
async function cpuSeconds(pid: number): Promise<number> {
  const stat = await readFile(`/proc/${pid}/stat`, "utf8");
  // Fields after the command name (which may hold spaces): utime is the 14th field, stime the 15th.
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return (Number(fields[11]) + Number(fields[12])) / 100; // USER_HZ is 100 on Linux
}

/** The control plane's (when the bench started it) and the bench's own CPU seconds so far. */
async function planeCpuNow(plane: ControlPlane): Promise<PlaneCpu> {
  const own = plane.owned ? (plane as PrivateControlPlane) : undefined;
  const of = async (pid: number | undefined) =>
    pid === undefined ? NaN : await cpuSeconds(pid).catch(() => NaN);
  const usage = process.cpuUsage();
  return {
    apiServer: await of(own?.apiServerPid),
    etcd: await of(own?.etcdPid),
    bench: (usage.user + usage.system) / 1e6,
  };
}

function cpuSince(before: PlaneCpu, after: PlaneCpu): PlaneCpu {
  const d = (a: number, b: number) => Number((b - a).toFixed(1));
  return {
    apiServer: d(before.apiServer, after.apiServer),
    etcd: d(before.etcd, after.etcd),
    bench: d(before.bench, after.bench),
  };
}

async function rssMiBOf(pid: number): Promise<number> {
  const status = await readFile(`/proc/${pid}/status`, "utf8");
  const kib = Number(/VmRSS:\s+(\d+)/.exec(status)?.[1]);
  return Number((kib / 1024).toFixed(1));
}

/**
 * The controller at rest, as the Deployment runs it (leader election on): a few Referables,
 * settled, then `idleSeconds` in which nothing changes and nobody scrapes it. CPU and RSS are
 * read from /proc, so the measurement itself does not wake the process.
 */
async function runIdle(
  client: BenchClient,
  plane: ControlPlane,
  referables: number,
  leaderElection: boolean,
): Promise<IdleResult> {
  log(
    `idle: ${referables} Referables, leader election ${leaderElection ? "on" : "off"}, ${idleSeconds} s of nothing`,
  );
  const label = `${RUN}-idle${referables}-${leaderElection ? "le" : "nole"}`;
  const fx = await makeNamedFixture(client, referables, label);
  const watch = new ReferableWatch(client, `bench-set=${fx.label}`);
  await watch.start();
  const c = await startController(
    plane.kubeconfigPath,
    `bench-set=${fx.label}`,
    leaderElection
      ? ["--leader-elect=true", `--leader-election-namespace=${NS}`, `--leader-election-id=${label}`]
      : ["--leader-elect=false"],
  );
  await until(
    "the idle Referables Ready",
    () => (watch.readyCount() >= referables ? true : undefined),
    60_000,
  );
  watch.close();
  // Let start-up settle: the first GCs, the first leader renewals.
  await new Promise((r) => setTimeout(r, 5000));
  const pid = c.proc.pid!;
  const cpu0 = await cpuSeconds(pid);
  await new Promise((r) => setTimeout(r, idleSeconds * 1000));
  const cpu1 = await cpuSeconds(pid);
  const rssMiB = await rssMiBOf(pid);
  await c.stop();
  await deleteFixtures(client, fx.label);
  return {
    referables,
    seconds: idleSeconds,
    cpuSecondsPerMinute: Number((((cpu1 - cpu0) * 60) / idleSeconds).toFixed(3)),
    rssMiB,
    leaderElection,
  };
}

interface ExportResult {
  refs: number;
  /** Source write acknowledged → the Referable's status.value shows the value (its watch). */
  status: Stats;
  /** Source write acknowledged → the exported ConfigMap key holds the value (a watch of ConfigMaps). */
  exported: Stats;
}

/**
 * spec.export: `n` Referables over ConfigMaps of their own, each exporting into a ConfigMap of its
 * own in another namespace. One source written at a time; for each write, the time until the
 * status shows the value and until the exported key does, both seen through watches as a
 * consumer sees them.
 */
async function runExport(client: BenchClient, plane: ControlPlane, n: number): Promise<ExportResult> {
  log(`export: ${n} Referables, each exporting its value into a ConfigMap key`);
  const label = `${RUN}-exp`;
  const labels = { "bench-set": label };
  const exportNs = label;
  await client.request("POST", "/api/v1/namespaces", {
    body: { apiVersion: "v1", kind: "Namespace", metadata: { name: exportNs } },
  });
  const indexes = Array.from({ length: n }, (_, i) => i);
  await pool(indexes, 64, (i) => createSource(client, "ConfigMap", `${label}-s${i}`, "v0", labels));
  await pool(indexes, 64, (i) =>
    createReferable(
      client,
      `${label}-rf${i}`,
      labels,
      { apiVersion: "v1", kind: "ConfigMap", namespace: NS, name: `${label}-s${i}`, fieldPath: "data.value" },
      { export: [{ kind: "ConfigMap", namespace: exportNs, name: `${label}-out${i}`, key: "VALUE" }] },
    ),
  );
  const keys = new Map<string, string | undefined>();
  const keyListeners = new Set<() => void>();
  const cms = `/api/v1/namespaces/${exportNs}/configmaps`;
  const list = await client.request<{ metadata: { resourceVersion: string } }>("GET", cms);
  const keyWatch = reopeningWatch(
    client,
    cms,
    {
      resourceVersion: list.metadata.resourceVersion,
      onReopen: (why) => log(`exported keys' watch reopened: ${why}`),
    },
    (e) => {
      if (e.type !== "ADDED" && e.type !== "MODIFIED") return;
      keys.set(e.object.metadata!.name!, (e.object.data as Record<string, string> | undefined)?.VALUE);
      for (const l of keyListeners) l();
    },
  );
  const watch = new ReferableWatch(client, `bench-set=${label}`);
  await watch.start();
  const c = await startController(plane.kubeconfigPath, `bench-set=${label}`);
  await until(
    "export Referables to export v0",
    () => (indexes.every((i) => keys.get(`${label}-out${i}`) === "v0") ? true : undefined),
    300_000,
  );
  const statusSamples: number[] = [];
  const exportedSamples: number[] = [];
  for (let round = 1; round <= (quick ? 30 : 200); round++) {
    const i = round % n;
    const value = `x${round}`;
    const seen = await timeStatusAndTarget(
      watch,
      `${label}-rf${i}`,
      { values: keys, listeners: keyListeners, name: `${label}-out${i}` },
      value,
      () => setSource(client, "ConfigMap", `${label}-s${i}`, value),
      `export round ${round}`,
    );
    statusSamples.push(seen.status);
    exportedSamples.push(seen.target);
  }
  await c.stop();
  watch.close();
  keyWatch.close();
  await deleteFixtures(client, label);
  await client.request("DELETE", `/api/v1/namespaces/${exportNs}`).catch(() => undefined);
  return { refs: n, status: stats(statusSamples), exported: stats(exportedSamples) };
}

interface AccountsResult {
  refs: number;
  accounts: number;
  /** SubjectAccessReviews made until every Referable was Available (referable_access_reviews_total). */
  reviewsToReady: number;
  restSeconds: number;
  /** Reviews made at rest, per minute: all of them, and per (account, resource) (one resource here). */
  reviewsPerMinute: number;
  reviewsPerAccountResourcePerMinute: number;
  /** Reviews made while the rounds below ran (none is needed: every answer is cached). */
  reviewsDuringRounds: number;
  /** Source write → status.value of a Referable that names an account... */
  withAccount: Stats;
  /** ...and of one that names none, in the same run, rounds interleaved. */
  withoutAccount: Stats;
}

/**
 * Referables acting as ServiceAccounts (issue 37): `n` Referables over ConfigMaps of their own,
 * each naming one of `k` ServiceAccounts (all allowed to read the namespace), beside a few that
 * name none. Counts the SubjectAccessReviews the controller makes to get every Referable Ready
 * and then at rest (the answers are cached per account and resource and asked again once a
 * minute), and times a source write to the status with and without an account, interleaved.
 */
async function runAccounts(
  client: BenchClient,
  plane: ControlPlane,
  n: number,
  k: number,
): Promise<AccountsResult> {
  log(
    `accounts: ${n} Referables sharing ${k} ServiceAccounts, reviews counted ${accountRestSeconds} s at rest`,
  );
  const label = `${RUN}-acc`;
  const labels = { "bench-set": label };
  const plain = Math.max(10, Math.round(n / 20));
  const accounts = Array.from({ length: k }, (_, a) => `${label}-sa${a}`);
  for (const name of accounts)
    await client.request("POST", `/api/v1/namespaces/${NS}/serviceaccounts`, {
      body: { apiVersion: "v1", kind: "ServiceAccount", metadata: { name, labels } },
    });
  const rbac = `/apis/rbac.authorization.k8s.io/v1/namespaces/${NS}`;
  await client.request("POST", `${rbac}/roles`, {
    body: {
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "Role",
      metadata: { name: label, labels },
      rules: [{ apiGroups: [""], resources: ["configmaps"], verbs: ["get", "list", "watch"] }],
    },
  });
  await client.request("POST", `${rbac}/rolebindings`, {
    body: {
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "RoleBinding",
      metadata: { name: label, labels },
      roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "Role", name: label },
      subjects: accounts.map((name) => ({ kind: "ServiceAccount", name, namespace: NS })),
    },
  });
  const indexes = Array.from({ length: n + plain }, (_, i) => i);
  await pool(indexes, 64, (i) => createSource(client, "ConfigMap", `${label}-s${i}`, "v0", labels));
  await pool(indexes, 64, (i) =>
    createReferable(
      client,
      `${label}-rf${i}`,
      labels,
      { apiVersion: "v1", kind: "ConfigMap", namespace: NS, name: `${label}-s${i}`, fieldPath: "data.value" },
      i < n ? { serviceAccountRef: { namespace: NS, name: accounts[i % k] } } : {},
    ),
  );
  const watch = new ReferableWatch(client, `bench-set=${label}`);
  await watch.start();
  const c = await startController(plane.kubeconfigPath, `bench-set=${label}`);
  const reviews = async () => sumOf(await scrape(c), "referable_access_reviews_total");
  try {
    await until(
      `all ${n + plain} accounts Referables Ready`,
      () => (watch.readyCount() >= n + plain ? true : undefined),
      600_000,
    );
    const ready = await reviews();
    await new Promise((r) => setTimeout(r, accountRestSeconds * 1000));
    const rested = await reviews();
    const withAccount: number[] = [];
    const withoutAccount: number[] = [];
    for (let round = 1; round <= (quick ? 30 : 100); round++) {
      for (const [i, samples] of [
        [round % n, withAccount],
        [n + (round % plain), withoutAccount],
      ] as const) {
        const value = `x${round}`;
        const seen = await timeStatusAndTarget(
          watch,
          `${label}-rf${i}`,
          { values: new Map([["-", value]]), listeners: new Set(), name: "-" },
          value,
          () => setSource(client, "ConfigMap", `${label}-s${i}`, value),
          `accounts round ${round}`,
        );
        samples.push(seen.status);
      }
    }
    const after = await reviews();
    const perMinute = ((rested - ready) * 60) / accountRestSeconds;
    return {
      refs: n,
      accounts: k,
      reviewsToReady: ready,
      restSeconds: accountRestSeconds,
      reviewsPerMinute: Number(perMinute.toFixed(2)),
      reviewsPerAccountResourcePerMinute: Number((perMinute / k).toFixed(2)),
      reviewsDuringRounds: after - rested,
      withAccount: stats(withAccount),
      withoutAccount: stats(withoutAccount),
    };
  } finally {
    await c.stop();
    watch.close();
    await deleteFixtures(client, label);
    await client.request("DELETE", `${rbac}/rolebindings/${label}`).catch(() => undefined);
    await client.request("DELETE", `${rbac}/roles/${label}`).catch(() => undefined);
    for (const name of accounts)
      await client
        .request("DELETE", `/api/v1/namespaces/${NS}/serviceaccounts/${name}`)
        .catch(() => undefined);
  }
}

interface FieldExportResult {
  refs: number;
  /** Source write acknowledged → the Referable's status.value shows the value (its watch). */
  status: Stats;
  /** Source write acknowledged → the target's spec.forProvider field holds the value (a watch of the kind). */
  field: Stats;
  /** Target writes (applies) per source change, from referable_export_writes_total. */
  writesPerChange: number;
  /** API GETs per source change (the target read before the write). */
  readsPerChange: number;
}

/**
 * spec.export into fields: `n` Referables over ConfigMaps of their own, each writing its value
 * into spec.forProvider.sourceLocationArn of a Task of its own (a CRD shaped like a Crossplane
 * managed resource, typed fields). One source written at a time; for each write, the time until
 * the status shows the value and until the field does, both seen through watches, and the writes
 * the controller made per change.
 */
async function runFieldExport(
  client: BenchClient,
  plane: ControlPlane,
  n: number,
): Promise<FieldExportResult> {
  log(`field-export: ${n} Referables, each writing its value into a field of a managed-resource-shaped Task`);
  const label = `${RUN}-fld`;
  const labels = { "bench-set": label };
  const group = `datasync.${label}.bench.referable.dev`;
  const crd = `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/tasks.${group}`;
  await client.request("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", {
    body: {
      apiVersion: "apiextensions.k8s.io/v1",
      kind: "CustomResourceDefinition",
      metadata: { name: `tasks.${group}` },
      spec: {
        group,
        scope: "Namespaced",
        names: { kind: "Task", plural: "tasks", singular: "task", listKind: "TaskList" },
        versions: [
          {
            name: "v1beta1",
            served: true,
            storage: true,
            schema: {
              openAPIV3Schema: {
                type: "object",
                properties: {
                  spec: {
                    type: "object",
                    properties: {
                      forProvider: {
                        type: "object",
                        properties: {
                          sourceLocationArn: { type: "string" },
                          destinationLocationArn: { type: "string" },
                        },
                      },
                    },
                  },
                },
              },
            },
          },
        ],
      },
    },
  });
  const tasks = `/apis/${group}/v1beta1/namespaces/${NS}/tasks`;
  await until(
    "the Task CRD to be served",
    async () =>
      await client
        .request("GET", tasks)
        .then(() => true)
        .catch(() => undefined),
    60_000,
  );
  const indexes = Array.from({ length: n }, (_, i) => i);
  await pool(indexes, 64, (i) =>
    client.request("POST", tasks, {
      body: {
        apiVersion: `${group}/v1beta1`,
        kind: "Task",
        metadata: { name: `${label}-t${i}`, labels },
        spec: { forProvider: { destinationLocationArn: "arn:dest" } },
      },
    }),
  );
  await pool(indexes, 64, (i) => createSource(client, "ConfigMap", `${label}-s${i}`, "v0", labels));
  await pool(indexes, 64, (i) =>
    createReferable(
      client,
      `${label}-rf${i}`,
      labels,
      { apiVersion: "v1", kind: "ConfigMap", namespace: NS, name: `${label}-s${i}`, fieldPath: "data.value" },
      {
        export: [
          {
            apiVersion: `${group}/v1beta1`,
            kind: "Task",
            namespace: NS,
            name: `${label}-t${i}`,
            fieldPath: "spec.forProvider.sourceLocationArn",
          },
        ],
      },
    ),
  );
  const fields = new Map<string, string | undefined>();
  const fieldListeners = new Set<() => void>();
  const list = await client.request<{ metadata: { resourceVersion: string } }>("GET", tasks);
  const taskWatch = client.watch(tasks, { resourceVersion: list.metadata.resourceVersion }, (e) => {
    if (e.type !== "ADDED" && e.type !== "MODIFIED") return;
    const spec = e.object.spec as { forProvider?: { sourceLocationArn?: string } } | undefined;
    fields.set(e.object.metadata!.name!, spec?.forProvider?.sourceLocationArn);
    for (const l of fieldListeners) l();
  });
  const watch = new ReferableWatch(client, `bench-set=${label}`);
  await watch.start();
  const c = await startController(plane.kubeconfigPath, `bench-set=${label}`);
  await until(
    "field Referables to write v0",
    () => (indexes.every((i) => fields.get(`${label}-t${i}`) === "v0") ? true : undefined),
    300_000,
  );
  // Settled: every status records its field (the intent write, then the field, then the status).
  await until(
    "field Referables to be Exported",
    () => (indexes.every((i) => watch.latest.get(`${label}-rf${i}`)?.value === "v0") ? true : undefined),
    300_000,
  );
  const before = await scrape(c);
  const statusSamples: number[] = [];
  const fieldSamples: number[] = [];
  const rounds = quick ? 30 : 200;
  for (let round = 1; round <= rounds; round++) {
    const i = round % n;
    const value = `x${round}`;
    const seen = await timeStatusAndTarget(
      watch,
      `${label}-rf${i}`,
      { values: fields, listeners: fieldListeners, name: `${label}-t${i}` },
      value,
      () => setSource(client, "ConfigMap", `${label}-s${i}`, value),
      `field-export round ${round}`,
    );
    statusSamples.push(seen.status);
    fieldSamples.push(seen.target);
  }
  const after = await scrape(c);
  const writes =
    sumOf(after, 'referable_export_writes_total{result="success"}') -
    sumOf(before, 'referable_export_writes_total{result="success"}');
  const gets = (requestsByVerb(after).get ?? 0) - (requestsByVerb(before).get ?? 0);
  await c.stop();
  watch.close();
  taskWatch.close();
  await deleteFixtures(client, label);
  await client
    .request("DELETE", tasks, { query: { labelSelector: `bench-set=${label}` } })
    .catch(() => undefined);
  await client.request("DELETE", crd).catch(() => undefined);
  return {
    refs: n,
    status: stats(statusSamples),
    field: stats(fieldSamples),
    writesPerChange: Number((writes / rounds).toFixed(2)),
    readsPerChange: Number((gets / rounds).toFixed(2)),
  };
}

async function runSelectors(client: BenchClient, plane: ControlPlane, objects: number, refs: number) {
  log(`selectors: ${refs} selector Referables (half Single, half Multiple) over ${objects} objects`);
  const label = `${RUN}-sel`;
  const groups = Math.max(1, Math.floor(objects / 10));
  const items = Array.from({ length: objects }, (_, i) => i);
  await pool(items, 64, (i) =>
    createSource(client, "ConfigMap", `${label}-o${i}`, `v${i}`, {
      "bench-set": label,
      id: `i${i}`,
      group: `g${i % groups}`,
    }),
  );
  const names = Array.from({ length: refs }, (_, i) => `${label}-rf${i}`);
  await pool(names, 64, async (name) => {
    const i = names.indexOf(name);
    const single = i % 2 === 0;
    await createReferable(
      client,
      name,
      { "bench-set": label },
      {
        apiVersion: "v1",
        kind: "ConfigMap",
        namespace: NS,
        selector: { matchLabels: single ? { id: `i${i}` } : { group: `g${i % groups}` } },
        fieldPath: "data.value",
      },
      single ? {} : { selection: { mode: "Multiple" } },
    );
  });
  const watch = new ReferableWatch(client, `bench-set=${label}`);
  await watch.start();
  const c = await startController(plane.kubeconfigPath, `bench-set=${label}`);
  await until("selector Referables Ready", () => (watch.readyCount() >= refs ? true : undefined), 600_000);
  const coldStartSeconds = (performance.now() - c.startedAt) / 1000;
  // Propagation: change the object each Single selector reads, one at a time.
  const latencies: number[] = [];
  for (let k = 0; k < (quick ? 10 : 50); k++) {
    const i = (k * 2) % refs;
    const value = `sel-${k}`;
    const name = names[i]!;
    const seen = new Promise<void>((resolve) => {
      const off = watch.onChange((n) => {
        if (n === name && watch.latest.get(n)?.value === value) {
          off();
          resolve();
        }
      });
    });
    await setSource(client, "ConfigMap", `${label}-o${i}`, value);
    const acked = performance.now();
    await seen;
    latencies.push(performance.now() - acked);
  }
  const settled = await cost(c);
  await c.stop();
  watch.close();
  await deleteFixtures(client, label);
  return { objects, refs, coldStartSeconds, latency: stats(latencies), cost: settled };
}

interface ContentResult {
  refs: number;
  objects: number;
  objectBytes: number;
  coldStartSeconds: number;
  /** Highest RSS and heap sampled every 200 ms from start-up to the end of the rewrite. */
  peakRssMiB: number;
  peakHeapMiB: number;
  steady: Cost;
  /** Heap the source cache keeps per object nobody reads, from bench/projection-cost.ts. */
  bytesPerUnreferencedObject: number;
}

/** Samples the controller's RSS and heap every 200 ms until stopped; returns the highest seen. */
function samplePeaks(
  c: Controller,
  intervalMs = 200,
): { stop(): Promise<{ rssMiB: number; heapMiB: number }> } {
  let rss = 0;
  let heap = 0;
  let running = true;
  const loop = (async () => {
    while (running) {
      const m = await scrape(c).catch(() => undefined);
      if (m) {
        rss = Math.max(rss, m.get("process_resident_memory_bytes") ?? 0);
        heap = Math.max(heap, m.get("nodejs_heap_size_used_bytes") ?? 0);
      }
      await new Promise((r) => setTimeout(r, intervalMs));
    }
  })();
  return {
    async stop() {
      running = false;
      await loop;
      return { rssMiB: Number(mib(rss)), heapMiB: Number(mib(heap)) };
    },
  };
}

/** Bytes kept per unreferenced object, measured exactly in a process of its own (--expose-gc). */
async function projectionCost(): Promise<number> {
  const script = join(repoRoot, "bench", "projection-cost.ts");
  const output = await new Promise<string>((resolve, reject) => {
    const child = spawn(
      process.execPath,
      ["--expose-gc", script, "--objects", "20000", "--data-bytes", "100000"],
      {
        stdio: ["ignore", "pipe", "inherit"],
      },
    );
    let text = "";
    child.stdout.on("data", (d: Buffer) => (text += d.toString()));
    child.on("exit", (code) =>
      code === 0 ? resolve(text) : reject(new Error(`projection-cost exited with ${code}`)),
    );
  });
  return (JSON.parse(output.trim()) as { bytesPerObject: number }).bytesPerObject;
}

/**
 * What the cluster holds beside the references: `refs` Referables over small sources, and
 * `objects` ConfigMaps of about 1 MiB in another namespace that nothing reads. The controller is
 * cold-started with them all in the cluster (its list pages through them), then every big
 * object is rewritten while it runs (its watch carries them).
 */
async function runClusterContent(
  client: BenchClient,
  plane: ControlPlane,
  refs: number,
  objects: number,
): Promise<ContentResult> {
  log(`cluster content: ${refs} Referables, ${objects} unreferenced ConfigMaps of about 1 MiB`);
  const objectBytes = 1_000_000;
  const fx = await makeNamedFixture(client, refs);
  const ns = `${NS}-content`;
  await client.request("POST", "/api/v1/namespaces", {
    body: { apiVersion: "v1", kind: "Namespace", metadata: { name: ns } },
  });
  const big = Array.from({ length: objects }, (_, i) => i);
  const write = (i: number, round: number) =>
    client.request(
      round === 0 ? "POST" : "PUT",
      `/api/v1/namespaces/${ns}/configmaps${round === 0 ? "" : `/big-${i}`}`,
      {
        body: {
          apiVersion: "v1",
          kind: "ConfigMap",
          metadata: { name: `big-${i}` },
          data: { blob: String.fromCharCode(97 + ((i + round) % 26)).repeat(objectBytes) },
        },
        timeoutMs: 120_000,
      },
    );
  await pool(big, 4, (i) => write(i, 0));

  const selector = `bench-set=${fx.label}`;
  const watch = new ReferableWatch(client, selector);
  await watch.start();
  const c = await startController(plane.kubeconfigPath, selector);
  const peaks = samplePeaks(c);
  await until(`all ${refs} Referables Ready`, () => (watch.readyCount() >= refs ? true : undefined), 600_000);
  const coldStartSeconds = (performance.now() - c.startedAt) / 1000;
  log(`cluster content: rewriting the ${objects} big ConfigMaps while the controller runs`);
  await pool(big, 4, (i) => write(i, 1));
  const peak = await peaks.stop();
  const steady = await cost(c);
  await c.stop();
  watch.close();
  await deleteFixtures(client, fx.label);
  await client.request("DELETE", `/api/v1/namespaces/${ns}`, { timeoutMs: 300_000 });
  return {
    refs,
    objects,
    objectBytes,
    coldStartSeconds,
    peakRssMiB: peak.rssMiB,
    peakHeapMiB: peak.heapMiB,
    steady,
    bytesPerUnreferencedObject: await projectionCost(),
  };
}

interface LabelsResult {
  refs: number;
  objects: number;
  /** Bytes of JSON of one object's labels. */
  labelBytes: number;
  /** A cold start without the labelled objects, then with them: steady cost after each. */
  without: Cost;
  with: Cost;
  /** Highest RSS sampled during the cold start with them. */
  peakRssMiB: number;
  coldStartSeconds: number;
}

/** The longest DNS-subdomain prefix a label key may have (253 characters). */
const LABEL_PREFIX = ["a", "b", "c"].map((c) => c.repeat(63)).join(".") + "." + "d".repeat(61);

/** The largest label set the API server takes (about 845 KB), distinct for each object. */
function largestLabels(object: number): Record<string, string> {
  const labels: Record<string, string> = {};
  for (let j = 0; j < 2190; j++)
    labels[`${LABEL_PREFIX}/${`o${object}-k${j}-`.padEnd(63, "x")}`] = `v${object}-${j}-`.padEnd(63, "y");
  return labels;
}

/**
 * Memory through labels (issue 21): `refs` Referables over small sources (so ConfigMaps are
 * watched cluster-wide), cold-started without and then with `objects` ConfigMaps in another
 * namespace carrying the largest label sets the API server takes, which nothing selects.
 */
async function runLabels(
  client: BenchClient,
  plane: ControlPlane,
  refs: number,
  objects: number,
): Promise<LabelsResult> {
  log(`labels: ${refs} Referables, then ${objects} ConfigMaps of about 845 KB of labels`);
  const fx = await makeNamedFixture(client, refs, `${RUN}-labels`);
  const selector = `bench-set=${fx.label}`;
  const watch = new ReferableWatch(client, selector);
  await watch.start();
  const coldStart = async (tag: string) => {
    const c = await startController(plane.kubeconfigPath, selector);
    const peaks = samplePeaks(c);
    await until(
      `all ${refs} Referables Ready`,
      () => (watch.readyCount() >= refs ? true : undefined),
      600_000,
    );
    // The statuses are the last run's: a change that arrives says this controller listed its
    // sources (the ConfigMap kind whole, the labelled objects included).
    const first = fx.sources[0]!;
    await setSource(client, first.kind, first.name, tag);
    await until(
      `${fx.names[0]} to follow its source`,
      () => (watch.latest.get(fx.names[0]!)?.value === tag ? true : undefined),
      600_000,
    );
    const seconds = (performance.now() - c.startedAt) / 1000;
    const peak = await peaks.stop();
    const steady = await cost(c);
    await c.stop();
    return { seconds, peak, steady };
  };
  const without = await coldStart("without");
  const ns = `${NS}-labels`;
  await client.request("POST", "/api/v1/namespaces", {
    body: { apiVersion: "v1", kind: "Namespace", metadata: { name: ns } },
  });
  const all = Array.from({ length: objects }, (_, i) => i);
  await pool(all, 4, (i) =>
    client.request("POST", `/api/v1/namespaces/${ns}/configmaps`, {
      body: {
        apiVersion: "v1",
        kind: "ConfigMap",
        metadata: { name: `labels-${i}`, labels: largestLabels(i) },
        data: { note: "nothing reads this" },
      },
      timeoutMs: 120_000,
    }),
  );
  const withThem = await coldStart("with");
  watch.close();
  await deleteFixtures(client, fx.label);
  await client.request("DELETE", `/api/v1/namespaces/${ns}`, { timeoutMs: 300_000 });
  return {
    refs,
    objects,
    labelBytes: JSON.stringify(largestLabels(0)).length,
    without: without.steady,
    with: withThem.steady,
    peakRssMiB: withThem.peak.rssMiB,
    coldStartSeconds: withThem.seconds,
  };
}

interface HostilePhase {
  /** Hostile evaluations running beside the canary (0: the run without them). */
  hostile: number;
  /** Canary source write acknowledged → its status.value shows the transformed value. */
  canary: Stats;
  /**
   * GET /healthz answered, asked every 20 ms: the event-loop lag as a probe sees it (the
   * controller's own nodejs_eventloop_lag metrics sample once a second, too coarse for this).
   */
  healthz: Stats;
  /** Peak RSS of the controller process so far, MiB. */
  peakRssMiB: number;
}

/**
 * Issue 21: a canary Referable (`value + '!'`) followed while hostile Referables are evaluated
 * again and again (their source rewritten every 100 ms) with a transform the cost meter does
 * not see through (deep equality of lists of 100^5 shared leaves: test/fixtures), which only the
 * worker's deadline stops; beside the same run without them.
 */
async function runHostile(client: BenchClient, plane: ControlPlane): Promise<HostilePhase[]> {
  const { DEEP_EQUALITY } = await import("../test/fixtures/hostile-transforms.ts");
  const label = `${RUN}-hostile`;
  const labels = { "bench-set": label };
  await createSource(client, "ConfigMap", `${label}-canary`, "c0", labels);
  await createSource(client, "ConfigMap", `${label}-bad`, "b0", labels);
  const byName = (name: string) => ({
    apiVersion: "v1",
    kind: "ConfigMap",
    namespace: NS,
    name,
    fieldPath: "data.value",
  });
  await createReferable(client, `${label}-canary`, labels, byName(`${label}-canary`), {
    transform: "value + '!'",
  });
  const watch = new ReferableWatch(client, `bench-set=${label}`);
  await watch.start();
  const c = await startController(plane.kubeconfigPath, `bench-set=${label}`);
  const probePort = Number(
    /--health-probe-bind-address=127\.0\.0\.1:(\d+)/.exec(c.proc.spawnargs.join(" "))![1],
  );
  await until(
    "the canary Available",
    () => (watch.latest.get(`${label}-canary`)?.value === "c0!" ? true : undefined),
    60_000,
  );
  const rounds = quick ? 30 : 150;
  const phases: HostilePhase[] = [];
  for (const hostile of [0, 2]) {
    log(`hostile: canary with ${hostile} hostile Referable(s) evaluated beside it`);
    for (let h = 0; h < hostile; h++)
      await createReferable(client, `${label}-bad${h}`, labels, byName(`${label}-bad`), {
        transform: DEEP_EQUALITY,
      });
    let running = true;
    const health: number[] = [];
    const prober = (async () => {
      while (running) {
        const t = performance.now();
        await fetch(`http://127.0.0.1:${probePort}/healthz`).catch(() => undefined);
        health.push(performance.now() - t);
        await new Promise((r) => setTimeout(r, 20));
      }
    })();
    let bad = 0;
    const rewriter = (async () => {
      while (running && hostile > 0) {
        await setSource(client, "ConfigMap", `${label}-bad`, `b${++bad}`);
        await new Promise((r) => setTimeout(r, 100));
      }
    })();
    const samples: number[] = [];
    for (let round = 1; round <= rounds; round++) {
      const value = `c${hostile}-${round}`;
      const seen = new Promise<number>((resolve) => {
        const off = watch.onChange(() => {
          if (watch.latest.get(`${label}-canary`)?.value === `${value}!`) {
            off();
            resolve(performance.now());
          }
        });
      });
      await setSource(client, "ConfigMap", `${label}-canary`, value);
      const acked = performance.now();
      let timer: NodeJS.Timeout | undefined;
      const at = await Promise.race([
        seen,
        new Promise<number>((_, reject) => {
          timer = setTimeout(
            () => reject(new Error(`hostile round ${round}: canary not seen in 60 s`)),
            60_000,
          );
        }),
      ]).finally(() => clearTimeout(timer));
      samples.push(Math.max(0, at - acked));
      await new Promise((r) => setTimeout(r, 50));
    }
    running = false;
    await Promise.all([prober, rewriter]);
    phases.push({
      hostile,
      canary: stats(samples),
      healthz: stats(health),
      peakRssMiB: await peakRssMiBOf(c.proc.pid!),
    });
  }
  const failed = hostileReasons(watch, label);
  log(`hostile: the hostile Referables ended ${failed.join(", ") || "(no status)"}`);
  await c.stop();
  watch.close();
  await deleteFixtures(client, label);
  return phases;
}

function hostileReasons(watch: ReferableWatch, label: string): string[] {
  return [...watch.latest].filter(([name]) => name.startsWith(`${label}-bad`)).map(([, v]) => v.reason ?? "");
}

/** The bench's helpers, for the load attacks of bench/hostile-load.ts. */
function hostileLoadTools(client: BenchClient, plane: ControlPlane): HostileLoadTools {
  return {
    client,
    kubeconfigPath: plane.kubeconfigPath,
    namespace: NS,
    run: RUN,
    log,
    widgetGroup: WIDGET_GROUP,
    createSource: (name, value, labels, objectLabels) =>
      createSource(client, "ConfigMap", name, value, { ...objectLabels, ...labels }),
    setSource: (name, value) => setSource(client, "ConfigMap", name, value),
    createReferable: async (name, labels, spec) => {
      const { source, ...extra } = spec;
      await createReferable(client, name, labels, source as Record<string, unknown>, extra);
    },
    deleteFixtures: (label) => deleteFixtures(client, label),
    startController: async (selector) => {
      const c = await startController(plane.kubeconfigPath, selector);
      return { pid: c.proc.pid!, stop: () => c.stop() };
    },
    watch: async (selector) => {
      const w = new ReferableWatch(client, selector, false);
      await w.start();
      return w;
    },
    cpuSeconds,
    peakRssMiB: peakRssMiBOf,
    pool: (items, concurrency, each) => pool(items, concurrency, each),
  };
}

async function peakRssMiBOf(pid: number): Promise<number> {
  const status = await readFile(`/proc/${pid}/status`, "utf8");
  return Number((Number(/VmHWM:\s+(\d+) kB/.exec(status)?.[1] ?? NaN) / 1024).toFixed(1));
}

// ---------- scale: 100,000 Referables, one replica, then shards (issue 27) ----------

/** Issue 27's targets, printed beside each figure measured against them. */
const TARGETS = {
  coldStartOverFloor: 1.2,
  rssMiBPerShard: 256,
  failoverSeconds: 20,
  /** Half of the 5.25 KB of heap used per Referable measured before issue 27. */
  heapBytesPerReferable: 2625,
};

interface ScalePhase {
  /** Controller processes. */
  replicas: number;
  /** Heap cap of each (--max-old-space-size), MiB. */
  heapCapMiB: number;
  /** Start → every Referable Ready (each needed one status write: the floor's writes cleared them). */
  coldStartSeconds: number;
  /** The cold start over the status-write floor measured just before it. */
  coldStartOverFloor: number;
  /** The floor just before: the same n status writes straight to the API server. */
  floorSeconds: number;
  /**
   * The controller's own status write budget's bound on the cold start: (n / replicas - burst) /
   * budget rate seconds, each replica having a budget of its own (sharded: an even share of n);
   * absent without a budget (REFERABLE_STATUS_WRITE_BUDGET=0). Whichever of it and the floor is
   * the larger binds.
   */
  budgetSeconds?: number;
  /** The cold start over {@link budgetSeconds}. */
  coldStartOverBudget?: number;
  /** Per replica, settled after the cold start. */
  cost: Cost[];
  /** Highest RSS of any replica from its start to the end of propagation. */
  peakRssMiB: number;
  /** Heap used at Ready over the idle controller's, per Referable (all n; not after a forced GC). */
  bytesPerReferable?: number;
  /** With --heap-snapshots: the same from the live heaps (after a full GC). */
  liveBytesPerReferable?: number;
  /** Shards: Referables each owned (referable_shard_referables_owned). */
  owned?: number[];
  /** Shards: heap used over the idle controller's, per Referable the shard owns. */
  bytesPerOwned?: number[];
  /** Shards: the same over all n (each shard caches every Referable for the reference graph). */
  bytesPerReferableEach?: number[];
  propagation: { rate: number; updates: number; seen: number; latency: Stats };
  /** Buckets each replica held (sharded only), from referable_shard_buckets. */
  buckets?: number[];
  /** Successful status writes of each replica from its start to Ready (referable_status_writes_total). */
  statusWrites: number[];
  /** Their sum over the n Referables: 1 when each was written once. */
  statusWritesPerReferable: number;
  /**
   * Per Referable, from start to Ready (all replicas): status writes the write policy held back
   * (referable_status_writes_deferred_total, by reason) and reconciles
   * (controller_runtime_reconcile_total): a write that waits for the budget costs one more.
   */
  deferredPerReferable?: { budget: number; rate: number };
  reconcilesPerReferable?: number;
  /** The replicas' warn/error log lines by message, from their start to the end of the phase. */
  logLines: LogCount[];
  /** Seconds from the start to the first Ready, to 10%, 50% and 90% of them Ready, and to the last. */
  readyAt: { first: number; p10: number; p50: number; p90: number; last: number };
  /** CPU seconds of the floor just before and of the cold start to Ready: the control plane's and the bench's own. */
  planeCpu: { floor: PlaneCpu; coldStart: PlaneCpu };
  failover?: ScaleFailover;
}

/** CPU seconds (user + system) of the control plane's processes and the bench over a span. */
interface PlaneCpu {
  apiServer: number;
  etcd: number;
  bench: number;
}

interface ScaleFailover {
  /** kill -9 of one replica → the others hold every bucket (referable_shard_buckets). */
  bucketsTakenSeconds: number;
  /** kill -9 → each of `sources` changed right after it shows in its Referable: p50 and max. */
  sources: number;
  followP50Seconds: number;
  followMaxSeconds: number;
  /** The replicas' warn/error log lines by message, from their start to the end of the failover. */
  logLines?: LogCount[];
}

interface ScaleResult {
  n: number;
  /** The phases run (--scale-phases). */
  phases: string[];
  setupSeconds: number;
  /** Objects (sources and Referables) created a second: what the duration estimate is made of. */
  createdPerSecond: number;
  /** Status writes in flight in the floor: the controller's default concurrency. */
  floorConcurrency: number;
  heapCapMiB: { single: number; shard: number };
  /** The run's propagation floor (write ack → a plain watch sees it, plus one status patch), ms. */
  propagationFloor: { p50: number; p99: number };
  single: ScalePhase | { skipped: string };
  sharded: ScalePhase | { skipped: string };
  /** NaN when the private control plane's teardown took the fixture with it. */
  cleanupSeconds: number;
}

/** Whether the compiled controller has the --shards flag (feat/sharding merged). */
async function controllerHasShards(): Promise<boolean> {
  const main = await compiledMain();
  const help = await new Promise<string>((resolve) => {
    const child = spawn(process.execPath, [main, "--help"], { stdio: ["ignore", "pipe", "pipe"] });
    let text = "";
    child.stdout.on("data", (d: Buffer) => (text += d.toString()));
    child.stderr.on("data", (d: Buffer) => (text += d.toString()));
    child.on("exit", () => resolve(text));
    child.on("error", () => resolve(text));
  });
  return help.includes("--shards");
}

/** Fails at once when a controller process died (OOM, crash): no ten-minute wait for nothing. */
function alive(controllers: readonly Controller[]): void {
  for (const c of controllers)
    if (c.proc.exitCode !== null || c.proc.signalCode !== null)
      throw new Error(
        `a controller process exited (${c.proc.exitCode ?? c.proc.signalCode}) during the scale scenario`,
      );
}

const clock = (secondsFromNow: number) =>
  new Date(Date.now() + secondsFromNow * 1000).toISOString().slice(11, 16) + " UTC";

/**
 * A rough duration of the scale scenario's phases still to run, from the rate the fixture was
 * created at or, once measured, the floor: each phase writes the floor, then a cold start of about 1.5 floors (one replica)
 * or 3 (four shards: each lists and graphs every Referable), as measured at 10,000 on the loaded
 * machine, plus the propagation phase and process starts; the failover at most a minute.
 */
function scaleEstimate(
  n: number,
  objectsPerSecond: number,
  options: { floorSeconds?: number; before?: number; singleFloorDone?: boolean } = {},
): string {
  // 16 status writes in flight go at about half the rate of 64 creates (0.48 at 100,000 on the
  // loaded machine, 0.65 at 10,000 on the quiet one).
  const floor = options.floorSeconds ?? n / (objectsPerSecond / 2);
  const parts: string[] = [];
  let total = options.before ?? 0;
  const add = (name: string, seconds: number) => {
    total += seconds;
    parts.push(`${name} ~${Math.round(seconds)} s`);
  };
  if (scalePhase("single"))
    add(
      options.singleFloorDone ? "single (cold start)" : "single (floor + cold start)",
      floor * (options.singleFloorDone ? 1.5 : 2.5) + phaseSeconds + 30,
    );
  if (scalePhase("sharded")) add("sharded (floor + cold start)", floor * 4 + phaseSeconds + 30);
  if (scalePhase("failover")) add("failover", 60);
  return `${parts.join(", ")}: about ${Math.round(total / 60)} min more in all (ends about ${clock(total)})`;
}

/**
 * The floor of a cold start: the n status writes it must make (the controller's JSON patch with
 * its preconditions), sent straight to the API server `concurrency` at a time. The status each
 * writes has no Ready condition, so a controller started after it must write every Referable
 * again: this is also what makes the next cold start a cold one.
 */
/**
 * What the scale floor writes of a Referable over `source`: the status the controller writes
 * (value, text, the source read with its uid and resourceVersion, a Ready condition), field for
 * field and of about the same length, so the API server validates, stores and sends the same
 * bytes as in the cold start (the floor wrote `{value, observedGeneration}` alone until
 * perf/shard-cold2: a fifth of the bytes). Not Ready ({@link FLOOR_REASON}), so a controller
 * started after it writes every Referable again; of the Referable's generation (1), so a shard
 * lists the others' Referables as compact records (a status of a generation not observed yet
 * stays whole: with generation 0 every shard kept the 75,000 others' statuses whole at 100,000).
 */
function floorStatus(round: string, source: Fixture["sources"][number], at: string): ReferableStatus {
  const condition = {
    type: "Ready",
    status: "False",
    reason: FLOOR_REASON,
    message: "",
    observedGeneration: 1,
    lastTransitionTime: at,
  };
  return {
    value: round,
    text: round,
    sources: [
      {
        apiVersion: source.kind === "ConfigMap" ? "v1" : `${WIDGET_GROUP}/v1`,
        kind: source.kind,
        namespace: NS,
        name: source.name,
        uid: "00000000-0000-4000-8000-000000000000",
        resourceVersion: "1000000",
      },
    ],
    observedGeneration: 1,
    conditions: [condition],
  } as ReferableStatus;
}

/** Lengths of kube-apiserver's CPU profiles (BENCH_APISERVER_DIAG): in the writes; the cold start's first seconds. */
const DIAG_PROFILE_SECONDS = Number(process.env.BENCH_DIAG_PROFILE_SECONDS ?? 20);
const DIAG_FIRST_SECONDS = Number(process.env.BENCH_DIAG_FIRST_SECONDS ?? 15);

async function scaleFloor(
  client: BenchClient,
  plane: ControlPlane,
  watch: ReferableWatch,
  fx: Fixture,
  concurrency: number,
  round: string,
): Promise<{ seconds: number; cpu: PlaneCpu }> {
  const names = fx.names;
  const sourceOf = new Map(names.map((name, i) => [name, fx.sources[i]!]));
  const at = new Date().toISOString().replace(/\.\d+Z$/, "Z");
  // Counted as the watch shows them: a poll must not walk 100,000 names every 50 ms.
  const shown = new Set<string>();
  const off = watch.onChange((name) => {
    if (watch.latest.get(name)?.value === round) shown.add(name);
  });
  try {
    await apiServerMetrics(plane.kubeconfigPath, `${round}-start`);
    apiServerProfile(plane.kubeconfigPath, round, 3000, DIAG_PROFILE_SECONDS);
    const cpu0 = await planeCpuNow(plane);
    const t0 = performance.now();
    let written = 0;
    let lastLog = t0;
    await pool(names, concurrency, async (name) => {
      const seen = watch.latest.get(name);
      if (!seen) throw new Error(`the watch has not seen ${name}`);
      await client.request("PATCH", `${RF}/${name}/status`, {
        body: statusPatch(seen.uid, floorStatus(round, sourceOf.get(name)!, at)),
        contentType: "application/json-patch+json",
        timeoutMs: 120_000,
      });
      written++;
      if (performance.now() - lastLog > 30_000) {
        lastLog = performance.now();
        log(
          `scale: ${round}: ${written} of ${names.length} written in ${((lastLog - t0) / 1000).toFixed(0)} s`,
        );
      }
    });
    const seconds = (performance.now() - t0) / 1000;
    const cpu = cpuSince(cpu0, await planeCpuNow(plane));
    await apiServerMetrics(plane.kubeconfigPath, `${round}-end`);
    await until(
      "the floor's writes to show",
      () => (shown.size >= names.length && watch.readyCount() === 0 ? true : undefined),
      600_000,
    );
    return { seconds, cpu };
  } finally {
    off();
  }
}

/** Starts `replicas` controllers (sharded when more than one), waits for every Referable Ready. */
async function scaleColdStart(
  client: BenchClient,
  plane: ControlPlane,
  fx: Fixture,
  watch: ReferableWatch,
  replicas: number,
  heapCapMiB: number,
  floor: { seconds: number; cpu: PlaneCpu },
  baselineHeapMiB: number,
  baselineLiveMiB: number | undefined,
): Promise<{ phase: ScalePhase; controllers: Controller[] }> {
  const floorSeconds = floor.seconds;
  const n = fx.names.length;
  const selector = `bench-set=${fx.label}`;
  const nodeOptions = withHeapCap(controllerNodeOptions, heapCapMiB);
  const args =
    replicas === 1
      ? ["--leader-elect=false"]
      : [
          `--shards=${scaleBuckets}`,
          `--leader-election-namespace=${NS}`,
          `--leader-election-id=${RUN}-scale`,
        ];
  log(`scale: cold start of ${n} Referables, ${replicas} replica(s), heap cap ${heapCapMiB} MiB`);
  await apiServerMetrics(plane.kubeconfigPath, `cold-${replicas}-start`);
  if (DIAG_FIRST_SECONDS > 0)
    apiServerProfile(plane.kubeconfigPath, `cold-${replicas}-first`, 0, DIAG_FIRST_SECONDS);
  let profiled = false;
  let firstCpu: Promise<PlaneCpu> | undefined;
  const cpu0 = await planeCpuNow(plane);
  const t0 = performance.now();
  const controllers: Controller[] = [];
  // /readyz waits for the list of every Referable: minutes at 100,000 on a loaded machine.
  const readyTimeoutMs = 60_000 + n * 10;
  try {
    await Promise.all(
      Array.from({ length: replicas }, async () => {
        controllers.push(
          await startController(plane.kubeconfigPath, selector, args, nodeOptions, readyTimeoutMs),
        );
      }),
    );
  } catch (err) {
    await Promise.all(controllers.map((c) => c.stop()));
    throw err;
  }
  // Once a second: a scrape walks prom-client's registry, and four shards scraped every 200 ms
  // spent a tenth of their cold-start CPU on the bench's sampler (perf/echo's profile). The peak
  // RSS is the kernel's own high-water mark (VmHWM) besides, so no peak falls between samples.
  const peaks = controllers.map((c) => samplePeaks(c, 1000));
  // When the first, 10%, 50%, 90% and the last were Ready: the write phase's start and rate.
  const marks = [1, Math.ceil(n / 10), Math.ceil(n / 2), Math.ceil((n * 9) / 10), n];
  const markedAt: number[] = [];
  try {
    let lastLog = performance.now();
    await until(
      `all ${n} Referables Ready`,
      () => {
        alive(controllers);
        const ready = watch.readyCount();
        if (firstCpu === undefined && ready >= 1) {
          firstCpu = planeCpuNow(plane).then((c) => {
            const d = cpuSince(cpu0, c);
            log(
              `scale: CPU s until the first Ready (${((performance.now() - t0) / 1000).toFixed(1)} s): kube-apiserver ${d.apiServer}, etcd ${d.etcd}`,
            );
            return d;
          });
          void apiServerMetrics(plane.kubeconfigPath, `cold-${replicas}-first`);
        }
        if (!profiled && ready >= Math.ceil(n / 10)) {
          profiled = true;
          apiServerProfile(plane.kubeconfigPath, `cold-${replicas}-writes`, 0, DIAG_PROFILE_SECONDS);
        }
        while (markedAt.length < marks.length && ready >= marks[markedAt.length]!)
          markedAt.push(Number(((performance.now() - t0) / 1000).toFixed(1)));
        if (performance.now() - lastLog > 30_000) {
          lastLog = performance.now();
          log(`scale: ${ready} of ${n} Ready after ${((lastLog - t0) / 1000).toFixed(0)} s`);
        }
        return ready >= n ? true : undefined;
      },
      Math.max(3_600_000, n * 60),
    );
  } catch (err) {
    await Promise.all(peaks.map((p) => p.stop()));
    await Promise.all(controllers.map((c) => c.stop()));
    throw err;
  }
  const coldStartSeconds = (performance.now() - t0) / 1000;
  const coldStartCpu = cpuSince(cpu0, await planeCpuNow(plane));
  await apiServerMetrics(plane.kubeconfigPath, `cold-${replicas}-end`);
  const [first, p10, p50, p90, last] = markedAt;
  const readyAt = { first: first!, p10: p10!, p50: p50!, p90: p90!, last: last! };
  log(`scale: ${replicas} replica(s) made ${n} Referables Ready in ${coldStartSeconds.toFixed(1)} s`);
  log(
    `scale: Ready at (s from the start): first ${readyAt.first}, 10% ${readyAt.p10}, 50% ${readyAt.p50}, 90% ${readyAt.p90}, last ${readyAt.last}`,
  );
  for (const [what, c] of [
    ["floor", floor.cpu],
    ["cold start", coldStartCpu],
  ] as const)
    log(`scale: CPU s of the ${what}: kube-apiserver ${c.apiServer}, etcd ${c.etcd}, bench ${c.bench}`);
  const costs = await Promise.all(controllers.map((c) => cost(c)));
  const metrics = await Promise.all(controllers.map((c) => scrape(c)));
  // Where each replica's RSS goes: V8's spaces (used / committed) beside RSS, heap and external.
  for (const c of costs)
    log(
      `scale: memory: RSS ${c.rssMiB} MiB, heap ${c.heapMiB} / ${c.heapTotalMiB} MiB, external ${c.externalMiB} MiB; spaces (used / committed MiB): ${Object.entries(
        c.heapSpacesMiB,
      )
        .map(([space, v]) => `${space} ${v.used} / ${v.committed}`)
        .join(", ")}`,
    );
  // And by kind of mapping (/proc/<pid>/smaps): the binary's pages, malloc's arenas, V8's pages.
  for (const c of controllers) {
    const map = await memoryMap(c.proc.pid!).catch(() => undefined);
    if (map) log(`scale: memory map (resident MiB): ${JSON.stringify(map)}`);
  }
  log(`scale: propagation at 50 updates/s for ${phaseSeconds} s`);
  const prop = await measurePropagation(client, controllers[0]!, fx, watch, 50, phaseSeconds);
  alive(controllers);
  const peak = await Promise.all(
    peaks.map(async (p, i) => {
      const sampled = await p.stop();
      const hwm = await peakRssMiBOf(controllers[i]!.proc.pid!).catch(() => 0);
      return { ...sampled, rssMiB: Math.max(sampled.rssMiB, hwm) };
    }),
  );
  log(`scale: peaks per replica: ${peak.map((p) => `RSS ${p.rssMiB} / heap ${p.heapMiB} MiB`).join("; ")}`);
  const overIdle = (c: Cost) => (c.heapMiB - baselineHeapMiB) * 1024 * 1024;
  const statusWrites = metrics.map((m) => sumOf(m, 'referable_status_writes_total{result="success"}'));
  const budgetSeconds = budgetBoundSeconds(Math.ceil(n / replicas));
  const phase: ScalePhase = {
    replicas,
    heapCapMiB,
    coldStartSeconds,
    coldStartOverFloor: Number((coldStartSeconds / floorSeconds).toFixed(2)),
    floorSeconds,
    ...(budgetSeconds !== undefined && {
      budgetSeconds,
      coldStartOverBudget: Number((coldStartSeconds / budgetSeconds).toFixed(2)),
    }),
    cost: costs,
    peakRssMiB: Math.max(...peak.map((p) => p.rssMiB)),
    propagation: { rate: prop.rate, updates: prop.updates, seen: prop.seen, latency: prop.latency },
    statusWrites,
    statusWritesPerReferable: Number((statusWrites.reduce((a, b) => a + b, 0) / n).toFixed(2)),
    deferredPerReferable: {
      budget: perReferable(metrics, 'referable_status_writes_deferred_total{reason="budget"', n),
      rate: perReferable(metrics, 'referable_status_writes_deferred_total{reason="rate"', n),
    },
    reconcilesPerReferable: perReferable(metrics, "controller_runtime_reconcile_total{", n),
    logLines: await countLogLines(controllers.map((c) => c.logPath)),
    readyAt,
    planeCpu: { floor: floor.cpu, coldStart: coldStartCpu },
  };
  if (replicas === 1) {
    phase.bytesPerReferable = Math.round(overIdle(costs[0]!) / n);
    if (costs[0]!.liveHeapMiB !== undefined && baselineLiveMiB !== undefined)
      phase.liveBytesPerReferable = Math.round(((costs[0]!.liveHeapMiB - baselineLiveMiB) * 1024 * 1024) / n);
  } else {
    phase.buckets = metrics.map((m) => m.get("referable_shard_buckets") ?? NaN);
    phase.owned = metrics.map((m) => m.get("referable_shard_referables_owned") ?? NaN);
    phase.bytesPerOwned = costs.map((c, i) => Math.round(overIdle(c) / phase.owned![i]!));
    phase.bytesPerReferableEach = costs.map((c) => Math.round(overIdle(c) / n));
  }
  return { phase, controllers };
}

/** kill -9 of the first shard: how long until the others hold its buckets and serve its Referables. */
async function scaleFailover(
  client: BenchClient,
  controllers: Controller[],
  fx: Fixture,
  watch: ReferableWatch,
): Promise<ScaleFailover> {
  const [victim, ...rest] = controllers;
  const sample = Math.min(fx.names.length, quick ? 40 : 200);
  const step = Math.max(1, Math.floor(fx.names.length / sample));
  const indexes = Array.from({ length: sample }, (_, k) => k * step);
  log(`scale: kill -9 of one shard, then ${sample} sources changed`);
  const killedAt = performance.now();
  victim!.proc.kill("SIGKILL");
  const seenAt = new Map<string, number>();
  const value = `failover-${RUN}`;
  const off = watch.onChange((name) => {
    if (!seenAt.has(name) && watch.latest.get(name)?.value === value) seenAt.set(name, performance.now());
  });
  try {
    await pool(indexes, 16, (i) => setSource(client, fx.sources[i]!.kind, fx.sources[i]!.name, value));
    let bucketsTakenSeconds = NaN;
    let lastScrape = 0;
    await until(
      "the surviving shards to hold every bucket and serve every changed source",
      async () => {
        alive(rest);
        // The survivors' metrics four times a second, not at every 50 ms poll.
        if (Number.isNaN(bucketsTakenSeconds) && performance.now() - lastScrape >= 250) {
          lastScrape = performance.now();
          const held = await Promise.all(
            rest.map(async (c) => (await scrape(c)).get("referable_shard_buckets") ?? 0),
          );
          if (held.reduce((a, b) => a + b, 0) >= scaleBuckets)
            bucketsTakenSeconds = (performance.now() - killedAt) / 1000;
        }
        return !Number.isNaN(bucketsTakenSeconds) && indexes.every((i) => seenAt.has(fx.names[i]!))
          ? true
          : undefined;
      },
      // The survivors reconcile the dead shard's share (25,000 at 100,000) before all show.
      Math.max(300_000, fx.names.length * 6),
    );
    const follow = stats(indexes.map((i) => (seenAt.get(fx.names[i]!)! - killedAt) / 1000));
    return {
      bucketsTakenSeconds,
      sources: sample,
      followP50Seconds: follow.p50,
      followMaxSeconds: follow.max,
    };
  } finally {
    off();
  }
}

/**
 * n Referables over sources of their own: the status-write floor, then one replica's cold start
 * (its RSS, heap per Referable, propagation), then the floor again and a cold start of
 * `scaleShards` shards (`--shards`), their RSS each, propagation, and the failover after a
 * kill -9 of one; `--scale-phases` picks which. Each phase's figures are printed and saved as
 * soon as measured (`save`). The fixture is left to the private control plane's teardown when
 * the bench started one (deleting 200,000 objects takes longer than the rest of the phases);
 * on a borrowed cluster it is deleted in batches.
 */
async function runScale(
  client: BenchClient,
  plane: ControlPlane,
  report: Report,
  save: () => Promise<void>,
): Promise<ScaleResult> {
  const n = scaleReferables;
  const concurrency = 16; // the controller's default --concurrency
  const single = scaleHeapMiB ?? Math.max(256, Math.ceil(n / 100));
  const heapCapMiB = { single, shard: scaleShardHeapMiB ?? single };
  const print = (line: string) => process.stdout.write(`${line}\n`);
  log(`scale: creating ${n} sources and ${n} Referables (phases: ${[...scalePhases].join(", ")})`);
  const t0 = performance.now();
  let estimated = false;
  let lastLog = t0;
  const fx = await makeNamedFixture(client, n, `${RUN}-scale`, true, (created, total) => {
    const now = performance.now();
    const first = !estimated && (created >= Math.min(2000, total) || now - t0 > 20_000);
    if (!first && now - lastLog < 30_000) return;
    estimated = true;
    lastLog = now;
    const rate = created / ((now - t0) / 1000);
    const left = (total - created) / rate;
    log(
      `scale: ${first ? "estimate: " : ""}${created} of ${total} objects created, ${rate.toFixed(0)}/s: creating ~${Math.round(left)} s more; then ${scaleEstimate(n, rate, { before: left })}`,
    );
  });
  const setupSeconds = (performance.now() - t0) / 1000;
  const createdPerSecond = Number(((2 * n) / setupSeconds).toFixed(1));
  log(
    `scale: created in ${setupSeconds.toFixed(0)} s (${createdPerSecond}/s); ${scaleEstimate(n, createdPerSecond)}`,
  );
  const watch = new ReferableWatch(client, `bench-set=${fx.label}`, false);
  const result: ScaleResult = {
    n,
    phases: [...scalePhases],
    setupSeconds,
    createdPerSecond,
    floorConcurrency: concurrency,
    heapCapMiB,
    propagationFloor: { p50: report.floor.p50, p99: report.floor.p99 },
    single: { skipped: "not run (--scale-phases)" },
    sharded: { skipped: "not run (--scale-phases)" },
    cleanupSeconds: NaN,
  };
  report.scale = result;
  print("");
  print(scaleHeader(result));
  let running: Controller[] = [];
  try {
    await watch.start();
    if (scalePhase("single")) {
      // The Referables were created without a status, and writing a status where there is none
      // costs the API server less than replacing one (no old status to ratchet the schema's
      // validation against, no old managed fields to compare): the cold start replaces the
      // floor's, so the floor measured replaces one too. Not measured: its CPU is the setup's.
      log(`scale: floor: a first status for each of the ${n} Referables (not measured)`);
      await scaleFloor(client, plane, watch, fx, concurrency, "floor-0");
      log(`scale: floor: ${n} status writes, ${concurrency} in flight`);
      const floor1 = await scaleFloor(client, plane, watch, fx, concurrency, "floor-1");
      log(
        `scale: floor ${floor1.seconds.toFixed(1)} s; ${scaleEstimate(n, createdPerSecond, { floorSeconds: floor1.seconds, singleFloorDone: true })}`,
      );
      const one = await scaleColdStart(
        client,
        plane,
        fx,
        watch,
        1,
        heapCapMiB.single,
        floor1,
        report.baseline!.heapMiB,
        report.baseline!.liveHeapMiB,
      );
      running = one.controllers;
      result.single = one.phase;
      await save();
      printScalePhase(result, one.phase, print);
      await Promise.all(running.map((c) => c.stop()));
      running = [];
    }

    if (scalePhase("sharded")) {
      if (!(await controllerHasShards())) {
        result.sharded = { skipped: "this controller has no --shards flag (feat/sharding not merged)" };
        log(`scale: ${result.sharded.skipped}`);
      } else {
        log(`scale: floor again: ${n} status writes`);
        const floor2 = await scaleFloor(client, plane, watch, fx, concurrency, "floor-2");
        log(`scale: floor ${floor2.seconds.toFixed(1)} s`);
        const sharded = await scaleColdStart(
          client,
          plane,
          fx,
          watch,
          scaleShards,
          heapCapMiB.shard,
          floor2,
          report.baseline!.heapMiB,
          report.baseline!.liveHeapMiB,
        );
        running = sharded.controllers;
        result.sharded = sharded.phase;
        await save();
        printScalePhase(result, sharded.phase, print);
        if (scalePhase("failover")) {
          sharded.phase.failover = await scaleFailover(client, running, fx, watch);
          sharded.phase.failover.logLines = await countLogLines(running.map((c) => c.logPath));
          await save();
          printScaleFailover(sharded.phase.failover, print);
          for (const line of formatLogCounts("after the failover", sharded.phase.failover.logLines))
            print(line);
        }
      }
    }
  } finally {
    await Promise.all(running.map((c) => c.stop()));
    watch.close();
    if (plane.owned) {
      log("scale: the fixture goes with the private control plane (not deleted object by object)");
    } else {
      const c0 = performance.now();
      await deleteFixtures(client, fx.label, fx.batches);
      result.cleanupSeconds = (performance.now() - c0) / 1000;
    }
  }
  return result;
}

/** The status write budget the controllers run with: their environment (the bench passes it on), else the defaults. */
function writeBudget(): { rate: number; burst: number } {
  const read = (name: string, fallback: number) => {
    const raw = process.env[name];
    return raw === undefined || raw.trim() === "" ? fallback : Number(raw);
  };
  return {
    rate: read("REFERABLE_STATUS_WRITE_BUDGET", WRITE_POLICY_DEFAULTS.budget),
    burst: Math.max(1, read("REFERABLE_STATUS_WRITE_BUDGET_BURST", WRITE_POLICY_DEFAULTS.budgetBurst)),
  };
}

/**
 * The least time one replica's budget lets `writes` status writes take: the burst at once, the
 * rest at the budget's rate. Undefined without a budget (0: REFERABLE_STATUS_WRITE_BUDGET=0).
 */
function budgetBoundSeconds(writes: number): number | undefined {
  const { rate, burst } = writeBudget();
  if (!(rate > 0)) return undefined;
  return Math.max(0, writes - burst) / rate;
}

function scaleHeader(r: ScaleResult): string {
  return `scale: ${r.n} Referables over sources of their own (created in ${r.setupSeconds.toFixed(0)} s, ${r.createdPerSecond} objects/s); floor = ${r.n} status writes straight to the API server, ${r.floorConcurrency} in flight; propagation floor p50 / p99 ${ms(r.propagationFloor.p50)} / ${ms(r.propagationFloor.p99)} ms; heap cap ${r.heapCapMiB.single} MiB (one replica), ${r.heapCapMiB.shard} MiB (each shard)`;
}

const SCALE_COLUMNS = [
  "| replicas | floor s | cold start s | cold start / floor | write budget bound s (cold start / it) | status writes per Referable | CPU s per replica at Ready | RSS MiB per replica | heap used MiB per replica | peak RSS MiB | heap bytes per Referable (per owned) | propagation p50 / p99 ms (seen/updates) | buckets held | failover: buckets taken s | failover: changed sources followed p50 / max s |",
  "|---:|---:|---:|---:|---|---:|---|---|---|---:|---|---|---|---:|---|",
];

function scaleRow(ph: ScalePhase): string {
  const perReferable =
    ph.bytesPerReferable !== undefined
      ? String(ph.bytesPerReferable)
      : ph.bytesPerReferableEach
        ? `${ph.bytesPerReferableEach.join(", ")} (${ph.bytesPerOwned!.join(", ")})`
        : "-";
  return `| ${ph.replicas} | ${ph.floorSeconds.toFixed(1)} | ${ph.coldStartSeconds.toFixed(1)} | ${ph.coldStartOverFloor} | ${ph.budgetSeconds !== undefined ? `${ph.budgetSeconds.toFixed(1)} (${ph.coldStartOverBudget})` : "no budget"} | ${ph.statusWritesPerReferable?.toFixed(2) ?? "-"} | ${ph.cost.map((c) => c.cpuSeconds.toFixed(1)).join(", ")} | ${ph.cost.map((c) => c.rssMiB).join(", ")} | ${ph.cost.map((c) => c.heapMiB).join(", ")} | ${ph.peakRssMiB} | ${perReferable} | ${ms(ph.propagation.latency.p50)} / ${ms(ph.propagation.latency.p99)} (${ph.propagation.seen}/${ph.propagation.updates}) | ${ph.buckets?.join(", ") ?? "-"} | ${ph.failover ? ph.failover.bucketsTakenSeconds.toFixed(1) : "-"} | ${ph.failover ? `${ph.failover.followP50Seconds.toFixed(1)} / ${ph.failover.followMaxSeconds.toFixed(1)}` : "-"} |`;
}

const ratio = (a: number, b: number) =>
  Number.isFinite(a) && Number.isFinite(b) && b > 0 ? (a / b).toFixed(2) : "-";
const verdict = (ok: boolean) => (ok ? "met" : "NOT met");

/** One phase's row and its figures against the floor and issue 27's targets, as soon as measured. */
function printScalePhase(r: ScaleResult, ph: ScalePhase, p: (line: string) => void): void {
  const who = ph.replicas === 1 ? "one replica" : `${ph.replicas} shards`;
  p(SCALE_COLUMNS[0]!);
  p(SCALE_COLUMNS[1]!);
  p(scaleRow(ph));
  p(
    `${who}: cold start ${ph.coldStartSeconds.toFixed(1)} s / floor ${ph.floorSeconds.toFixed(1)} s = ${ph.coldStartOverFloor}x (target <= ${TARGETS.coldStartOverFloor}x: ${verdict(ph.coldStartOverFloor <= TARGETS.coldStartOverFloor)})`,
  );
  const { rate, burst } = writeBudget();
  p(
    ph.budgetSeconds === undefined
      ? `${who}: no status write budget (REFERABLE_STATUS_WRITE_BUDGET=0): the floor alone bounds the cold start`
      : `${who}: cold start ${ph.coldStartSeconds.toFixed(1)} s / the write budget's own bound ${ph.budgetSeconds.toFixed(1)} s ((${Math.ceil(r.n / ph.replicas)} writes${ph.replicas > 1 ? " per replica, an even share" : ""} - burst ${burst}) / ${rate} a second) = ${ph.coldStartOverBudget}x; the ${ph.budgetSeconds > ph.floorSeconds ? `budget binds (${ph.budgetSeconds.toFixed(1)} s > floor ${ph.floorSeconds.toFixed(1)} s)` : `floor binds (${ph.floorSeconds.toFixed(1)} s >= budget ${ph.budgetSeconds.toFixed(1)} s)`}`,
  );
  const maxRss = Math.max(...ph.cost.map((c) => c.rssMiB));
  p(
    `${who}: RSS ${ph.cost.map((c) => c.rssMiB).join(", ")} MiB at Ready, peak ${ph.peakRssMiB} MiB (heap cap ${ph.heapCapMiB} MiB; target per shard < ${TARGETS.rssMiBPerShard} MiB: ${verdict(Math.max(maxRss, ph.peakRssMiB) < TARGETS.rssMiBPerShard)})`,
  );
  const lat = ph.propagation.latency;
  p(
    `${who}: propagation p50 ${ms(lat.p50)} ms = ${ratio(lat.p50, r.propagationFloor.p50)}x the floor's ${ms(r.propagationFloor.p50)} ms; p99 ${ms(lat.p99)} ms = ${ratio(lat.p99, r.propagationFloor.p99)}x the floor's ${ms(r.propagationFloor.p99)} ms`,
  );
  if (ph.statusWrites)
    p(
      `${who}: ${ph.statusWrites.join(", ")} status writes from start to Ready = ${ph.statusWritesPerReferable.toFixed(2)} per Referable (1.00: each written once)`,
    );
  if (ph.deferredPerReferable && ph.reconcilesPerReferable !== undefined)
    p(
      `${who}: per Referable from start to Ready: ${ph.reconcilesPerReferable} reconciles, status writes held back ${ph.deferredPerReferable.budget} for the budget and ${ph.deferredPerReferable.rate} for its own rate`,
    );
  for (const line of formatLogCounts(who, ph.logLines ?? [])) p(line);
  if (ph.bytesPerReferable !== undefined)
    p(
      `${who}: heap used per Referable ${ph.bytesPerReferable} bytes ((heap used at Ready - idle heap) / ${r.n}; target <= ${TARGETS.heapBytesPerReferable}: ${verdict(ph.bytesPerReferable <= TARGETS.heapBytesPerReferable)})${ph.liveBytesPerReferable !== undefined ? `; live (after a full GC) ${ph.liveBytesPerReferable}` : ""}`,
    );
  if (ph.bytesPerOwned)
    p(
      `${who}: heap used per owned Referable ${ph.bytesPerOwned.join(", ")} bytes (owned ${ph.owned!.join(", ")}); over all ${r.n}: ${ph.bytesPerReferableEach!.join(", ")} bytes`,
    );
}

function printScaleFailover(f: ScaleFailover, p: (line: string) => void): void {
  p(
    `failover after kill -9 of one shard: every bucket held again after ${f.bucketsTakenSeconds.toFixed(1)} s (target < ${TARGETS.failoverSeconds} s: ${verdict(f.bucketsTakenSeconds < TARGETS.failoverSeconds)}); ${f.sources} changed sources shown p50 ${f.followP50Seconds.toFixed(1)} s, max ${f.followMaxSeconds.toFixed(1)} s (target < ${TARGETS.failoverSeconds} s: ${verdict(f.followMaxSeconds < TARGETS.failoverSeconds)})`,
  );
}

/** The whole scale table (the end of the run). */
function printScale(r: ScaleResult, p: (line: string) => void): void {
  p("");
  p(scaleHeader(r));
  p(SCALE_COLUMNS[0]!);
  p(SCALE_COLUMNS[1]!);
  for (const ph of [r.single, r.sharded]) if ("replicas" in ph) p(scaleRow(ph));
  if ("replicas" in r.single && r.single.liveBytesPerReferable !== undefined)
    p(`one replica's live heap (after a full GC): ${r.single.liveBytesPerReferable} bytes per Referable`);
  for (const [name, ph] of [
    ["one replica", r.single],
    ["shards", r.sharded],
  ] as const)
    if ("skipped" in ph) p(`${name}: skipped: ${ph.skipped}`);
}

// ---------- main ----------

/** Requests retried so far (bench/retry.ts); each is logged too. */
let retries = 0;

async function main(): Promise<void> {
  // In process and first, before the control plane competes for the two cores.
  // Not in a run of the scale scenario alone: half a minute of a run that must be short.
  const onlyScale = scenarios.size === 1 && scenarios.has("scale");
  if (!onlyScale) log("measuring transforms");
  const transforms = onlyScale ? [] : await measureTransforms(quick);
  // The scale scenario's control plane holds 200,000 objects written several times over.
  // Ctrl-C or a kill of a long run: end the controllers and the control plane, then exit.
  const toStop: { plane?: ControlPlane; signal?: NodeJS.Signals } = {};
  const onSignal = (signal: NodeJS.Signals) => {
    toStop.signal = signal;
    log(`${signal}: stopping ${liveControllers.size} controller(s) and the control plane`);
    for (const proc of liveControllers) proc.kill("SIGKILL");
    void (toStop.plane?.stop() ?? Promise.resolve()).finally(() => process.exit(130));
  };
  process.once("SIGINT", onSignal);
  process.once("SIGTERM", onSignal);
  const plane = await startControlPlane({ log, ...(scenarios.has("scale") && { extraFlags: SCALE_FLAGS }) });
  toStop.plane = plane;
  try {
    if (planeCpus) {
      if (!plane.owned)
        throw new Error("--plane-cpus needs the bench's own control plane (not USE_EXISTING_CLUSTER)");
      const own = plane as PrivateControlPlane;
      for (const pid of [own.apiServerPid, own.etcdPid]) if (pid !== undefined) await pinTo(pid, planeCpus);
      log(`kube-apiserver and etcd on CPUs ${planeCpus}`);
    }
    if (clientCpus) {
      await pinTo(process.pid, clientCpus);
      log(`the bench and its controllers on CPUs ${clientCpus}`);
    }
  } catch (err) {
    await plane.stop(); // before anything is measured: no control plane left behind
    throw err;
  }
  const kubeConfig = new KubeConfig();
  kubeConfig.loadFromFile(plane.kubeconfigPath);
  const rawClient = new KubeClient({ kubeConfig, requestTimeoutMs: 120_000 });
  const client = new RetryingClient(rawClient, {
    onRetry: (what, err, attempt, waitMs) => {
      retries++;
      log(`retry ${attempt} of ${what} in ${Math.round(waitMs)} ms: ${err.message.slice(0, 160)}`);
    },
  });
  try {
    await client.request("POST", "/api/v1/namespaces", {
      body: { apiVersion: "v1", kind: "Namespace", metadata: { name: NS } },
    });
    await installTestCrd(rawClient, WIDGET_GROUP, "Widget");
    log("measuring the floor");
    const report: Report = {
      command: `npm run bench -- ${process.argv.slice(2).join(" ")}`.trim(),
      date: new Date().toISOString(),
      machine: {
        cores: cpus().length,
        cpu: cpus()[0]?.model,
        memoryGiB: Number((totalmem() / 1024 ** 3).toFixed(1)),
      },
      node: process.version,
      kubernetes: plane.version,
      settings: {
        sizes,
        rates,
        phaseSeconds,
        fanOut,
        selectorObjects,
        selectorRefs,
        contentRefs,
        contentObjects,
        labelRefs,
        labelObjects,
        hotPeriods,
        hotUpdates,
        idleSeconds,
        exportRefs,
        accountRefs,
        accounts: accountCount,
        accountRestSeconds,
        scaleReferables,
        scaleShards,
        controllerNodeOptions,
        cpus: { plane: planeCpus ?? "any", clients: clientCpus ?? "any" },
        etcd: "--unsafe-no-fsync (test data)",
      },
      floor: await measureFloor(client, quick ? 30 : 200),
      baseline: undefined,
      sizes: [],
      hot: undefined,
      fanOut: undefined,
      selectors: undefined,
      content: undefined,
      labels: undefined,
      idle: undefined,
      reads: undefined,
      export: undefined,
      fieldExport: undefined,
      accounts: undefined,
      hostile: undefined,
      hostileLoad: undefined,
      scale: undefined,
      transforms,
      failed: {},
      retries: 0,
    };
    // Every figure is written and printed as soon as it is measured: a failure later (or a
    // crash) keeps what came before, and a failed scenario is reported, then the next one runs.
    const save = async () => {
      report.retries = retries;
      await mkdir(join(repoRoot, "bench"), { recursive: true });
      await writeFile(out, `${JSON.stringify(report, null, 2)}\n`);
    };
    const measured = async (part: Part) => {
      await save();
      printTable(report, part);
    };
    await measured("header");
    const scenario = async (name: string, run: () => Promise<void>) => {
      if (!scenarios.has(name)) return;
      try {
        await run();
      } catch (err) {
        if (toStop.signal) {
          // Stopped by the operator (its controllers killed under it): not a failure of the code.
          report.stopped = { signal: toStop.signal, scenario: name };
          log(`scenario ${name} stopped by ${toStop.signal}: what it measured before is kept`);
        } else {
          report.failed[name] = (err as Error).message.slice(0, 1000);
          log(`scenario ${name} failed: ${(err as Error).stack ?? String(err)}`);
        }
        await save();
      }
    };

    // The controller's heap with no Referables: the base for bytes per Referable.
    if (controllerScenarios.length > 0) {
      const idle = await startController(plane.kubeconfigPath, `bench-set=${RUN}-none`);
      report.baseline = await cost(idle);
      await idle.stop();
    }

    await scenario("sizes", async () => {
      for (const n of sizes) {
        report.sizes.push(
          await runSize(client, plane, n, report.baseline!.heapMiB, report.baseline!.liveHeapMiB),
        );
        await save();
      }
      await measured("sizes");
    });
    await scenario("hot", async () => {
      report.hot = await runHotSource(client, plane);
      await measured("hot");
    });
    await scenario("fanout", async () => {
      report.fanOut = await runFanOut(client, plane, fanOut);
      await measured("fanout");
    });
    await scenario("selectors", async () => {
      report.selectors = await runSelectors(client, plane, selectorObjects, selectorRefs);
      await measured("selectors");
    });
    await scenario("content", async () => {
      report.content = await runClusterContent(client, plane, contentRefs, contentObjects);
      await measured("content");
    });
    await scenario("labels", async () => {
      report.labels = await runLabels(client, plane, labelRefs, labelObjects);
      await measured("labels");
    });
    // As the Deployment runs it (leader election on), and as `npm start` does (off).
    await scenario("idle", async () => {
      report.idle = [];
      for (const n of idleReferables)
        report.idle.push(await runIdle(client, plane, n, true), await runIdle(client, plane, n, false));
      await measured("idle");
    });
    await scenario("reads", async () => {
      log("measuring one-shot reads (cached and consistent)");
      report.reads = await measureReads(rawClient, kubeConfig, `${NS}-reads-${RUN}`, quick);
      await measured("reads");
    });
    await scenario("export", async () => {
      report.export = await runExport(client, plane, exportRefs);
      await measured("export");
    });
    await scenario("field-export", async () => {
      report.fieldExport = await runFieldExport(client, plane, exportRefs);
      await measured("field-export");
    });
    await scenario("accounts", async () => {
      report.accounts = await runAccounts(client, plane, accountRefs, accountCount);
      await measured("accounts");
    });
    await scenario("hostile", async () => {
      report.hostile = await runHostile(client, plane);
      report.hostileLoad = await runHostileLoad(hostileLoadTools(client, plane), hostileLoadSizes);
      await measured("hostile");
    });
    await scenario("scale", async () => {
      report.scale = await runScale(client, plane, report, save);
      await measured("scale");
    });
    await measured("transforms");
    log(`wrote ${out}`);
    const failed = Object.keys(report.failed);
    if (failed.length > 0) {
      log(`failed: ${failed.join(", ")} (see "failed" in ${out})`);
      process.exitCode = 1;
    }
  } finally {
    await rawClient.close();
    await plane.stop();
  }
}

/** The parts of the report, each printed as soon as it is measured. */
type Part =
  | "header"
  | "sizes"
  | "hot"
  | "fanout"
  | "selectors"
  | "content"
  | "labels"
  | "idle"
  | "reads"
  | "export"
  | "field-export"
  | "accounts"
  | "hostile"
  | "scale"
  | "transforms";

/** bench/results.json: settings, then each scenario's figures (undefined until measured). */
interface Report {
  command: string;
  date: string;
  machine: { cores: number; memoryGiB: number; cpu?: string | undefined };
  node: string;
  kubernetes: string;
  settings: Record<string, unknown>;
  floor: Floor;
  baseline: Cost | undefined;
  sizes: SizeResult[];
  hot: HotResult[] | undefined;
  fanOut: FanOutResult | undefined;
  selectors:
    { objects: number; refs: number; coldStartSeconds: number; latency: Stats; cost: Cost } | undefined;
  content: ContentResult | undefined;
  labels: LabelsResult | undefined;
  idle: IdleResult[] | undefined;
  reads: ReadsResult | undefined;
  export: ExportResult | undefined;
  fieldExport: FieldExportResult | undefined;
  accounts: AccountsResult | undefined;
  hostile: HostilePhase[] | undefined;
  hostileLoad: HostileLoadPhase[] | undefined;
  scale: ScaleResult | undefined;
  transforms: TransformResult[];
  /** Scenarios that failed, with why: their figures are missing, the others are not. */
  failed: Record<string, string>;
  /** The run was stopped by a signal (Ctrl-C, a kill) during this scenario: not a failure. */
  stopped?: { signal: NodeJS.Signals; scenario: string };
  /** Requests retried in the whole run (each logged). */
  retries: number;
}

function printTable(r: Report, part: Part): void {
  const p = (s: string) => process.stdout.write(`${s}\n`);
  if (part === "header") {
    p(`\n${r.command}`);
    p(
      `machine: ${r.machine.cores} cores, ${r.machine.memoryGiB} GiB (${r.machine.cpu}); node ${r.node}; kube-apiserver ${r.kubernetes}`,
    );
    p(
      `floor (write ack → plain watch, + one status patch): p50 ${ms(r.floor.p50)} ms, p99 ${ms(r.floor.p99)} ms` +
        ` [watch p50 ${ms(r.floor.watchDelivery.p50)} p99 ${ms(r.floor.watchDelivery.p99)}; patch p50 ${ms(r.floor.statusPatch.p50)} p99 ${ms(r.floor.statusPatch.p99)}]`,
    );
  }
  if (part === "sizes" && (r.sizes.length > 0 || r.baseline)) {
    p("");
    p(
      "| Referables | updates/s | updates | p50 ms | p95 ms | p99 ms | max ms | p99 / floor p99 | in controller p50/p99 ms | max queue | status patch p50/p99 ms | status writes | requests in phase |",
    );
    p("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|");
    for (const s of r.sizes) {
      for (const prop of s.propagation) {
        const req = Object.entries(prop.requests)
          .filter(([, v]) => v > 0)
          .map(([k, v]) => `${k} ${v}`)
          .join(", ");
        p(
          `| ${s.n} | ${prop.rate} | ${prop.seen}/${prop.updates} | ${ms(prop.latency.p50)} | ${ms(prop.latency.p95)} | ${ms(prop.latency.p99)} | ${ms(prop.latency.max)} | ${(prop.latency.p99 / r.floor.p99).toFixed(2)} | ≤${ms(prop.controllerP50)} / ≤${ms(prop.controllerP99)} | ${prop.maxQueueDepth} | ≤${ms(prop.patchP50)} / ≤${ms(prop.patchP99)} | ${prop.statusWrites} | ${req} |`,
        );
      }
    }
    p("");
    p(
      "| Referables | cold start s | restart s | writes after restart | RSS MiB | heap used / total MiB | external MiB | bytes/Referable | watches | source informers |",
    );
    p("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    if (r.baseline)
      p(
        `| 0 (idle) | - | - | - | ${r.baseline.rssMiB} | ${r.baseline.heapMiB} / ${r.baseline.heapTotalMiB} | ${r.baseline.externalMiB} | - | ${r.baseline.watches} | ${r.baseline.informers} |`,
      );
    for (const s of r.sizes) {
      p(
        `| ${s.n} | ${s.coldStartSeconds.toFixed(1)} | ${s.restart.coldStartSeconds.toFixed(1)} | ${s.restart.statusWrites} | ${s.cost.rssMiB} | ${s.cost.heapMiB} / ${s.cost.heapTotalMiB} | ${s.cost.externalMiB} | ${s.bytesPerReferable} | ${s.cost.watches} | ${s.cost.informers} |`,
      );
    }
    for (const s of r.sizes)
      if (s.liveBytesPerReferable !== undefined)
        p(
          `live heap (after a full GC, from a heap snapshot): idle ${r.baseline?.liveHeapMiB} MiB, ${s.n} Referables ${s.cost.liveHeapMiB} MiB: ${s.liveBytesPerReferable} bytes per Referable`,
        );
  }
  if (part === "sizes") p("");
  if (part === "hot" && r.hot) {
    p(
      "| hot source: one write every | values shown | p50 ms | p99 ms | max ms | p99 / 200 ms row's p99 | status writes |",
    );
    p("|---:|---:|---:|---:|---:|---:|---:|");
    const base = r.hot.find((h) => h.periodMs === 200)?.latency.p99;
    for (const h of r.hot)
      p(
        `| ${h.periodMs} ms | ${h.shown}/${h.updates} (${((100 * h.shown) / h.updates).toFixed(1)}%) | ${ms(h.latency.p50)} | ${ms(h.latency.p99)} | ${ms(h.latency.max)} | ${base ? (h.latency.p99 / base).toFixed(2) : "-"} | ${h.statusWrites} |`,
      );
    p(`(floor in the same run: p50 ${ms(r.floor.p50)} ms, p99 ${ms(r.floor.p99)} ms)`);
    p("");
  }
  if (part === "fanout" && r.fanOut) {
    const floor = Math.min(...r.fanOut.writeFloor.map((f) => f.ms));
    p(
      `fan-out: one source → ${r.fanOut.n} Referables all updated: p50 ${ms(r.fanOut.samples.p50)} ms, max ${ms(r.fanOut.samples.max)} ms (${r.fanOut.samples.n} rounds); ` +
        `floor (${r.fanOut.n} status writes straight to the API server): ${r.fanOut.writeFloor.map((f) => `${ms(f.ms)} ms at ${f.concurrency} in flight`).join(", ")}; p50 / best floor ${(r.fanOut.samples.p50 / floor).toFixed(2)}`,
    );
  }
  for (const idle of part === "idle" ? (r.idle ?? []) : [])
    p(
      `idle: ${idle.referables} Referables, leader election ${idle.leaderElection ? "on" : "off"}, ${idle.seconds} s with nothing changing and no scrape: CPU ${idle.cpuSecondsPerMinute.toFixed(3)} s per minute, RSS ${idle.rssMiB} MiB`,
    );
  if (part === "selectors" && r.selectors)
    p(
      `selectors: ${r.selectors.refs} Referables (half Single, half Multiple) over ${r.selectors.objects} objects: cold start ${r.selectors.coldStartSeconds.toFixed(1)} s, propagation p50 ${ms(r.selectors.latency.p50)} ms p99 ${ms(r.selectors.latency.p99)} ms, RSS ${r.selectors.cost.rssMiB} MiB, heap ${r.selectors.cost.heapMiB} MiB`,
    );
  const c = r.content;
  if (part === "content" && c)
    p(
      `cluster content: ${c.refs} Referables + ${c.objects} unreferenced ConfigMaps of ${(c.objectBytes / 1e6).toFixed(0)} MB (listed at start, then rewritten): cold start ${c.coldStartSeconds.toFixed(1)} s, peak RSS ${c.peakRssMiB} MiB, peak heap ${c.peakHeapMiB} MiB; steady RSS ${c.steady.rssMiB} MiB, heap ${c.steady.heapMiB} / ${c.steady.heapTotalMiB} MiB; bytes kept per unreferenced object ${c.bytesPerUnreferencedObject}`,
    );
  const l = r.labels;
  if (part === "labels" && l)
    p(
      `labels: ${l.refs} Referables, cold start without then with ${l.objects} unselected ConfigMaps of ${(l.labelBytes / 1e3).toFixed(0)} KB of labels: steady RSS ${l.without.rssMiB} → ${l.with.rssMiB} MiB (+${(l.with.rssMiB - l.without.rssMiB).toFixed(1)}), heap ${l.without.heapMiB} → ${l.with.heapMiB} MiB; peak RSS with them ${l.peakRssMiB} MiB, cold start ${l.coldStartSeconds.toFixed(1)} s`,
    );
  const e = r.export;
  if (part === "export" && e)
    p(
      `export: ${e.refs} Referables, one source written at a time (${e.status.n} writes): status.value p50 ${ms(e.status.p50)} ms p99 ${ms(e.status.p99)} ms; exported ConfigMap key p50 ${ms(e.exported.p50)} ms p99 ${ms(e.exported.p99)} ms`,
    );
  const f = r.fieldExport;
  if (part === "field-export" && f)
    p(
      `field-export: ${f.refs} Referables, one source written at a time (${f.status.n} writes): status.value p50 ${ms(f.status.p50)} ms p99 ${ms(f.status.p99)} ms; target field (spec.forProvider of a managed-resource-shaped Task) p50 ${ms(f.field.p50)} ms p99 ${ms(f.field.p99)} ms; ${f.writesPerChange} target writes and ${f.readsPerChange} GETs per change`,
    );
  const a = r.accounts;
  if (part === "accounts" && a)
    p(
      `accounts: ${a.refs} Referables sharing ${a.accounts} ServiceAccounts: ${a.reviewsToReady} SubjectAccessReviews to Ready; at rest (${a.restSeconds} s) ${a.reviewsPerMinute} a minute, ${a.reviewsPerAccountResourcePerMinute} per (account, resource); ${a.reviewsDuringRounds} during ${a.withAccount.n} source writes; status.value p50 ${ms(a.withAccount.p50)} ms p99 ${ms(a.withAccount.p99)} ms with an account, p50 ${ms(a.withoutAccount.p50)} ms p99 ${ms(a.withoutAccount.p99)} ms without`,
    );
  if (part === "hostile" && r.hostile) {
    p(
      "hostile transforms (issue 21): a canary Referable while hostile ones are evaluated, beside the run without",
    );
    p(
      "| hostile Referables | canary p50 / p99 / max ms | /healthz (event-loop lag as a probe sees it) p50 / p99 / max ms | peak RSS MiB |",
    );
    p("|---:|---|---|---:|");
    for (const h of r.hostile)
      p(
        `| ${h.hostile} | ${ms(h.canary.p50)} / ${ms(h.canary.p99)} / ${ms(h.canary.max)} | ${ms(h.healthz.p50)} / ${ms(h.healthz.p99)} / ${ms(h.healthz.max)} | ${h.peakRssMiB} |`,
      );
  }
  if (part === "hostile") p("");
  if (part === "hostile" && r.hostileLoad) printHostileLoad(r.hostileLoad, p);
  if (part === "reads" && r.reads) {
    printReads(r.reads, p);
    p("");
  }
  if (part === "scale" && r.scale) printScale(r.scale, p);
  if (part === "transforms" && r.transforms.length > 0) printTransforms(r.transforms, p);
}

await main();
