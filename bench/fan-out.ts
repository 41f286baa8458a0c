/** The fan-out scenario: one source read by many Referables, against the floor of their status writes. */
import type { ReferableStatus } from "../src/api/referable.ts";
import { statusPatch } from "../src/referable/status.ts";
import type { ControlPlane } from "../test/harness/control-plane.ts";
import { configMapSource, createReferable, createSource, deleteFixtures, RF, setSource } from "./fixtures.ts";
import { log, quick, RUN } from "./options.ts";
import { watchAndStart } from "./referable-watch.ts";
import { type BenchClient, pool } from "./retry.ts";
import { type Stats, stats, until } from "./stats.ts";

/** The fan-out scenario's figures. */
export interface FanOutResult {
  n: number;
  /** Source write ack → every Referable shows the value, per round. */
  samples: Stats;
  /**
   * The floor: the same n status writes (the controller's JSON patch, with its uid and
   * resourceVersion preconditions) sent straight from here, `concurrency` at a time.
   */
  writeFloor: Array<{ concurrency: number; ms: number }>;
}

/** One source read by `n` Referables: the time until all show a new value, beside the floor of their status writes. */
export async function runFanOut(client: BenchClient, plane: ControlPlane, n: number): Promise<FanOutResult> {
  log(`fan-out: one source read by ${n} Referables`);
  const label = `${RUN}-fan`;
  const labels = { "bench-set": label };
  await createSource(client, "ConfigMap", label, "v0", labels);
  const names = Array.from({ length: n }, (_, i) => `${label}-rf${i}`);
  await pool(names, 64, (name) => createReferable(client, name, labels, configMapSource(label)));
  const { watch, c } = await watchAndStart(client, plane, label);
  await until("fan-out Referables Ready", () => (watch.readyCount() >= n ? true : undefined), 300_000);
  const samples: number[] = [];
  for (let round = 1; round <= (quick ? 3 : 5); round++) {
    const value = `fan-${round}`;
    const remaining = new Set(names);
    const done = new Promise<void>((resolve) => {
      const off = watch.onChange((name) => {
        if (watch.latest.get(name)?.value === value) remaining.delete(name);
        if (remaining.size === 0) {
          off();
          resolve();
        }
      });
    });
    await setSource(client, "ConfigMap", label, value);
    const acked = performance.now();
    await done;
    samples.push(performance.now() - acked);
  }
  await c.stop();

  // The floor: how fast this API server takes the same n status writes, the controller's own
  // patch with its preconditions, with nothing else to do (no watch to follow, no value to read).
  const writeFloor: FanOutResult["writeFloor"] = [];
  let round = 0;
  for (const concurrency of [8, 16, 32]) {
    round++;
    const t0 = performance.now();
    await pool(names, concurrency, async (name) => {
      const seen = watch.latest.get(name)!;
      await client.request("PATCH", `${RF}/${name}/status`, {
        body: statusPatch(
          seen.uid,
          { ...(seen.status as ReferableStatus), value: `floor-${round}` },
          seen.rv,
        ),
        contentType: "application/json-patch+json",
        timeoutMs: 120_000,
      });
    });
    writeFloor.push({ concurrency, ms: performance.now() - t0 });
    // Let the watch catch up, so the next round's preconditions hold.
    await until(
      "the floor's writes to show",
      () => (names.every((name) => watch.latest.get(name)?.value === `floor-${round}`) ? true : undefined),
      60_000,
    );
  }
  watch.close();
  await deleteFixtures(client, label);
  return { n, samples: stats(samples), writeFloor };
}
