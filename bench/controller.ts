/**
 * The controller as a process of its own, compiled as the image runs it (`node dist/process/main.js`):
 * its start (until /readyz), its stop, the CPUs it runs on, and what it costs (RSS, heap, CPU
 * seconds from /proc, the live heap from a heap snapshot).
 */
import { type ChildProcess, spawn } from "node:child_process";
import { copyFile, mkdir, readdir, readFile, rm } from "node:fs/promises";
import { join } from "node:path";
import { type ControlPlane, type PrivateControlPlane, repoRoot } from "../test/harness/control-plane.ts";
import { freePort } from "../test/harness/ports.ts";
import { ControllerLogs } from "./controller-logs.ts";
import { scrape } from "./metrics.ts";
import {
  clientCpus,
  controllerLogLevel,
  controllerNodeOptions,
  heapSnapshots,
  profile,
  RUN,
  SNAPSHOT_DIR,
} from "./options.ts";
import { mib, until } from "./stats.ts";

/**
 * Pins every thread `pid` has now to `cpus` (taskset's list); threads made later inherit the set
 * of the thread that makes them. A list taskset refuses fails the run before anything is measured.
 */
export async function pinTo(pid: number, cpus: string): Promise<void> {
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
export function withHeapCap(options: string, mib: number): string {
  const rest = options.split(/\s+/).filter((o) => o !== "" && !o.startsWith("--max-old-space-size="));
  return [`--max-old-space-size=${mib}`, ...rest].join(" ");
}

/** Each controller's log file, under bench/logs/<RUN>/. */
export const controllerLogs = new ControllerLogs(repoRoot, RUN);

// ---------- the controller process ----------

/** A controller process the bench started. */
export interface Controller {
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
export let compiled: Promise<string> | undefined;
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
export const liveControllers = new Set<ChildProcess>();

/** Starts a controller over the Referables `selector` picks; resolves once it answers /readyz. */
export async function startController(
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
  proc.once("exit", () => {
    liveControllers.delete(proc);
    controllerLogs.exited(logFile.path);
  });
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

/** What a controller costs, read once it has settled. */
export interface Cost {
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
export async function liveHeapMiB(c: Controller): Promise<number> {
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

/** The cost of `c` now, after a second for a GC to settle its heap. */
export async function cost(c: Controller): Promise<Cost> {
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

/** The process's user + system CPU seconds, from /proc (Linux). */
export async function cpuSeconds(pid: number): Promise<number> {
  const stat = await readFile(`/proc/${pid}/stat`, "utf8");
  // Fields after the command name (which may hold spaces): utime is the 14th field, stime the 15th.
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return (Number(fields[11]) + Number(fields[12])) / 100; // USER_HZ is 100 on Linux
}

/** The control plane's (when the bench started it) and the bench's own CPU seconds so far. */
export async function planeCpuNow(plane: ControlPlane): Promise<PlaneCpu> {
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

/** The CPU seconds each process used between two readings. */
export function cpuSince(before: PlaneCpu, after: PlaneCpu): PlaneCpu {
  const d = (a: number, b: number) => Number((b - a).toFixed(1));
  return {
    apiServer: d(before.apiServer, after.apiServer),
    etcd: d(before.etcd, after.etcd),
    bench: d(before.bench, after.bench),
  };
}

/** The resident memory of process `pid` now (VmRSS), MiB. */
export async function rssMiBOf(pid: number): Promise<number> {
  const status = await readFile(`/proc/${pid}/status`, "utf8");
  const kib = Number(/VmRSS:\s+(\d+)/.exec(status)?.[1]);
  return Number((kib / 1024).toFixed(1));
}

/** Samples the controller's RSS and heap every 200 ms until stopped; returns the highest seen. */
export function samplePeaks(
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

/** The highest resident memory of process `pid` so far (VmHWM), MiB. */
export async function peakRssMiBOf(pid: number): Promise<number> {
  const status = await readFile(`/proc/${pid}/status`, "utf8");
  return Number((Number(/VmHWM:\s+(\d+) kB/.exec(status)?.[1] ?? NaN) / 1024).toFixed(1));
}

/** CPU seconds (user + system) of the control plane's processes and the bench over a span. */
export interface PlaneCpu {
  apiServer: number;
  etcd: number;
  bench: number;
}

/** Whether the compiled controller has the --shards flag (feat/sharding merged). */
export async function controllerHasShards(): Promise<boolean> {
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
export function alive(controllers: readonly Controller[]): void {
  for (const c of controllers)
    if (c.proc.exitCode !== null || c.proc.signalCode !== null)
      throw new Error(
        `a controller process exited (${c.proc.exitCode ?? c.proc.signalCode}) during the scale scenario`,
      );
}
