/**
 * What the controller process does to stay small at rest (BENCHMARKS.md, "At rest, one Referable
 * (issue 39)"). Two things V8 does for a browser tab but not for a Node.js process at rest:
 *
 * - **undici's HTTP/1 parser stays baseline code.** undici parses responses with llhttp compiled
 *   to WebAssembly. V8 compiles it with Liftoff, then recompiles its hot functions with TurboFan;
 *   llhttp's parser is one very large function, and optimizing it takes megabytes of malloc'd
 *   compiler memory that glibc keeps once freed (8 MiB of RSS in an idle controller). Liftoff
 *   code parses the few hundred bytes of a response's head well enough: the bodies (the large part)
 *   pass through as spans.
 * - **A memory-reducing collection once the process comes to rest.** V8's memory reducer, which
 *   would shrink the young generation and give pooled pages back after a burst of work, never
 *   starts in a Node.js process at rest (`--trace-memory-reducer` says "high alloc" every 8 s,
 *   in a bare `node` script too), so the pages the cold start grew stay committed. The process
 *   runs that collection itself, once per quiet spell, while the heap is small enough for it to
 *   be short.
 */
import { performance } from "node:perf_hooks";
import { getHeapStatistics, setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";

/**
 * V8 flags that keep WebAssembly in its baseline tier (Liftoff): no tier-up on a budget, none in
 * the background. Read when a module is compiled, so they act on undici's parser when set before
 * the first request; both are needed (either alone still tiers up).
 */
export const WASM_BASELINE_FLAGS = ["--no-wasm-dynamic-tiering", "--no-wasm-tier-up"] as const;

/** Keeps WebAssembly compiled from now on in Liftoff code (see the module's comment). */
export function keepWasmAtBaseline(): void {
  for (const flag of WASM_BASELINE_FLAGS) setFlagsFromString(flag);
}

/** V8's `gc` extension, as `--expose-gc` gives it. */
type GcExtension = (options?: {
  type?: "major" | "minor";
  execution?: "sync";
  flavor?: "regular" | "last-resort";
}) => void;

/**
 * A full, memory-reducing collection (V8's "last resort": mark-compact until nothing more is
 * freed, then the young generation shrunk and pooled pages unmapped), as a function. The
 * process's own `gc` when it runs with `--expose-gc`; otherwise V8's `gc` extension is taken
 * from a context of its own, made while the flag is on and the flag turned off again, so neither
 * this process's global object nor a worker started later gets a `gc`.
 */
export function memoryReducingCollection(): () => void {
  const own = (globalThis as { gc?: unknown }).gc;
  let gc: GcExtension;
  if (typeof own === "function") gc = own as GcExtension;
  else {
    setFlagsFromString("--expose-gc");
    try {
      gc = runInNewContext("gc") as GcExtension;
    } finally {
      setFlagsFromString("--no-expose-gc");
    }
  }
  return () => gc({ type: "major", execution: "sync", flavor: "last-resort" });
}

/** The timer functions {@link RestCollector} uses (Node's, or a test's fake). */
export interface RestTimers {
  every(run: () => void, ms: number): unknown;
  clear(handle: unknown): void;
}

const NODE_TIMERS: RestTimers = {
  every: (run, ms) => setInterval(run, ms).unref(),
  clear: (handle) => clearInterval(handle as NodeJS.Timeout),
};

/** Options of {@link RestCollector}. */
export interface RestCollectorOptions {
  /**
   * The window the event loop's utilization is read over, ms: a window under
   * `maxUtilization` after a busier one is rest, so the collection comes one to two windows
   * after the work ends.
   * @default 10_000
   */
  windowMs?: number;
  /**
   * The share of a window the event loop may be busy and the process still be at rest (an idle
   * leader renewing its Lease every 2 s uses under 0.4% of a core, all threads counted).
   * @default 0.02
   */
  maxUtilization?: number;
  /**
   * No collection while V8's heap holds more than this, bytes: the collection blocks the event
   * loop for about 2.5 ms per MiB of live heap on a 2-core machine (40 ms for an idle controller,
   * 250 ms at 100 MiB), and a large heap's young generation is a small share of its RSS anyway.
   * 32 MiB covers a controller of about 1,000 Referables (23 MiB).
   * @default 32 MiB
   */
  maxHeapUsedBytes?: number;
  /**
   * A long rest collects again once the heap has grown this much since the last collection, bytes:
   * an idle controller's Lease renewals and scrapes add about 1 MiB a minute that V8 would leave
   * until its own next full collection. At the default, one collection of about 40 ms every few
   * minutes of rest.
   * @default 4 MiB
   */
  regrowthBytes?: number;
  /** Runs the collection. @default {@link memoryReducingCollection}'s */
  collect?: () => void;
  /** The event loop's utilization since the previous call (0-1). @default `performance.eventLoopUtilization` */
  utilization?: () => number;
  /** Bytes of V8's heap in use. @default `v8.getHeapStatistics().used_heap_size` */
  heapUsed?: () => number;
  /** Told after each collection, with how long it blocked and the heap's size before and after (bytes). */
  onCollected?: (done: { ms: number; heapBefore: number; heapAfter: number }) => void;
  timers?: RestTimers;
}

/** The event loop's utilization since the previous call, from Node's counters. */
function utilizationSinceLastCall(): () => number {
  let last = performance.eventLoopUtilization();
  return () => {
    const now = performance.eventLoopUtilization();
    const since = performance.eventLoopUtilization(now, last);
    last = now;
    return since.utilization;
  };
}

/**
 * Runs one memory-reducing collection each time the process comes to rest: a window in which
 * the event loop was busy under `maxUtilization`, after work (the start, a burst of changes)
 * since the last collection. Rest after rest collects again only once the heap has grown by
 * `regrowthBytes` since, so an idle process pays one collection every few minutes, and a busy one
 * none while it is busy.
 */
export class RestCollector {
  private readonly windowMs: number;
  private readonly maxUtilization: number;
  private readonly maxHeapUsedBytes: number;
  private readonly regrowthBytes: number;
  private readonly collect: () => void;
  private readonly utilization: () => number;
  private readonly heapUsed: () => number;
  private readonly onCollected: RestCollectorOptions["onCollected"];
  private readonly timers: RestTimers;
  private handle: unknown;
  /** Work since the last collection; the start is work. */
  private workedSinceCollection = true;
  /** The heap in use right after the last collection. */
  private heapAfterCollection = 0;

  constructor(options: RestCollectorOptions = {}) {
    this.windowMs = options.windowMs ?? 10_000;
    this.maxUtilization = options.maxUtilization ?? 0.02;
    this.maxHeapUsedBytes = options.maxHeapUsedBytes ?? 32 * 1024 * 1024;
    this.regrowthBytes = options.regrowthBytes ?? 4 * 1024 * 1024;
    this.collect = options.collect ?? memoryReducingCollection();
    this.utilization = options.utilization ?? utilizationSinceLastCall();
    this.heapUsed = options.heapUsed ?? (() => getHeapStatistics().used_heap_size);
    this.onCollected = options.onCollected;
    this.timers = options.timers ?? NODE_TIMERS;
  }

  /** Reads the event loop every window from now on (a timer that keeps no process alive). */
  start(): void {
    if (this.handle !== undefined) return;
    this.handle = this.timers.every(() => this.tick(), this.windowMs);
  }

  /** Stops reading; no collection after this. */
  stop(): void {
    if (this.handle === undefined) return;
    this.timers.clear(this.handle);
    this.handle = undefined;
  }

  /** One window's end: collect when it was rest after work, or a long rest the heap grew in. */
  private tick(): void {
    if (this.utilization() > this.maxUtilization) {
      this.workedSinceCollection = true;
      return;
    }
    const heapBefore = this.heapUsed();
    if (!this.workedSinceCollection && heapBefore - this.heapAfterCollection < this.regrowthBytes) return;
    // A large heap stays as it is until it is small again: it is not marked as collected.
    if (heapBefore > this.maxHeapUsedBytes) return;
    const started = performance.now();
    this.collect();
    this.workedSinceCollection = false;
    this.heapAfterCollection = this.heapUsed();
    this.onCollected?.({ ms: performance.now() - started, heapBefore, heapAfter: this.heapAfterCollection });
  }
}
