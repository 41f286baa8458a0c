/**
 * CPU of waiting for the status write budget, on the work queue alone: a cold start's n keys
 * arrive at once (500 a turn), each worker's first look reserves a place in a token bucket of
 * `--rate` a second (burst `--burst`, as the controller's budget) and asks to be looked at again
 * when it is due, as a deferred status write does; the second look finishes the key. Prints the
 * wall time against the bucket's own bound and the CPU it took; with every key waiting at once,
 * a queue that does O(n) per delayed key shows as CPU growing with n².
 *
 *   node bench/budget-queue.ts [--referables 100000] [--rate 5000] [--burst 1000]
 */
import { parseArgs } from "node:util";
import { TokenBucket } from "../src/timing/token-bucket.ts";
import type { Result } from "../src/runtime/reconciler.ts";
import { runWorkers } from "../src/runtime/workers.ts";
import { WorkQueue } from "../src/runtime/workqueue.ts";

const { values } = parseArgs({
  options: {
    referables: { type: "string", default: "100000" },
    rate: { type: "string", default: "5000" },
    burst: { type: "string", default: "1000" },
  },
});
const n = Number(values.referables);
const rate = Number(values.rate);
const burst = Number(values.burst);

const queue = new WorkQueue();
const budget = new TokenBucket(rate, burst, performance.now());
const placed = new Set<string>();
let finished = 0;
let allDone!: () => void;
const done = new Promise<void>((resolve) => (allDone = resolve));
const cpu0 = process.cpuUsage();
const t0 = performance.now();
const workers = runWorkers(queue, 16, async (key): Promise<Result> => {
  if (!placed.has(key)) {
    placed.add(key);
    const waitMs = budget.reserve(performance.now());
    if (waitMs > 0) return { requeueAfterMs: waitMs };
  }
  if (++finished === n) allDone();
  return {};
});
let next = 0;
const arrive = (): void => {
  for (const end = Math.min(n, next + 500); next < end; next++) queue.add(`r${next}`);
  if (next < n) setImmediate(arrive);
};
arrive();
await done;
const cpu = process.cpuUsage(cpu0);
const wall = (performance.now() - t0) / 1000;
const bound = Math.max(0, n - burst) / rate;
console.log(
  `${n} keys through a budget of ${rate}/s (burst ${burst}): ${wall.toFixed(1)} s (the budget's bound ${bound.toFixed(1)} s), CPU ${((cpu.user + cpu.system) / 1e6).toFixed(1)} s`,
);
queue.shutDown();
await workers;
