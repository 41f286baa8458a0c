/**
 * The runtime Controller (controller-runtime's controller): sources whose events handlers turn
 * into keys, a work queue, the workers that reconcile them, and the one mapping of a
 * {@link Reconciler}'s result onto the queue ({@link settle}). It knows nothing of what it
 * reconciles. Build one with {@link controller}:
 *
 * ```ts
 * controller("referable").watches(source, enqueueObject(nameOf), notOwnEcho(writes)).admit(gate).build(reconciler)
 * ```
 */
import { silentLogger, type Logger } from "../api/log.ts";
import type { Handler, KeyQueue } from "./handler.ts";
import type { Predicate } from "./predicate.ts";
import type { RateLimiter } from "./rate-limiter.ts";
import { classifyError, type Reconciler, type Result } from "./reconciler.ts";
import type { Source } from "./source.ts";
import { runWorkers, type ReconcileOutcome } from "./workers.ts";
import { WorkQueue, type Priority, type UnfinishedWork, type WorkQueueObserver } from "./workqueue.ts";

export type { ReconcileOutcome } from "./workers.ts";

/** Receives the controller's measurements, to feed a metric registry. Must not throw. */
export interface ControllerObserver extends WorkQueueObserver {
  /** A reconcile started (+1) or ended (-1): the active-workers gauge. */
  onActive?(delta: 1 | -1): void;
  /** A reconcile ended after `seconds`; `error` says what it threw (see classifyError). */
  onReconcile?(outcome: ReconcileOutcome, seconds: number, error?: "terminal" | "panic" | "error"): void;
}

/**
 * Which keys a controller takes at all (sharding: those of the buckets this replica serves), and
 * the reconciler's wrapper that keeps the keys it no longer takes from running.
 */
export interface Gate {
  /** Whether `key` is queued; a key refused is dropped, not deferred. */
  admits(key: string): boolean;
  /** `reconciler`, as the gate runs it. @default the reconciler itself */
  wrap?(reconciler: Reconciler): Reconciler;
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
  /** Which keys are queued at all (see {@link Gate}). @default every key */
  admit?: (key: string) => boolean;
  /** @default silentLogger */
  logger?: Logger;
}

/** Runs a Reconciler over a queue of keys; see the module comment. */
export class Controller {
  private readonly options: ControllerOptions;
  private readonly logger: Logger;
  private readonly queue: WorkQueue;
  private readonly sources: Array<Source<never>> = [];
  /** Aborted by {@link stop}: what every reconcile is given. */
  private readonly abort = new AbortController();
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
   * Connects `source`: each of its events that every predicate lets through goes to `handler`,
   * which queues keys (behind the admission).
   */
  watch<E>(source: Source<E>, handler: Handler<E>, predicates: ReadonlyArray<Predicate<E>> = []): void {
    const queue: KeyQueue = { add: (key, priority) => this.enqueue(key, priority) };
    source.start((event) => {
      for (const admit of predicates) if (!admit(event)) return;
      handler(event, queue);
    });
    this.sources.push(source as Source<never>);
  }

  /** Resolves once every source has delivered what existed when it started. */
  async whenSynced(): Promise<void> {
    await Promise.all(this.sources.map((source) => source.synced()));
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
      onSettled: (key, outcome, error) => {
        const seconds = this.seconds(key);
        this.logger.debug(
          { [this.options.name]: key, result: outcome, ms: Math.round(seconds * 1000) },
          "reconciled",
        );
        const kind = outcome === "error" ? classifyError(error) : undefined;
        notify(() => this.options.observer?.onReconcile?.(outcome, seconds, kind));
      },
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

  /** Aborts the signal every running reconcile was given, then {@link drain}s. */
  async stop(): Promise<void> {
    this.abort.abort();
    await this.drain();
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

  /** When each running reconcile started, for its duration. */
  private readonly started = new Map<string, number>();

  private seconds(key: string): number {
    const started = this.started.get(key);
    this.started.delete(key);
    return started === undefined ? 0 : (performance.now() - started) / 1000;
  }

  private async run(key: string): Promise<Result> {
    const observer = this.options.observer;
    this.started.set(key, performance.now());
    notify(() => observer?.onActive?.(1));
    try {
      // Stopped: the keys still queued are handed out by the draining queue, and not reconciled.
      if (this.abort.signal.aborted) return {};
      return await this.options.reconciler.reconcile(key, this.abort.signal);
    } finally {
      notify(() => observer?.onActive?.(-1));
    }
  }
}

/** A metrics hook must never break a reconcile. */
function notify(call: () => void): void {
  try {
    call();
  } catch {
    // dropped
  }
}

/** Builds a {@link Controller}: its watches, its admission, its options, then its reconciler. */
export class ControllerBuilder {
  private readonly name: string;
  private readonly watchList: Array<(controller: Controller) => void> = [];
  private gate: Gate | undefined;
  private settings: Omit<ControllerOptions, "name" | "reconciler" | "admit"> = {};

  constructor(name: string) {
    this.name = name;
  }

  /** Each event of `source` that every predicate lets through goes to `handler`. */
  watches<E>(source: Source<E>, handler: Handler<E>, ...predicates: Array<Predicate<E>>): this {
    this.watchList.push((controller) => controller.watch(source, handler, predicates));
    return this;
  }

  /** Only the keys `gate` admits are queued, and its wrapper runs the reconciler. */
  admit(gate: Gate | undefined): this {
    this.gate = gate;
    return this;
  }

  /** Concurrency, retries, metrics and logger (see {@link ControllerOptions}). */
  with(settings: Omit<ControllerOptions, "name" | "reconciler" | "admit">): this {
    this.settings = { ...this.settings, ...settings };
    return this;
  }

  /** The controller, its sources connected; its workers start with {@link Controller.start}. */
  build(reconciler: Reconciler): Controller {
    const gate = this.gate;
    const controller = new Controller({
      ...this.settings,
      name: this.name,
      reconciler: gate?.wrap ? gate.wrap(reconciler) : reconciler,
      ...(gate && { admit: (key: string) => gate.admits(key) }),
    });
    for (const watch of this.watchList) watch(controller);
    return controller;
  }
}

/** Starts building the controller `name` (controller-runtime's `builder.ControllerManagedBy`). */
export function controller(name: string): ControllerBuilder {
  return new ControllerBuilder(name);
}
