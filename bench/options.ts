/**
 * The bench's command line, parsed once when the bench starts (`npm run bench -- --help`), and
 * what every scenario shares of a run: its id, its log, and the sizes the flags chose.
 */
import { join } from "node:path";
import { numberFlag, parseOrExit } from "../src/process/cli.ts";
import { repoRoot } from "../test/harness/control-plane.ts";
import type { HostileLoadSizes } from "./hostile-load.ts";

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
/** `--quick`: CI's smoke sizes. */
export const quick = flags.quick === true;
export const sizes = numbers("sizes", quick ? "100" : "100,1000,10000");
export const rates = numbers("rates", quick ? "50" : "50,200");
export const phaseSeconds = num("seconds", quick ? 3 : 10);
export const fanOut = num("fan-out", quick ? 100 : 1000);
export const selectorObjects = num("selector-objects", quick ? 1000 : 10000);
export const selectorRefs = num("selector-refs", quick ? 100 : 1000);
/** The cluster-content scenario: Referables, and unreferenced ConfigMaps of about 1 MiB beside them. */
export const contentRefs = num("content-refs", quick ? 100 : 1000);
export const contentObjects = num("content-objects", quick ? 20 : 400);
/** The labels scenario: Referables, and ConfigMaps with the largest label sets the API server takes. */
export const labelRefs = num("label-refs", quick ? 20 : 100);
export const labelObjects = num("label-objects", quick ? 30 : 150);
/** The hot-source scenario: one source rewritten every this many ms, each period a phase. */
export const hotPeriods = numbers("hot-periods", "200,50,20");
export const hotUpdates = num("hot-updates", quick ? 40 : 200);
/** The idle scenario: how long the settled controller is watched doing nothing. */
export const idleSeconds = num("idle-seconds", quick ? 10 : 60);
/** The idle scenario: how many Referables, one run each. */
export const idleReferables = numbers("idle-referables", "1");
/** Where results.json goes. */
export const out = arg("out") ?? join(repoRoot, "bench", "results.json");
/** The export scenario: Referables, each exporting its value into a ConfigMap key of its own. */
export const exportRefs = num("export-refs", quick ? 20 : 100);
/** The accounts scenario: Referables sharing ServiceAccounts, and how long reviews are counted at rest. */
export const accountRefs = num("account-refs", quick ? 100 : 1000);
export const accountCount = num("accounts", 10);
export const accountRestSeconds = num("account-rest-seconds", quick ? 70 : 150);
/** The sizes of the hostile scenario's load attacks (bench/hostile-load.ts). */
export const hostileLoadSizes: HostileLoadSizes = {
  rounds: quick ? 20 : 60,
  labelReferables: num("hostile-label-referables", quick ? 40 : 160),
  labelKeysEach: 96,
  labelObjects: num("hostile-label-objects", quick ? 10 : 40),
  transformReferables: num("hostile-transforms", quick ? 30 : 150),
  rewriteSeconds: 31,
  readReferables: num("hostile-read-referables", quick ? 20 : 100),
};
/** The scale scenario: Referables, shards (processes) and buckets (`--shards=N`). */
export const scaleReferables = num("referables", quick ? 1000 : 100_000);
export const scaleShards = num("shards", 4);
export const scaleBuckets = num("buckets", 16);
export const scaleHeapMiB = arg("scale-heap-mib") === undefined ? undefined : num("scale-heap-mib", 256);
export const scaleShardHeapMiB =
  arg("scale-shard-heap-mib") === undefined ? undefined : num("scale-shard-heap-mib", 256);
const SCALE_PHASES = ["single", "sharded", "failover"] as const;
type ScalePhaseName = (typeof SCALE_PHASES)[number];
export const scalePhases = new Set(
  (arg("scale-phases") ?? SCALE_PHASES.join(",")).split(",").filter(Boolean),
);
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
/** Whether the scale scenario runs phase `name`. */
export const scalePhase = (name: ScalePhaseName) => scalePhases.has(name);
/** Which scenarios run: sizes (with propagation), hot, fanout, selectors, content, labels, idle, reads, export, field-export, hostile (and scale and accounts, only when named). @default all but scale and accounts */
export const scenarios = new Set((arg("scenarios") ?? ALL_SCENARIOS).split(","));
for (const s of scenarios) {
  if (!KNOWN_SCENARIOS.split(",").includes(s)) {
    process.stderr.write(
      `--scenarios: unknown scenario ${JSON.stringify(s)}; the scenarios are ${KNOWN_SCENARIOS}\n`,
    );
    process.exit(2);
  }
}
/** Scenarios that run the controller process (and so need its idle baseline). */
export const controllerScenarios = [
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
/** `--profile`: a CPU profile of each controller, in bench/profiles/. */
export const profile = flags.profile === true;
/** Heap snapshots of the controller (they force a full GC): the live heap, not heap used. */
export const heapSnapshots = flags["heap-snapshots"] === true;
/** Where the controllers write their heap snapshots (deleted once read). */
export const SNAPSHOT_DIR = join(repoRoot, "bench", "heap");
/**
 * NODE_OPTIONS of the controller process. The default is the one deploy/base/deployment.yaml
 * ships, so the numbers are those of the shipped configuration.
 */
export const controllerLogLevel = arg("controller-log-level") ?? "warn";
export const controllerNodeOptions =
  arg("controller-node-options") ?? "--max-old-space-size=256 --max-semi-space-size=4";
/** Where the control plane and the clients run (--plane-cpus, --client-cpus): any CPU unless given. */
export const planeCpus = arg("plane-cpus");
export const clientCpus = arg("client-cpus");

export { log, RUN } from "./run-id.ts";

/** The settings results.json records: what sized each scenario. */
export const settings: Record<string, unknown> = {
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
};
