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
 * - an error backs off with full jitter and relists (the cache keeps serving meanwhile: a
 *   dropped watch never clears what was known);
 * - 410 Gone (resourceVersion compacted) relists at once;
 * - a watchdog closes a watch that has been silent for `watchdogMs` (bookmarks count as
 *   traffic) and re-opens it from the last resourceVersion;
 * - a relist tells listeners only what differs from the cache, so nothing unchanged looks new;
 * - {@link Informer.refresh} reads chosen objects again out of band (to decode them for a reader
 *   that just arrived); what it reads replaces the cache only when it is not older, and a watch
 *   event older than the cache is dropped (resourceVersions compare as integers since Kubernetes
 *   1.35, KEP-5504; ones that do not parse as integers are never compared).
 */
import { asError } from "../errors.ts";
import { isApiError, type KubeClient, type KubeObject, type WatchEvent } from "../kube/client.ts";
import type { ListItemFilter } from "../kube/list-stream.ts";
import type { ResourceInfo } from "../kube/discovery.ts";
import { nameFieldSelector } from "../kube/field-selector.ts";
import { silentLogger, type Logger } from "../log.ts";
import { backoffDelay, jittered } from "../runtime/backoff.ts";

/** What an informer knows of its resource. */
export type InformerState =
  | { phase: "Pending" }
  | { phase: "Synced" }
  /** The list was refused or the resource is gone; retried on the backoff. */
  | { phase: "Failed"; reason: "Forbidden" | "KindNotFound"; message: string };

/** What an informer can key and order: the identity fields of ObjectMeta. */
export interface Cached {
  readonly metadata?:
    | {
        readonly name?: string | undefined;
        readonly namespace?: string | undefined;
        readonly resourceVersion?: string | undefined;
      }
    | undefined;
}

/** A change to one object; `old` is the cached object it replaces, if any. */
export interface InformerEvent<T extends Cached = KubeObject> {
  type: "ADDED" | "MODIFIED" | "DELETED";
  object: T;
  old: T | undefined;
}

/** Receives what an informer learns. Must not throw (what it throws is logged and dropped). */
export interface InformerListener<T extends Cached = KubeObject> {
  onEvent(event: InformerEvent<T>): void;
  onState(state: InformerState): void;
}

/** Which objects {@link Informer.refresh} reads again: one by name, or those a label selector matches. */
export type RefreshTarget =
  { namespace: string | undefined; name: string } | { namespace: string | undefined; labelSelector: string };

/** Options for {@link Informer}. */
export interface InformerOptions<T extends Cached = KubeObject> {
  client: Pick<KubeClient, "request" | "watch">;
  resource: ResourceInfo;
  /** Only this namespace; all namespaces (or a cluster-scoped kind) when undefined. */
  namespace?: string;
  logger?: Logger;
  /** A watch silent this long is closed and re-opened. @default 90000 */
  watchdogMs?: number;
  /** First backoff after an error. @default 250 */
  minBackoffMs?: number;
  /** Longest backoff. @default 30000 */
  maxBackoffMs?: number;
  /** Most objects per list page. @default 500 */
  pageSize?: number;
  /**
   * About how many bytes of JSON one list page may hold: the page size adapts to the objects
   * seen so far (the first page has at most 10 objects, so a page of unknown objects stays small).
   * @default 4194304
   */
  pageBytes?: number;
  /**
   * What to keep of an object: called on each object decoded from a list page, a watch event or a
   * refresh, which is dropped afterwards. @default the object without metadata.managedFields
   */
  decode?: (obj: KubeObject) => T;
  /**
   * What a listed object loses before it is parsed, as its bytes arrive: labels `decode` does
   * not keep, managedFields. @default managedFields dropped, with the default `decode`
   */
  itemFilter?: ListItemFilter;
  /**
   * Whether a relisted object tells listeners nothing new. @default equal resourceVersions
   */
  same?: (a: T, b: T) => boolean;
  /** Only objects with these labels (a label selector in its string form, sent to the server). */
  labelSelector?: string;
  /**
   * Asked when a list or watch answers 404: true confirms the resource is gone (state
   * `KindNotFound`); false makes the 404 a transient error (retried on the backoff, nothing
   * cleared). Custom resources answer 404 for a moment after an API server restart.
   * @default every 404 means gone
   */
  confirmGone?: () => Promise<boolean>;
  /**
   * The lifetime the server gives each watch, in seconds, as [least, most] (a random value in
   * between, so watches do not end together). Reopening a watch is re-authorised, so this bounds
   * how long a watch outlives the controller's access to its resource.
   * @default [30, 50]
   */
  watchTimeoutSeconds?: [number, number];
  /** Called with a counter name on notable events, for metrics: relist, watchdog, error, expired. */
  onSignal?: (signal: "relist" | "watchdog" | "error" | "expired") => void;
}

/** The cache key of an object: "namespace/name", or "name" when cluster-scoped. */
export function objectKey(namespace: string | undefined, name: string): string {
  return namespace ? `${namespace}/${name}` : name;
}

/**
 * Cached objects by namespace, then name. Two levels rather than one map keyed by
 * "namespace/name": the inner key is the object's own name string, so no key string is made and
 * kept per object (a cache of many small projections pays for every byte of its index).
 */
class ObjectStore<T extends Cached> {
  private readonly byNamespace = new Map<string, Map<string, T>>();
  private count = 0;

  get(namespace: string | undefined, name: string): T | undefined {
    return this.byNamespace.get(namespace ?? "")?.get(name);
  }

  getLike(obj: Cached): T | undefined {
    return this.get(obj.metadata?.namespace, obj.metadata?.name ?? "");
  }

  set(obj: T): void {
    const ns = obj.metadata?.namespace ?? "";
    let names = this.byNamespace.get(ns);
    if (!names) this.byNamespace.set(ns, (names = new Map()));
    const name = obj.metadata?.name ?? "";
    if (!names.has(name)) this.count++;
    names.set(name, obj);
  }

  delete(obj: Cached): void {
    const ns = obj.metadata?.namespace ?? "";
    const names = this.byNamespace.get(ns);
    if (names?.delete(obj.metadata?.name ?? "")) this.count--;
    if (names?.size === 0) this.byNamespace.delete(ns);
  }

  *values(namespace?: string): Iterable<T> {
    if (namespace !== undefined) {
      yield* this.byNamespace.get(namespace)?.values() ?? [];
      return;
    }
    for (const names of this.byNamespace.values()) yield* names.values();
  }

  get size(): number {
    return this.count;
  }

  /** Objects in `namespace` (all, when undefined). */
  countIn(namespace: string | undefined): number {
    return namespace === undefined ? this.count : (this.byNamespace.get(namespace)?.size ?? 0);
  }
}

/** Drops what nobody reads and everybody pays for. */
function slim(obj: KubeObject): KubeObject {
  if (obj.metadata && "managedFields" in obj.metadata) delete obj.metadata.managedFields;
  return obj;
}

const DECIMAL = /^[0-9]{1,30}$/;

/** The refresh queue's key of a target: requests for the same objects are read once. */
function refreshKey(target: RefreshTarget): string {
  return "name" in target
    ? `n:${objectKey(target.namespace, target.name)}`
    : `s:${target.namespace ?? ""}:${target.labelSelector}`;
}

/**
 * Orders two resourceVersions: negative when `a` is older, positive when newer, 0 when equal or
 * not comparable (either absent or not a decimal integer, as an aggregated API may send).
 */
export function compareResourceVersions(a: string | undefined, b: string | undefined): number {
  if (a === undefined || b === undefined || a === b || !DECIMAL.test(a) || !DECIMAL.test(b)) return 0;
  const x = a.replace(/^0+(?=.)/, "");
  const y = b.replace(/^0+(?=.)/, "");
  return x.length !== y.length ? x.length - y.length : x < y ? -1 : x > y ? 1 : 0;
}

/** The first page's size, before anything is known of the objects' size. */
const FIRST_PAGE = 10;
/** Targets read one by one in a refresh round before a whole namespace is read instead. */
const REFRESH_BY_NAME_MAX = 32;

class Expired extends Error {}

/** A list-then-watch cache of one resource, supervised; see the module comment. */
export class Informer<T extends Cached = KubeObject> {
  readonly resource: ResourceInfo;
  readonly namespace: string | undefined;
  private readonly client: Pick<KubeClient, "request" | "watch">;
  private readonly logger: Logger;
  private readonly watchdogMs: number;
  private readonly minBackoffMs: number;
  private readonly maxBackoffMs: number;
  private readonly pageSize: number;
  private readonly pageBytes: number;
  private readonly labelSelector: string | undefined;
  private readonly onSignal: InformerOptions["onSignal"];
  private listsStarted = 0;
  private readonly decode: (obj: KubeObject) => T;
  private readonly itemFilter: ListItemFilter | undefined;
  private readonly confirmGone: (() => Promise<boolean>) | undefined;
  private readonly watchTimeoutSeconds: [number, number];
  private readonly same: (a: T, b: T) => boolean;
  private readonly listeners = new Set<InformerListener<T>>();
  private store = new ObjectStore<T>();
  /** Bytes of JSON per object seen in the last list page, to size the next page. */
  private bytesPerObject: number | undefined;
  private readonly refreshQueue = new Map<string, RefreshTarget>();
  private refreshing = false;
  private refreshFailures = 0;
  private current: InformerState = { phase: "Pending" };
  private resourceVersion = "";
  private running = false;
  private stopWatch: (() => void) | undefined;
  private wake: (() => void) | undefined;
  private loop: Promise<void> | undefined;
  private syncedWaiters: Array<() => void> = [];

  constructor(options: InformerOptions<T>) {
    this.client = options.client;
    this.resource = options.resource;
    this.namespace = options.resource.namespaced ? options.namespace : undefined;
    this.logger = options.logger ?? silentLogger;
    this.watchdogMs = options.watchdogMs ?? 90_000;
    this.minBackoffMs = options.minBackoffMs ?? 250;
    this.maxBackoffMs = options.maxBackoffMs ?? 30_000;
    this.pageSize = options.pageSize ?? 500;
    this.pageBytes = options.pageBytes ?? 4 * 1024 * 1024;
    this.decode = options.decode ?? (slim as unknown as (obj: KubeObject) => T);
    this.itemFilter = options.itemFilter ?? (options.decode ? undefined : { dropManagedFields: () => true });
    this.confirmGone = options.confirmGone;
    this.watchTimeoutSeconds = options.watchTimeoutSeconds ?? [30, 50];
    this.same = options.same ?? ((a, b) => a.metadata?.resourceVersion === b.metadata?.resourceVersion);
    this.labelSelector = options.labelSelector || undefined;
    this.onSignal = options.onSignal;
  }

  /** The collection path, e.g. /apis/apps/v1/namespaces/x/deployments. */
  get path(): string {
    return this.pathIn(this.namespace);
  }

  private pathIn(namespace: string | undefined): string {
    const { group, version, resource } = this.resource;
    const base = group ? `/apis/${group}/${version}` : `/api/${version}`;
    return namespace ? `${base}/namespaces/${namespace}/${resource}` : `${base}/${resource}`;
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
    this.loop = this.run().catch((err: unknown) => {
      // run() handles its own errors; reaching here is a bug, never a crash of the process.
      this.logger.error({ err: asError(err).message, path: this.path }, "informer loop ended unexpectedly");
    });
  }

  /** Stops the loop and closes the watch; resolves when the loop has ended. */
  async stop(): Promise<void> {
    this.running = false;
    this.stopWatch?.();
    this.wake?.();
    this.settleWaiters();
    await this.loop;
  }

  private async run(): Promise<void> {
    let failures = 0;
    while (this.running) {
      try {
        await this.relist();
        failures = 0;
        while (this.running) await this.watchOnce();
      } catch (err) {
        if (!this.running) break;
        if (err instanceof Expired) {
          this.onSignal?.("expired");
          this.logger.info({ path: this.path }, "watch resourceVersion expired (410 Gone): relisting");
          continue;
        }
        failures++;
        this.onSignal?.("error");
        await this.noteFailure(err);
        await this.sleep(this.backoff(failures));
      }
    }
  }

  private async noteFailure(err: unknown): Promise<void> {
    const message = asError(err).message;
    // 403 only: a 401 is a credential that expired or rotated, not access withdrawn, and under
    // the contract a refusal withdraws values (the client reloads credentials on its own).
    if (isApiError(err, 403)) {
      this.setState({
        phase: "Failed",
        reason: "Forbidden",
        message: `the controller may not list/watch ${this.describe()}: grant it list and watch on that resource`,
      });
    } else if (isApiError(err, 404)) {
      const gone = this.confirmGone ? await this.confirmGone().catch(() => false) : true;
      if (gone && this.running) {
        this.setState({
          phase: "Failed",
          reason: "KindNotFound",
          message: `the API server no longer serves ${this.describe()}`,
        });
      }
    }
    // Anything else (and a 404 not confirmed) is transient: keep the cache and the state, so
    // no value flaps.
    this.logger.warn({ path: this.path, err: message }, "list/watch failed; retrying with backoff");
  }

  private describe(): string {
    const { group, resource } = this.resource;
    const gr = group ? `${resource}.${group}` : resource;
    return this.namespace ? `${gr} in namespace ${this.namespace}` : gr;
  }

  /** Full jitter: a random wait in [base/2, base], base doubling per failure up to the cap. */
  private backoff(failures: number): number {
    return jittered(backoffDelay(failures - 1, { baseMs: this.minBackoffMs, maxMs: this.maxBackoffMs }));
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(done, ms);
      function done() {
        clearTimeout(timer);
        resolve();
      }
      this.wake = done;
    });
  }

  /**
   * Lists `path` page by page, handing each decoded item to `onItem` as its page arrives; returns
   * the list's resourceVersion. Stops early (returning undefined) when the informer stops.
   */
  private async listPaged(
    path: string,
    query: { labelSelector?: string | undefined; fieldSelector?: string | undefined },
    onItem: (item: T) => void,
  ): Promise<string | undefined> {
    let continueToken: string | undefined;
    let resourceVersion = "";
    let limit = Math.min(this.pageSize, this.bytesPerObject ? this.pageLimit() : FIRST_PAGE);
    do {
      let length = 0;
      let streamed = 0;
      // Items are decoded as their bytes arrive (the client never holds the page whole); a
      // client that answers with the items in the page instead is read below.
      const page = await this.client.request<{
        metadata?: { resourceVersion?: string; continue?: string };
        items?: KubeObject[];
      }>("GET", path, {
        query: { ...query, limit, continue: continueToken },
        onBodyLength: (n) => (length = n),
        onItem: (item) => {
          streamed++;
          onItem(this.decode(item));
        },
        itemFilter: this.itemFilter,
      });
      const items = page.items ?? [];
      const count = streamed + items.length;
      if (count > 0 && length > 0) {
        this.bytesPerObject = Math.max(1, length / count);
        limit = this.pageLimit();
      }
      // Decode item by item and let go of each whole object at once: the page's array is the
      // only other reference, and it is dropped with `page` at the end of this turn.
      for (let i = 0; i < items.length; i++) {
        const item = items[i]!;
        items[i] = undefined as unknown as KubeObject;
        onItem(this.decode(item));
      }
      resourceVersion = page.metadata?.resourceVersion ?? resourceVersion;
      continueToken = page.metadata?.continue || undefined;
    } while (continueToken && this.running);
    return this.running ? resourceVersion : undefined;
  }

  /** Objects per page so a page holds about `pageBytes` of JSON. */
  private pageLimit(): number {
    return Math.max(1, Math.min(this.pageSize, Math.floor(this.pageBytes / (this.bytesPerObject ?? 1))));
  }

  /**
   * A refresh round's backoff. Not `sleep`: its `wake` belongs to the list/watch loop. A stop
   * does not cut it short; the round checks `running` when it ends (the timer holds no exit).
   */
  private pause(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(resolve, ms);
      timer.unref?.();
    });
  }

  private async relist(): Promise<void> {
    // The first list is the informer starting, not a relist: the counter is a restart signal,
    // and counting every start made each new source informer look like a restart.
    if (this.listsStarted++ > 0) this.onSignal?.("relist");
    const fresh = new ObjectStore<T>();
    const resourceVersion = await this.listPaged(this.path, { labelSelector: this.labelSelector }, (item) =>
      fresh.set(item),
    );
    if (resourceVersion === undefined) return;

    // Tell listeners only what differs from what they were told before.
    const previous = this.store;
    this.store = fresh;
    this.resourceVersion = resourceVersion;
    for (const obj of fresh.values()) {
      const old = previous.getLike(obj);
      if (!old) this.emit({ type: "ADDED", object: obj, old: undefined });
      else if (!this.same(old, obj)) this.emit({ type: "MODIFIED", object: obj, old });
    }
    for (const old of previous.values()) {
      if (!fresh.getLike(old)) this.emit({ type: "DELETED", object: old, old });
    }
    if (this.current.phase !== "Synced") this.setState({ phase: "Synced" });
  }

  /**
   * Reads `target` again out of band and replaces what is cached of each object read (unless the
   * cache already holds a newer version), telling listeners with MODIFIED: for a reader whose
   * data was not kept when the object was last decoded. Only objects already cached are
   * replaced (the watch brings new ones, and removes deleted ones). Requests made together are
   * read together, one round at a time; a failed round is retried with backoff.
   */
  refresh(target: RefreshTarget): void {
    this.refreshQueue.set(refreshKey(target), target);
    if (!this.refreshing) {
      this.refreshing = true;
      // After the current burst of requests (a resolver flush asks for many at once).
      void Promise.resolve().then(() => this.refreshRounds());
    }
  }

  private async refreshRounds(): Promise<void> {
    try {
      while (this.refreshQueue.size > 0 && this.running) {
        const targets = [...this.refreshQueue.values()];
        this.refreshQueue.clear();
        try {
          await this.refreshRound(targets);
          this.refreshFailures = 0;
        } catch (err) {
          if (!this.running) return;
          for (const t of targets) {
            const key = refreshKey(t);
            if (!this.refreshQueue.has(key)) this.refreshQueue.set(key, t);
          }
          this.refreshFailures++;
          this.onSignal?.("error");
          this.logger.warn(
            { path: this.path, err: asError(err).message },
            "refresh read failed; retrying with backoff",
          );
          await this.pause(this.backoff(this.refreshFailures));
        }
      }
    } finally {
      // The loop ends with the queue drained (requests made meanwhile joined it) or stopped.
      this.refreshing = false;
    }
  }

  private async refreshRound(targets: RefreshTarget[]): Promise<void> {
    // Group names by namespace: many names in one namespace are cheaper read as one list.
    const byNamespace = new Map<string, string[]>();
    const reads: Array<{ namespace: string | undefined; labelSelector?: string; fieldSelector?: string }> =
      [];
    for (const t of targets) {
      if ("labelSelector" in t) reads.push({ namespace: t.namespace, labelSelector: t.labelSelector });
      else {
        const ns = this.resource.namespaced ? (t.namespace ?? "") : "";
        let names = byNamespace.get(ns);
        if (!names) byNamespace.set(ns, (names = []));
        names.push(t.name);
      }
    }
    for (const [ns, names] of byNamespace) {
      const namespace = ns || undefined;
      // A whole namespace is read when the names asked for are many, and a good share of it.
      const inNamespace = this.store.countIn(this.resource.namespaced ? namespace : undefined);
      if (names.length > REFRESH_BY_NAME_MAX && names.length * 4 >= inNamespace) reads.push({ namespace });
      else for (const name of names) reads.push({ namespace, fieldSelector: nameFieldSelector(name) });
    }
    // A few reads at a time: enough to hide round trips, few enough not to crowd the API server.
    let next = 0;
    const worker = async () => {
      while (next < reads.length && this.running) {
        const r = reads[next++]!;
        const path = this.namespace ? this.path : this.pathIn(r.namespace);
        const labelSelector = [this.labelSelector, r.labelSelector].filter(Boolean).join(",") || undefined;
        await this.listPaged(path, { labelSelector, fieldSelector: r.fieldSelector }, (item) =>
          this.applyRead(item),
        );
      }
    };
    await Promise.all(Array.from({ length: Math.min(8, reads.length) }, worker));
  }

  private applyRead(item: T): void {
    const old = this.store.getLike(item);
    if (!old) return;
    if (compareResourceVersions(old.metadata?.resourceVersion, item.metadata?.resourceVersion) > 0) return;
    // The same version decoded with nothing new to tell (its reads were there): no event.
    if (this.same(old, item) && old.metadata?.resourceVersion === item.metadata?.resourceVersion) return;
    this.store.set(item);
    this.emit({ type: "MODIFIED", object: item, old });
  }

  private async watchOnce(): Promise<void> {
    let watchdog: NodeJS.Timeout | undefined;
    let silent = false;
    let events = 0;
    const openedAt = performance.now();
    let expired = false;
    const stream = this.client.watch(
      this.path,
      {
        resourceVersion: this.resourceVersion,
        allowWatchBookmarks: true,
        labelSelector: this.labelSelector,
        // The server ends every watch after this; spread them so reopens never line up. Each
        // reopen is authorised anew, so access withdrawn is noticed within this bound.
        timeoutSeconds:
          this.watchTimeoutSeconds[0] +
          Math.floor(Math.random() * (this.watchTimeoutSeconds[1] - this.watchTimeoutSeconds[0] + 1)),
      },
      (event) => {
        events++;
        armWatchdog();
        if (this.handle(event) === "expired") {
          expired = true;
          stream.close();
        }
      },
    );
    const armWatchdog = () => {
      clearTimeout(watchdog);
      watchdog = setTimeout(() => {
        silent = true;
        stream.close();
      }, this.watchdogMs);
    };
    this.stopWatch = () => stream.close();
    armWatchdog();
    try {
      await stream.done;
    } catch (err) {
      if (isApiError(err, 410)) throw new Expired();
      throw err;
    } finally {
      clearTimeout(watchdog);
      this.stopWatch = undefined;
    }
    if (expired) throw new Expired();
    // A watch the server (or a proxy) ends at once, with nothing on it, would otherwise be
    // reopened in a hot loop: treat it as an error, so the backoff applies (client-go does too).
    if (!silent && this.running && events === 0 && performance.now() - openedAt < 1000) {
      throw new Error(`watch ${this.path} ended immediately without an event`);
    }
    if (silent) {
      this.onSignal?.("watchdog");
      this.logger.warn(
        { path: this.path, silentMs: this.watchdogMs },
        "watch was silent past the watchdog window: reopening",
      );
    }
  }

  private handle(event: WatchEvent): "expired" | undefined {
    const raw = event.object;
    switch (event.type) {
      case "ADDED":
      case "MODIFIED": {
        const rv = raw.metadata?.resourceVersion;
        const old = this.store.getLike(raw);
        this.resourceVersion = rv ?? this.resourceVersion;
        // A refresh may have cached a newer version than the watch has reached: keep it.
        if (old && compareResourceVersions(old.metadata?.resourceVersion, rv) > 0) return undefined;
        const obj = this.decode(raw);
        this.store.set(obj);
        this.emit({ type: old ? "MODIFIED" : "ADDED", object: obj, old });
        return undefined;
      }
      case "DELETED": {
        const old = this.store.getLike(raw);
        this.store.delete(raw);
        this.resourceVersion = raw.metadata?.resourceVersion ?? this.resourceVersion;
        this.emit({ type: "DELETED", object: this.decode(raw), old });
        return undefined;
      }
      case "BOOKMARK":
        this.resourceVersion = raw.metadata?.resourceVersion ?? this.resourceVersion;
        return undefined;
      case "ERROR": {
        const status = raw as { code?: number; reason?: string; message?: string };
        if (status.code === 410 || status.reason === "Expired" || status.reason === "Gone") return "expired";
        throw new Error(
          `watch ${this.path} sent an error: ${status.code ?? ""} ${status.reason ?? ""}`.trim(),
        );
      }
      default:
        return undefined;
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
