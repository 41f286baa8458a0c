/** The soak's verdict: the oracle's check of every Referable, the controller's log, and what fails a run. */
import type { KubeClient, KubeObject } from "../../src/kube/client.ts";
import { SHARD_LABEL } from "../../test/harness/controller.ts";
import { checkAll, checkExports, expectationFor, observeWorld } from "../../test/harness/oracle.ts";
import { isErrorLine, type LogLine } from "../../test/harness/process.ts";
import type { MetricsSample, SoakReport } from "./report.ts";
import { ORACLE_KINDS, RF } from "./world.ts";

export const BUG_MESSAGES = [
  "informer loop ended unexpectedly",
  "informer listener threw",
  "a watch callback threw",
  "leader election ended unexpectedly",
  "leader election callback failed",
];

/** The oracle's verdict on the shard's Referables, and the reasons it expects (the spread checked). */
export async function judge(admin: KubeClient, shard: string) {
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
export function readLogs(logs: readonly LogLine[]) {
  const unhandled = logs.filter((l) => String(l.msg).includes("unhandled rejection")).length;
  const bugLines = logs
    .filter((l) => BUG_MESSAGES.some((m) => String(l.msg).includes(m)))
    .map((l) => JSON.stringify(l).slice(0, 300));
  const errorLines: Record<string, number> = {};
  for (const l of logs) if (isErrorLine(l)) errorLines[String(l.msg)] = (errorLines[String(l.msg)] ?? 0) + 1;
  return { unhandled, bugLines, errorLines };
}

/** Why a report fails, if it does. */
export function problemsOf(r: SoakReport, baseline: MetricsSample): string[] {
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
