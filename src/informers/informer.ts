/**
 * One supervised informer: a list, then a watch from the list's resourceVersion, keeping what
 * `decode` makes of every object of one resource (in one namespace, or all): by default the raw
 * JSON without managedFields; for source kinds a {@link Projection} (see projection.ts), so the
 * cache costs what is read, not what the cluster holds.
 *
 * Memory stays bounded while reading: lists are paged with a page size adapted to the objects'
 * size (a page of 1 MiB ConfigMaps is a few objects, a page of small ones hundreds), each item is
 * decoded as its page arrives and the page then dropped, and a watch event costs its decode.
 *
 * Supervision, because a watch in Node dies or stalls without a word:
 * - an error backs off with full jitter (at least the `Retry-After` of a 429) and relists (the
 *   cache keeps serving meanwhile: a dropped watch never clears what was known); a watch refused
 *   with 429 reopens from its resourceVersion after the wait instead, without a relist;
 * - 410 Gone (resourceVersion compacted) relists at once;
 * - a paged list whose continue token expired before its last page (410 Expired: the list took
 *   longer than the server's compaction interval) lists again at once, in one unpaged request
 *   (no continue token to expire, answered from the API server's watch cache at
 *   resourceVersion 0), as client-go's pager and reflector do;
 * - every restart carries a reason from a fixed set (restart-reason.ts), given to `onSignal`
 *   and logged with the resource, so a restart says why without its values;
 * - a watchdog closes a watch that has been silent for `watchdogMs` (bookmarks count as
 *   traffic) and re-opens it from the last resourceVersion;
 * - a relist tells listeners only what differs from the cache, so nothing unchanged looks new;
 * - {@link Informer.refresh} reads chosen objects again out of band (to decode them for a reader
 *   that just arrived); what it reads replaces the cache only when it is not older, and a watch
 *   event older than the cache is dropped (resourceVersions compare as integers since Kubernetes
 *   1.35, KEP-5504; ones that do not parse as integers are never compared).
 *
 * The jobs live beside it: object-store.ts (the cache and resourceVersion order), store-events.ts
 * (what a list, a watch event or a read changes, and the events it tells), list-pager.ts (paged
 * lists), watch-round.ts (one watch and its watchdog), refresh.ts (out-of-band reads),
 * restart-reason.ts (what a failure is, and leaves); this file is the loop that supervises them.
 */
import { asError } from "../api/errors.ts";
import { isApiError, type KubeClient, type KubeObject, type WatchEvent } from "../kube/client.ts";
import type { ResourceInfo } from "../kube/discovery.ts";
import { resourcePath } from "../kube/resource-path.ts";
import { silentLogger, type Logger } from "../api/log.ts";
import { backoffDelay, jitter, jittered } from "../timing/backoff.ts";
import { sleep } from "../timing/sleep.ts";
import type { InformerEvent, InformerListener, InformerOptions, InformerState } from "./informer-types.ts";
import { ListPager } from "./list-pager.ts";
import { ObjectStore, type Cached } from "./object-store.ts";
import { planRefreshReads, RefreshQueue, type RefreshTarget } from "./refresh.ts";
import {
  classifyFailure,
  failedState,
  ListExpired,
  safeMessage,
  signalOf,
  type RestartReason,
  WatchEndedEarly,
} from "./restart-reason.ts";
import { applyList, applyRead, applyWatchEvent, type StoreSink } from "./store-events.ts";
import { Expired, watchRound } from "./watch-round.ts";

export type { InformerEvent, InformerListener, InformerOptions, InformerState } from "./informer-types.ts";
export { compareResourceVersions, objectKey, type Cached } from "./object-store.ts";
export type { RefreshTarget } from "./refresh.ts";
export { RESTART_REASONS, type InformerSignal, type RestartReason } from "./restart-reason.ts";

/**
 * Most objects per list page, unless the objects' size bounds it lower (`pageBytes`). Large,
 * because the API server's watch cache (which serves paged lists with ListFromCacheSnapshot, on
 * in the v1.36.3 tested here) gathers every object from a page's continue key to the end of the
 * collection before it takes the page's `limit` of them: a list of N objects in pages of P costs
 * it N²/2P object visits. Pages of 500 over 100,000 Referables were 10 million visits a list, four
 * such lists for four shards (a kube-apiserver profile of a sharded cold start, BENCHMARKS.md);
 * what bounds a page is its bytes, which the client reads item by item anyway.
 */
export const DEFAULT_PAGE_SIZE = 5000;

/** Watches in a row that end at once with nothing on them, each opened again, before a relist. */
export const EARLY_ENDS_BEFORE_RELIST = 3;

/** Drops what nobody reads and everybody pays for. */
function slim(obj: KubeObject): KubeObject {
  if (obj.metadata && "managedFields" in obj.metadata) delete obj.metadata.managedFields;
  return obj;
}

/** A list-then-watch cache of one resource, supervised; see the module comment. */
export class Informer<T extends Cached = KubeObject> {
  readonly resource: ResourceInfo;
  readonly namespace: string | undefined;
  private readonly client: Pick<KubeClient, "request" | "watch">;
  private readonly logger: Logger;
  private readonly watchdogMs: number;
  private readonly minBackoffMs: number;
  private readonly maxBackoffMs: number;
  private readonly labelSelector: string | undefined;
  private readonly name: string | undefined;
  private readonly onSignal: InformerOptions["onSignal"];
  private listsStarted = 0;
  /** Why the next list is a relist (the last restart's reason). */
  private restartReason: RestartReason = "other";
  /** The next list is one unpaged request: the last one's continue token expired. */
  private unpagedNext = false;
  private readonly decode: (obj: KubeObject) => T;
  private readonly parseEvent: ((line: string) => WatchEvent | undefined) | undefined;
  private readonly confirmGone: (() => Promise<boolean>) | undefined;
  private readonly watchTimeoutSeconds: [number, number];
  private readonly same: (a: T, b: T) => boolean;
  private readonly listeners = new Set<InformerListener<T>>();
  private store = new ObjectStore<T>();
  private readonly pager: ListPager<T>;
  private readonly refreshQueue: RefreshQueue;
  private current: InformerState = { phase: "Pending" };
  private resourceVersion = "";
  private running = false;
  private stopWatch: (() => void) | undefined;
  /** Aborted by {@link stop}: cuts the loop's wait short. */
  private stopping = new AbortController();
  private loop: Promise<void> | undefined;
  private syncedWaiters: Array<() => void> = [];
  /** Where the store's changes go (see store-events.ts). */
  private readonly sink: StoreSink<T> & { advance: (resourceVersion: string | undefined) => void } = {
    same: (a, b) => this.same(a, b),
    emit: (event) => this.emit(event),
    advance: (rv) => (this.resourceVersion = rv ?? this.resourceVersion),
  };

  constructor(options: InformerOptions<T>) {
    this.client = options.client;
    this.resource = options.resource;
    this.namespace = options.resource.namespaced ? options.namespace : undefined;
    this.logger = options.logger ?? silentLogger;
    this.watchdogMs = options.watchdogMs ?? 90_000;
    this.minBackoffMs = options.minBackoffMs ?? 250;
    this.maxBackoffMs = options.maxBackoffMs ?? 30_000;
    this.decode = options.decode ?? (slim as unknown as (obj: KubeObject) => T);
    this.parseEvent = options.parseEvent;
    this.confirmGone = options.confirmGone;
    this.watchTimeoutSeconds = options.watchTimeoutSeconds ?? [30, 50];
    this.same = options.same ?? ((a, b) => a.metadata?.resourceVersion === b.metadata?.resourceVersion);
    this.labelSelector = options.labelSelector || undefined;
    this.name = options.name;
    this.onSignal = options.onSignal;
    this.pager = new ListPager({
      client: this.client,
      decode: this.decode,
      itemFilter: options.itemFilter ?? (options.decode ? undefined : { dropManagedFields: () => true }),
      pageSize: options.pageSize ?? DEFAULT_PAGE_SIZE,
      pageBytes: options.pageBytes ?? 4 * 1024 * 1024,
      isRunning: () => this.running,
    });
    this.refreshQueue = new RefreshQueue({
      readRound: (targets) => this.refreshRound(targets),
      isRunning: () => this.running,
      stopped: () => this.stopping.signal,
      onFailure: (err, failures) => {
        const reason = classifyFailure(err);
        this.onSignal?.(signalOf(reason), reason);
        this.logger.warn(
          { resource: this.describe(), reason, err: safeMessage(err, reason) },
          "refresh read failed; retrying with backoff",
        );
        return this.retryWait(failures, err);
      },
    });
  }

  /** The collection path, e.g. /apis/apps/v1/namespaces/x/deployments. */
  get path(): string {
    return this.pathIn(this.namespace);
  }

  private pathIn(namespace: string | undefined): string {
    return resourcePath(this.resource, { namespace });
  }

  get state(): InformerState {
    return this.current;
  }

  /** The cached object, or undefined. */
  get(namespace: string | undefined, name: string): T | undefined {
    return this.store.get(this.resource.namespaced ? namespace : undefined, name);
  }

  /** Every cached object (of `namespace` when given). Do not mutate what it yields. */
  *list(namespace?: string): Iterable<T> {
    yield* this.store.values(this.resource.namespaced ? namespace : undefined);
  }

  /** How many objects are cached. */
  get size(): number {
    return this.store.size;
  }

  /**
   * Puts `obj` in place of the cached object of the same name and resourceVersion, with no event:
   * the same version kept in another form (a sharded replica's compact record of a Referable it
   * gave back). Does nothing when that version is no longer cached.
   */
  replace(obj: T): void {
    const old = this.store.getLike(obj);
    if (old && old.metadata?.resourceVersion === obj.metadata?.resourceVersion) this.store.set(obj);
  }

  addListener(listener: InformerListener<T>): void {
    this.listeners.add(listener);
  }

  removeListener(listener: InformerListener<T>): void {
    this.listeners.delete(listener);
  }

  /** Resolves once the first list has completed, or the informer failed or stopped. */
  whenSettled(): Promise<void> {
    if (this.current.phase !== "Pending" || !this.running) return Promise.resolve();
    return new Promise((resolve) => this.syncedWaiters.push(resolve));
  }

  /** Starts the list/watch loop; idempotent. */
  start(): void {
    if (this.running) return;
    this.running = true;
    if (this.stopping.signal.aborted) this.stopping = new AbortController();
    this.loop = this.run().catch((err: unknown) => {
      // run() handles its own errors; reaching here is a bug, never a crash of the process.
      this.logger.error({ err: asError(err).message, path: this.path }, "informer loop ended unexpectedly");
    });
  }

  /** Stops the loop and closes the watch; resolves when the loop has ended. */
  async stop(): Promise<void> {
    this.running = false;
    this.stopWatch?.();
    this.stopping.abort();
    this.settleWaiters();
    await this.loop;
  }

  private async run(): Promise<void> {
    let failures = 0;
    while (this.running) {
      try {
        await this.relist();
        failures = 0;
        await this.watchLoop();
      } catch (err) {
        if (!this.running) break;
        const reason = err instanceof Expired ? "watch-expired" : classifyFailure(err);
        this.restartReason = reason;
        this.onSignal?.(signalOf(reason), reason);
        // Only the two expiries known for what they are skip the backoff: a 410 from anywhere
        // else (a proxy answering every list so) is a failure like any other, never a hot loop.
        if (err instanceof Expired) {
          this.logger.info(
            { path: this.path, resource: this.describe(), reason },
            "watch resourceVersion expired (410 Gone): relisting",
          );
          continue;
        }
        if (err instanceof ListExpired) {
          // The list took longer than the server keeps a continue token: start again at once, in
          // one request that has none. Not a fault of the server's (no backoff, not an error);
          // the next list is paged again, so an unpaged list that fails is never repeated at once.
          this.unpagedNext = true;
          this.logger.warn(
            { path: this.path, resource: this.describe(), reason },
            "list continue token expired (410) before the last page: listing again in one request",
          );
          continue;
        }
        failures++;
        await this.noteFailure(err, reason);
        await sleep(this.retryWait(failures, err), this.stopping.signal);
      }
    }
  }

  /**
   * Watches until a watch fails. A watch the server turned away with 429 (API Priority and
   * Fairness, or its watch cache re-initializing: "storage is (re)initializing") did nothing: it
   * is opened again from the same resourceVersion after the wait the server asked for (and the
   * backoff), not answered with a relist of everything. So is a watch that ended at once with
   * nothing on it, up to {@link EARLY_ENDS_BEFORE_RELIST} times in a row (a server or proxy that
   * keeps ending watches still gets a relist now and then). A version the cache no longer has
   * then gets 410 Gone, which relists.
   */
  private async watchLoop(): Promise<void> {
    let refused = 0;
    let endedEarly = 0;
    while (this.running) {
      try {
        await this.watchOnce();
        refused = 0;
        endedEarly = 0;
      } catch (err) {
        if (!this.running) throw err;
        const early = err instanceof WatchEndedEarly;
        if (early ? ++endedEarly > EARLY_ENDS_BEFORE_RELIST : !isApiError(err, 429)) throw err;
        const reason = early ? "watch-ended-early" : "throttled";
        refused++;
        this.onSignal?.("error", reason);
        this.logger.warn(
          { path: this.path, resource: this.describe(), reason },
          early
            ? "watch ended at once with nothing on it: opening it again from the same resourceVersion after the wait"
            : "watch refused (429): opening it again from the same resourceVersion after the wait",
        );
        await sleep(this.retryWait(refused, err), this.stopping.signal);
      }
    }
  }

  private async noteFailure(err: unknown, reason: RestartReason): Promise<void> {
    const state = await failedState(err, this.describe(), this.confirmGone, () => this.running);
    if (state) this.setState(state);
    this.logger.warn(
      { path: this.path, resource: this.describe(), reason, err: safeMessage(err, reason) },
      "list/watch failed; retrying with backoff",
    );
  }

  private describe(): string {
    const { group, resource } = this.resource;
    const gr = group ? `${resource}.${group}` : resource;
    const described = this.namespace ? `${gr} in namespace ${this.namespace}` : gr;
    return this.name ? `${described} (${this.name})` : described;
  }

  /**
   * Full jitter: a random wait in [base/2, base], base doubling per failure up to the cap; never
   * less than the `Retry-After` a 429 or 5xx gave (itself jittered upwards, by up to a half, so
   * the informers a throttled server turned away together do not come back together).
   */
  private retryWait(failures: number, err?: unknown): number {
    const wait = jittered(
      backoffDelay(failures - 1, { baseMs: this.minBackoffMs, maxMs: this.maxBackoffMs }),
    );
    const after = isApiError(err) ? err.retryAfterMs : undefined;
    return after === undefined ? wait : Math.max(wait, jitter(after, 0.5));
  }

  private async relist(): Promise<void> {
    // The first list is the informer starting, not a relist: the counter is a restart signal,
    // and counting every start made each new source informer look like a restart.
    if (this.listsStarted++ > 0) this.onSignal?.("relist", this.restartReason);
    const fresh = new ObjectStore<T>();
    const startedAt = performance.now();
    const unpaged = this.unpagedNext;
    this.unpagedNext = false;
    const resourceVersion = await this.pager.list(
      this.path,
      { labelSelector: this.labelSelector, unpaged },
      (item) => fresh.set(item),
    );
    if (resourceVersion === undefined) return;

    // Tell listeners only what differs from what they were told before (see applyList).
    const previous = this.store;
    this.store = fresh;
    this.resourceVersion = resourceVersion;
    applyList(previous, fresh, resourceVersion, this.sink);
    if (this.current.phase !== "Synced") {
      // Once per informer: a cold start's timeline (how long each first list took) in the log.
      this.logger.info(
        {
          resource: this.describe(),
          objects: fresh.size,
          seconds: Number(((performance.now() - startedAt) / 1000).toFixed(1)),
        },
        "listed: the cache is synced",
      );
      this.setState({ phase: "Synced" });
    }
  }

  /**
   * Reads `target` again out of band and replaces what is cached of each object read (unless the
   * cache already holds a newer version), telling listeners with MODIFIED: for a reader whose
   * data was not kept when the object was last decoded. Only objects already cached are
   * replaced (the watch brings new ones, and removes deleted ones). Requests made together are
   * read together, one round at a time; a failed round is retried with backoff.
   */
  refresh(target: RefreshTarget): void {
    this.refreshQueue.add(target);
  }

  private async refreshRound(targets: RefreshTarget[]): Promise<void> {
    const reads = planRefreshReads(targets, this.resource.namespaced, (ns) => this.store.countIn(ns));
    // A few reads at a time: enough to hide round trips, few enough not to crowd the API server.
    let next = 0;
    const worker = async () => {
      while (next < reads.length && this.running) {
        const r = reads[next++]!;
        const path = this.namespace ? this.path : this.pathIn(r.namespace);
        const labelSelector = [this.labelSelector, r.labelSelector].filter(Boolean).join(",") || undefined;
        await this.pager.list(path, { labelSelector, fieldSelector: r.fieldSelector }, (item) =>
          applyRead(this.store, item, this.sink),
        );
      }
    };
    await Promise.all(Array.from({ length: Math.min(8, reads.length) }, worker));
  }

  private async watchOnce(): Promise<void> {
    const outcome = await watchRound({
      client: this.client,
      path: this.path,
      resourceVersion: this.resourceVersion,
      labelSelector: this.labelSelector,
      timeoutSeconds: this.watchTimeoutSeconds,
      watchdogMs: this.watchdogMs,
      parseLine: this.parseEvent,
      onEvent: (event) => applyWatchEvent(this.store, event, this.decode, this.sink, this.path),
      setStop: (stop) => (this.stopWatch = stop),
      isRunning: () => this.running,
    });
    if (outcome === "silent") {
      this.onSignal?.("watchdog", "watchdog");
      this.logger.warn(
        { path: this.path, resource: this.describe(), reason: "watchdog", silentMs: this.watchdogMs },
        "watch was silent past the watchdog window: reopening",
      );
    }
  }

  private emit(event: InformerEvent<T>): void {
    for (const listener of this.listeners) {
      try {
        listener.onEvent(event);
      } catch (err) {
        this.logger.error({ path: this.path, err: asError(err).message }, "informer listener threw");
      }
    }
  }

  private setState(state: InformerState): void {
    this.current = state;
    this.settleWaiters();
    for (const listener of this.listeners) {
      try {
        listener.onState(state);
      } catch (err) {
        this.logger.error({ path: this.path, err: asError(err).message }, "informer listener threw");
      }
    }
  }

  private settleWaiters(): void {
    if (this.current.phase === "Pending" && this.running) return;
    for (const resolve of this.syncedWaiters.splice(0)) resolve();
  }
}
