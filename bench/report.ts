/** bench/results.json's shape, and the tables and lines printed as each part is measured. */
import type { AccountsResult } from "./accounts.ts";
import type { ContentResult, LabelsResult } from "./cluster-content.ts";
import { type ControllerLogLines, summarizeLogLines } from "./controller-logs.ts";
import type { Cost } from "./controller.ts";
import type { ExportResult, FieldExportResult } from "./exports.ts";
import type { FanOutResult } from "./fan-out.ts";
import { type HostileLoadPhase, printHostileLoad } from "./hostile-load.ts";
import type { HostilePhase } from "./hostile.ts";
import type { HotResult } from "./hot-source.ts";
import type { IdleResult } from "./idle.ts";
import type { Floor } from "./propagation.ts";
import { printReads, type ReadsResult } from "./reads.ts";
import { printScale, type ScaleResult } from "./scale-report.ts";
import type { SizeResult } from "./sizes.ts";
import { ms, type Stats } from "./stats.ts";
import { printTransforms, type TransformResult } from "./transform.ts";

/** The parts of the report, each printed as soon as it is measured. */
export type Part =
  | "header"
  | "sizes"
  | "hot"
  | "fanout"
  | "selectors"
  | "content"
  | "labels"
  | "idle"
  | "reads"
  | "export"
  | "field-export"
  | "accounts"
  | "hostile"
  | "scale"
  | "transforms"
  | "logs";

/** bench/results.json: settings, then each scenario's figures (undefined until measured). */
export interface Report {
  command: string;
  date: string;
  machine: { cores: number; memoryGiB: number; cpu?: string | undefined };
  node: string;
  kubernetes: string;
  settings: Record<string, unknown>;
  floor: Floor;
  baseline: Cost | undefined;
  sizes: SizeResult[];
  hot: HotResult[] | undefined;
  fanOut: FanOutResult | undefined;
  selectors:
    { objects: number; refs: number; coldStartSeconds: number; latency: Stats; cost: Cost } | undefined;
  content: ContentResult | undefined;
  labels: LabelsResult | undefined;
  idle: IdleResult[] | undefined;
  reads: ReadsResult | undefined;
  export: ExportResult | undefined;
  fieldExport: FieldExportResult | undefined;
  accounts: AccountsResult | undefined;
  hostile: HostilePhase[] | undefined;
  hostileLoad: HostileLoadPhase[] | undefined;
  scale: ScaleResult | undefined;
  transforms: TransformResult[];
  /** Scenarios that failed, with why: their figures are missing, the others are not. */
  failed: Record<string, string>;
  /** The run was stopped by a signal (Ctrl-C, a kill) during this scenario: not a failure. */
  stopped?: { signal: NodeJS.Signals; scenario: string };
  /** Requests retried in the whole run (each logged). */
  retries: number;
  /** Each controller process's warn and error lines (capped), in the order they were started. */
  controllerLogs: ControllerLogLines[];
}

/** Prints the part of the report just measured (standard output). */
export function printTable(r: Report, part: Part): void {
  const p = (s: string) => process.stdout.write(`${s}\n`);
  if (part === "header") {
    p(`\n${r.command}`);
    p(
      `machine: ${r.machine.cores} cores, ${r.machine.memoryGiB} GiB (${r.machine.cpu}); node ${r.node}; kube-apiserver ${r.kubernetes}`,
    );
    p(
      `floor (write ack → plain watch, + one status patch): p50 ${ms(r.floor.p50)} ms, p99 ${ms(r.floor.p99)} ms` +
        ` [watch p50 ${ms(r.floor.watchDelivery.p50)} p99 ${ms(r.floor.watchDelivery.p99)}; patch p50 ${ms(r.floor.statusPatch.p50)} p99 ${ms(r.floor.statusPatch.p99)}]`,
    );
  }
  if (part === "sizes" && (r.sizes.length > 0 || r.baseline)) {
    p("");
    p(
      "| Referables | updates/s | updates | p50 ms | p95 ms | p99 ms | max ms | p99 / floor p99 | in controller p50/p99 ms | max queue | status patch p50/p99 ms | status writes | requests in phase |",
    );
    p("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|");
    for (const s of r.sizes) {
      for (const prop of s.propagation) {
        const req = Object.entries(prop.requests)
          .filter(([, v]) => v > 0)
          .map(([k, v]) => `${k} ${v}`)
          .join(", ");
        p(
          `| ${s.n} | ${prop.rate} | ${prop.seen}/${prop.updates} | ${ms(prop.latency.p50)} | ${ms(prop.latency.p95)} | ${ms(prop.latency.p99)} | ${ms(prop.latency.max)} | ${(prop.latency.p99 / r.floor.p99).toFixed(2)} | ≤${ms(prop.controllerP50)} / ≤${ms(prop.controllerP99)} | ${prop.maxQueueDepth} | ≤${ms(prop.patchP50)} / ≤${ms(prop.patchP99)} | ${prop.statusWrites} | ${req} |`,
        );
      }
    }
    p("");
    p(
      "| Referables | cold start s | restart s | writes after restart | RSS MiB | heap used / total MiB | external MiB | bytes/Referable | watches | source informers |",
    );
    p("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    if (r.baseline)
      p(
        `| 0 (idle) | - | - | - | ${r.baseline.rssMiB} | ${r.baseline.heapMiB} / ${r.baseline.heapTotalMiB} | ${r.baseline.externalMiB} | - | ${r.baseline.watches} | ${r.baseline.informers} |`,
      );
    for (const s of r.sizes) {
      p(
        `| ${s.n} | ${s.coldStartSeconds.toFixed(1)} | ${s.restart.coldStartSeconds.toFixed(1)} | ${s.restart.statusWrites} | ${s.cost.rssMiB} | ${s.cost.heapMiB} / ${s.cost.heapTotalMiB} | ${s.cost.externalMiB} | ${s.bytesPerReferable} | ${s.cost.watches} | ${s.cost.informers} |`,
      );
    }
    for (const s of r.sizes)
      if (s.liveBytesPerReferable !== undefined)
        p(
          `live heap (after a full GC, from a heap snapshot): idle ${r.baseline?.liveHeapMiB} MiB, ${s.n} Referables ${s.cost.liveHeapMiB} MiB: ${s.liveBytesPerReferable} bytes per Referable`,
        );
  }
  if (part === "sizes") p("");
  if (part === "hot" && r.hot) {
    p(
      "| hot source: one write every | values shown | p50 ms | p99 ms | max ms | p99 / 200 ms row's p99 | status writes |",
    );
    p("|---:|---:|---:|---:|---:|---:|---:|");
    const base = r.hot.find((h) => h.periodMs === 200)?.latency.p99;
    for (const h of r.hot)
      p(
        `| ${h.periodMs} ms | ${h.shown}/${h.updates} (${((100 * h.shown) / h.updates).toFixed(1)}%) | ${ms(h.latency.p50)} | ${ms(h.latency.p99)} | ${ms(h.latency.max)} | ${base ? (h.latency.p99 / base).toFixed(2) : "-"} | ${h.statusWrites} |`,
      );
    p(`(floor in the same run: p50 ${ms(r.floor.p50)} ms, p99 ${ms(r.floor.p99)} ms)`);
    p("");
  }
  if (part === "fanout" && r.fanOut) {
    const floor = Math.min(...r.fanOut.writeFloor.map((f) => f.ms));
    p(
      `fan-out: one source → ${r.fanOut.n} Referables all updated: p50 ${ms(r.fanOut.samples.p50)} ms, max ${ms(r.fanOut.samples.max)} ms (${r.fanOut.samples.n} rounds); ` +
        `floor (${r.fanOut.n} status writes straight to the API server): ${r.fanOut.writeFloor.map((f) => `${ms(f.ms)} ms at ${f.concurrency} in flight`).join(", ")}; p50 / best floor ${(r.fanOut.samples.p50 / floor).toFixed(2)}`,
    );
  }
  for (const idle of part === "idle" ? (r.idle ?? []) : [])
    p(
      `idle: ${idle.referables} Referables, leader election ${idle.leaderElection ? "on" : "off"}, ${idle.seconds} s with nothing changing and no scrape: CPU ${idle.cpuSecondsPerMinute.toFixed(3)} s per minute, RSS ${idle.rssMiB} MiB`,
    );
  if (part === "selectors" && r.selectors)
    p(
      `selectors: ${r.selectors.refs} Referables (half Single, half Multiple) over ${r.selectors.objects} objects: cold start ${r.selectors.coldStartSeconds.toFixed(1)} s, propagation p50 ${ms(r.selectors.latency.p50)} ms p99 ${ms(r.selectors.latency.p99)} ms, RSS ${r.selectors.cost.rssMiB} MiB, heap ${r.selectors.cost.heapMiB} MiB`,
    );
  const c = r.content;
  if (part === "content" && c)
    p(
      `cluster content: ${c.refs} Referables + ${c.objects} unreferenced ConfigMaps of ${(c.objectBytes / 1e6).toFixed(0)} MB (listed at start, then rewritten): cold start ${c.coldStartSeconds.toFixed(1)} s, peak RSS ${c.peakRssMiB} MiB, peak heap ${c.peakHeapMiB} MiB; steady RSS ${c.steady.rssMiB} MiB, heap ${c.steady.heapMiB} / ${c.steady.heapTotalMiB} MiB; bytes kept per unreferenced object ${c.bytesPerUnreferencedObject}`,
    );
  const l = r.labels;
  if (part === "labels" && l)
    p(
      `labels: ${l.refs} Referables, cold start without then with ${l.objects} unselected ConfigMaps of ${(l.labelBytes / 1e3).toFixed(0)} KB of labels: steady RSS ${l.without.rssMiB} → ${l.with.rssMiB} MiB (+${(l.with.rssMiB - l.without.rssMiB).toFixed(1)}), heap ${l.without.heapMiB} → ${l.with.heapMiB} MiB; peak RSS with them ${l.peakRssMiB} MiB, cold start ${l.coldStartSeconds.toFixed(1)} s`,
    );
  const e = r.export;
  if (part === "export" && e)
    p(
      `export: ${e.refs} Referables, one source written at a time (${e.status.n} writes): status.value p50 ${ms(e.status.p50)} ms p99 ${ms(e.status.p99)} ms; exported ConfigMap key p50 ${ms(e.exported.p50)} ms p99 ${ms(e.exported.p99)} ms`,
    );
  const f = r.fieldExport;
  if (part === "field-export" && f)
    p(
      `field-export: ${f.refs} Referables, one source written at a time (${f.status.n} writes): status.value p50 ${ms(f.status.p50)} ms p99 ${ms(f.status.p99)} ms; target field (spec.forProvider of a managed-resource-shaped Task) p50 ${ms(f.field.p50)} ms p99 ${ms(f.field.p99)} ms; ${f.writesPerChange} target writes and ${f.readsPerChange} GETs per change`,
    );
  const a = r.accounts;
  if (part === "accounts" && a)
    p(
      `accounts: ${a.refs} Referables sharing ${a.accounts} ServiceAccounts: ${a.reviewsToReady} SubjectAccessReviews to Ready; at rest (${a.restSeconds} s) ${a.reviewsPerMinute} a minute, ${a.reviewsPerAccountResourcePerMinute} per (account, resource); ${a.reviewsDuringRounds} during ${a.withAccount.n} source writes; status.value p50 ${ms(a.withAccount.p50)} ms p99 ${ms(a.withAccount.p99)} ms with an account, p50 ${ms(a.withoutAccount.p50)} ms p99 ${ms(a.withoutAccount.p99)} ms without`,
    );
  if (part === "hostile" && r.hostile) {
    p(
      "hostile transforms (issue 21): a canary Referable while hostile ones are evaluated, beside the run without",
    );
    p(
      "| hostile Referables | canary p50 / p99 / max ms | /healthz (event-loop lag as a probe sees it) p50 / p99 / max ms | peak RSS MiB |",
    );
    p("|---:|---|---|---:|");
    for (const h of r.hostile)
      p(
        `| ${h.hostile} | ${ms(h.canary.p50)} / ${ms(h.canary.p99)} / ${ms(h.canary.max)} | ${ms(h.healthz.p50)} / ${ms(h.healthz.p99)} / ${ms(h.healthz.max)} | ${h.peakRssMiB} |`,
      );
  }
  if (part === "hostile") p("");
  if (part === "hostile" && r.hostileLoad) printHostileLoad(r.hostileLoad, p);
  if (part === "reads" && r.reads) {
    printReads(r.reads, p);
    p("");
  }
  if (part === "scale" && r.scale) printScale(r.scale, p);
  if (part === "transforms" && r.transforms.length > 0) printTransforms(r.transforms, p);
  if (part === "logs") p(summarizeLogLines(r.controllerLogs));
}
