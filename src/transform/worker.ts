/**
 * The body of a transform worker thread (see ./pool.ts): evaluates the jobs the pool posts, one
 * at a time and in order, and answers each batch with one message. Before each job it writes the
 * job's id and start time into memory shared with the pool, which is how the pool's watchdog
 * knows which job overran its deadline, however busy the main thread was when it looked.
 */
import { readlinkSync } from "node:fs";
import { parentPort, workerData } from "node:worker_threads";
import { isResolutionError } from "../api/errors.ts";
import { compileTransform, warmUp } from "./engine.ts";
import type { JobMessage, ResultMessage, WorkerData } from "./protocol.ts";

const data = workerData as WorkerData;
const running = new Int32Array(data.state, 0, 1);
const startedAt = new Float64Array(data.state, 8, 1);
const cpuAtStart = new Float64Array(data.state, 16, 1);
const now = () => performance.timeOrigin + performance.now();

warmUp();

/** This thread's id in /proc (Linux), so the pool can read the CPU time it spent; -1 elsewhere. */
function threadId(): number {
  try {
    const m = /\/task\/(\d+)$/.exec(readlinkSync("/proc/thread-self"));
    return m ? Number(m[1]) : -1;
  } catch {
    return -1;
  }
}

parentPort!.on("message", (message: JobMessage) => {
  const results: ResultMessage["results"] = [];
  for (const job of message.jobs) {
    const cpu = process.threadCpuUsage();
    cpuAtStart[0] = (cpu.user + cpu.system) / 1000;
    startedAt[0] = now();
    Atomics.store(running, 0, job.id);
    try {
      const compiled = compileTransform(job.text, job.shape);
      const out = compiled.evaluate(job.input, job.limits);
      results.push({ id: job.id, ok: true, value: out.value, cost: out.cost });
    } catch (err) {
      const known = isResolutionError(err);
      results.push({
        id: job.id,
        ok: false,
        reason: known ? err.reason : "TransformFailed",
        message: known ? err.message : "the transform failed unexpectedly",
      });
    } finally {
      Atomics.store(running, 0, 0);
    }
  }
  parentPort!.postMessage({ results } satisfies ResultMessage);
});

parentPort!.postMessage({ ready: true, tid: threadId() });
