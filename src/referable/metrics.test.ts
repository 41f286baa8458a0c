import { createRequire } from "node:module";
import type * as Prom from "prom-client";
import { ControllerMetrics } from "./metrics.ts";
import { VERSION } from "../api/version.ts";

const require = createRequire(import.meta.url);
const Registry = require("prom-client/lib/registry.js") as typeof Prom.Registry;

/** The value of one series in the registry's text, or undefined when it is absent. */
async function value(metrics: ControllerMetrics, series: string): Promise<number | undefined> {
  const text = await metrics.registry.metrics();
  const line = text.split("\n").find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

const QUEUE = 'name="referable",controller="referable"';

describe("ControllerMetrics", () => {
  const fresh = () => new ControllerMetrics({ registry: new Registry(), defaultMetrics: false });

  const atZero = [
    `controller_runtime_reconcile_panics_total{controller="referable"}`,
    `controller_runtime_terminal_reconcile_errors_total{controller="referable"}`,
    `workqueue_unfinished_work_seconds{${QUEUE}}`,
    `workqueue_longest_running_processor_seconds{${QUEUE}}`,
  ];
  it.each(atZero)("exports %s at 0 from the start (an alert's rate() needs the series)", async (series) => {
    expect(await value(fresh(), series)).toBe(0);
  });

  it("counts panics and terminal errors per controller, on the registry injected", async () => {
    const registry = new Registry();
    const metrics = new ControllerMetrics({ registry, defaultMetrics: false });
    const other = fresh();
    metrics.reconcilePanics.labels("referable").inc();
    metrics.terminalReconcileErrors.labels("referable").inc(2);
    expect(await value(metrics, `controller_runtime_reconcile_panics_total{controller="referable"}`)).toBe(1);
    expect(
      await value(metrics, `controller_runtime_terminal_reconcile_errors_total{controller="referable"}`),
    ).toBe(2);
    expect(await value(other, `controller_runtime_reconcile_panics_total{controller="referable"}`)).toBe(0);
    expect(metrics.registry).toBe(registry);
  });

  const thrown: Array<{ reason: string; kind: "terminal" | "panic" | "error"; want: number[] }> = [
    { reason: "an error counts in the totals only", kind: "error", want: [1, 1, 0, 0] },
    { reason: "a panic counts as an error and a panic", kind: "panic", want: [1, 1, 1, 0] },
    {
      reason: "a terminal error counts as an error and a terminal one",
      kind: "terminal",
      want: [1, 1, 0, 1],
    },
  ];
  it.each(thrown)("observeReconcileError: $reason", async ({ kind, want }) => {
    const metrics = fresh();
    metrics.observeReconcileError(kind);
    const c = 'controller="referable"';
    expect([
      await value(metrics, `controller_runtime_reconcile_total{${c},result="error"}`),
      await value(metrics, `controller_runtime_reconcile_errors_total{${c}}`),
      await value(metrics, `controller_runtime_reconcile_panics_total{${c}}`),
      await value(metrics, `controller_runtime_terminal_reconcile_errors_total{${c}}`),
    ]).toEqual(want);
  });

  it("sets the stuck-worker gauges from the queue's measurement", async () => {
    const metrics = fresh();
    metrics.setUnfinishedWork({ unfinishedWorkSeconds: 7.5, longestRunningProcessorSeconds: 6 });
    expect(await value(metrics, `workqueue_unfinished_work_seconds{${QUEUE}}`)).toBe(7.5);
    expect(await value(metrics, `workqueue_longest_running_processor_seconds{${QUEUE}}`)).toBe(6);
    metrics.setUnfinishedWork({ unfinishedWorkSeconds: 0, longestRunningProcessorSeconds: 0 });
    expect(await value(metrics, `workqueue_longest_running_processor_seconds{${QUEUE}}`)).toBe(0);
  });

  it("exports referable_build_info 1 with the package version and the Node.js version", async () => {
    const node = process.versions.node;
    expect(await value(fresh(), `referable_build_info{version="${VERSION}",node_version="${node}"}`)).toBe(1);
    const custom = new ControllerMetrics({
      registry: new Registry(),
      defaultMetrics: false,
      version: "9.9.9",
    });
    expect(await value(custom, `referable_build_info{version="9.9.9",node_version="${node}"}`)).toBe(1);
    expect(VERSION).toMatch(/^\d+\.\d+\.\d+/);
  });

  it("counts every informer signal by reason but starts them all at 0", async () => {
    const metrics = fresh();
    const zero: Array<[string, string]> = [
      ["relist", "list-expired"],
      ["expired", "watch-expired"],
      ["expired", "list-expired"],
      ["watchdog", "watchdog"],
      ["error", "timeout"],
      ["error", "throttled"],
      ["error", "connection"],
    ];
    for (const [signal, reason] of zero)
      expect(
        await value(metrics, `referable_informer_restarts_total{signal="${signal}",reason="${reason}"}`),
      ).toBe(0);
    // Only pairs that can happen: a watchdog only reopens the watch, and an expiry is no error.
    expect(
      await value(metrics, `referable_informer_restarts_total{signal="error",reason="list-expired"}`),
    ).toBe(undefined);
    expect(await value(metrics, `referable_informer_restarts_total{signal="relist",reason="watchdog"}`)).toBe(
      undefined,
    );
  });
});
