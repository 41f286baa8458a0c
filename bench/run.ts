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
import { mkdir, writeFile } from "node:fs/promises";
import { cpus, totalmem } from "node:os";
import { join } from "node:path";
import { KubeConfig } from "@kubernetes/client-node";
import { KubeClient } from "../src/kube/client.ts";
import {
  type ControlPlane,
  type PrivateControlPlane,
  repoRoot,
  SCALE_FLAGS,
  startControlPlane,
} from "../test/harness/control-plane.ts";
import { installTestCrd } from "../test/harness/kube.ts";
import { runAccounts } from "./accounts.ts";
import { runClusterContent, runLabels } from "./cluster-content.ts";
import { controllerLogs, cost, liveControllers, pinTo, startController } from "./controller.ts";
import { runExport, runFieldExport } from "./exports.ts";
import { runFanOut } from "./fan-out.ts";
import { NS, WIDGET_GROUP } from "./fixtures.ts";
import { runHostileLoad } from "./hostile-load.ts";
import { hostileLoadTools, runHostile } from "./hostile.ts";
import { runHotSource } from "./hot-source.ts";
import { runIdle } from "./idle.ts";
import {
  accountCount,
  accountRefs,
  clientCpus,
  contentObjects,
  contentRefs,
  controllerScenarios,
  exportRefs,
  fanOut,
  idleReferables,
  hostileLoadSizes,
  labelObjects,
  labelRefs,
  log,
  out,
  planeCpus,
  quick,
  RUN,
  scenarios,
  selectorObjects,
  selectorRefs,
  settings,
  sizes,
} from "./options.ts";
import { measureFloor } from "./propagation.ts";
import { measureReads } from "./reads.ts";
import { type Part, printTable, type Report } from "./report.ts";
import { type BenchClient, RetryingClient } from "./retry.ts";
import { runScale } from "./scale.ts";
import { runSelectors } from "./selectors.ts";
import { runSize } from "./sizes.ts";
import { measureTransforms, type TransformResult } from "./transform.ts";

/** Requests retried so far (bench/retry.ts); each is logged too. */
let retries = 0;

/** Why the run ends early: the operator's signal, with the control plane to stop. */
interface ToStop {
  plane?: ControlPlane;
  signal?: NodeJS.Signals;
}

/**
 * Ctrl-C or a kill of a long run (the scale scenario's control plane holds 200,000 objects
 * written several times over): end the controllers and the control plane, then exit.
 */
function stopOnSignal(): ToStop {
  const toStop: ToStop = {};
  const onSignal = (signal: NodeJS.Signals) => {
    toStop.signal = signal;
    log(`${signal}: stopping ${liveControllers.size} controller(s) and the control plane`);
    for (const proc of liveControllers) proc.kill("SIGKILL");
    void (toStop.plane?.stop() ?? Promise.resolve()).finally(() => process.exit(130));
  };
  process.once("SIGINT", onSignal);
  process.once("SIGTERM", onSignal);
  return toStop;
}

/** The control plane, its processes and the bench's pinned to their CPUs when asked. */
async function startPlane(): Promise<ControlPlane> {
  const plane = await startControlPlane({ log, ...(scenarios.has("scale") && { extraFlags: SCALE_FLAGS }) });
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
  return plane;
}

/** The report before any scenario: the run, the machine, the settings and the floor. */
async function newReport(
  client: BenchClient,
  plane: ControlPlane,
  transforms: TransformResult[],
): Promise<Report> {
  return {
    command: `npm run bench -- ${process.argv.slice(2).join(" ")}`.trim(),
    date: new Date().toISOString(),
    machine: {
      cores: cpus().length,
      cpu: cpus()[0]?.model,
      memoryGiB: Number((totalmem() / 1024 ** 3).toFixed(1)),
    },
    node: process.version,
    kubernetes: plane.version,
    settings,
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
    controllerLogs: [],
  };
}

/** What a scenario is handed: the clients, the control plane, the report and its save. */
interface Run {
  client: BenchClient;
  rawClient: KubeClient;
  kubeConfig: KubeConfig;
  plane: ControlPlane;
  report: Report;
  save: () => Promise<void>;
}

/** A scenario that sets the report's `field` to what `measure` returns. */
function into<K extends keyof Report>(field: K, measure: (r: Run) => Promise<Report[K]>) {
  return async (r: Run): Promise<void> => {
    r.report[field] = await measure(r);
  };
}

/** The scenarios in the order they run, each filling its part of the report (printed after it). */
const SCENARIOS: ReadonlyArray<{
  name: Exclude<Part, "header" | "transforms" | "logs">;
  run(r: Run): Promise<void>;
}> = [
  {
    name: "sizes",
    async run({ client, plane, report, save }) {
      for (const n of sizes) {
        report.sizes.push(
          await runSize(client, plane, n, report.baseline!.heapMiB, report.baseline!.liveHeapMiB),
        );
        await save();
      }
    },
  },
  { name: "hot", run: into("hot", (r) => runHotSource(r.client, r.plane)) },
  { name: "fanout", run: into("fanOut", (r) => runFanOut(r.client, r.plane, fanOut)) },
  {
    name: "selectors",
    run: into("selectors", (r) => runSelectors(r.client, r.plane, selectorObjects, selectorRefs)),
  },
  {
    name: "content",
    run: into("content", (r) => runClusterContent(r.client, r.plane, contentRefs, contentObjects)),
  },
  { name: "labels", run: into("labels", (r) => runLabels(r.client, r.plane, labelRefs, labelObjects)) },
  {
    // As the Deployment runs it (leader election on), and as `npm start` does (off).
    name: "idle",
    run: into("idle", async (r) => {
      const runs = [];
      for (const n of idleReferables)
        runs.push(await runIdle(r.client, r.plane, n, true), await runIdle(r.client, r.plane, n, false));
      return runs;
    }),
  },
  {
    name: "reads",
    async run(r) {
      log("measuring one-shot reads (cached and consistent)");
      r.report.reads = await measureReads(r.rawClient, r.kubeConfig, `${NS}-reads-${RUN}`, quick);
    },
  },
  { name: "export", run: into("export", (r) => runExport(r.client, r.plane, exportRefs)) },
  { name: "field-export", run: into("fieldExport", (r) => runFieldExport(r.client, r.plane, exportRefs)) },
  {
    name: "accounts",
    run: into("accounts", (r) => runAccounts(r.client, r.plane, accountRefs, accountCount)),
  },
  {
    name: "hostile",
    async run(r) {
      r.report.hostile = await runHostile(r.client, r.plane);
      r.report.hostileLoad = await runHostileLoad(hostileLoadTools(r.client, r.plane), hostileLoadSizes);
    },
  },
  { name: "scale", run: into("scale", (r) => runScale(r.client, r.plane, r.report, r.save)) },
];

/** Runs the scenarios asked for; a failed one is reported, then the next one runs. */
async function runScenarios(r: Run, toStop: ToStop): Promise<void> {
  const measured = async (part: Part) => {
    await r.save();
    printTable(r.report, part);
  };
  await measured("header");
  // The controller's heap with no Referables: the base for bytes per Referable.
  if (controllerScenarios.length > 0) {
    controllerLogs.scenario = "baseline";
    const idle = await startController(r.plane.kubeconfigPath, `bench-set=${RUN}-none`);
    r.report.baseline = await cost(idle);
    await idle.stop();
  }
  for (const { name, run } of SCENARIOS) {
    if (!scenarios.has(name)) continue;
    controllerLogs.scenario = name;
    try {
      await run(r);
      await measured(name);
    } catch (err) {
      if (toStop.signal) {
        // Stopped by the operator (its controllers killed under it): not a failure of the code.
        r.report.stopped = { signal: toStop.signal, scenario: name };
        log(`scenario ${name} stopped by ${toStop.signal}: what it measured before is kept`);
      } else {
        r.report.failed[name] = (err as Error).message.slice(0, 1000);
        log(`scenario ${name} failed: ${(err as Error).stack ?? String(err)}`);
      }
      await r.save();
    }
  }
  await measured("transforms");
  await measured("logs");
}

async function main(): Promise<void> {
  // In process and first, before the control plane competes for the two cores.
  // Not in a run of the scale scenario alone: half a minute of a run that must be short.
  const onlyScale = scenarios.size === 1 && scenarios.has("scale");
  if (!onlyScale) log("measuring transforms");
  const transforms = onlyScale ? [] : await measureTransforms(quick);
  const toStop = stopOnSignal();
  const plane = await startPlane();
  toStop.plane = plane;
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
    const report = await newReport(client, plane, transforms);
    // Every figure is written and printed as soon as it is measured: a failure later (or a
    // crash) keeps what came before.
    const save = async () => {
      report.retries = retries;
      report.controllerLogs = await controllerLogs.kept();
      await mkdir(join(repoRoot, "bench"), { recursive: true });
      await writeFile(out, `${JSON.stringify(report, null, 2)}\n`);
    };
    await runScenarios({ client, rawClient, kubeConfig, plane, report, save }, toStop);
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

await main();
