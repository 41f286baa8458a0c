/** The sizes scenario: a cold start, propagation at each rate, and a restart with nothing changed, per size. */
import type { ControlPlane } from "../test/harness/control-plane.ts";
import { type Cost, cost, startController } from "./controller.ts";
import { deleteFixtures, makeNamedFixture } from "./fixtures.ts";
import { requestsByVerb, scrape, sumOf } from "./metrics.ts";
import { log, phaseSeconds, rates } from "./options.ts";
import { measurePropagation, type Propagation } from "./propagation.ts";
import { ReferableWatch } from "./referable-watch.ts";
import type { BenchClient } from "./retry.ts";
import { until } from "./stats.ts";

/** One size's figures. */
export interface SizeResult {
  n: number;
  setupSeconds: number;
  coldStartSeconds: number;
  cost: Cost;
  bytesPerReferable: number;
  /** With --heap-snapshots: the live heap over the idle controller's, per Referable. */
  liveBytesPerReferable?: number;
  propagation: Propagation[];
  restart: { coldStartSeconds: number; statusWrites: number; reconciles: number };
}

/** `n` Referables over sources of their own: a cold start, propagation at each rate, then a restart with nothing changed. */
export async function runSize(
  client: BenchClient,
  plane: ControlPlane,
  n: number,
  baselineHeapMiB: number,
  baselineLiveMiB?: number,
): Promise<SizeResult> {
  log(`size ${n}: creating ${n} sources and ${n} Referables`);
  const t0 = performance.now();
  const fx = await makeNamedFixture(client, n);
  const setupSeconds = (performance.now() - t0) / 1000;
  const selector = `bench-set=${fx.label}`;
  const watch = new ReferableWatch(client, selector);
  await watch.start();

  log(`size ${n}: cold start`);
  let c = await startController(plane.kubeconfigPath, selector);
  await until(`all ${n} Referables Ready`, () => (watch.readyCount() >= n ? true : undefined), 600_000);
  const coldStartSeconds = (performance.now() - c.startedAt) / 1000;
  const settled = await cost(c);
  const coldMetrics = await scrape(c);
  log(
    `size ${n}: cold start ${coldStartSeconds.toFixed(1)} s, CPU ${settled.cpuSeconds} s, ${sumOf(coldMetrics, 'referable_status_writes_total{result="success"}')} status writes, requests ${JSON.stringify(requestsByVerb(coldMetrics))}`,
  );

  const propagation: Propagation[] = [];
  for (const rate of rates) {
    log(`size ${n}: ${rate} updates/s for ${phaseSeconds} s`);
    propagation.push(await measurePropagation(client, c, fx, watch, rate, phaseSeconds));
  }

  log(`size ${n}: restart with nothing changed`);
  const rvs = new Map([...watch.latest].map(([k, v]) => [k, v.rv]));
  await c.stop();
  c = await startController(plane.kubeconfigPath, selector);
  const reconciled = await until(
    "every Referable reconciled after the restart",
    async () => {
      const m = await scrape(c);
      const done = m.get('controller_runtime_reconcile_total{controller="referable",result="success"}') ?? 0;
      return done >= n ? m : undefined;
    },
    600_000,
  );
  const restartSeconds = (performance.now() - c.startedAt) / 1000;
  const restartWrites = sumOf(reconciled, 'referable_status_writes_total{result="success"}');
  let changed = 0;
  for (const [k, v] of watch.latest) if (rvs.get(k) !== v.rv) changed++;
  if (changed) log(`size ${n}: ${changed} Referables changed resourceVersion across the restart`);
  await c.stop();
  watch.close();
  await deleteFixtures(client, fx.label);
  return {
    n,
    setupSeconds,
    coldStartSeconds,
    cost: settled,
    bytesPerReferable: Math.round(((settled.heapMiB - baselineHeapMiB) * 1024 * 1024) / n),
    ...(settled.liveHeapMiB !== undefined &&
      baselineLiveMiB !== undefined && {
        liveBytesPerReferable: Math.round(((settled.liveHeapMiB - baselineLiveMiB) * 1024 * 1024) / n),
      }),
    propagation,
    restart: {
      coldStartSeconds: restartSeconds,
      statusWrites: restartWrites,
      reconciles:
        reconciled.get('controller_runtime_reconcile_total{controller="referable",result="success"}') ?? 0,
    },
  };
}
