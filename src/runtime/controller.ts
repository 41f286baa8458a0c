/**
 * The runtime Controller: a work queue, the workers that take keys from it, and the mapping of
 * a {@link Reconciler}'s result onto the queue (controller-runtime's controller). It knows
 * nothing of Referables: events are turned into keys by whoever watches, with {@link enqueue}.
 *
 * - `{}`: the key's backoff is forgotten;
 * - `{ requeueAfterMs }`: forgotten, and the key comes back after that delay;
 * - `{ requeue: true }` and a retryable error: the key comes back on its growing backoff;
 * - a {@link TerminalError}: reported, forgotten; the key's next event brings it back.
 */
import { silentLogger, type Logger } from "../api/log.ts";
import { classifyError, type Reconciler, type Result } from "./reconciler.ts";
import {
  runWorkers,
  WorkQueue,
  type Priority,
  type RateLimiter,
  type UnfinishedWork,
  type WorkQueueObserver,
  type WorkResult,
} from "./workqueue.ts";

/** How a reconcile ended, as controller-runtime's `controller_runtime_reconcile_total` labels it. */
export type ReconcileOutcome = "success" | "requeue" | "requeue_after" | "error";

/** Receives the controller's measurements, to feed a metric registry. Must not throw. */
export interface ControllerObserver extends WorkQueueObserver {
  /** A reconcile started (+1) or ended (-1): the active-workers gauge. */
  onActive?(delta: 1 | -1): void;
  /** A reconcile ended after `seconds`; `error` says what it threw (see classifyError). */
  onReconcile?(outcome: ReconcileOutcome, seconds: number, error?: "terminal" | "panic" | "error"): void;
}

/** Options for {@link Controller}. */
export interface ControllerOptions {
  /** The controller's name, in its log lines. */
  name: string;
  reconciler: Reconciler;
  /** Reconciles at once. @default 16 (fan-out measured in BENCHMARKS.md) */
  concurrency?: number;
  /** Delays of retries. @default defaultControllerRateLimiter() */
  rateLimiter?: RateLimiter;
  /** Metric hooks. @default none */
  observer?: ControllerObserver;
  /**
   * Which keys are queued at all (sharding: those of the buckets this replica serves); a key
   * refused is dropped, not deferred. @default every key
   */
  admit?: (key: string) => boolean;
  /** @default silentLogger */
  logger?: Logger;
}

/** Runs a Reconciler over a queue of keys; see the module comment. */
export class Controller {
  private readonly options: ControllerOptions;
  private readonly logger: Logger;
  private readonly queue: WorkQueue;
  private workers: Promise<void> | undefined;

  constructor(options: ControllerOptions) {
    this.options = options;
    this.logger = options.logger ?? silentLogger;
    const queueOptions: ConstructorParameters<typeof WorkQueue>[0] = {};
    if (options.rateLimiter) queueOptions.rateLimiter = options.rateLimiter;
    if (options.observer) queueOptions.observer = options.observer;
    this.queue = new WorkQueue(queueOptions);
  }

  /** The number of workers. */
  get concurrency(): number {
    return this.options.concurrency ?? 16;
  }

  /**
   * Queues `key` for a reconcile (once, however often it is added before a worker takes it);
   * `"low"`: behind every key queued with the normal priority (see WorkQueue.add).
   */
  enqueue(key: string, priority: Priority = "normal"): void {
    if (this.options.admit && !this.options.admit(key)) return;
    this.queue.add(key, priority);
  }

  /** Starts the workers; idempotent. */
  start(): void {
    this.workers ??= runWorkers(this.queue, this.concurrency, (key) => this.run(key), {
      onError: (key, err) => this.reportError(key, err),
    });
  }

  /** The work queue's work in progress (the stuck-worker gauges), measured now. */
  unfinishedWork(): UnfinishedWork {
    return this.queue.unfinishedWork();
  }

  /** Takes no more keys and resolves once every running reconcile has finished. */
  async drain(): Promise<void> {
    await this.queue.shutDownWithDrain();
    await this.workers;
  }

  /** A reconcile that threw: a terminal error is not retried, a panic is a bug, said loudly. */
  private reportError(key: string, err: Error): void {
    const kind = classifyError(err);
    const fields = { [this.options.name]: key, err: err.message };
    if (kind === "terminal") this.logger.error(fields, "reconcile failed; not retried (terminal)");
    else if (kind === "panic")
      this.logger.error(
        { ...fields, stack: err.stack?.split("\n").slice(0, 6).join("\n") },
        "reconcile panicked (a bug: please report it); retrying with backoff",
      );
    else this.logger.warn(fields, "reconcile failed; retrying with backoff");
  }

  private async run(key: string): Promise<WorkResult> {
    const observer = this.options.observer;
    const started = performance.now();
    const seconds = () => (performance.now() - started) / 1000;
    notify(() => observer?.onActive?.(1));
    try {
      const result = await this.options.reconciler.reconcile(key);
      const work = toWork(result);
      this.logger.debug(
        {
          [this.options.name]: key,
          result: typeof work === "string" ? work : "requeue_after",
          ms: Math.round(seconds() * 1000),
        },
        "reconciled",
      );
      notify(() => observer?.onReconcile?.(outcomeOf(work), seconds()));
      return work;
    } catch (err) {
      notify(() => observer?.onReconcile?.("error", seconds(), classifyError(err)));
      throw err; // the workers retry it on the backoff, or forget it when terminal
    } finally {
      notify(() => observer?.onActive?.(-1));
    }
  }
}

/** The queue's form of a result. */
function toWork(result: Result): WorkResult {
  if (result.requeue) return "requeue";
  if (result.requeueAfterMs !== undefined) return { requeueAfterMs: result.requeueAfterMs };
  return "done";
}

function outcomeOf(work: WorkResult): ReconcileOutcome {
  return work === "done" ? "success" : work === "requeue" ? "requeue" : "requeue_after";
}

/** A metrics hook must never break a reconcile. */
function notify(call: () => void): void {
  try {
    call();
  } catch {
    // dropped
  }
}
