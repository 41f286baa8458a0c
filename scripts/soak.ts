/**
 * `npm run soak -- --minutes N [--seed S] [--rate R] [--quiet SECONDS]`: a churn soak of the
 * controller process against a private control plane, judged by an independent oracle.
 *
 * For N minutes it creates, updates, relabels and deletes sources (ConfigMaps in three
 * namespaces, a namespaced and a cluster-scoped custom kind) and Referables (names and
 * selectors, Single and Multiple, defaults and Optional, a kind that is never served; some
 * exporting into a few shared ConfigMap keys, which it also edits by hand and deletes), one
 * operation at a time from a seeded PRNG, so a seed replays the same sequence. After a quiet
 * period the oracle (test/harness/oracle.ts) computes every Referable's status from the final
 * cluster state and compares. Meanwhile /metrics is sampled for memory (heap used, whose
 * regression slope is reported), event-loop delay and informers, and once a minute a full
 * collection is forced through the controller's inspector to read its live heap, the figure
 * the memory verdict rests on. At the end every Referable is deleted and the informers must go
 * back to baseline.
 *
 * Exits 1 on a mismatch, an unhandled rejection, a log line that only a bug writes, informers
 * not back to baseline, the controller dying, or (runs with 10+ minutes after warm-up) a live
 * heap that grows. The CI test (test/integration/soak.test.ts) runs a short soak through
 * {@link runSoak}.
 */
import { randomInt } from "node:crypto";
import { writeFileSync } from "node:fs";
import { pathToFileURL } from "node:url";
import { parseOrExit, type CommandSpec, type FlagValues } from "../src/process/cli.ts";
import type { KubeClient, KubeObject } from "../src/kube/client.ts";
import { startControlPlane, type PrivateControlPlane } from "../test/harness/control-plane.ts";
import { SHARD_LABEL } from "../test/harness/controller.ts";
import { clientFor } from "../test/harness/faults.ts";
import { installTestCrd, waitFor } from "../test/harness/kube.ts";
import {
  checkAll,
  checkExports,
  describeMismatch,
  expectationFor,
  observeWorld,
  type Mismatch,
} from "../test/harness/oracle.ts";
import {
  freePort,
  isErrorLine,
  metricValue,
  parseMetrics,
  startControllerProcess,
  type ControllerProcess,
  type Exit,
  type LogLine,
} from "../test/harness/process.ts";

/** Options of {@link runSoak}. */
export interface SoakOptions {
  /** How long the churn lasts. */
  durationMs: number;
  /** PRNG seed (32-bit unsigned); a random one when absent. It is printed and reported. */
  seed?: number;
  /** Operations per second, one at a time. @default 20 */
  ratePerSecond?: number;
  /** Quiet time after the churn before the oracle looks. @default 10000 */
  quietMs?: number;
  /** How often /metrics is sampled. @default 5000 */
  sampleEveryMs?: number;
  /** Samples before this (from the start of the churn) are left out of the memory trend. @default 20% of the run, 15 s to 3 min */
  warmupMs?: number;
  /**
   * How often to force a full garbage collection in the controller (through the inspector,
   * which the soak opens on a loopback port) and record the live heap: the one memory figure a
   * collector's saw-tooth does not blur. 0 turns it off. @default 60000
   */
  liveHeapEveryMs?: number;
  /** Progress lines. @default stderr */
  log?: (line: string) => void;
}

/** One /metrics sample of the controller process. */
export interface MetricsSample {
  /** ms since the churn started. */
  t: number;
  heapUsedBytes: number;
  residentBytes: number;
  eventLoopLagSeconds: number;
  eventLoopLagP99Seconds: number;
  eventLoopLagMaxSeconds: number;
  sourceInformers: number;
  watchesOpen: number;
}

/** What a soak measured, and whether it passed. */
export interface SoakReport {
  seed: number;
  churnMs: number;
  operations: { total: number; failed: number; byType: Record<string, number> };
  referablesChecked: number;
  /** The final Referables by the reason the oracle expects: the spread of what was checked. */
  reasons: Record<string, number>;
  mismatches: Mismatch[];
  /** Of the mismatches, those still there after 30 s more (a slow controller versus a wrong one). */
  persistentMismatches: Mismatch[];
  memory: {
    warmupMs: number;
    samples: number;
    heapFirstMiB: number;
    heapLastMiB: number;
    /** Least-squares slope of heap used after warm-up. */
    slopeKiBPerMin: number;
    /** Slope of the per-window minimum (the heap after collections), which GC noise hardly moves. */
    floorSlopeKiBPerMin: number;
    /** Slope of the live heap after forced full collections (NaN without them): what is judged. */
    liveSlopeKiBPerMin: number;
    liveFirstMiB: number;
    liveLastMiB: number;
    /** Whether the run was long enough to judge a trend (10 min after warm-up). */
    judged: boolean;
    growing: boolean;
  };
  informers: { baseline: number; peak: number; end: number; backToBaseline: boolean; watchesEnd: number };
  eventLoop: { p99MaxMs: number; p99MeanMs: number; maxMs: number };
  propagation: { count: number; p50Ms: number; p99Ms: number };
  statusWrites: { success: number; conflict: number; error: number };
  unhandledRejections: number;
  /** Log lines only a bug writes (a listener or callback threw, a loop ended). */
  bugLines: string[];
  errorLines: Record<string, number>;
  controllerExit: Exit | undefined;
  /** Every /metrics sample, for a closer look (`--save-samples FILE` writes them as JSON). */
  samples: MetricsSample[];
  /** The live heap after each forced full collection (`t` in ms since the churn started). */
  liveHeap: Array<{ t: number; bytes: number }>;
  problems: string[];
  passed: boolean;
}

// ---------------------------------------------------------------------------------------------
// The seeded PRNG and the world the churn plays in

/** mulberry32: small, fast, and the same sequence for the same seed everywhere. */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

class Dice {
  private readonly next: () => number;
  constructor(seed: number) {
    this.next = prng(seed);
  }
  /** An integer in [0, n). */
  int(n: number): number {
    return Math.floor(this.next() * n);
  }
  chance(p: number): boolean {
    return this.next() < p;
  }
  pick<T>(items: readonly T[]): T {
    return items[this.int(items.length)]!;
  }
  /** A key of `weights`, with probability proportional to its weight. */
  weighted<K extends string>(weights: Record<K, number>): K {
    const entries = Object.entries(weights) as Array<[K, number]>;
    let roll = this.next() * entries.reduce((sum, [, w]) => sum + w, 0);
    for (const [key, w] of entries) {
      roll -= w;
      if (roll < 0) return key;
    }
    return entries[entries.length - 1]![0];
  }
}

const GROUP = "soak.test.referable.dev";
const CR_VERSION = `${GROUP}/v1`;
const NAMESPACES = ["soak-a", "soak-b", "soak-c"];
const LEASE_NAMESPACE = "soak-system";
/** Where Referables export: a few objects and keys, so targets are shared, edited and deleted. */
const EXPORT_NAMESPACE = "soak-out";
const EXPORT_OBJECTS = 3;
const EXPORT_KEYS = 3;
const COLORS = ["red", "green", "blue"];
const SOURCE_NAMES = 6;
const REFERABLE_NAMES = 40;
const RF = "/apis/referable.dev/v1alpha1/referables";

interface SourceKind {
  apiVersion: string;
  kind: string;
  resource: string;
  namespaced: boolean;
  /** Field paths a Referable of this kind may read (dotted names and [key] only: the oracle's subset). */
  fieldPaths: string[];
}

const KINDS: SourceKind[] = [
  {
    apiVersion: "v1",
    kind: "ConfigMap",
    resource: "configmaps",
    namespaced: true,
    fieldPaths: ["data.v", "data.v", "data[w]", "metadata.labels[app]"],
  },
  {
    apiVersion: CR_VERSION,
    kind: "Widget",
    resource: "widgets",
    namespaced: true,
    fieldPaths: ["spec.size", "spec.tags[env]", "metadata.labels[app]"],
  },
  {
    apiVersion: CR_VERSION,
    kind: "Gadget",
    resource: "gadgets",
    namespaced: false,
    fieldPaths: ["spec.size", "spec.tags[env]"],
  },
];
/** Never served: Referables of it are KindNotFound (and keep a CRD informer open while they exist). */
const GHOST = { apiVersion: CR_VERSION, kind: "Ghost" };
const ORACLE_KINDS = [...KINDS.map((k) => ({ apiVersion: k.apiVersion, kind: k.kind })), GHOST];

interface SourceSlot {
  kind: SourceKind;
  namespace: string | undefined;
  name: string;
}

/** The path of an export target object. */
const targetPath = (name: string) => `/api/v1/namespaces/${EXPORT_NAMESPACE}/configmaps/${name}`;

function slotPath(slot: SourceSlot, withName = true): string {
  const base = slot.kind.apiVersion.includes("/") ? `/apis/${slot.kind.apiVersion}` : `/api/v1`;
  const ns = slot.namespace ? `/namespaces/${slot.namespace}` : "";
  return `${base}${ns}/${slot.kind.resource}${withName ? `/${slot.name}` : ""}`;
}

const slotKey = (s: SourceSlot) => `${s.kind.kind}/${s.namespace ?? ""}/${s.name}`;

/** Every source slot of the world: a few names per kind and namespace, so names get reused. */
function allSlots(): SourceSlot[] {
  const slots: SourceSlot[] = [];
  for (const kind of KINDS) {
    for (const namespace of kind.namespaced ? NAMESPACES : [undefined]) {
      for (let i = 0; i < SOURCE_NAMES; i++)
        slots.push({ kind, namespace, name: `${kind.kind.toLowerCase()}-${i}` });
    }
  }
  return slots;
}

type OpType =
  | "createSource"
  | "updateSource"
  | "relabelSource"
  | "deleteSource"
  | "relabelBurst"
  | "createReferable"
  | "updateReferable"
  | "deleteReferable"
  | "editTarget"
  | "deleteTarget";

const WEIGHTS: Record<OpType, number> = {
  createSource: 18,
  updateSource: 26,
  relabelSource: 14,
  deleteSource: 9,
  relabelBurst: 2,
  createReferable: 13,
  updateReferable: 10,
  deleteReferable: 8,
  editTarget: 4,
  deleteTarget: 2,
};

/** The churn: the model of what exists (kept from the API server's answers) and the operations. */
class Churn {
  readonly counts: Record<string, number> = {};
  failed = 0;
  /** The first few refusals, for the log. */
  readonly firstErrors: string[] = [];
  private readonly dice: Dice;
  private readonly admin: KubeClient;
  private readonly shard: string;
  private readonly slots = allSlots();
  private readonly present = new Map<string, SourceSlot>();
  private readonly referables = new Set<string>();
  private serial = 0;

  constructor(dice: Dice, admin: KubeClient, shard: string) {
    this.dice = dice;
    this.admin = admin;
    this.shard = shard;
  }

  get total(): number {
    return Object.values(this.counts).reduce((a, b) => a + b, 0);
  }

  /** Names of the Referables that exist now. */
  referableNames(): string[] {
    return [...this.referables];
  }

  async step(): Promise<void> {
    let op = this.dice.weighted(WEIGHTS);
    // Keep the model's choices possible: nothing to update means create.
    if (op !== "createSource" && op !== "createReferable") {
      if (op.endsWith("Referable") && this.referables.size === 0) op = "createReferable";
      else if (!op.endsWith("Referable") && this.present.size === 0) op = "createSource";
    }
    if (op === "createSource" && this.present.size === this.slots.length) op = "updateSource";
    if (op === "createReferable" && this.referables.size === REFERABLE_NAMES) op = "updateReferable";
    this.counts[op] = (this.counts[op] ?? 0) + 1;
    try {
      await this.run(op);
    } catch (err) {
      // The model follows the server (a 404 means gone, a 409 on create means there); any
      // other refusal is counted, and the oracle judges the cluster as it ends up anyway.
      this.failed++;
      if (this.firstErrors.length < 5)
        this.firstErrors.push(`${op}: ${(err as Error).message.slice(0, 200)}`);
    }
  }

  private async run(op: OpType): Promise<void> {
    const d = this.dice;
    switch (op) {
      case "createSource": {
        const slot = d.pick(this.slots.filter((s) => !this.present.has(slotKey(s))));
        this.present.set(slotKey(slot), slot);
        await this.admin.request("POST", slotPath(slot, false), { body: this.sourceBody(slot) });
        return;
      }
      case "updateSource": {
        const slot = this.pickPresent();
        await this.mergePatch(slotPath(slot), this.sourceUpdate(slot), slot);
        return;
      }
      case "relabelSource": {
        const slot = this.pickPresent();
        await this.mergePatch(slotPath(slot), { metadata: { labels: { app: this.color() } } }, slot);
        return;
      }
      case "relabelBurst": {
        // Several at once, so the controller sees a burst; the targets are distinct, so the
        // end state does not depend on the order the server applies them.
        const picked = new Map<string, SourceSlot>();
        for (let i = 0; i < 6; i++) {
          const slot = this.pickPresent();
          picked.set(slotKey(slot), slot);
        }
        const patches = [...picked.values()].map((slot) => [slot, this.color()] as const);
        const results = await Promise.allSettled(
          patches.map(([slot, app]) =>
            this.mergePatch(slotPath(slot), { metadata: { labels: { app } } }, slot),
          ),
        );
        for (const r of results) if (r.status === "rejected") throw r.reason;
        return;
      }
      case "deleteSource": {
        const slot = this.pickPresent();
        this.present.delete(slotKey(slot));
        await this.admin.request("DELETE", slotPath(slot));
        return;
      }
      case "createReferable": {
        const free = Array.from({ length: REFERABLE_NAMES }, (_, i) => `soak-r${i}`).filter(
          (n) => !this.referables.has(n),
        );
        const name = d.pick(free);
        this.referables.add(name);
        await this.admin.request("POST", RF, {
          body: {
            apiVersion: "referable.dev/v1alpha1",
            kind: "Referable",
            metadata: { name, labels: { [SHARD_LABEL]: this.shard } },
            spec: this.referableSpec(),
          },
        });
        return;
      }
      case "updateReferable": {
        const name = d.pick([...this.referables].sort());
        try {
          await this.admin.request("PATCH", `${RF}/${name}`, {
            body: [{ op: "replace", path: "/spec", value: this.referableSpec() }],
            contentType: "application/json-patch+json",
          });
        } catch (err) {
          if ((err as { statusCode?: number }).statusCode === 404) this.referables.delete(name);
          throw err;
        }
        return;
      }
      case "deleteReferable": {
        const name = d.pick([...this.referables].sort());
        this.referables.delete(name);
        await this.admin.request("DELETE", `${RF}/${name}`);
        return;
      }
      case "editTarget": {
        // A hand edit of an exported key (or its removal), as kubectl would make it.
        const key = `K${d.int(EXPORT_KEYS)}`;
        await this.admin.request("PATCH", targetPath(`out-${d.int(EXPORT_OBJECTS)}`), {
          body: { data: { [key]: d.chance(0.3) ? null : `hand${++this.serial}` } },
          contentType: "application/merge-patch+json",
          query: { fieldManager: "soak-hand" },
        });
        return;
      }
      case "deleteTarget": {
        await this.admin.request("DELETE", targetPath(`out-${d.int(EXPORT_OBJECTS)}`));
        return;
      }
    }
  }

  private pickPresent(): SourceSlot {
    return this.dice.pick([...this.present.values()].sort((a, b) => (slotKey(a) < slotKey(b) ? -1 : 1)));
  }

  private async mergePatch(path: string, body: unknown, slot: SourceSlot): Promise<void> {
    try {
      await this.admin.request("PATCH", path, { body, contentType: "application/merge-patch+json" });
    } catch (err) {
      if ((err as { statusCode?: number }).statusCode === 404) this.present.delete(slotKey(slot));
      throw err;
    }
  }

  private color(): string | null {
    return this.dice.chance(0.2) ? null : this.dice.pick(COLORS);
  }

  private sourceBody(slot: SourceSlot): KubeObject {
    const d = this.dice;
    const n = ++this.serial;
    const metadata: Record<string, unknown> = { name: slot.name };
    if (slot.namespace) metadata.namespace = slot.namespace;
    const app = this.color();
    if (app) metadata.labels = { app };
    if (slot.kind.kind === "ConfigMap") {
      const data: Record<string, string> = {};
      if (d.chance(0.85)) data.v = `v${n}`;
      if (d.chance(0.5)) data.w = `w${n}`;
      return { apiVersion: "v1", kind: "ConfigMap", metadata, data };
    }
    const spec: Record<string, unknown> = {};
    if (d.chance(0.85)) spec.size = n;
    if (d.chance(0.5)) spec.tags = { env: `e${n}` };
    return { apiVersion: slot.kind.apiVersion, kind: slot.kind.kind, metadata, spec };
  }

  private sourceUpdate(slot: SourceSlot): unknown {
    const d = this.dice;
    const n = ++this.serial;
    const roll = d.int(10);
    // An annotation-only change: every Referable reading it must be left alone.
    if (roll === 0) return { metadata: { annotations: { touched: `${n}` } } };
    if (slot.kind.kind === "ConfigMap") {
      if (roll === 1) return { data: { v: null } };
      if (roll <= 3) return { data: { w: d.chance(0.3) ? null : `w${n}` } };
      return { data: { v: `v${n}` } };
    }
    if (roll === 1) return { spec: { size: null } };
    if (roll <= 3) return { spec: { tags: d.chance(0.3) ? null : { env: `e${n}` } } };
    return { spec: { size: n } };
  }

  private referableSpec(): Record<string, unknown> {
    const d = this.dice;
    const ghost = d.chance(0.04);
    const kind = ghost ? undefined : d.pick([KINDS[0]!, KINDS[0]!, KINDS[1]!, KINDS[2]!]);
    const source: Record<string, unknown> = ghost
      ? { apiVersion: GHOST.apiVersion, kind: GHOST.kind, namespace: d.pick(NAMESPACES) }
      : { apiVersion: kind!.apiVersion, kind: kind!.kind };
    if (kind) {
      // Now and then the scope is wrong, which is InvalidSpec.
      const wrongScope = d.chance(0.04);
      if (kind.namespaced !== wrongScope) source.namespace = d.pick(NAMESPACES);
    }
    source.fieldPath = kind ? d.pick(kind.fieldPaths) : "spec.size";
    const spec: Record<string, unknown> = { source };
    if (d.chance(0.5)) {
      source.name = `${(kind?.kind ?? "ghost").toLowerCase()}-${d.int(SOURCE_NAMES)}`;
    } else {
      source.selector = { matchLabels: { app: d.pick(COLORS) } };
      if (d.chance(0.6)) {
        const selection: Record<string, unknown> = { mode: "Multiple" };
        const min = d.pick([undefined, undefined, 0, 2]);
        const max = d.pick([undefined, undefined, 2, 3]);
        if (min !== undefined) selection.minMatch = min;
        if (max !== undefined && (min === undefined || min <= max)) selection.maxMatch = max;
        spec.selection = selection;
      } else if (d.chance(0.3)) {
        spec.selection = { mode: "Single" };
      }
    }
    const policy = d.int(8);
    if (policy === 0) spec.policy = { resolution: "Optional" };
    else if (policy === 1) spec.default = d.pick(["fallback", 7, ["d1", "d2"], { port: 5432 }]);
    if (d.chance(0.35)) {
      // One or two keys of a few shared objects: several Referables name the same key.
      const keys = new Set<string>();
      for (let i = 1 + d.int(2); i > 0; i--) keys.add(`out-${d.int(EXPORT_OBJECTS)}/K${d.int(EXPORT_KEYS)}`);
      spec.export = [...keys].map((k) => {
        const [name, key] = k.split("/");
        return { kind: "ConfigMap", namespace: EXPORT_NAMESPACE, name, key };
      });
    }
    return spec;
  }
}

// ---------------------------------------------------------------------------------------------
// Measurements

function regressionSlope(points: ReadonlyArray<[number, number]>): number {
  const n = points.length;
  if (n < 2) return 0;
  const mx = points.reduce((s, [x]) => s + x, 0) / n;
  const my = points.reduce((s, [, y]) => s + y, 0) / n;
  let num = 0;
  let den = 0;
  for (const [x, y] of points) {
    num += (x - mx) * (y - my);
    den += (x - mx) ** 2;
  }
  return den === 0 ? 0 : num / den;
}

/** histogram_quantile over the cumulative buckets of `name` in a metrics text. */
function histogramQuantile(text: string, name: string, q: number): number {
  const buckets = parseMetrics(text)
    .filter((s) => s.name === `${name}_bucket`)
    .map((s) => ({ le: s.labels.le === "+Inf" ? Infinity : Number(s.labels.le), count: s.value }))
    .sort((a, b) => a.le - b.le);
  const total = buckets[buckets.length - 1]?.count ?? 0;
  if (total === 0) return NaN;
  const rank = q * total;
  let prevLe = 0;
  let prevCount = 0;
  for (const b of buckets) {
    if (b.count >= rank) {
      if (b.le === Infinity) return prevLe;
      return prevLe + ((b.le - prevLe) * (rank - prevCount)) / Math.max(1e-12, b.count - prevCount);
    }
    prevLe = b.le;
    prevCount = b.count;
  }
  return prevLe;
}

async function sampleMetrics(p: ControllerProcess, t: number): Promise<MetricsSample> {
  const text = await p.metrics();
  const v = (name: string) => metricValue(text, name) ?? NaN;
  return {
    t,
    heapUsedBytes: v("nodejs_heap_size_used_bytes"),
    residentBytes: v("process_resident_memory_bytes"),
    eventLoopLagSeconds: v("nodejs_eventloop_lag_seconds"),
    eventLoopLagP99Seconds: v("nodejs_eventloop_lag_p99_seconds"),
    eventLoopLagMaxSeconds: v("nodejs_eventloop_lag_max_seconds"),
    sourceInformers: v("referable_source_informers"),
    watchesOpen: v("referable_watches_open"),
  };
}

/** Memory trend after warm-up; see {@link SoakReport.memory}. */
function memoryTrend(
  samples: MetricsSample[],
  liveHeap: SoakReport["liveHeap"],
  warmupMs: number,
  churnMs: number,
): SoakReport["memory"] {
  const kept = samples.filter((s) => s.t >= warmupMs && s.t <= churnMs && Number.isFinite(s.heapUsedBytes));
  const kib = (b: number) => b / 1024;
  const slope = regressionSlope(kept.map((s) => [s.t / 60_000, kib(s.heapUsedBytes)]));
  // Minimum per window: what is left after the collector has run. A window must span at least
  // one major collection (the heap saw-tooths over tens of seconds), so: a minute, twelve
  // samples, or a fifteenth of the run, whichever is longest.
  const span = kept.length > 1 ? kept[kept.length - 1]!.t - kept[0]!.t : 0;
  const windowMs = Math.max(60_000, 12 * (kept.length > 1 ? span / (kept.length - 1) : 0), span / 15);
  const floors = new Map<number, MetricsSample>();
  for (const s of kept) {
    const w = Math.floor((s.t - warmupMs) / windowMs);
    const prev = floors.get(w);
    if (!prev || s.heapUsedBytes < prev.heapUsedBytes) floors.set(w, s);
  }
  const floorPoints = [...floors.entries()].map(([w, s]): [number, number] => [
    (warmupMs + (w + 0.5) * windowMs) / 60_000,
    kib(s.heapUsedBytes),
  ]);
  const floorSlope = floorPoints.length >= 3 ? regressionSlope(floorPoints) : slope;
  const live = liveHeap.filter((l) => l.t >= warmupMs && l.t <= churnMs);
  const liveSlope = live.length >= 3 ? regressionSlope(live.map((l) => [l.t / 60_000, kib(l.bytes)])) : NaN;
  const judged = churnMs - warmupMs >= 10 * 60_000;
  // Judged on the live heap when there is one, else on the floor.
  const trend = Number.isFinite(liveSlope) ? liveSlope : floorSlope;
  return {
    warmupMs,
    samples: kept.length,
    heapFirstMiB: kept.length ? kept[0]!.heapUsedBytes / 2 ** 20 : NaN,
    heapLastMiB: kept.length ? kept[kept.length - 1]!.heapUsedBytes / 2 ** 20 : NaN,
    slopeKiBPerMin: slope,
    floorSlopeKiBPerMin: floorSlope,
    liveSlopeKiBPerMin: liveSlope,
    liveFirstMiB: live.length ? live[0]!.bytes / 2 ** 20 : NaN,
    liveLastMiB: live.length ? live[live.length - 1]!.bytes / 2 ** 20 : NaN,
    judged,
    // 128 KiB/min is under 4 MiB over 30 minutes: above the live heap's noise, below any leak
    // that matters (the churn recreates thousands of objects, so a leak per object shows).
    growing: judged && trend > 128,
  };
}

const BUG_MESSAGES = [
  "informer loop ended unexpectedly",
  "informer listener threw",
  "a watch callback threw",
  "leader election ended unexpectedly",
  "leader election callback failed",
];

// ---------------------------------------------------------------------------------------------
// The run

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, Math.max(0, ms)));

/**
 * Forces a full collection in the process whose inspector listens on `port`, and returns the
 * heap used after it (Chrome DevTools Protocol: HeapProfiler.collectGarbage, Runtime.getHeapUsage).
 */
async function liveHeapBytes(port: number): Promise<number> {
  const targets = (await (await fetch(`http://127.0.0.1:${port}/json/list`)).json()) as Array<{
    webSocketDebuggerUrl: string;
  }>;
  const ws = new WebSocket(targets[0]!.webSocketDebuggerUrl);
  const replies = new Map<number, (result: Record<string, unknown>) => void>();
  ws.addEventListener("message", (event) => {
    const message = JSON.parse(String(event.data)) as { id?: number; result?: Record<string, unknown> };
    if (message.id !== undefined) replies.get(message.id)?.(message.result ?? {});
  });
  await new Promise<void>((resolve, reject) => {
    ws.addEventListener("open", () => resolve(), { once: true });
    ws.addEventListener("error", () => reject(new Error("the inspector refused the connection")), {
      once: true,
    });
  });
  let id = 0;
  const call = (method: string) =>
    new Promise<Record<string, unknown>>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`${method} got no answer`)), 30_000);
      replies.set(++id, (result) => {
        clearTimeout(timer);
        resolve(result);
      });
      ws.send(JSON.stringify({ id, method }));
    });
  try {
    await call("HeapProfiler.collectGarbage");
    return Number((await call("Runtime.getHeapUsage")).usedSize);
  } finally {
    ws.close();
  }
}

/** Namespaces for the sources and the Lease, and the two custom kinds. */
async function setUpWorld(admin: KubeClient): Promise<void> {
  for (const name of [...NAMESPACES, LEASE_NAMESPACE, EXPORT_NAMESPACE])
    await admin.request("POST", "/api/v1/namespaces", {
      body: { apiVersion: "v1", kind: "Namespace", metadata: { name } },
    });
  await installTestCrd(admin, GROUP, "Widget", "Namespaced");
  await installTestCrd(admin, GROUP, "Gadget", "Cluster");
}

/** Scrapes /metrics every `everyMs`, one scrape at a time, until stopped; stop() gives the failures. */
function startSampler(
  p: ControllerProcess,
  started: number,
  everyMs: number,
  live: { port: number; everyMs: number } | undefined,
) {
  const samples: MetricsSample[] = [];
  const liveHeap: SoakReport["liveHeap"] = [];
  let running = true;
  let failures = 0;
  let nextLive = performance.now();
  const loop = (async () => {
    while (running) {
      try {
        samples.push(await sampleMetrics(p, performance.now() - started));
        if (live && performance.now() >= nextLive) {
          nextLive += live.everyMs;
          liveHeap.push({ t: performance.now() - started, bytes: await liveHeapBytes(live.port) });
        }
      } catch {
        failures++;
      }
      await sleep(everyMs);
    }
  })();
  return {
    samples,
    liveHeap,
    stop: async (): Promise<number> => {
      running = false;
      await loop;
      return failures;
    },
  };
}

/** The oracle's verdict on the shard's Referables, and the reasons it expects (the spread checked). */
async function judge(admin: KubeClient, shard: string) {
  const world = await observeWorld(admin, ORACLE_KINDS);
  const list = await admin.request<{ items: KubeObject[] }>("GET", RF, {
    query: { labelSelector: `${SHARD_LABEL}=${shard}` },
  });
  const reasons: Record<string, number> = {};
  for (const item of list.items) {
    const want = expectationFor(item, world);
    const reason = typeof want === "string" ? "unsupported" : want.reason;
    reasons[reason] = (reasons[reason] ?? 0) + 1;
  }
  return {
    checked: list.items.length,
    reasons,
    mismatches: [...checkAll(list.items, world), ...checkExports(list.items, world)],
  };
}

/** What the controller's log says: unhandled rejections, lines only a bug writes, errors by message. */
function readLogs(logs: readonly LogLine[]) {
  const unhandled = logs.filter((l) => String(l.msg).includes("unhandled rejection")).length;
  const bugLines = logs
    .filter((l) => BUG_MESSAGES.some((m) => String(l.msg).includes(m)))
    .map((l) => JSON.stringify(l).slice(0, 300));
  const errorLines: Record<string, number> = {};
  for (const l of logs) if (isErrorLine(l)) errorLines[String(l.msg)] = (errorLines[String(l.msg)] ?? 0) + 1;
  return { unhandled, bugLines, errorLines };
}

/** Why a report fails, if it does. */
function problemsOf(r: SoakReport, baseline: MetricsSample): string[] {
  const problems: string[] = [];
  if (r.mismatches.length) problems.push(`${r.mismatches.length} mismatch(es) with the oracle`);
  if (r.unhandledRejections) problems.push(`${r.unhandledRejections} unhandled rejection(s)`);
  if (r.bugLines.length) problems.push(`${r.bugLines.length} log line(s) only a bug writes`);
  if (!r.informers.backToBaseline)
    problems.push(
      `informers not back to baseline: ${r.informers.end} source informers and ${r.informers.watchesEnd} watches (baseline ${baseline.sourceInformers} and ${baseline.watchesOpen})`,
    );
  if (r.controllerExit?.code !== 0)
    problems.push(`the controller exited with ${JSON.stringify(r.controllerExit)}`);
  if (r.memory.growing)
    problems.push(
      `the heap grows: ${(Number.isFinite(r.memory.liveSlopeKiBPerMin) ? r.memory.liveSlopeKiBPerMin : r.memory.floorSlopeKiBPerMin).toFixed(0)} KiB/min after warm-up`,
    );
  return problems;
}

/** Runs one soak; see the module comment. Never leaves a process behind. */
export async function runSoak(options: SoakOptions): Promise<SoakReport> {
  const log = options.log ?? ((line: string) => process.stderr.write(`${line}\n`));
  const seed = options.seed ?? randomInt(2 ** 32);
  const rate = options.ratePerSecond ?? 20;
  const quietMs = options.quietMs ?? 10_000;
  const sampleEveryMs = options.sampleEveryMs ?? 5_000;
  const warmupMs = options.warmupMs ?? Math.min(180_000, Math.max(15_000, options.durationMs * 0.2));
  const liveHeapEveryMs = options.liveHeapEveryMs ?? 60_000;
  const inspectPort = liveHeapEveryMs > 0 ? await freePort() : undefined;
  log(
    `soak: seed ${seed} (replay with --seed ${seed}), ${(options.durationMs / 60_000).toFixed(1)} min at ${rate} ops/s`,
  );

  const shard = `soak-${seed.toString(16)}`;
  let plane: PrivateControlPlane | undefined;
  let admin: KubeClient | undefined;
  let controller: ControllerProcess | undefined;
  let controllerExit: Exit | undefined;
  try {
    plane = await startControlPlane({ private: true, log: (line) => log(`[control-plane] ${line}`) });
    admin = clientFor(plane.kubeconfigPath);
    await setUpWorld(admin);

    controller = await startControllerProcess(
      [
        "--kubeconfig",
        plane.kubeconfigPath,
        "--referable-selector",
        `${SHARD_LABEL}=${shard}`,
        "--leader-elect=true",
        "--leader-election-namespace",
        LEASE_NAMESPACE,
        "--informer-linger",
        "3s",
      ],
      { kubeconfig: false, env: inspectPort ? { NODE_OPTIONS: `--inspect=127.0.0.1:${inspectPort}` } : {} },
    );
    const proc = controller;
    void proc.exited.then((exit) => (controllerExit = exit));
    await waitFor(
      "the controller to lead",
      async () => metricValue(await proc.metrics(), "leader_election_master_status") === 1,
      {
        timeoutMs: 60_000,
        intervalMs: 200,
      },
    );
    // Baseline: no source informer, and the controller's own watch on Referables.
    const baseline = await waitFor(
      "the controller's watch on Referables to open",
      async () => {
        const s = await sampleMetrics(proc, 0);
        return s.watchesOpen === 1 && s.sourceInformers === 0 && s;
      },
      { timeoutMs: 60_000, intervalMs: 200 },
    );
    log(
      `controller pid ${proc.pid} leads; baseline: ${baseline.sourceInformers} source informers, ${baseline.watchesOpen} watch(es)`,
    );

    const started = performance.now();
    const sampler = startSampler(
      proc,
      started,
      sampleEveryMs,
      inspectPort ? { port: inspectPort, everyMs: liveHeapEveryMs } : undefined,
    );
    const samples = sampler.samples;

    const churn = new Churn(new Dice(seed), admin, shard);
    let lastProgress = started;
    for (let i = 0; performance.now() - started < options.durationMs && controllerExit === undefined; i++) {
      await churn.step();
      if (performance.now() - lastProgress >= 30_000) {
        lastProgress = performance.now();
        const s = samples[samples.length - 1];
        log(
          `  ${Math.round((lastProgress - started) / 1000)} s: ${churn.total} operations, heap ${s ? (s.heapUsedBytes / 2 ** 20).toFixed(1) : "?"} MiB, ${s?.sourceInformers ?? "?"} source informers`,
        );
      }
      // Pacing, not synchronisation: the next operation is due at a fixed rate.
      await sleep(started + ((i + 1) * 1000) / rate - performance.now());
    }
    const churnMs = performance.now() - started;
    log(
      `churn done: ${churn.total} operations in ${(churnMs / 1000).toFixed(0)} s (${churn.failed} refused); quiet for ${quietMs / 1000} s`,
    );
    for (const line of churn.firstErrors) log(`  refused: ${line}`);
    // The quiet period the oracle is defined after; then the controller must also be idle.
    await sleep(quietMs);
    await waitFor(
      "the controller to be idle",
      async () => {
        const text = await proc.metrics();
        return (
          metricValue(text, "workqueue_depth") === 0 &&
          metricValue(text, "controller_runtime_active_workers", { controller: "referable" }) === 0
        );
      },
      { timeoutMs: 60_000, intervalMs: 200 },
    );

    const verdict = await judge(admin, shard);
    let persistent: Mismatch[] = [];
    if (verdict.mismatches.length) {
      for (const m of verdict.mismatches) log(`  MISMATCH ${describeMismatch(m)}`);
      log("  looking again in 30 s, to tell a slow controller from a wrong one");
      await sleep(30_000);
      persistent = (await judge(admin, shard)).mismatches;
      for (const m of persistent) log(`  STILL ${describeMismatch(m)}`);
    }
    const endText = await proc.metrics();
    const peak = Math.max(...samples.map((s) => s.sourceInformers).filter(Number.isFinite));

    // Every Referable gone: the source informers must close (after their linger).
    await Promise.all(
      churn.referableNames().map((name) => admin!.request("DELETE", `${RF}/${name}`).catch(() => undefined)),
    );
    let end = await sampleMetrics(proc, performance.now() - started);
    try {
      await waitFor(
        "the source informers to close",
        async () => {
          end = await sampleMetrics(proc, performance.now() - started);
          return end.sourceInformers === baseline.sourceInformers && end.watchesOpen === baseline.watchesOpen;
        },
        { timeoutMs: 45_000, intervalMs: 250 },
      );
    } catch {
      // reported below
    }
    const scrapeFailures = await sampler.stop();
    if (scrapeFailures) log(`  (${scrapeFailures} scrapes of /metrics failed)`);

    controllerExit ??= await proc.stop("SIGTERM");
    const { unhandled, bugLines, errorLines } = readLogs(proc.logs());

    const lags = samples.filter((s) => s.t >= warmupMs && Number.isFinite(s.eventLoopLagP99Seconds));
    const report: SoakReport = {
      seed,
      churnMs,
      operations: { total: churn.total, failed: churn.failed, byType: churn.counts },
      referablesChecked: verdict.checked,
      reasons: verdict.reasons,
      mismatches: verdict.mismatches,
      persistentMismatches: persistent,
      memory: memoryTrend(samples, sampler.liveHeap, warmupMs, churnMs),
      informers: {
        baseline: baseline.sourceInformers,
        peak,
        end: end.sourceInformers,
        backToBaseline:
          end.sourceInformers === baseline.sourceInformers && end.watchesOpen === baseline.watchesOpen,
        watchesEnd: end.watchesOpen,
      },
      eventLoop: {
        p99MaxMs: Math.max(0, ...lags.map((s) => s.eventLoopLagP99Seconds * 1000)),
        p99MeanMs:
          lags.reduce((sum, s) => sum + s.eventLoopLagP99Seconds * 1000, 0) / Math.max(1, lags.length),
        maxMs: Math.max(0, ...lags.map((s) => s.eventLoopLagMaxSeconds * 1000)),
      },
      propagation: {
        count: metricValue(endText, "referable_propagation_seconds_count") ?? 0,
        p50Ms: histogramQuantile(endText, "referable_propagation_seconds", 0.5) * 1000,
        p99Ms: histogramQuantile(endText, "referable_propagation_seconds", 0.99) * 1000,
      },
      statusWrites: {
        success: metricValue(endText, "referable_status_writes_total", { result: "success" }) ?? 0,
        conflict: metricValue(endText, "referable_status_writes_total", { result: "conflict" }) ?? 0,
        error: metricValue(endText, "referable_status_writes_total", { result: "error" }) ?? 0,
      },
      unhandledRejections: unhandled,
      bugLines,
      errorLines,
      controllerExit,
      samples,
      liveHeap: sampler.liveHeap,
      problems: [],
      passed: false,
    };
    report.problems = problemsOf(report, baseline);
    report.passed = report.problems.length === 0;
    return report;
  } finally {
    if (controller && controllerExit === undefined) await controller.stop("SIGKILL").catch(() => undefined);
    await admin?.close();
    await plane?.stop();
  }
}

/** The summary `npm run soak` prints. */
export function formatReport(r: SoakReport): string {
  const ms = (v: number) => (Number.isFinite(v) ? `${v.toFixed(1)} ms` : "n/a");
  const byType = Object.entries(r.operations.byType)
    .sort(([a], [b]) => (a < b ? -1 : 1))
    .map(([k, v]) => `${k} ${v}`)
    .join(", ");
  const m = r.memory;
  const mib = (v: number) => (Number.isFinite(v) ? v.toFixed(1) : "n/a");
  const signed = (v: number) => (Number.isFinite(v) ? `${v >= 0 ? "+" : ""}${v.toFixed(0)}` : "n/a");
  const trend = `slope ${signed(m.slopeKiBPerMin)} KiB/min, floor ${signed(m.floorSlopeKiBPerMin)} KiB/min`;
  return [
    `soak summary (seed ${r.seed})`,
    `  churn:        ${(r.churnMs / 60_000).toFixed(1)} min, ${r.operations.total} operations (${r.operations.failed} refused by the server): ${byType}`,
    `  oracle:       ${r.referablesChecked} Referables checked (${Object.entries(r.reasons)
      .sort(([a], [b]) => (a < b ? -1 : 1))
      .map(([k, v]) => `${k} ${v}`)
      .join(
        ", ",
      )}), ${r.mismatches.length} mismatch(es)${r.mismatches.length ? `, ${r.persistentMismatches.length} still after 30 s` : ""}`,
    `  status writes: ${r.statusWrites.success} ok, ${r.statusWrites.conflict} conflicts, ${r.statusWrites.error} errors`,
    `  propagation:  p50 ${ms(r.propagation.p50Ms)}, p99 ${ms(r.propagation.p99Ms)} over ${r.propagation.count} writes`,
    `  memory:       heap used ${m.heapFirstMiB.toFixed(1)} -> ${m.heapLastMiB.toFixed(1)} MiB after ${(m.warmupMs / 1000).toFixed(0)} s warm-up (${m.samples} samples of /metrics); ${trend}`,
    `                live heap after a full GC ${mib(m.liveFirstMiB)} -> ${mib(m.liveLastMiB)} MiB, slope ${signed(m.liveSlopeKiBPerMin)} KiB/min; ${m.judged ? (m.growing ? "GROWING" : "flat") : "not judged (needs 10+ min after warm-up)"}`,
    `  informers:    baseline ${r.informers.baseline}, peak ${r.informers.peak}, after deleting every Referable ${r.informers.end} (${r.informers.backToBaseline ? "back to baseline" : "NOT back to baseline"})`,
    `  event loop:   p99 mean ${ms(r.eventLoop.p99MeanMs)}, p99 max ${ms(r.eventLoop.p99MaxMs)}, max ${ms(r.eventLoop.maxMs)}`,
    `  logs:         ${r.unhandledRejections} unhandled rejection(s), ${r.bugLines.length} bug line(s), errors: ${JSON.stringify(r.errorLines)}`,
    ...r.mismatches.slice(0, 20).map((x) => `  mismatch:     ${describeMismatch(x)}`),
    `  result:       ${r.passed ? "PASS" : `FAIL: ${r.problems.join("; ")}`}`,
  ].join("\n");
}

/** The soak's command line; see `npm run soak -- --help`. */
export const SOAK_COMMAND: CommandSpec = {
  usage: "npm run soak -- [options]",
  description:
    "Churns Referables and sources against the real control plane for a while, then reports memory, informers, event-loop delay and mismatches.",
  flags: {
    minutes: { type: "string", valueName: "N", default: "1", help: "how long the churn runs" },
    seed: {
      type: "string",
      valueName: "S",
      default: "random",
      help: "seed of the churn's choices, to replay a run",
    },
    rate: { type: "string", valueName: "OPS_PER_S", default: "20", help: "changes a second" },
    quiet: {
      type: "string",
      valueName: "SECONDS",
      default: "10",
      help: "quiet spell before the final checks",
    },
    sample: {
      type: "string",
      valueName: "SECONDS",
      default: "5",
      help: "how often memory and informers are sampled",
    },
    "live-heap": {
      type: "string",
      valueName: "SECONDS",
      default: "60; 0 off",
      help: "how often the live heap is measured after a full GC",
    },
    "save-samples": { type: "string", valueName: "FILE", help: "write every sample as JSON to FILE" },
  },
};

/** Soak options from the command line's flags; throws naming a flag whose value is not a number. */
export function soakOptions(flags: FlagValues): SoakOptions & { saveSamples?: string } {
  const options: SoakOptions & { saveSamples?: string } = { durationMs: 60_000 };
  const value = (name: string): number | undefined => {
    const v = flags[name];
    if (v === undefined) return undefined;
    const n = Number(v);
    if (typeof v !== "string" || v.trim() === "" || !Number.isFinite(n) || n < 0)
      throw new Error(`--${name}: ${JSON.stringify(v)} is not a number`);
    return n;
  };
  const minutes = value("minutes");
  if (minutes !== undefined) options.durationMs = minutes * 60_000;
  const seed = value("seed");
  if (seed !== undefined) options.seed = seed >>> 0;
  const rate = value("rate");
  if (rate !== undefined) options.ratePerSecond = rate;
  const quiet = value("quiet");
  if (quiet !== undefined) options.quietMs = quiet * 1000;
  const sample = value("sample");
  if (sample !== undefined) options.sampleEveryMs = sample * 1000;
  const liveHeap = value("live-heap");
  if (liveHeap !== undefined) options.liveHeapEveryMs = liveHeap * 1000;
  if (typeof flags["save-samples"] === "string") options.saveSamples = flags["save-samples"];
  return options;
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  let options: ReturnType<typeof soakOptions>;
  try {
    options = soakOptions(parseOrExit(SOAK_COMMAND));
  } catch (err) {
    process.stderr.write(`${(err as Error).message}\n`);
    process.exit(2);
  }
  const { saveSamples } = options;
  runSoak(options).then(
    (report) => {
      if (saveSamples)
        writeFileSync(
          saveSamples,
          JSON.stringify({ samples: report.samples, liveHeap: report.liveHeap }, null, 1),
        );
      process.stdout.write(`${formatReport(report)}\n`);
      process.exit(report.passed ? 0 : 1);
    },
    (err: unknown) => {
      process.stderr.write(`soak failed to run: ${(err as Error).stack ?? String(err)}\n`);
      process.exit(1);
    },
  );
}
