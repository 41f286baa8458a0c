/** The hot-source scenario: one source rewritten faster and faster, read by one Referable. */
import type { ControlPlane } from "../test/harness/control-plane.ts";
import { configMapSource, createReferable, createSource, deleteFixtures, setSource } from "./fixtures.ts";
import { scrape, sumOf } from "./metrics.ts";
import { hotPeriods, hotUpdates, log, RUN } from "./options.ts";
import { watchAndStart } from "./referable-watch.ts";
import type { BenchClient } from "./retry.ts";
import { type Stats, stats, until } from "./stats.ts";

/** One hot-source phase's figures. */
export interface HotResult {
  periodMs: number;
  updates: number;
  /** Values that status.value showed (each value is distinct; one skipped was coalesced). */
  shown: number;
  /** Per update: its write's ack → status.value shows it or a later value. */
  latency: Stats;
  statusWrites: number;
}

/**
 * One source rewritten every `periodMs`, one write after the other (each waits for the previous
 * one's ack, so the API server applies them in order), read by one Referable. Measures the share
 * of values that status.value shows and how long until it shows each value or a later one.
 */
export async function runHotSource(client: BenchClient, plane: ControlPlane): Promise<HotResult[]> {
  const label = `${RUN}-hot`;
  const labels = { "bench-set": label };
  await createSource(client, "ConfigMap", label, "v0", labels);
  await createReferable(client, label, labels, configMapSource(label));
  const { watch, c } = await watchAndStart(client, plane, label);
  await until("the hot Referable Ready", () => (watch.readyCount() >= 1 ? true : undefined), 60_000);
  const results: HotResult[] = [];
  for (const periodMs of hotPeriods) {
    log(`hot source: one write every ${periodMs} ms, ${hotUpdates} writes`);
    const prefix = `hot${periodMs}-`;
    const ackedAt: number[] = [];
    const seenAt: number[] = [];
    const shown = new Set<number>();
    let latestSeen = -1;
    const off = watch.onChange(() => {
      const value = watch.latest.get(label)?.value;
      if (typeof value !== "string" || !value.startsWith(prefix)) return;
      const j = Number(value.slice(prefix.length));
      shown.add(j);
      const now = performance.now();
      for (let k = latestSeen + 1; k <= j; k++) seenAt[k] = now;
      latestSeen = Math.max(latestSeen, j);
    });
    const before = await scrape(c);
    const start = performance.now();
    for (let k = 0; k < hotUpdates; k++) {
      const wait = start + k * periodMs - performance.now();
      if (wait > 0) await new Promise((r) => setTimeout(r, wait));
      await setSource(client, "ConfigMap", label, `${prefix}${k}`);
      ackedAt[k] = performance.now();
    }
    await until(
      "the last hot value to show",
      () => (latestSeen === hotUpdates - 1 ? true : undefined),
      30_000,
    ).catch(() => log(`hot source: the last value never showed (latest ${latestSeen})`));
    off();
    const after = await scrape(c);
    const writesOf = (m: Map<string, number>) => sumOf(m, 'referable_status_writes_total{result="success"}');
    const latencies: number[] = [];
    for (let k = 0; k < hotUpdates; k++)
      if (seenAt[k] !== undefined) latencies.push(Math.max(0, seenAt[k]! - ackedAt[k]!));
    results.push({
      periodMs,
      updates: hotUpdates,
      shown: shown.size,
      latency: stats(latencies),
      statusWrites: writesOf(after) - writesOf(before),
    });
  }
  await c.stop();
  watch.close();
  await deleteFixtures(client, label);
  return results;
}
