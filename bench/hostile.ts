/**
 * The hostile scenario's transforms (issue 21): a canary followed while hostile Referables run
 * their transforms to the worker's deadline; and the helpers bench/hostile-load.ts is handed.
 */
import type { ControlPlane } from "../test/harness/control-plane.ts";
import { cpuSeconds, peakRssMiBOf, startController } from "./controller.ts";
import {
  configMapSource,
  createReferable,
  createSource,
  deleteFixtures,
  NS,
  setSource,
  WIDGET_GROUP,
} from "./fixtures.ts";
import type { HostileLoadTools } from "./hostile-load.ts";
import { log, quick, RUN } from "./options.ts";
import { ReferableWatch, watchAndStart } from "./referable-watch.ts";
import { type BenchClient, pool } from "./retry.ts";
import { type Stats, stats, timeToShow, until } from "./stats.ts";

/** The canary beside a number of hostile Referables. */
export interface HostilePhase {
  /** Hostile evaluations running beside the canary (0: the run without them). */
  hostile: number;
  /** Canary source write acknowledged → its status.value shows the transformed value. */
  canary: Stats;
  /**
   * GET /healthz answered, asked every 20 ms: the event-loop lag as a probe sees it (the
   * controller's own nodejs_eventloop_lag metrics sample once a second, too coarse for this).
   */
  healthz: Stats;
  /** Peak RSS of the controller process so far, MiB. */
  peakRssMiB: number;
}

/**
 * Issue 21: a canary Referable (`value + '!'`) followed while hostile Referables are evaluated
 * again and again (their source rewritten every 100 ms) with a transform the cost meter does
 * not see through (deep equality of lists of 100^5 shared leaves: test/fixtures), which only the
 * worker's deadline stops; beside the same run without them.
 */
export async function runHostile(client: BenchClient, plane: ControlPlane): Promise<HostilePhase[]> {
  const { DEEP_EQUALITY } = await import("../test/fixtures/hostile-transforms.ts");
  const label = `${RUN}-hostile`;
  const labels = { "bench-set": label };
  await createSource(client, "ConfigMap", `${label}-canary`, "c0", labels);
  await createSource(client, "ConfigMap", `${label}-bad`, "b0", labels);
  await createReferable(client, `${label}-canary`, labels, configMapSource(`${label}-canary`), {
    transform: "value + '!'",
  });
  const { watch, c } = await watchAndStart(client, plane, label);
  const probePort = Number(
    /--health-probe-bind-address=127\.0\.0\.1:(\d+)/.exec(c.proc.spawnargs.join(" "))![1],
  );
  await until(
    "the canary Available",
    () => (watch.latest.get(`${label}-canary`)?.value === "c0!" ? true : undefined),
    60_000,
  );
  const rounds = quick ? 30 : 150;
  const phases: HostilePhase[] = [];
  for (const hostile of [0, 2]) {
    log(`hostile: canary with ${hostile} hostile Referable(s) evaluated beside it`);
    for (let h = 0; h < hostile; h++)
      await createReferable(client, `${label}-bad${h}`, labels, configMapSource(`${label}-bad`), {
        transform: DEEP_EQUALITY,
      });
    let running = true;
    const health: number[] = [];
    const prober = (async () => {
      while (running) {
        const t = performance.now();
        await fetch(`http://127.0.0.1:${probePort}/healthz`).catch(() => undefined);
        health.push(performance.now() - t);
        await new Promise((r) => setTimeout(r, 20));
      }
    })();
    let bad = 0;
    const rewriter = (async () => {
      while (running && hostile > 0) {
        await setSource(client, "ConfigMap", `${label}-bad`, `b${++bad}`);
        await new Promise((r) => setTimeout(r, 100));
      }
    })();
    const samples: number[] = [];
    for (let round = 1; round <= rounds; round++) {
      const value = `c${hostile}-${round}`;
      samples.push(
        await timeToShow(
          watch,
          () => watch.latest.get(`${label}-canary`)?.value === `${value}!`,
          () => setSource(client, "ConfigMap", `${label}-canary`, value),
          `hostile round ${round}: the canary`,
        ),
      );
      await new Promise((r) => setTimeout(r, 50));
    }
    running = false;
    await Promise.all([prober, rewriter]);
    phases.push({
      hostile,
      canary: stats(samples),
      healthz: stats(health),
      peakRssMiB: await peakRssMiBOf(c.proc.pid!),
    });
  }
  const failed = hostileReasons(watch, label);
  log(`hostile: the hostile Referables ended ${failed.join(", ") || "(no status)"}`);
  await c.stop();
  watch.close();
  await deleteFixtures(client, label);
  return phases;
}

function hostileReasons(watch: ReferableWatch, label: string): string[] {
  return [...watch.latest].filter(([name]) => name.startsWith(`${label}-bad`)).map(([, v]) => v.reason ?? "");
}

/** The bench's helpers, for the load attacks of bench/hostile-load.ts. */
export function hostileLoadTools(client: BenchClient, plane: ControlPlane): HostileLoadTools {
  return {
    client,
    kubeconfigPath: plane.kubeconfigPath,
    namespace: NS,
    run: RUN,
    log,
    widgetGroup: WIDGET_GROUP,
    createSource: (name, value, labels, objectLabels) =>
      createSource(client, "ConfigMap", name, value, { ...objectLabels, ...labels }),
    setSource: (name, value) => setSource(client, "ConfigMap", name, value),
    createReferable: async (name, labels, spec) => {
      const { source, ...extra } = spec;
      await createReferable(client, name, labels, source as Record<string, unknown>, extra);
    },
    deleteFixtures: (label) => deleteFixtures(client, label),
    startController: async (selector) => {
      const c = await startController(plane.kubeconfigPath, selector);
      return { pid: c.proc.pid!, stop: () => c.stop() };
    },
    watch: async (selector) => {
      const w = new ReferableWatch(client, selector, false);
      await w.start();
      return w;
    },
    cpuSeconds,
    peakRssMiB: peakRssMiBOf,
    pool: (items, concurrency, each) => pool(items, concurrency, each),
  };
}
