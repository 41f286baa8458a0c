/**
 * A short churn soak in CI: the same code as `npm run soak` (scripts/soak.ts), for under a
 * minute of churn against a private control plane. Every Referable must end as the
 * independent oracle says, with no unhandled rejection, and the informers must close once every
 * Referable is gone. Set SOAK_SEED to replay a failing run's sequence.
 */
import { formatReport, runSoak } from "../../scripts/soak.ts";
import { describeMismatch } from "../harness/oracle.ts";

it("a short churn soak ends with every Referable as the oracle computes it", async () => {
  const lines: string[] = [];
  const seed = process.env.SOAK_SEED ? Number(process.env.SOAK_SEED) : undefined;
  const report = await runSoak({
    durationMs: 50_000,
    seed,
    quietMs: 5_000,
    sampleEveryMs: 2_000,
    liveHeapEveryMs: 15_000,
    log: (line) => lines.push(line),
  });
  const summary = formatReport(report);
  process.stderr.write(`${summary}\n`);
  // The seed goes with every failure, so the run can be replayed.
  const verdict = (value: unknown) => ({ seed: report.seed, value });
  expect(verdict(report.mismatches.map(describeMismatch))).toEqual(verdict([]));
  expect(verdict(report.unhandledRejections)).toEqual(verdict(0));
  expect(verdict(report.bugLines)).toEqual(verdict([]));
  expect(verdict(report.informers)).toEqual(
    verdict({ ...report.informers, end: report.informers.baseline, backToBaseline: true }),
  );
  expect(verdict(report.controllerExit)).toEqual(verdict({ code: 0, signal: null }));
  expect(report.operations.total).toBeGreaterThan(300);
  expect(report.referablesChecked).toBeGreaterThan(10);
  expect(report.passed).toBe(true);
}, 300_000);
