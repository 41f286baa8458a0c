/**
 * Runs the controller as the real process (`node src/process/main.ts`, Node stripping the types) for
 * tests of what only a process shows: flags, signals, exit codes, logs on stdout, /metrics and
 * the probes. Every process started here is tracked, so {@link killAllProcesses} in afterAll
 * leaves none behind even when a test fails half-way.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { request } from "node:http";
import { fileURLToPath } from "node:url";
import { JITTER_FACTOR } from "../../src/runtime/leader-election.ts";
import { SHARD_LABEL } from "./controller.ts";
import { waitFor } from "./kube.ts";
import { freePort } from "./ports.ts";
export { freePort };

const MAIN = fileURLToPath(new URL("../../src/process/main.ts", import.meta.url));

/** One stdout line, as the controller wrote it (`level` a name: debug, info, warn, error, fatal). */
export type LogLine = Record<string, unknown> & { level?: string; msg?: string };

/**
 * When a log line was written, in epoch milliseconds: the controller writes ISO 8601 times
 * (`"time":"2026-11-29T01:31:17.627Z"`). NaN for a line without a time, so a comparison with it
 * is never true by accident of a type: callers that need one assert it.
 */
export function logTime(line: LogLine): number {
  const time = line.time;
  if (typeof time === "number") return time;
  return typeof time === "string" ? Date.parse(time) : Number.NaN;
}

/** Whether a log line is at error level or above. */
export function isErrorLine(line: LogLine): boolean {
  return line.level === "error" || line.level === "fatal";
}

/** How a process ended. */
export interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

/** A running (or ended) controller process and what it wrote. */
export interface ControllerProcess {
  readonly pid: number;
  /** The ports passed as --metrics-bind-address and --health-probe-bind-address. */
  readonly metricsPort: number;
  readonly probePort: number;
  /** Everything written so far. */
  stdout(): string;
  stderr(): string;
  /** The stdout lines that parsed as JSON objects. */
  logs(): LogLine[];
  /** The stdout lines that did not. */
  unparsed(): string[];
  /** Resolves with the first log line (already written or to come) that satisfies `predicate`. */
  waitForLog(predicate: (line: LogLine) => boolean, timeoutMs?: number): Promise<LogLine>;
  /** The text of GET /metrics. */
  metrics(): Promise<string>;
  /** The status code of GET /readyz. */
  ready(): Promise<number>;
  /** The status code of GET /healthz. */
  healthy(): Promise<number>;
  /** Resolves when the process has ended and its output is closed. */
  readonly exited: Promise<Exit>;
  /** {@link exited}, but rejects when the process is still running after `timeoutMs`. */
  waitForExit(timeoutMs?: number): Promise<Exit>;
  /** Sends `signal` and waits for the exit; SIGKILLs and rejects if it takes over `timeoutMs`. */
  stop(signal?: NodeJS.Signals, timeoutMs?: number): Promise<Exit>;
  /** SIGKILL: the process gets no chance to clean up (no lease release). */
  kill(): Promise<Exit>;
}

const running = new Set<ChildProcess>();

/** Kills (SIGKILL) every process still running; call in afterAll. */
export async function killAllProcesses(): Promise<void> {
  await Promise.all(
    [...running].map(
      (child) =>
        new Promise<void>((resolve) => {
          child.once("close", () => resolve());
          if (!child.kill("SIGKILL") && child.exitCode !== null) resolve();
        }),
    ),
  );
  running.clear();
}

/** A lease short enough that a test sees a takeover in seconds. */
export const TEST_LEASE_MS = 3_000;
/** How often a candidate retries the lease, with {@link TEST_LEASE_MS}. */
export const TEST_RETRY_MS = 500;
/** Slack for process start-up, request latency and timer lateness on a loaded 2-core machine. */
export const TOLERANCE_MS = 2_500;

/**
 * The most a standby takes to take over from a killed leader: it takes a Lease once it has looked
 * unchanged for the lease duration, and it looks every retry period, jittered up to
 * (1 + JITTER_FACTOR) times: one look may be needed to see the last renewal and one to find it
 * expired.
 */
export const TAKE_OVER_BOUND_MS = TEST_LEASE_MS + 2 * (1 + JITTER_FACTOR) * TEST_RETRY_MS + TOLERANCE_MS;

/** The lease timing flags of the test lease (leader election and sharding both use them). */
export function leaseTimingArgs(): string[] {
  return [
    "--leader-election-lease-duration",
    `${TEST_LEASE_MS}ms`,
    "--leader-election-renew-deadline",
    "2s",
    "--leader-election-retry-period",
    `${TEST_RETRY_MS}ms`,
  ];
}

/**
 * The flags that give a controller process its own part of the cluster: the Referables labelled
 * with `scope.shard`, its Lease in `scope.ns`, and its identity.
 */
export function scopeArgs(scope: { ns: string; shard: string }, identity: string): string[] {
  return [
    "--referable-selector",
    `${SHARD_LABEL}=${scope.shard}`,
    "--leader-election-namespace",
    scope.ns,
    "--identity",
    identity,
  ];
}

/** The flags of leader election with the test lease (and the Lease `id`, when given). */
export function leaseArgs(id?: string): string[] {
  return [
    "--leader-elect=true",
    ...(id === undefined ? [] : ["--leader-election-id", id]),
    ...leaseTimingArgs(),
  ];
}

/** Options for {@link startControllerProcess}. */
export interface StartOptions {
  /**
   * Environment variables, on top of PATH and HOME only: the test's own environment
   * (NODE_OPTIONS, a developer's KUBECONFIG or REFERABLE_*) must not leak in. @default {}
   */
  env?: Record<string, string>;
  /** Prepend --kubeconfig with the test cluster's admin kubeconfig. @default true */
  kubeconfig?: boolean;
}

/**
 * Starts `node src/process/main.ts` with free metrics and probe ports on 127.0.0.1 (and the test
 * kubeconfig) before `args`, so `args` may override any of them (the last flag wins).
 */
export async function startControllerProcess(
  args: readonly string[],
  { env = {}, kubeconfig = true }: StartOptions = {},
): Promise<ControllerProcess> {
  const metricsPort = await freePort();
  const probePort = await freePort();
  const base = [
    "--metrics-bind-address",
    `127.0.0.1:${metricsPort}`,
    "--health-probe-bind-address",
    `127.0.0.1:${probePort}`,
  ];
  if (kubeconfig) {
    const path = process.env.REFERABLE_TEST_KUBECONFIG;
    if (!path)
      throw new Error("REFERABLE_TEST_KUBECONFIG is not set: run through jest's integration project");
    base.push("--kubeconfig", path);
  }
  const childEnv: Record<string, string> = { ...env };
  for (const name of ["PATH", "HOME"]) {
    const value = process.env[name];
    if (value !== undefined && childEnv[name] === undefined) childEnv[name] = value;
  }
  const child = spawn(process.execPath, [MAIN, ...base, ...args], {
    env: childEnv,
    stdio: ["ignore", "pipe", "pipe"],
  });
  running.add(child);

  let stdout = "";
  let stderr = "";
  let partial = "";
  const logs: LogLine[] = [];
  const unparsed: string[] = [];
  type Waiter = { predicate: (line: LogLine) => boolean; resolve: (line: LogLine) => void };
  const waiters = new Set<Waiter>();

  const exited = new Promise<Exit>((resolve, reject) => {
    child.once("error", reject); // e.g. the executable cannot be spawned
    child.once("close", (code, signal) => {
      running.delete(child);
      resolve({ code, signal });
    });
  });
  // Keeps an unawaited rejection (spawn failure) from failing an unrelated test.
  exited.catch(() => undefined);

  const take = (text: string) => {
    let line: unknown;
    try {
      line = JSON.parse(text);
    } catch {
      unparsed.push(text);
      return;
    }
    if (typeof line !== "object" || line === null || Array.isArray(line)) {
      unparsed.push(text);
      return;
    }
    logs.push(line as LogLine);
    for (const waiter of [...waiters]) {
      if (waiter.predicate(line as LogLine)) {
        waiters.delete(waiter);
        waiter.resolve(line as LogLine);
      }
    }
  };
  child.stdout.setEncoding("utf8");
  child.stdout.on("data", (chunk: string) => {
    stdout += chunk;
    const lines = (partial + chunk).split("\n");
    partial = lines.pop() ?? "";
    for (const line of lines) if (line.trim()) take(line);
  });
  child.stdout.on("end", () => {
    if (partial.trim()) take(partial);
    partial = "";
  });
  child.stderr.setEncoding("utf8");
  child.stderr.on("data", (chunk: string) => (stderr += chunk));

  const recentOutput = () =>
    `pid ${child.pid}; last output:\n${stdout.split("\n").slice(-8).join("\n")}\nstderr: ${stderr.slice(-800)}`;

  const waitForLog = (predicate: (line: LogLine) => boolean, timeoutMs = 20_000): Promise<LogLine> => {
    const found = logs.find(predicate);
    if (found) return Promise.resolve(found);
    return new Promise<LogLine>((resolve, reject) => {
      const waiter: Waiter = {
        predicate,
        resolve: (line) => {
          clearTimeout(timer);
          resolve(line);
        },
      };
      const timer = setTimeout(() => {
        waiters.delete(waiter);
        reject(new Error(`timed out after ${timeoutMs} ms waiting for a log line; ${recentOutput()}`));
      }, timeoutMs);
      waiters.add(waiter);
      void exited.then((exit) => {
        if (!waiters.delete(waiter)) return;
        clearTimeout(timer);
        reject(
          new Error(`the process exited (${JSON.stringify(exit)}) before the log line; ${recentOutput()}`),
        );
      });
    });
  };

  const waitForExit = async (timeoutMs = 30_000, onTimeout: () => void = () => undefined): Promise<Exit> => {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        onTimeout();
        reject(new Error(`the process did not exit within ${timeoutMs} ms; ${recentOutput()}`));
      }, timeoutMs);
    });
    try {
      return await Promise.race([exited, timeout]);
    } finally {
      clearTimeout(timer);
    }
  };

  const stop = (signal: NodeJS.Signals = "SIGTERM", timeoutMs = 30_000): Promise<Exit> => {
    if (child.exitCode === null && child.signalCode === null) child.kill(signal);
    return waitForExit(timeoutMs, () => child.kill("SIGKILL"));
  };

  if (child.pid === undefined) {
    await exited; // rejects with the spawn error
    throw new Error("the controller process did not start");
  }
  return {
    pid: child.pid,
    metricsPort,
    probePort,
    stdout: () => stdout,
    stderr: () => stderr,
    logs: () => [...logs],
    unparsed: () => [...unparsed],
    waitForLog,
    metrics: async () => {
      const res = await httpGet(metricsPort, "/metrics");
      if (res.status !== 200)
        throw new Error(`GET /metrics answered ${res.status}: ${res.body.slice(0, 200)}`);
      return res.body;
    },
    ready: async () => (await httpGet(probePort, "/readyz")).status,
    healthy: async () => (await httpGet(probePort, "/healthz")).status,
    exited,
    waitForExit: (timeoutMs) => waitForExit(timeoutMs),
    stop,
    kill: () => stop("SIGKILL"),
  };
}

/** A GET on 127.0.0.1 without connection reuse, so no socket outlives the request. */
function httpGet(port: number, path: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request({ host: "127.0.0.1", port, path, agent: false, timeout: 5_000 }, (res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (chunk: string) => (body += chunk));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
      res.on("error", reject);
    });
    req.on("timeout", () => req.destroy(new Error(`GET ${path} on port ${port} timed out`)));
    req.on("error", reject);
    req.end();
  });
}

/** One sample of the Prometheus text format. */
export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/** Parses the Prometheus text exposition format (comments skipped; label values unescaped). */
export function parseMetrics(text: string): Sample[] {
  const samples: Sample[] = [];
  for (const raw of text.split("\n")) {
    const line = raw.trim();
    if (!line || line.startsWith("#")) continue;
    const name = /^[a-zA-Z_:][a-zA-Z0-9_:]*/.exec(line)?.[0];
    if (!name) throw new Error(`not a Prometheus sample: ${line}`);
    let rest = line.slice(name.length);
    const labels: Record<string, string> = {};
    if (rest.startsWith("{")) {
      rest = rest.slice(1);
      for (;;) {
        rest = rest.replace(/^[\s,]+/, "");
        if (rest.startsWith("}")) {
          rest = rest.slice(1);
          break;
        }
        const m = /^([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/.exec(rest);
        if (!m) throw new Error(`bad labels in Prometheus sample: ${line}`);
        labels[m[1]!] = m[2]!.replace(/\\(.)/g, (_, c: string) => (c === "n" ? "\n" : c));
        rest = rest.slice(m[0].length);
      }
    }
    const value = rest.trim().split(/\s+/)[0] ?? "";
    // As Prometheus reads them (Go's ParseFloat): NaN and Inf in any case (prom-client writes "Nan").
    const special: Record<string, number> = { nan: NaN, inf: Infinity, "+inf": Infinity, "-inf": -Infinity };
    const number = special[value.toLowerCase()] ?? Number(value);
    if (value === "" || (Number.isNaN(number) && value.toLowerCase() !== "nan"))
      throw new Error(`bad value in Prometheus sample: ${line}`);
    samples.push({ name, labels, value: number });
  }
  return samples;
}

/**
 * The value of the series `name` whose labels include `labels`; when several match, their sum
 * (as PromQL's `sum(name{labels})`); undefined when none does.
 */
export function metricValue(
  text: string,
  name: string,
  labels: Record<string, string> = {},
): number | undefined {
  const matching = parseMetrics(text).filter(
    (s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v),
  );
  if (matching.length === 0) return undefined;
  return matching.reduce((sum, s) => sum + s.value, 0);
}

/** The labels of the controller's work queue series (workqueue_depth and the like). */
export const QUEUE = { name: "referable", controller: "referable" };

/** Waits (up to `timeoutMs`) until nothing is queued or being reconciled in `p`; returns its metrics then. */
export function waitForIdle(p: ControllerProcess, timeoutMs: number): Promise<string> {
  return waitFor(
    `process ${p.pid} to have an empty work queue and no reconcile running`,
    async () => {
      const text = await p.metrics();
      const idle =
        metricValue(text, "workqueue_depth", QUEUE) === 0 &&
        metricValue(text, "controller_runtime_active_workers", { controller: "referable" }) === 0;
      return idle && text;
    },
    { timeoutMs, intervalMs: 100 },
  );
}

/** Waits (up to `timeoutMs`) until `p` reports leader_election_master_status `want` (with `labels`). */
export function waitForLeaderStatus(
  p: ControllerProcess,
  want: 0 | 1,
  timeoutMs: number,
  labels: Record<string, string> = {},
): Promise<true> {
  return waitFor(
    `process ${p.pid} to report leader_election_master_status ${want}`,
    async () => metricValue(await p.metrics(), "leader_election_master_status", labels) === want,
    { timeoutMs, intervalMs: 50 },
  );
}

/**
 * Waits (up to `timeoutMs`) until exactly one of `a` and `b` reports leader_election_master_status
 * 1 (with `labels`) and the other 0; returns them as [leader, standby].
 */
export function waitForOneLeader(
  a: ControllerProcess,
  b: ControllerProcess,
  timeoutMs: number,
  labels: Record<string, string> = {},
): Promise<readonly [ControllerProcess, ControllerProcess]> {
  const statusOf = async (p: ControllerProcess) =>
    metricValue(await p.metrics(), "leader_election_master_status", labels);
  return waitFor(
    "exactly one of two replicas to lead",
    async () => {
      const [sa, sb] = await Promise.all([statusOf(a), statusOf(b)]);
      if (sa === 1 && sb === 0) return [a, b] as const;
      if (sa === 0 && sb === 1) return [b, a] as const;
      return undefined;
    },
    { timeoutMs, intervalMs: 100 },
  );
}
