/** The idle scenario: the settled controller watched doing nothing, its CPU and RSS read from /proc. */
import type { ControlPlane } from "../test/harness/control-plane.ts";
import { cpuSeconds, rssMiBOf, startController } from "./controller.ts";
import { deleteFixtures, makeNamedFixture, NS } from "./fixtures.ts";
import { idleSeconds, log, RUN } from "./options.ts";
import { ReferableWatch } from "./referable-watch.ts";
import type { BenchClient } from "./retry.ts";
import { until } from "./stats.ts";

/** The controller at rest. */
export interface IdleResult {
  referables: number;
  seconds: number;
  /** CPU (user + system) the controller used while nothing changed, per minute. */
  cpuSecondsPerMinute: number;
  rssMiB: number;
  leaderElection: boolean;
}

/**
 * The controller at rest, as the Deployment runs it (leader election on): a few Referables,
 * settled, then `idleSeconds` in which nothing changes and nobody scrapes it. CPU and RSS are
 * read from /proc, so the measurement itself does not wake the process.
 */
export async function runIdle(
  client: BenchClient,
  plane: ControlPlane,
  referables: number,
  leaderElection: boolean,
): Promise<IdleResult> {
  log(
    `idle: ${referables} Referables, leader election ${leaderElection ? "on" : "off"}, ${idleSeconds} s of nothing`,
  );
  const label = `${RUN}-idle${referables}-${leaderElection ? "le" : "nole"}`;
  const fx = await makeNamedFixture(client, referables, label);
  const watch = new ReferableWatch(client, `bench-set=${fx.label}`);
  await watch.start();
  const c = await startController(
    plane.kubeconfigPath,
    `bench-set=${fx.label}`,
    leaderElection
      ? ["--leader-elect=true", `--leader-election-namespace=${NS}`, `--leader-election-id=${label}`]
      : ["--leader-elect=false"],
  );
  await until(
    "the idle Referables Ready",
    () => (watch.readyCount() >= referables ? true : undefined),
    60_000,
  );
  watch.close();
  // Let start-up settle: the first GCs, the first leader renewals.
  await new Promise((r) => setTimeout(r, 5000));
  const pid = c.proc.pid!;
  const cpu0 = await cpuSeconds(pid);
  await new Promise((r) => setTimeout(r, idleSeconds * 1000));
  const cpu1 = await cpuSeconds(pid);
  const rssMiB = await rssMiBOf(pid);
  await c.stop();
  await deleteFixtures(client, fx.label);
  return {
    referables,
    seconds: idleSeconds,
    cpuSecondsPerMinute: Number((((cpu1 - cpu0) * 60) / idleSeconds).toFixed(3)),
    rssMiB,
    leaderElection,
  };
}
