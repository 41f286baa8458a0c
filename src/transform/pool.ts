/**
 * Transforms run off the event loop, in a small pool of worker threads with hard limits, so a
 * hole in the cost meter costs one evaluation, never the process: a worker whose evaluation runs
 * past its deadline, or whose heap reaches its ceiling (`resourceLimits`), is terminated and
 * replaced, and only that evaluation fails (`TransformFailed`, naming the limit). The other jobs
 * it held are handed to its replacement.
 *
 * The deadline is CPU time of the worker's thread where Linux lets the pool read it
 * (/proc/self/task/<tid>/stat), so a thread that waits for a core on a busy node is not killed
 * for waiting; whatever happens, an evaluation is stopped after {@link HARD_DEADLINE_FACTOR}
 * times the deadline in wall-clock time. Elsewhere the deadline is wall-clock time.
 *
 * Jobs cross as structured clones (bounded: the input is at most `maxValueBytes` of JSON per
 * value, the result is sized in the worker before it is sent) and are batched per turn of the
 * event loop, so many evaluations share one message each way.
 *
 * Fair scheduling, in three lanes (healthy, probation, quarantine), each with workers and a
 * queue of its own: which expression runs in which lane, and how the quarantine backs off, is
 * quarantine.ts.
 */
import { readFileSync } from "node:fs";
import { Worker } from "node:worker_threads";
import { ResolutionError } from "../api/errors.ts";
import type { EvaluateLimits, TransformInput, TransformOutput, TransformShape } from "./engine.ts";
import type { Job, JobMessage, ReadyMessage, ResultMessage, WorkerData } from "./protocol.ts";
import { IdleStop } from "./idle-stop.ts";
import { expressionKey, HEALTHY, PROBATION, Quarantine, QUARANTINE, type Lane } from "./quarantine.ts";

/** Options of the pool of worker threads transforms run in; each has a default. */
export interface TransformPoolOptions {
  /** Worker threads evaluating transforms. @default 1 */
  workers?: number;
  /**
   * The deadline of one evaluation, in milliseconds of the worker's CPU time (wall-clock time
   * where that cannot be read); an evaluation past it fails. @default 50
   */
  timeoutMs?: number;
  /** The heap ceiling of each worker (V8's old generation), in MiB. @default 64 */
  maxHeapMiB?: number;
  /**
   * The quarantine's backoff of an expression that hit the deadline or the heap ceiling, as
   * [first, longest] in milliseconds: with the same input it fails at once, with the same message,
   * for `first` after its first failure, twice as long after each next one, at most `longest`.
   * @default [1000, 300000]
   */
  quarantineBackoffMs?: [number, number];
  /**
   * Whether idle workers keep the process alive. The library's pool does not: a worker holds
   * the process only while it has evaluations to finish, so a process with nothing else to do
   * exits. @default true
   */
  keepAlive?: boolean;
  /**
   * How long the pool holds no work before it stops its workers (each a V8 isolate, megabytes
   * of RSS); the next evaluation starts them again. 0 keeps them. @default 60000
   */
  idleStopMs?: number;
}

/** The defaults of {@link TransformPoolOptions}. */
export const TRANSFORM_POOL_DEFAULTS = Object.freeze({
  workers: 1,
  timeoutMs: 50,
  maxHeapMiB: 64,
  quarantineBackoffMs: Object.freeze([1000, 300_000] as const),
  idleStopMs: 60_000,
});

/** Wall-clock time, as a multiple of the deadline, after which an evaluation stops even if its thread was starved of CPU. */
export const HARD_DEADLINE_FACTOR = 10;

/** Jobs one worker holds at once (running and queued in its inbox). */
const MAX_IN_FLIGHT = 64;
/** The young generation of a worker, in MiB: V8's default semi-spaces, fixed so the ceiling is known. */
const YOUNG_GENERATION_MIB = 16;
/** /proc reports CPU time in ticks of (on every Linux we run on) 10 ms. */
const TICK_MS = 10;

interface Pending {
  lane: Lane;
  /** The expression's key (shape and text). */
  key: string;
  job: Job;
  resolve: (output: TransformOutput) => void;
  reject: (error: ResolutionError) => void;
}

interface Slot {
  lane: Lane;
  worker: Worker;
  /** Int32 at 0: the job running (0: none); Float64 at 8: when it started (ms since the epoch). */
  running: Int32Array;
  startedAt: Float64Array;
  /** Float64 at 16: the thread's CPU time (ms) when the job started. */
  cpuAtStart: Float64Array;
  tid: number;
  ready: boolean;
  dead: boolean;
  /** Why it stopped, when it reported an error before exiting. */
  error: Error | undefined;
  outstanding: Map<number, Pending>;
  timer: NodeJS.Timeout | undefined;
}

const now = () => performance.timeOrigin + performance.now();

/** The worker's entry: the TypeScript source when this module runs from source, else the build. */
const WORKER_URL = new URL(import.meta.url.endsWith(".ts") ? "./worker.ts" : "./worker.js", import.meta.url);

/** A pool of transform workers; {@link TransformPool.close} it when done. */
export class TransformPool {
  private readonly workers: number;
  private readonly timeoutMs: number;
  private readonly maxHeapMiB: number;
  private readonly keepAlive: boolean;
  /** Which lane each expression runs in, and the quarantine's memory. */
  private readonly lanes: Quarantine;
  private readonly slots: Slot[] = [];
  /** The jobs waiting for a worker, per lane. */
  private readonly queues: [Pending[], Pending[], Pending[]] = [[], [], []];
  private nextId = 1;
  /**
   * A started worker kept idle, so a worker retired for a limit is replaced at once rather than
   * after a worker's start (which takes tens of milliseconds on an idle node, seconds on a busy
   * one) while the transforms queued behind it wait.
   */
  private spare: Slot | undefined;
  private flushScheduled = false;
  private closed = false;
  private readonly idleStop: IdleStop;

  constructor(options: TransformPoolOptions = {}) {
    this.workers = Math.max(1, Math.floor(options.workers ?? TRANSFORM_POOL_DEFAULTS.workers));
    this.timeoutMs = Math.max(1, options.timeoutMs ?? TRANSFORM_POOL_DEFAULTS.timeoutMs);
    this.maxHeapMiB = Math.max(8, options.maxHeapMiB ?? TRANSFORM_POOL_DEFAULTS.maxHeapMiB);
    this.keepAlive = options.keepAlive ?? true;
    this.lanes = new Quarantine(options.quarantineBackoffMs ?? TRANSFORM_POOL_DEFAULTS.quarantineBackoffMs);
    this.idleStop = new IdleStop(options.idleStopMs ?? TRANSFORM_POOL_DEFAULTS.idleStopMs, () =>
      this.stopWorkers(),
    );
  }

  /** Worker threads running now (the spare included): none before the first evaluation, nor once idle. */
  get workersRunning(): number {
    return this.slots.length + (this.spare ? 1 : 0);
  }

  /** How many expressions are quarantined now (at most MAX_QUARANTINED, see quarantine.ts). */
  get quarantined(): number {
    return this.lanes.size;
  }

  /**
   * How long until the quarantined expression `text` (compiled for `shape`) is evaluated again
   * rather than failed at once; undefined when it is not backing off.
   */
  retryAfterMs(text: string, shape: TransformShape): number | undefined {
    return this.lanes.retryAfterMs(text, shape);
  }

  /** How many evaluations ran in the quarantine's lane since the pool was made. */
  get quarantineEvaluations(): number {
    return this.lanes.evaluations;
  }

  /** The deadline of one evaluation, in ms. */
  get deadlineMs(): number {
    return this.timeoutMs;
  }

  /**
   * Evaluates transform `text` (compiled for `shape`) with `input` in a worker. Rejects only
   * with a `ResolutionError`: what the engine reports, or `TransformFailed` when a limit of the
   * worker stopped it.
   */
  evaluate(
    text: string,
    shape: TransformShape,
    input: TransformInput,
    limits: EvaluateLimits,
  ): Promise<TransformOutput> {
    if (this.closed)
      return Promise.reject(new ResolutionError("TransformFailed", "the transform pool is closed"));
    const key = expressionKey(text, shape);
    const lane = this.lanes.laneOf(key, input);
    if (typeof lane === "object") return Promise.reject(new ResolutionError("TransformFailed", lane.fail));
    return new Promise<TransformOutput>((resolve, reject) => {
      const id = this.nextId;
      this.nextId = this.nextId >= 0x7fff_ffff ? 1 : this.nextId + 1;
      this.queues[lane].push({ lane, key, job: { id, text, shape, input, limits }, resolve, reject });
      this.idleStop.busy();
      this.scheduleFlush();
    });
  }

  /** Stops every worker; evaluations not finished fail. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.idleStop.busy();
    const stopping: Promise<unknown>[] = [];
    if (this.spare) this.slots.push(this.spare);
    this.spare = undefined;
    for (const slot of this.slots) {
      slot.dead = true;
      if (slot.timer) clearTimeout(slot.timer);
      for (const p of slot.outstanding.values()) p.reject(closedError());
      slot.outstanding.clear();
      stopping.push(slot.worker.terminate());
    }
    this.slots.length = 0;
    for (const queue of this.queues) for (const p of queue.splice(0)) p.reject(closedError());
    await Promise.allSettled(stopping);
  }

  private scheduleFlush(): void {
    if (this.flushScheduled) return;
    this.flushScheduled = true;
    // A whole synchronous burst (a relist recomputes every subscription) goes in one message.
    setImmediate(() => {
      this.flushScheduled = false;
      this.flush();
    });
  }

  private flush(): void {
    if (this.closed) return;
    this.flushLane(HEALTHY, this.workers);
    // As many for the first evaluations of expressions, made when they first have work: a new
    // expression that runs to a limit costs the others new like it, never the trusted ones.
    this.flushLane(PROBATION, this.workers);
    // One worker for the quarantine: its expressions wait for each other, never for or in front
    // of the others.
    this.flushLane(QUARANTINE, 1);
  }

  private flushLane(lane: Lane, workers: number): void {
    const queue = this.queues[lane];
    if (queue.length === 0) return;
    const slots = () => this.slots.filter((s) => s.lane === lane);
    while (slots().length < workers) {
      // A spare is kept for the healthy lane only: a quarantined expression may wait for a start.
      const spare = lane === HEALTHY ? this.spare : undefined;
      this.slots.push(spare ?? this.spawn(lane));
      if (spare) this.spare = undefined;
    }
    if (lane === HEALTHY) this.spare ??= this.spawn(HEALTHY);
    const mine = slots();
    const batches = new Map<Slot, Pending[]>();
    while (queue.length > 0) {
      let best: Slot | undefined;
      for (const s of mine) if (!best || s.outstanding.size < best.outstanding.size) best = s;
      if (!best || best.outstanding.size >= MAX_IN_FLIGHT) break;
      const p = queue.shift()!;
      best.outstanding.set(p.job.id, p);
      let batch = batches.get(best);
      if (!batch) batches.set(best, (batch = []));
      batch.push(p);
    }
    for (const [slot, batch] of batches) {
      // Without keepAlive a worker holds the process only while it has work: an evaluation
      // awaited at the top of a script still completes.
      if (!this.keepAlive) slot.worker.ref();
      slot.worker.postMessage({ jobs: batch.map((p) => p.job) } satisfies JobMessage);
      this.arm(slot, this.timeoutMs);
    }
  }

  private spawn(lane: Lane): Slot {
    const state = new SharedArrayBuffer(24);
    const worker = new Worker(WORKER_URL, {
      workerData: { state } satisfies WorkerData,
      resourceLimits: {
        maxOldGenerationSizeMb: this.maxHeapMiB,
        maxYoungGenerationSizeMb: YOUNG_GENERATION_MIB,
      },
      // Not the process's flags: the main thread's heap cap must not become the worker's.
      execArgv: [],
      stdout: false,
      stderr: false,
    });
    const slot: Slot = {
      lane,
      worker,
      running: new Int32Array(state, 0, 1),
      startedAt: new Float64Array(state, 8, 1),
      cpuAtStart: new Float64Array(state, 16, 1),
      tid: -1,
      ready: false,
      dead: false,
      error: undefined,
      outstanding: new Map(),
      timer: undefined,
    };
    worker.on("message", (message: ResultMessage | ReadyMessage) => this.onMessage(slot, message));
    worker.on("error", (err) => {
      slot.error = err;
    });
    worker.on("exit", () => this.onExit(slot));
    // After the listeners: adding a "message" listener refs the worker's port again.
    if (!this.keepAlive) worker.unref();
    return slot;
  }

  private onMessage(slot: Slot, message: ResultMessage | ReadyMessage): void {
    if (slot.dead) return;
    if ("ready" in message) {
      slot.ready = true;
      slot.tid = message.tid;
      return;
    }
    for (const r of message.results) {
      const p = slot.outstanding.get(r.id);
      if (!p) continue;
      slot.outstanding.delete(r.id);
      // Evaluated within its limits (whatever the outcome): from now on in the healthy lane.
      if (p.lane === PROBATION) this.lanes.trust(p.key);
      if (r.ok) p.resolve({ value: r.value, cost: r.cost });
      else p.reject(new ResolutionError(r.reason, r.message));
    }
    if (slot.outstanding.size === 0) {
      if (slot.timer) clearTimeout(slot.timer);
      slot.timer = undefined;
      if (!this.keepAlive) slot.worker.unref();
    }
    if (this.queues[slot.lane].length > 0) this.scheduleFlush();
    this.idleIfNoWork();
  }

  /** Arms the idle stop when no job is queued or held by a worker. */
  private idleIfNoWork(): void {
    if (this.queues.some((q) => q.length > 0) || this.slots.some((s) => s.outstanding.size > 0)) return;
    this.idleStop.idle();
  }

  /** Stops every worker (the pool is idle): the next evaluation starts them again. */
  private stopWorkers(): void {
    if (this.closed) return;
    if (this.spare) this.slots.push(this.spare);
    this.spare = undefined;
    for (const slot of this.slots.splice(0)) {
      slot.dead = true;
      if (slot.timer) clearTimeout(slot.timer);
      void slot.worker.terminate();
    }
  }

  private onExit(slot: Slot): void {
    if (slot.dead) return;
    const err = slot.error;
    const oom = (err as { code?: string } | undefined)?.code === "ERR_WORKER_OUT_OF_MEMORY";
    const message = oom
      ? `the transform ran out of its memory limit of ${this.maxHeapMiB} MiB: make it build smaller values`
      : slot.ready
        ? `the transform worker stopped unexpectedly${err ? `: ${err.message}` : ""}`
        : `the transform worker could not start${err ? `: ${err.message}` : ""}`;
    this.retire(slot, Atomics.load(slot.running, 0), message, !slot.ready && !oom, oom);
  }

  /** Keeps a watchdog on `slot` while it holds jobs. */
  private arm(slot: Slot, delayMs: number): void {
    if (slot.timer || slot.dead) return;
    slot.timer = setTimeout(
      () => {
        slot.timer = undefined;
        this.check(slot);
      },
      Math.max(1, Math.ceil(delayMs)),
    );
    slot.timer.unref();
  }

  private check(slot: Slot): void {
    if (slot.dead || slot.outstanding.size === 0) return;
    const id = Atomics.load(slot.running, 0);
    if (id === 0) return this.arm(slot, this.timeoutMs);
    const wall = now() - slot.startedAt[0]!;
    if (wall < this.timeoutMs) return this.arm(slot, this.timeoutMs - wall);
    if (wall < this.timeoutMs * HARD_DEADLINE_FACTOR) {
      // /proc counts whole ticks, so `spent` is at most the CPU time the job took: a thread
      // that waited for a core is given the time it waited.
      const cpu = threadCpuMs(slot.tid);
      const spent = cpu === undefined ? undefined : cpu - slot.cpuAtStart[0]!;
      if (spent !== undefined && spent < this.timeoutMs)
        return this.arm(slot, Math.max(TICK_MS, this.timeoutMs - spent));
    }
    this.retire(
      slot,
      id,
      `the transform ran past its time limit of ${this.timeoutMs} ms: make it do less work`,
      false,
      true,
    );
  }

  /**
   * Terminates `slot`, fails job `culprit` with `message` (every job it held, when `failAll`),
   * and hands its other jobs to the pool again.
   */
  private retire(slot: Slot, culprit: number, message: string, failAll: boolean, limitHit: boolean): void {
    slot.dead = true;
    if (slot.timer) clearTimeout(slot.timer);
    void slot.worker.terminate();
    const index = this.slots.indexOf(slot);
    if (index >= 0) this.slots.splice(index, 1);
    if (this.spare === slot) this.spare = undefined;
    const held = [...slot.outstanding.values()];
    slot.outstanding.clear();
    // With no job marked as running (it died between jobs), the oldest job it held is the suspect.
    const suspect = culprit !== 0 ? culprit : held[0]?.job.id;
    const again: Pending[] = [];
    for (const p of held) {
      if (failAll || p.job.id === suspect) {
        const said =
          limitHit && p.job.id === suspect ? this.lanes.remember(p.key, p.job.input, message) : message;
        p.reject(new ResolutionError("TransformFailed", said));
      } else again.push(p);
    }
    this.queues[slot.lane].unshift(...again);
    if (again.length > 0) this.scheduleFlush();
    else this.idleIfNoWork();
  }
}

function closedError(): ResolutionError {
  return new ResolutionError("TransformFailed", "the transform pool was closed before the evaluation ended");
}

/** The CPU time thread `tid` of this process has spent, in ms, or undefined where it cannot be read. */
function threadCpuMs(tid: number): number | undefined {
  if (tid < 0) return undefined;
  try {
    const stat = readFileSync(`/proc/self/task/${tid}/stat`, "utf8");
    // Fields after the command (which may hold spaces) start at the state, field 3; utime and
    // stime are fields 14 and 15.
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    const ticks = Number(fields[11]) + Number(fields[12]);
    return Number.isFinite(ticks) ? ticks * TICK_MS : undefined;
  } catch {
    return undefined;
  }
}
