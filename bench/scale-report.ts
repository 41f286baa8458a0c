/** The scale scenario's figures (issue 27), the targets they are held against, and how they are printed. */
import { WRITE_POLICY_DEFAULTS } from "../src/outputs/write-policy.ts";
import { formatLogCounts, type LogCount } from "./controller-logs.ts";
import { type Cost, type PlaneCpu } from "./controller.ts";
import { ms, type Stats } from "./stats.ts";

// ---------- scale: 100,000 Referables, one replica, then shards (issue 27) ----------

/** Issue 27's targets, printed beside each figure measured against them. */
const TARGETS = {
  coldStartOverFloor: 1.2,
  rssMiBPerShard: 256,
  failoverSeconds: 20,
  /** Half of the 5.25 KB of heap used per Referable measured before issue 27. */
  heapBytesPerReferable: 2625,
};

/** One phase of the scale scenario: one replica, or the shards. */
export interface ScalePhase {
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
  /** Each replica's informer restarts from its start to the end of the phase, by signal (none: `{}`). */
  informerRestarts?: Array<Record<string, number>>;
  /** The replicas' warn/error log lines by message, from their start to the end of the phase. */
  logLines: LogCount[];
  /** Seconds from the start to the first Ready, to 10%, 50% and 90% of them Ready, and to the last. */
  readyAt: { first: number; p10: number; p50: number; p90: number; last: number };
  /** CPU seconds of the floor just before and of the cold start to Ready: the control plane's and the bench's own. */
  planeCpu: { floor: PlaneCpu; coldStart: PlaneCpu };
  failover?: ScaleFailover;
}

/** The failover after a kill -9 of one shard. */
export interface ScaleFailover {
  /** kill -9 of one replica → the others hold every bucket (referable_shard_buckets). */
  bucketsTakenSeconds: number;
  /** kill -9 → each of `sources` changed right after it shows in its Referable: p50 and max. */
  sources: number;
  followP50Seconds: number;
  followMaxSeconds: number;
  /** The replicas' warn/error log lines by message, from their start to the end of the failover. */
  logLines?: LogCount[];
}

/** The scale scenario's figures. */
export interface ScaleResult {
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
export function budgetBoundSeconds(writes: number): number | undefined {
  const { rate, burst } = writeBudget();
  if (!(rate > 0)) return undefined;
  return Math.max(0, writes - burst) / rate;
}

/** The line the scale scenario's table starts with. */
export function scaleHeader(r: ScaleResult): string {
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
export function printScalePhase(r: ScaleResult, ph: ScalePhase, p: (line: string) => void): void {
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

/** The failover's figures against issue 27's target. */
export function printScaleFailover(f: ScaleFailover, p: (line: string) => void): void {
  p(
    `failover after kill -9 of one shard: every bucket held again after ${f.bucketsTakenSeconds.toFixed(1)} s (target < ${TARGETS.failoverSeconds} s: ${verdict(f.bucketsTakenSeconds < TARGETS.failoverSeconds)}); ${f.sources} changed sources shown p50 ${f.followP50Seconds.toFixed(1)} s, max ${f.followMaxSeconds.toFixed(1)} s (target < ${TARGETS.failoverSeconds} s: ${verdict(f.followMaxSeconds < TARGETS.failoverSeconds)})`,
  );
}

/** The whole scale table (the end of the run). */
export function printScale(r: ScaleResult, p: (line: string) => void): void {
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
