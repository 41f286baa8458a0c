/**
 * A rate-limited work queue of string keys with the semantics of client-go's typed
 * rate-limiting queue (k8s.io/client-go/util/workqueue), which controllers rely on:
 *
 * - a key added many times before a worker takes it is processed once (the dirty set);
 * - two lanes: a key added with priority `"low"` waits until no key of the normal lane does
 *   (a bulk look at many keys, such as a bucket taken over, lets every other key pass it);
 *   added again with the normal priority before a worker takes it, it moves to the normal lane
 *   (a low key waits as long as normal keys keep coming: for passes that may wait, not for work);
 * - a key is never handed to two workers at once: added while processing, it waits and is
 *   queued again when the worker calls {@link WorkQueue.done};
 * - `addAfter` holds a key back; of several pending delays for one key the earliest wins;
 * - `addRateLimited` delays by the larger of a per-key exponential backoff and an overall
 *   token bucket, and `forget` ends a key's backoff;
 * - after `shutDown`, adds are ignored, the keys already queued are still handed out, and
 *   `get` resolves to undefined once the queue is empty.
 */
import { defaultControllerRateLimiter, type RateLimiter } from "./rate-limiter.ts";

/**
 * Receives the measurements of client-go's workqueue metrics, to feed a metric registry. Label
 * the metrics by queue name only, never by key. Must not throw (what it throws is dropped).
 */
export interface WorkQueueObserver {
  /** A key became pending (adds that merge into a pending key do not count). */
  onAdd?(): void;
  /** The number of pending keys changed (the `depth` gauge). */
  onDepth?(depth: number): void;
  /** A worker took a key that had waited this long since it became pending (queue latency). */
  onGet?(latencySeconds: number): void;
  /** A worker finished a key it had held this long (work duration). */
  onDone?(workSeconds: number): void;
  /** A key was scheduled for a later retry with `addAfter` or `addRateLimited` (retries). */
  onRetry?(): void;
}

/** Options for {@link WorkQueue}. */
export interface WorkQueueOptions {
  /** Delays of `addRateLimited`. @default defaultControllerRateLimiter() */
  rateLimiter?: RateLimiter;
  /** Metric hooks. @default none */
  observer?: WorkQueueObserver;
}

/** Seconds of work in progress, read when metrics are scraped. */
export interface UnfinishedWork {
  /** Sum over the keys being processed of how long each has been held. */
  unfinishedWorkSeconds: number;
  /** How long the key held longest has been held, or 0. */
  longestRunningProcessorSeconds: number;
}

interface Delayed {
  key: string;
  readyAt: number;
  order: number;
}

/** Whether `a` is due before `b`: the earlier time, then the earlier call. */
function before(a: Delayed, b: Delayed): boolean {
  return a.readyAt < b.readyAt || (a.readyAt === b.readyAt && a.order < b.order);
}

/**
 * The delayed keys' entries as a binary min-heap (earliest first): adding one and taking the
 * earliest cost O(log n), where a scan of every delayed key per `addAfter` and per timer made a
 * cold start under the status write budget (up to every Referable waiting for its place, a
 * timer every 2 ms) cost O(n) per step. An entry replaced by an earlier one for its key stays in
 * the heap until it comes up, and is skipped then (see WorkQueue.delayed).
 */
class DelayHeap {
  private items: Delayed[] = [];

  get size(): number {
    return this.items.length;
  }

  peek(): Delayed | undefined {
    return this.items[0];
  }

  push(entry: Delayed): void {
    const items = this.items;
    let i = items.length;
    items.push(entry);
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!before(entry, items[parent]!)) break;
      items[i] = items[parent]!;
      i = parent;
    }
    items[i] = entry;
  }

  pop(): Delayed | undefined {
    const items = this.items;
    const top = items[0];
    const last = items.pop();
    if (top === undefined || last === undefined || items.length === 0) return top;
    let i = 0;
    for (;;) {
      const left = 2 * i + 1;
      if (left >= items.length) break;
      const right = left + 1;
      const child = right < items.length && before(items[right]!, items[left]!) ? right : left;
      if (!before(items[child]!, last)) break;
      items[i] = items[child]!;
      i = child;
    }
    items[i] = last;
    return top;
  }

  clear(): void {
    this.items = [];
  }

  /** Keeps only `entries` (a sorted array is a heap). */
  reset(entries: Iterable<Delayed>): void {
    this.items = [...entries].sort((a, b) => a.readyAt - b.readyAt || a.order - b.order);
  }
}

/**
 * The lane of a key added: `"low"` waits behind every key of the normal lane (see the module
 * comment). @default "normal"
 */
export type Priority = "normal" | "low";

/**
 * A first-in first-out list of keys whose shift costs O(1) at any length: `Array.shift` copies
 * the whole array once it is too large to be trimmed in place (tens of thousands of keys, a
 * bucket taken over), which makes handing out n keys cost n².
 */
class KeyFifo {
  private items: string[] = [];
  private head = 0;

  get length(): number {
    return this.items.length - this.head;
  }

  push(key: string): void {
    this.items.push(key);
  }

  shift(): string | undefined {
    if (this.head >= this.items.length) return undefined;
    const key = this.items[this.head++];
    // Drop what was handed out once it is most of the array: amortised O(1) per key.
    if (this.head === this.items.length) {
      this.items = [];
      this.head = 0;
    } else if (this.head >= 1024 && this.head * 2 >= this.items.length) {
      this.items = this.items.slice(this.head);
      this.head = 0;
    }
    return key;
  }

  /** Keeps only the keys `keep` accepts, in order. */
  filter(keep: (key: string) => boolean): void {
    this.items = this.items.slice(this.head).filter(keep);
    this.head = 0;
  }
}

/** A deduplicating, delaying, rate-limited queue of keys; see the module comment for its promises. */
export class WorkQueue {
  private readonly rateLimiter: RateLimiter;
  private readonly observer: WorkQueueObserver | undefined;
  /** Keys of the normal lane ready for a worker, in order; each is also in `dirty`. */
  private readonly queue = new KeyFifo();
  /**
   * The low lane, in order: the keys of `low`, and entries left by keys that moved to the
   * normal lane or were handed out (skipped when reached, and dropped when they outnumber it).
   */
  private readonly later = new KeyFifo();
  /** Keys waiting in the low lane (each also in `dirty`, none being processed). */
  private readonly low = new Set<string>();
  /** Keys added with the low priority only while being processed: `done` queues them in the low lane. */
  private readonly lowAfterDone = new Set<string>();
  /** Keys that need processing: queued, or added again while being processed. */
  private readonly dirty = new Set<string>();
  /** Keys held by a worker, with when each was taken. */
  private readonly processing = new Map<string, number>();
  /** When each dirty key became dirty, for queue latency. */
  private readonly addedAt = new Map<string, number>();
  private readonly waiters: Array<(key: string | undefined) => void> = [];
  /** Each delayed key's pending entry: the one of its entries in `delays` that counts. */
  private readonly delayed = new Map<string, Delayed>();
  /** Every entry of `delayed`, and entries since replaced by an earlier one (skipped when reached). */
  private readonly delays = new DelayHeap();
  private delayedOrder = 0;
  private timer: ReturnType<typeof setTimeout> | undefined;
  private timerAt = Infinity;
  private shuttingDown = false;
  private drainWaiters: Array<() => void> = [];

  constructor(options: WorkQueueOptions = {}) {
    this.rateLimiter = options.rateLimiter ?? defaultControllerRateLimiter();
    this.observer = options.observer;
  }

  /**
   * Marks `key` as needing processing, in the lane `priority` says (a key pending in the low lane
   * added with the normal priority moves to the normal lane); ignored after shut down.
   */
  add(key: string, priority: Priority = "normal"): void {
    if (this.shuttingDown) return;
    if (this.dirty.has(key)) {
      if (priority === "low") return;
      this.lowAfterDone.delete(key);
      if (this.low.delete(key)) {
        this.queue.push(key);
        this.dispatch();
      }
      return;
    }
    this.dirty.add(key);
    this.addedAt.set(key, performance.now());
    this.notify((o) => o.onAdd?.());
    this.notify((o) => o.onDepth?.(this.dirty.size));
    // A key being processed is queued again by done(), never handed to a second worker.
    if (this.processing.has(key)) {
      if (priority === "low") this.lowAfterDone.add(key);
      return;
    }
    this.enter(key, priority);
    this.dispatch();
  }

  /** Puts a dirty key that no worker holds into its lane. */
  private enter(key: string, priority: Priority): void {
    if (priority === "normal") {
      this.queue.push(key);
      return;
    }
    this.low.add(key);
    this.later.push(key);
    // Entries left behind (keys moved to the normal lane) never outnumber the lane's keys for long.
    if (this.later.length > 2 * this.low.size + 1024) this.later.filter((k) => this.low.has(k));
  }

  /**
   * The next key to process, waiting for one if none is queued; undefined once the queue is
   * shut down and empty. Every key it returns must be passed to {@link done}.
   */
  get(): Promise<string | undefined> {
    return new Promise((resolve) => {
      this.waiters.push(resolve);
      this.dispatch();
    });
  }

  /** Ends the processing of `key`; if it was added meanwhile, queues it again. */
  done(key: string): void {
    const started = this.processing.get(key);
    if (started === undefined) return;
    this.processing.delete(key);
    this.notify((o) => o.onDone?.((performance.now() - started) / 1000));
    if (this.dirty.has(key)) {
      this.enter(key, this.lowAfterDone.delete(key) ? "low" : "normal");
      this.dispatch();
    }
    if (this.processing.size === 0) {
      for (const resolve of this.drainWaiters.splice(0)) resolve();
    }
  }

  /** Adds `key` after `delayMs`; of several pending delays for one key the earliest wins. */
  addAfter(key: string, delayMs: number): void {
    if (this.shuttingDown) return;
    this.notify((o) => o.onRetry?.());
    if (!(delayMs > 0)) {
      this.add(key);
      return;
    }
    const readyAt = performance.now() + delayMs;
    const pending = this.delayed.get(key);
    if (pending && pending.readyAt <= readyAt) return;
    const entry: Delayed = { key, readyAt, order: pending?.order ?? this.delayedOrder++ };
    this.delayed.set(key, entry);
    this.delays.push(entry);
    // Replaced entries never outnumber the pending ones for long (keys moved sooner, again and again).
    if (this.delays.size > 2 * this.delayed.size + 1024) this.delays.reset(this.delayed.values());
    this.schedule();
  }

  /** Adds `key` after the rate limiter's delay for it. */
  addRateLimited(key: string): void {
    this.addAfter(key, this.rateLimiter.when(key));
  }

  /** Ends the rate limiter's backoff for `key` (call it when the key was processed successfully). */
  forget(key: string): void {
    this.rateLimiter.forget(key);
  }

  /** How many times `key` has been rate-limited since it was last forgotten. */
  numRequeues(key: string): number {
    return this.rateLimiter.numRequeues(key);
  }

  /** How many keys wait for a worker now, in both lanes (not counting delayed keys or keys being processed). */
  get len(): number {
    return this.queue.length + this.low.size;
  }

  /** Whether {@link shutDown} or {@link shutDownWithDrain} was called. */
  get isShuttingDown(): boolean {
    return this.shuttingDown;
  }

  /** The unfinished-work and longest-running-processor gauges, computed now. */
  unfinishedWork(): UnfinishedWork {
    const now = performance.now();
    let total = 0;
    let longest = 0;
    for (const started of this.processing.values()) {
      const held = (now - started) / 1000;
      total += held;
      longest = Math.max(longest, held);
    }
    return { unfinishedWorkSeconds: total, longestRunningProcessorSeconds: longest };
  }

  /**
   * Stops accepting keys and drops the delayed ones; keys already queued are still handed out,
   * then `get` resolves to undefined.
   */
  shutDown(): void {
    if (this.shuttingDown) return;
    this.shuttingDown = true;
    this.delayed.clear();
    this.delays.clear();
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
    this.timerAt = Infinity;
    this.dispatch();
  }

  /** {@link shutDown}, then resolves once no key is being processed. */
  shutDownWithDrain(): Promise<void> {
    this.shutDown();
    if (this.processing.size === 0) return Promise.resolve();
    return new Promise((resolve) => this.drainWaiters.push(resolve));
  }

  /** Hands queued keys to waiting workers; after shut down, tells idle workers to exit. */
  private dispatch(): void {
    while (this.waiters.length > 0 && this.len > 0) {
      const resolve = this.waiters.shift()!;
      const key = this.queue.length > 0 ? this.queue.shift()! : this.nextLow();
      const now = performance.now();
      this.processing.set(key, now);
      this.dirty.delete(key);
      const addedAt = this.addedAt.get(key) ?? now;
      this.addedAt.delete(key);
      this.notify((o) => o.onGet?.((now - addedAt) / 1000));
      this.notify((o) => o.onDepth?.(this.dirty.size));
      resolve(key);
    }
    if (this.shuttingDown && this.len === 0) {
      for (const resolve of this.waiters.splice(0)) resolve(undefined);
    }
  }

  /** The first key of the low lane (there is one: `low` is not empty), taken out of it. */
  private nextLow(): string {
    for (;;) {
      const key = this.later.shift()!;
      if (this.low.delete(key)) return key;
    }
  }

  /** The earliest pending entry, entries replaced since dropped on the way. */
  private earliest(): Delayed | undefined {
    for (;;) {
      const top = this.delays.peek();
      if (top === undefined || this.delayed.get(top.key) === top) return top;
      this.delays.pop();
    }
  }

  /** One timer, for the earliest delayed key, whatever the number of delayed keys. */
  private schedule(): void {
    const earliest = this.earliest()?.readyAt ?? Infinity;
    if (earliest === this.timerAt) return;
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
    this.timerAt = earliest;
    if (earliest === Infinity) return;
    this.timer = setTimeout(() => this.fire(), Math.max(0, Math.ceil(earliest - performance.now())));
  }

  private fire(): void {
    this.timer = undefined;
    this.timerAt = Infinity;
    const now = performance.now();
    // Due keys in order of their times, then of their calls; only those due are touched.
    for (let next = this.earliest(); next !== undefined && next.readyAt <= now; next = this.earliest()) {
      this.delays.pop();
      this.delayed.delete(next.key);
      this.add(next.key);
    }
    this.schedule();
  }

  private notify(call: (observer: WorkQueueObserver) => void): void {
    if (!this.observer) return;
    try {
      call(this.observer);
    } catch {
      // A metrics hook must never break the queue.
    }
  }
}
