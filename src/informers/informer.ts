/**
 * One supervised informer: a list, then a watch from the list's resourceVersion, keeping every
 * object of one resource (in one namespace, or all) as raw JSON.
 *
 * Supervision, because a watch in Node dies or stalls without a word:
 * - an error backs off with full jitter and relists (the cache keeps serving meanwhile: a
 *   dropped watch never clears what was known);
 * - 410 Gone (resourceVersion compacted) relists at once;
 * - a watchdog closes a watch that has been silent for `watchdogMs` (bookmarks count as
 *   traffic) and re-opens it from the last resourceVersion;
 * - a relist tells listeners only what differs from the cache, so nothing unchanged looks new.
 */
import { asError } from "../errors.ts";
import { isApiError, type KubeClient, type KubeObject, type WatchEvent } from "../kube/client.ts";
import type { ResourceInfo } from "../kube/discovery.ts";
import { silentLogger, type Logger } from "../log.ts";

/** What an informer knows of its resource. */
export type InformerState =
  | { phase: "Pending" }
  | { phase: "Synced" }
  /** The list was refused or the resource is gone; retried on the backoff. */
  | { phase: "Failed"; reason: "Forbidden" | "KindNotFound"; message: string };

/** A change to one object; `old` is the cached object it replaces, if any. */
export interface InformerEvent {
  type: "ADDED" | "MODIFIED" | "DELETED";
  object: KubeObject;
  old: KubeObject | undefined;
}

/** Receives what an informer learns. Must not throw (what it throws is logged and dropped). */
export interface InformerListener {
  onEvent(event: InformerEvent): void;
  onState(state: InformerState): void;
}

/** Options for {@link Informer}. */
export interface InformerOptions {
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
  /** Objects per list page. @default 500 */
  pageSize?: number;
  /** Only objects with these labels (a label selector in its string form, sent to the server). */
  labelSelector?: string;
  /** Called with a counter name on notable events, for metrics: relist, watchdog, error, expired. */
  onSignal?: (signal: "relist" | "watchdog" | "error" | "expired") => void;
}

/** The cache key of an object: "namespace/name", or "name" when cluster-scoped. */
export function objectKey(namespace: string | undefined, name: string): string {
  return namespace ? `${namespace}/${name}` : name;
}

function keyOf(obj: KubeObject): string {
  return objectKey(obj.metadata?.namespace, obj.metadata?.name ?? "");
}

/** Drops what nobody reads and everybody pays for. */
function slim(obj: KubeObject): KubeObject {
  if (obj.metadata && "managedFields" in obj.metadata) delete obj.metadata.managedFields;
  return obj;
}

class Expired extends Error {}

/** A list-then-watch cache of one resource, supervised; see the module comment. */
export class Informer {
  readonly resource: ResourceInfo;
  readonly namespace: string | undefined;
  private readonly client: Pick<KubeClient, "request" | "watch">;
  private readonly logger: Logger;
  private readonly watchdogMs: number;
  private readonly minBackoffMs: number;
  private readonly maxBackoffMs: number;
  private readonly pageSize: number;
  private readonly labelSelector: string | undefined;
  private readonly onSignal: InformerOptions["onSignal"];
  private readonly listeners = new Set<InformerListener>();
  private store = new Map<string, KubeObject>();
  private current: InformerState = { phase: "Pending" };
  private resourceVersion = "";
  private running = false;
  private stopWatch: (() => void) | undefined;
  private wake: (() => void) | undefined;
  private loop: Promise<void> | undefined;
  private syncedWaiters: Array<() => void> = [];

  constructor(options: InformerOptions) {
    this.client = options.client;
    this.resource = options.resource;
    this.namespace = options.resource.namespaced ? options.namespace : undefined;
    this.logger = options.logger ?? silentLogger;
    this.watchdogMs = options.watchdogMs ?? 90_000;
    this.minBackoffMs = options.minBackoffMs ?? 250;
    this.maxBackoffMs = options.maxBackoffMs ?? 30_000;
    this.pageSize = options.pageSize ?? 500;
    this.labelSelector = options.labelSelector || undefined;
    this.onSignal = options.onSignal;
  }

  /** The collection path, e.g. /apis/apps/v1/namespaces/x/deployments. */
  get path(): string {
    const { group, version, resource } = this.resource;
    const base = group ? `/apis/${group}/${version}` : `/api/${version}`;
    return this.namespace ? `${base}/namespaces/${this.namespace}/${resource}` : `${base}/${resource}`;
  }

  get state(): InformerState {
    return this.current;
  }

  /** The cached object, or undefined. */
  get(namespace: string | undefined, name: string): KubeObject | undefined {
    return this.store.get(objectKey(this.resource.namespaced ? namespace : undefined, name));
  }

  /** Every cached object (of `namespace` when given). Do not mutate what it yields. */
  *list(namespace?: string): Iterable<KubeObject> {
    for (const obj of this.store.values()) {
      if (namespace === undefined || obj.metadata?.namespace === namespace) yield obj;
    }
  }

  /** How many objects are cached. */
  get size(): number {
    return this.store.size;
  }

  addListener(listener: InformerListener): void {
    this.listeners.add(listener);
  }

  removeListener(listener: InformerListener): void {
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
        this.noteFailure(err);
        await this.sleep(this.backoff(failures));
      }
    }
  }

  private noteFailure(err: unknown): void {
    const message = asError(err).message;
    if (isApiError(err, 403) || isApiError(err, 401)) {
      this.setState({
        phase: "Failed",
        reason: "Forbidden",
        message: `the controller may not list/watch ${this.describe()}: grant it list and watch on that resource`,
      });
    } else if (isApiError(err, 404)) {
      this.setState({
        phase: "Failed",
        reason: "KindNotFound",
        message: `the API server no longer serves ${this.describe()}`,
      });
    }
    // Anything else is transient: keep the cache and the state, so no value flaps.
    this.logger.warn({ path: this.path, err: message }, "list/watch failed; retrying with backoff");
  }

  private describe(): string {
    const { group, resource } = this.resource;
    const gr = group ? `${resource}.${group}` : resource;
    return this.namespace ? `${gr} in namespace ${this.namespace}` : gr;
  }

  /** Full jitter: a random wait in [base/2, base], base doubling per failure up to the cap. */
  private backoff(failures: number): number {
    const base = Math.min(this.maxBackoffMs, this.minBackoffMs * 2 ** Math.min(failures - 1, 20));
    return base / 2 + Math.random() * (base / 2);
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

  private async relist(): Promise<void> {
    this.onSignal?.("relist");
    const fresh = new Map<string, KubeObject>();
    let continueToken: string | undefined;
    let resourceVersion = "";
    do {
      const page = await this.client.request<{
        metadata?: { resourceVersion?: string; continue?: string };
        items?: KubeObject[];
      }>("GET", this.path, {
        query: { limit: this.pageSize, continue: continueToken, labelSelector: this.labelSelector },
      });
      for (const item of page.items ?? []) fresh.set(keyOf(item), slim(item));
      resourceVersion = page.metadata?.resourceVersion ?? resourceVersion;
      continueToken = page.metadata?.continue || undefined;
    } while (continueToken && this.running);
    if (!this.running) return;

    // Tell listeners only what differs from what they were told before.
    const previous = this.store;
    this.store = fresh;
    this.resourceVersion = resourceVersion;
    for (const [key, obj] of fresh) {
      const old = previous.get(key);
      if (!old) this.emit({ type: "ADDED", object: obj, old: undefined });
      else if (old.metadata?.resourceVersion !== obj.metadata?.resourceVersion)
        this.emit({ type: "MODIFIED", object: obj, old });
    }
    for (const [key, old] of previous) {
      if (!fresh.has(key)) this.emit({ type: "DELETED", object: old, old });
    }
    if (this.current.phase !== "Synced") this.setState({ phase: "Synced" });
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
        // The server ends every watch after this; spread them so relists never line up.
        timeoutSeconds: 300 + Math.floor(Math.random() * 300),
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
    const obj = event.object;
    switch (event.type) {
      case "ADDED":
      case "MODIFIED": {
        slim(obj);
        const key = keyOf(obj);
        const old = this.store.get(key);
        this.store.set(key, obj);
        this.resourceVersion = obj.metadata?.resourceVersion ?? this.resourceVersion;
        this.emit({ type: old ? "MODIFIED" : "ADDED", object: obj, old });
        return undefined;
      }
      case "DELETED": {
        const key = keyOf(obj);
        const old = this.store.get(key);
        this.store.delete(key);
        this.resourceVersion = obj.metadata?.resourceVersion ?? this.resourceVersion;
        this.emit({ type: "DELETED", object: slim(obj), old });
        return undefined;
      }
      case "BOOKMARK":
        this.resourceVersion = obj.metadata?.resourceVersion ?? this.resourceVersion;
        return undefined;
      case "ERROR": {
        const status = obj as { code?: number; reason?: string; message?: string };
        if (status.code === 410 || status.reason === "Expired" || status.reason === "Gone") return "expired";
        throw new Error(
          `watch ${this.path} sent an error: ${status.code ?? ""} ${status.reason ?? ""}`.trim(),
        );
      }
      default:
        return undefined;
    }
  }

  private emit(event: InformerEvent): void {
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
