/** What a soak is asked (its options), what it measured (its report), and the summary it prints. */
import { describeMismatch, type Mismatch } from "../../test/harness/oracle.ts";
import type { Exit } from "../../test/harness/process.ts";

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
