/** The scale scenario: 100,000 Referables, one replica, then shards (issue 27). */
import type { ControlPlane } from "../test/harness/control-plane.ts";
import { countLogLines, formatLogCounts } from "./controller-logs.ts";
import { type Controller, controllerHasShards } from "./controller.ts";
import { deleteFixtures, makeNamedFixture } from "./fixtures.ts";
import {
  log,
  phaseSeconds,
  RUN,
  scaleHeapMiB,
  scalePhase,
  scalePhases,
  scaleReferables,
  scaleShardHeapMiB,
  scaleShards,
} from "./options.ts";
import { ReferableWatch } from "./referable-watch.ts";
import type { Report } from "./report.ts";
import type { BenchClient } from "./retry.ts";
import { scaleColdStart, scaleFailover, scaleFloor } from "./scale-phases.ts";
import { printScaleFailover, printScalePhase, scaleHeader, type ScaleResult } from "./scale-report.ts";

const clock = (secondsFromNow: number) =>
  new Date(Date.now() + secondsFromNow * 1000).toISOString().slice(11, 16) + " UTC";

/**
 * A rough duration of the scale scenario's phases still to run, from the rate the fixture was
 * created at or, once measured, the floor: each phase writes the floor, then a cold start of about 1.5 floors (one replica)
 * or 3 (four shards: each lists and graphs every Referable), as measured at 10,000 on the loaded
 * machine, plus the propagation phase and process starts; the failover at most a minute.
 */
function scaleEstimate(
  n: number,
  objectsPerSecond: number,
  options: { floorSeconds?: number; before?: number; singleFloorDone?: boolean } = {},
): string {
  // 16 status writes in flight go at about half the rate of 64 creates (0.48 at 100,000 on the
  // loaded machine, 0.65 at 10,000 on the quiet one).
  const floor = options.floorSeconds ?? n / (objectsPerSecond / 2);
  const parts: string[] = [];
  let total = options.before ?? 0;
  const add = (name: string, seconds: number) => {
    total += seconds;
    parts.push(`${name} ~${Math.round(seconds)} s`);
  };
  if (scalePhase("single"))
    add(
      options.singleFloorDone ? "single (cold start)" : "single (floor + cold start)",
      floor * (options.singleFloorDone ? 1.5 : 2.5) + phaseSeconds + 30,
    );
  if (scalePhase("sharded")) add("sharded (floor + cold start)", floor * 4 + phaseSeconds + 30);
  if (scalePhase("failover")) add("failover", 60);
  return `${parts.join(", ")}: about ${Math.round(total / 60)} min more in all (ends about ${clock(total)})`;
}

/**
 * n Referables over sources of their own: the status-write floor, then one replica's cold start
 * (its RSS, heap per Referable, propagation), then the floor again and a cold start of
 * `scaleShards` shards (`--shards`), their RSS each, propagation, and the failover after a
 * kill -9 of one; `--scale-phases` picks which. Each phase's figures are printed and saved as
 * soon as measured (`save`). The fixture is left to the private control plane's teardown when
 * the bench started one (deleting 200,000 objects takes longer than the rest of the phases);
 * on a borrowed cluster it is deleted in batches.
 */
export async function runScale(
  client: BenchClient,
  plane: ControlPlane,
  report: Report,
  save: () => Promise<void>,
): Promise<ScaleResult> {
  const n = scaleReferables;
  const concurrency = 16; // the controller's default --concurrency
  const single = scaleHeapMiB ?? Math.max(256, Math.ceil(n / 100));
  const heapCapMiB = { single, shard: scaleShardHeapMiB ?? single };
  const print = (line: string) => process.stdout.write(`${line}\n`);
  log(`scale: creating ${n} sources and ${n} Referables (phases: ${[...scalePhases].join(", ")})`);
  const t0 = performance.now();
  let estimated = false;
  let lastLog = t0;
  const fx = await makeNamedFixture(client, n, `${RUN}-scale`, true, (created, total) => {
    const now = performance.now();
    const first = !estimated && (created >= Math.min(2000, total) || now - t0 > 20_000);
    if (!first && now - lastLog < 30_000) return;
    estimated = true;
    lastLog = now;
    const rate = created / ((now - t0) / 1000);
    const left = (total - created) / rate;
    log(
      `scale: ${first ? "estimate: " : ""}${created} of ${total} objects created, ${rate.toFixed(0)}/s: creating ~${Math.round(left)} s more; then ${scaleEstimate(n, rate, { before: left })}`,
    );
  });
  const setupSeconds = (performance.now() - t0) / 1000;
  const createdPerSecond = Number(((2 * n) / setupSeconds).toFixed(1));
  log(
    `scale: created in ${setupSeconds.toFixed(0)} s (${createdPerSecond}/s); ${scaleEstimate(n, createdPerSecond)}`,
  );
  const watch = new ReferableWatch(client, `bench-set=${fx.label}`, false);
  const result: ScaleResult = {
    n,
    phases: [...scalePhases],
    setupSeconds,
    createdPerSecond,
    floorConcurrency: concurrency,
    heapCapMiB,
    propagationFloor: { p50: report.floor.p50, p99: report.floor.p99 },
    single: { skipped: "not run (--scale-phases)" },
    sharded: { skipped: "not run (--scale-phases)" },
    cleanupSeconds: NaN,
  };
  report.scale = result;
  print("");
  print(scaleHeader(result));
  const coldStart = (replicas: number, heapCap: number, floor: Awaited<ReturnType<typeof scaleFloor>>) =>
    scaleColdStart(
      client,
      plane,
      fx,
      watch,
      replicas,
      heapCap,
      floor,
      report.baseline!.heapMiB,
      report.baseline!.liveHeapMiB,
    );
  let running: Controller[] = [];
  try {
    await watch.start();
    if (scalePhase("single")) {
      // The Referables were created without a status, and writing a status where there is none
      // costs the API server less than replacing one (no old status to ratchet the schema's
      // validation against, no old managed fields to compare): the cold start replaces the
      // floor's, so the floor measured replaces one too. Not measured: its CPU is the setup's.
      log(`scale: floor: a first status for each of the ${n} Referables (not measured)`);
      await scaleFloor(client, plane, watch, fx, concurrency, "floor-0");
      log(`scale: floor: ${n} status writes, ${concurrency} in flight`);
      const floor1 = await scaleFloor(client, plane, watch, fx, concurrency, "floor-1");
      log(
        `scale: floor ${floor1.seconds.toFixed(1)} s; ${scaleEstimate(n, createdPerSecond, { floorSeconds: floor1.seconds, singleFloorDone: true })}`,
      );
      const one = await coldStart(1, heapCapMiB.single, floor1);
      running = one.controllers;
      result.single = one.phase;
      await save();
      printScalePhase(result, one.phase, print);
      await Promise.all(running.map((c) => c.stop()));
      running = [];
    }

    if (scalePhase("sharded")) {
      if (!(await controllerHasShards())) {
        result.sharded = { skipped: "this controller has no --shards flag (feat/sharding not merged)" };
        log(`scale: ${result.sharded.skipped}`);
      } else {
        log(`scale: floor again: ${n} status writes`);
        const floor2 = await scaleFloor(client, plane, watch, fx, concurrency, "floor-2");
        log(`scale: floor ${floor2.seconds.toFixed(1)} s`);
        const sharded = await coldStart(scaleShards, heapCapMiB.shard, floor2);
        running = sharded.controllers;
        result.sharded = sharded.phase;
        await save();
        printScalePhase(result, sharded.phase, print);
        if (scalePhase("failover")) {
          sharded.phase.failover = await scaleFailover(client, running, fx, watch);
          sharded.phase.failover.logLines = await countLogLines(running.map((c) => c.logPath));
          await save();
          printScaleFailover(sharded.phase.failover, print);
          for (const line of formatLogCounts("after the failover", sharded.phase.failover.logLines))
            print(line);
        }
      }
    }
  } finally {
    await Promise.all(running.map((c) => c.stop()));
    watch.close();
    if (plane.owned) {
      log("scale: the fixture goes with the private control plane (not deleted object by object)");
    } else {
      const c0 = performance.now();
      await deleteFixtures(client, fx.label, fx.batches);
      result.cleanupSeconds = (performance.now() - c0) / 1000;
    }
  }
  return result;
}
