/**
 * Issue 41's load attacks, each against a canary Referable (`value + '!'` over a ConfigMap of its
 * own), beside the same run at rest: a controller process of its own per phase, so that each
 * phase's peak RSS is its own.
 *
 * - labels: Referables whose selectors each name many label keys (64 matchLabels and 32 Exists,
 *   within the per-Referable cap), and a tenant's ConfigMaps carrying every one of those keys
 *   with 63-character values. The kind's total (--max-label-keys-per-kind) refuses the selectors
 *   past it (TooManyLabelKeys), so the tenant's labels cost at most the total's worth each.
 * - transforms: Referables with distinct expressions that each run to the time limit, their
 *   source rewritten every `rewriteSeconds`: quarantined after their first failure, they run in
 *   a lane of their own.
 * - reads: Referables with 16 field targets each, 15 of them missing, on the default reread
 *   interval: the drift reads share --drift-read-budget, and missing targets back off.
 *
 * Reported per phase: the canary's propagation (source write acknowledged → status.value seen
 * through a watch) p50/p99, the controller's peak RSS (VmHWM), and, over the canary's rounds
 * (20 s after the attack started: its first lists, evaluations and reads made), the controller's
 * CPU seconds and the GETs a minute the API server counted on the field targets' resource (the
 * reads a change calls for, such as each target's first, are not the budget's).
 *
 * The bench's own helpers (fixtures, the controller process, the watch) are handed in by
 * bench/hostile.ts: this file holds only the scenario.
 */
import type { BenchClient } from "./retry.ts";
import { stats, timeToShow } from "./stats.ts";

/** What the bench hands the scenario (bench/hostile.ts). */
export interface HostileLoadTools {
  client: BenchClient;
  kubeconfigPath: string;
  namespace: string;
  run: string;
  log: (line: string) => void;
  widgetGroup: string;
  createSource(
    name: string,
    value: string,
    labels: Record<string, string>,
    objectLabels?: Record<string, string>,
  ): Promise<void>;
  setSource(name: string, value: string): Promise<void>;
  createReferable(name: string, labels: Record<string, string>, spec: Record<string, unknown>): Promise<void>;
  deleteFixtures(label: string): Promise<void>;
  startController(selector: string): Promise<{ pid: number; stop(): Promise<void> }>;
  /** A watch of the Referables with `selector`: their latest value and Ready reason. */
  watch(selector: string): Promise<{
    latest: Map<string, { value: unknown; reason: string | undefined }>;
    onChange(listener: () => void): () => void;
    close(): void;
  }>;
  cpuSeconds(pid: number): Promise<number>;
  peakRssMiB(pid: number): Promise<number>;
  pool<T>(items: T[], concurrency: number, each: (item: T) => Promise<unknown>): Promise<unknown>;
}

/** The sizes of the attacks; the defaults run in a few minutes on a small machine. */
export interface HostileLoadSizes {
  /** Canary rounds per phase. */
  rounds: number;
  /** Referables of the labels attack, and label keys each names (64 matchLabels, the rest Exists). */
  labelReferables: number;
  labelKeysEach: number;
  /** The tenant's ConfigMaps, each carrying every key. */
  labelObjects: number;
  /** Referables of the transforms attack (distinct expressions), and how often their source is rewritten. */
  transformReferables: number;
  rewriteSeconds: number;
  /** Referables of the reads attack, each with 16 field targets (15 missing). */
  readReferables: number;
}

/** One phase's figures: the canary under one attack (or at rest). */
export interface HostileLoadPhase {
  attack: "rest" | "labels" | "transforms" | "reads";
  /** What the attack was, in words. */
  load: string;
  canaryP50Ms: number;
  canaryP99Ms: number;
  peakRssMiB: number;
  /** Controller CPU seconds over the measured part of the phase (after the attack took hold), and its length. */
  cpuSeconds: number;
  seconds: number;
  /** GETs a minute the API server counted on the field targets' resource (Widgets), over the measured part. */
  getsPerMinute: number;
  /** How the attack's Referables ended, by Ready reason (or Exported reason for the reads). */
  outcome: Record<string, number>;
}

/** The API server's count of GETs on `resource` of `group`, from its own /metrics. */
async function apiServerGets(client: BenchClient, group: string, resource: string): Promise<number> {
  const text = await client.request<string>("GET", "/metrics", { decode: (t: string) => t });
  let total = 0;
  for (const line of text.split("\n")) {
    if (!line.startsWith("apiserver_request_total{")) continue;
    if (!line.includes(`group="${group}"`) || !line.includes(`resource="${resource}"`)) continue;
    if (!line.includes('verb="GET"')) continue;
    total += Number(line.slice(line.lastIndexOf(" ") + 1));
  }
  return total;
}

/** The label key `k` of attacker `r`: short, so that a ConfigMap can carry thousands. */
const keyOf = (r: number, k: number) => `h/r${r}k${k}`;

/** Runs the phases: at rest, then each attack. */
export async function runHostileLoad(
  t: HostileLoadTools,
  sizes: HostileLoadSizes,
): Promise<HostileLoadPhase[]> {
  const phases: HostileLoadPhase[] = [];
  for (const attack of ["rest", "labels", "transforms", "reads"] as const)
    phases.push(await runPhase(t, sizes, attack));
  return phases;
}

async function runPhase(
  t: HostileLoadTools,
  sizes: HostileLoadSizes,
  attack: HostileLoadPhase["attack"],
): Promise<HostileLoadPhase> {
  const label = `${t.run}-hl-${attack}`;
  const labels = { "bench-set": label };
  const canary = `${label}-canary`;
  const byName = (name: string) => ({
    apiVersion: "v1",
    kind: "ConfigMap",
    namespace: t.namespace,
    name,
    fieldPath: "data.value",
  });
  await t.createSource(canary, "c0", labels);
  await t.createReferable(canary, labels, { source: byName(canary), transform: "value + '!'" });
  const watch = await t.watch(`bench-set=${label}`);
  const c = await t.startController(`bench-set=${label}`);
  await until(() => watch.latest.get(canary)?.value === "c0!", 60_000, "the canary Available");
  let load = "none";
  let running = true;
  const background: Array<Promise<unknown>> = [];
  const attackers: string[] = [];

  if (attack === "labels") {
    const { labelReferables: n, labelKeysEach: k, labelObjects: m } = sizes;
    const every: Record<string, string> = {};
    for (let r = 0; r < n; r++) for (let j = 0; j < k; j++) every[keyOf(r, j)] = `${r}-${j}-`.padEnd(63, "x");
    await t.pool(
      Array.from({ length: m }, (_, i) => i),
      4,
      (i) => t.createSource(`${label}-tenant-${i}`, "t", labels, every),
    );
    for (let r = 0; r < n; r++) {
      const name = `${label}-sel-${r}`;
      attackers.push(name);
      const matchLabels: Record<string, string> = {};
      const matchExpressions: Array<{ key: string; operator: string }> = [];
      for (let j = 0; j < k; j++) {
        if (j < 64) matchLabels[keyOf(r, j)] = "v";
        else matchExpressions.push({ key: keyOf(r, j), operator: "Exists" });
      }
      await t.createReferable(name, labels, {
        source: {
          apiVersion: "v1",
          kind: "ConfigMap",
          namespace: t.namespace,
          selector: { matchLabels, matchExpressions },
          fieldPath: "data.value",
        },
        policy: { resolution: "Optional" },
      });
    }
    load = `${n} Referables naming ${k} label keys each (${n * k} keys), ${m} ConfigMaps carrying all of them (${Math.round(JSON.stringify(every).length / 1024)} KiB of labels each)`;
  } else if (attack === "transforms") {
    const { DEEP_EQUALITY } = await import("../test/fixtures/hostile-transforms.ts");
    const bad = `${label}-bad`;
    await t.createSource(bad, "b0", labels);
    for (let i = 0; i < sizes.transformReferables; i++) {
      const name = `${label}-bad-${i}`;
      attackers.push(name);
      await t.createReferable(name, labels, {
        source: byName(bad),
        transform: `${DEEP_EQUALITY} ? value + '${i}' : value`,
      });
    }
    let round = 0;
    background.push(
      (async () => {
        while (running) {
          await t.setSource(bad, `b${++round}`);
          const until = Date.now() + sizes.rewriteSeconds * 1000;
          while (running && Date.now() < until) await new Promise((r) => setTimeout(r, 200));
        }
      })(),
    );
    load = `${sizes.transformReferables} Referables with distinct expressions that run to the time limit, their source rewritten every ${sizes.rewriteSeconds} s`;
  } else if (attack === "reads") {
    const widgets = `/apis/${t.widgetGroup}/v1/namespaces/${t.namespace}/widgets`;
    for (let r = 0; r < sizes.readReferables; r++) {
      const name = `${label}-rd-${r}`;
      attackers.push(name);
      const present = `${label}-w-${r}`;
      await t.client.request("POST", widgets, {
        body: {
          apiVersion: `${t.widgetGroup}/v1`,
          kind: "Widget",
          metadata: { name: present, labels },
          spec: { value: "w" },
        },
      });
      await t.createSource(`${label}-rs-${r}`, `v${r}`, labels);
      const target = (object: string) => ({
        apiVersion: `${t.widgetGroup}/v1`,
        kind: "Widget",
        namespace: t.namespace,
        name: object,
        fieldPath: "spec.copy",
      });
      await t.createReferable(name, labels, {
        source: byName(`${label}-rs-${r}`),
        export: [
          target(present),
          ...Array.from({ length: 15 }, (_, i) => target(`${label}-missing-${r}-${i}`)),
        ],
      });
    }
    load = `${sizes.readReferables} Referables with 16 field targets each, 15 missing`;
  }

  // Let the attack take hold before the canary is measured (the first lists, first evaluations).
  if (attack !== "rest") await new Promise((r) => setTimeout(r, 20_000));
  // Measured from here: the attack under way, its first reads and evaluations made.
  const cpu0 = await t.cpuSeconds(c.pid);
  const started = performance.now();
  const gets0 = await apiServerGets(t.client, t.widgetGroup, "widgets");
  const samples: number[] = [];
  for (let round = 1; round <= sizes.rounds; round++) {
    const value = `c${round}`;
    samples.push(
      await timeToShow(
        watch,
        () => watch.latest.get(canary)?.value === `${value}!`,
        () => t.setSource(canary, value),
        `${attack} round ${round}: the canary`,
        120_000,
      ),
    );
    await new Promise((r) => setTimeout(r, 500));
  }
  running = false;
  await Promise.all(background);
  const seconds = (performance.now() - started) / 1000;
  const gets = (await apiServerGets(t.client, t.widgetGroup, "widgets")) - gets0;
  const canaryLatency = stats(samples);
  const phase: HostileLoadPhase = {
    attack,
    load,
    canaryP50Ms: canaryLatency.p50,
    canaryP99Ms: canaryLatency.p99,
    peakRssMiB: await t.peakRssMiB(c.pid),
    cpuSeconds: Number(((await t.cpuSeconds(c.pid)) - cpu0).toFixed(1)),
    seconds: Number(seconds.toFixed(0)),
    getsPerMinute: Number(((gets * 60) / seconds).toFixed(0)),
    outcome: outcomeOf(watch.latest, attackers),
  };
  t.log(
    `hostile-load ${attack}: canary p50 ${phase.canaryP50Ms.toFixed(1)} ms p99 ${phase.canaryP99Ms.toFixed(1)} ms, peak RSS ${phase.peakRssMiB} MiB, CPU ${phase.cpuSeconds} s in ${phase.seconds} s, ${phase.getsPerMinute} GETs/min, ${JSON.stringify(phase.outcome)}`,
  );
  await c.stop();
  watch.close();
  await t.deleteFixtures(label);
  return phase;
}

function outcomeOf(
  latest: Map<string, { reason: string | undefined }>,
  names: string[],
): Record<string, number> {
  const out: Record<string, number> = {};
  for (const name of names) {
    const reason = latest.get(name)?.reason ?? "(none)";
    out[reason] = (out[reason] ?? 0) + 1;
  }
  return out;
}

async function until(ok: () => boolean, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!ok()) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** The phases as a Markdown table. */
export function printHostileLoad(phases: HostileLoadPhase[], p: (line: string) => void): void {
  p("load attacks (issue 41): a canary Referable under each attack, beside the run at rest");
  p("");
  p(
    "| attack | load | canary p50 / p99 ms | peak RSS MiB | controller CPU s (phase s) | GETs/min (field targets) | attackers ended |",
  );
  p("| --- | --- | --- | --- | --- | --- | --- |");
  for (const ph of phases)
    p(
      `| ${ph.attack} | ${ph.load} | ${ph.canaryP50Ms.toFixed(1)} / ${ph.canaryP99Ms.toFixed(1)} | ${ph.peakRssMiB} | ${ph.cpuSeconds} (${ph.seconds}) | ${ph.getsPerMinute} | ${
        Object.entries(ph.outcome)
          .map(([k, v]) => `${k} ${v}`)
          .join(", ") || "-"
      } |`,
    );
  p("");
}
