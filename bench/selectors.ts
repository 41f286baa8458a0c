/** The selectors scenario: Referables with label selectors (Single and Multiple) over many objects. */
import type { ControlPlane } from "../test/harness/control-plane.ts";
import { cost } from "./controller.ts";
import { createReferable, createSource, deleteFixtures, NS, setSource } from "./fixtures.ts";
import { log, quick, RUN } from "./options.ts";
import { watchAndStart } from "./referable-watch.ts";
import { type BenchClient, pool } from "./retry.ts";
import { stats, timeToShow, until } from "./stats.ts";

/** Referables with selectors, half Single and half Multiple: their cold start, propagation and cost. */
export async function runSelectors(client: BenchClient, plane: ControlPlane, objects: number, refs: number) {
  log(`selectors: ${refs} selector Referables (half Single, half Multiple) over ${objects} objects`);
  const label = `${RUN}-sel`;
  const groups = Math.max(1, Math.floor(objects / 10));
  const items = Array.from({ length: objects }, (_, i) => i);
  await pool(items, 64, (i) =>
    createSource(client, "ConfigMap", `${label}-o${i}`, `v${i}`, {
      "bench-set": label,
      id: `i${i}`,
      group: `g${i % groups}`,
    }),
  );
  const names = Array.from({ length: refs }, (_, i) => `${label}-rf${i}`);
  await pool(names, 64, async (name) => {
    const i = names.indexOf(name);
    const single = i % 2 === 0;
    await createReferable(
      client,
      name,
      { "bench-set": label },
      {
        apiVersion: "v1",
        kind: "ConfigMap",
        namespace: NS,
        selector: { matchLabels: single ? { id: `i${i}` } : { group: `g${i % groups}` } },
        fieldPath: "data.value",
      },
      single ? {} : { selection: { mode: "Multiple" } },
    );
  });
  const { watch, c } = await watchAndStart(client, plane, label);
  await until("selector Referables Ready", () => (watch.readyCount() >= refs ? true : undefined), 600_000);
  const coldStartSeconds = (performance.now() - c.startedAt) / 1000;
  // Propagation: change the object each Single selector reads, one at a time.
  const latencies: number[] = [];
  for (let k = 0; k < (quick ? 10 : 50); k++) {
    const i = (k * 2) % refs;
    const value = `sel-${k}`;
    latencies.push(
      await timeToShow(
        watch,
        () => watch.latest.get(names[i]!)?.value === value,
        () => setSource(client, "ConfigMap", `${label}-o${i}`, value),
        `selectors round ${k}`,
      ),
    );
  }
  const settled = await cost(c);
  await c.stop();
  watch.close();
  await deleteFixtures(client, label);
  return { objects, refs, coldStartSeconds, latency: stats(latencies), cost: settled };
}
