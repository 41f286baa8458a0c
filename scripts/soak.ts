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
import { writeFileSync } from "node:fs";
import { parseOrExit, type CommandSpec, type FlagValues } from "../src/process/cli.ts";
import { isMainModule } from "../src/process/main-module.ts";
import { formatReport, type SoakOptions } from "./soak/report.ts";
import { runSoak } from "./soak/run.ts";

export { formatReport, type MetricsSample, type SoakOptions, type SoakReport } from "./soak/report.ts";
export { runSoak } from "./soak/run.ts";

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

if (isMainModule(import.meta.url, process.argv[1])) {
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
