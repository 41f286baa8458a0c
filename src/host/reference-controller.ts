/**
 * The plumbing every controller that holds references needs, once: list and watch its own
 * objects, keep one resolver subscription per object on the references it names, and run a
 * reconcile per object, one at a time, again when anything changed meanwhile, with a per-object
 * backoff when it fails. Level-based: an event (of the object or of a source) only queues the
 * object's key; the reconcile gets the object as it is now.
 */
import type { KubeConfig, KubernetesObject } from "@kubernetes/client-node";
import { silentLogger, type Logger } from "../api/log.ts";
import { checkKeys, everyKey } from "../resolver/strict.ts";
import type { Subscription, WatchCallback } from "../resolver/subscription.ts";
import type { GenericReference, GenericSelector } from "../resolver/types.ts";

/** What a reconcile may ask for: to run again after a while even if nothing changes. */
export interface ReconcileResult {
  /** Run the reconcile of this object again after this many milliseconds. */
  requeueAfterMs?: number;
}

/** The resolver's push API, which is all the controller needs from it. */
export interface ReferenceWatcher {
  /** As {@link Resolver.watch}. */
  watch(ref: GenericReference | GenericSelector, callback: WatchCallback): Subscription;
}

/**
 * What a host controller is given: where its objects are, its resolver, and optionally a
 * namespace and a logger. A host's own options of this type spread into
 * {@link ReferenceControllerOptions} as they are.
 */
export interface HostControllerOptions<R extends ReferenceWatcher = ReferenceWatcher> {
  /** Where to list and watch the objects (with `@kubernetes/client-node`). */
  kubeConfig: KubeConfig;
  /** The resolver whose `watch` pushes the sources' changes (a host may read with it too). */
  resolver: R;
  /** Watch the objects of this namespace only. @default every namespace */
  namespace?: string;
  /** @default a silent logger */
  logger?: Logger;
}

/** Options of {@link createReferenceController}. */
export interface ReferenceControllerOptions<T extends KubernetesObject> extends HostControllerOptions {
  /** The objects' API group; `""` for the core group. */
  group: string;
  /** Their API version (`v1alpha1`). */
  version: string;
  /** Their plural resource name (`tasks`). */
  plural: string;
  /**
   * The references of an object whose changes should reconcile it again: one subscription each
   * (references compared as JSON), opened when the object shows one, closed when a later version
   * of it no longer does or it is deleted. Return `[]` for none: a reference whose value is
   * settled need not be watched.
   */
  referencesOf(object: T): ReadonlyArray<GenericReference | GenericSelector>;
  /**
   * Brings the world in line with `object` (the latest the watch delivered). Never runs twice at
   * once for one object; an event during a run makes it run once more after. A throw is logged
   * (its message only) and retried with backoff; return `{ requeueAfterMs }` to run again later.
   * Not called for a deleted object.
   */
  reconcile(object: T, signal: AbortSignal): Promise<ReconcileResult | void>;
  /** First and longest wait before a failed reconcile (or list) runs again. @default [500, 60000] */
  backoffMs?: [number, number];
}

/** A running {@link createReferenceController}. */
export interface ReferenceController {
  /**
   * Lists the objects, then watches them. Resolves once the first list has arrived and a
   * reconcile of each listed object is queued; throws when the list is refused for good (a 4xx
   * other than 429: no CRD, no RBAC), and retries with backoff while the server is unavailable.
   */
  start(): Promise<void>;
  /** Stops watching, closes every subscription and waits for reconciles in flight. */
  stop(): Promise<void>;
  /** How many subscriptions are open for one object (`namespace` `""` for a cluster-scoped one). */
  subscriptionsOf(namespace: string, name: string): number;
}

const OPTION_KEYS = everyKey<ReferenceControllerOptions<KubernetesObject>>()([
  "kubeConfig",
  "resolver",
  "group",
  "version",
  "plural",
  "namespace",
  "referencesOf",
  "reconcile",
  "backoffMs",
  "logger",
]);

/** An informer of client-node, as far as this file uses it. */
interface HostInformer<T> {
  on(event: "add" | "update" | "delete", cb: (obj: T) => void): void;
  on(event: "error", cb: (err: unknown) => void): void;
  off(event: "error", cb: (err: unknown) => void): void;
  start(): Promise<void>;
  stop(): Promise<void>;
}

/**
 * Makes the host-controller loop for objects of one kind whose references the `resolver`
 * watches; see {@link ReferenceControllerOptions} for what it calls and when.
 */
export function createReferenceController<T extends KubernetesObject>(
  options: ReferenceControllerOptions<T>,
): ReferenceController {
  checkKeys(options, OPTION_KEYS, "the options of createReferenceController");
  return new Loop(options);
}

class Loop<T extends KubernetesObject> implements ReferenceController {
  private readonly objects = new Map<string, T>();
  /** Per object, its open subscriptions by the JSON of the reference each watches. */
  private readonly subs = new Map<string, Map<string, Subscription>>();
  private readonly running = new Map<string, Promise<void>>();
  private readonly again = new Set<string>();
  private readonly failures = new Map<string, number>();
  private readonly timers = new Map<string, NodeJS.Timeout>();
  private readonly abort = new AbortController();
  private readonly logger: Logger;
  private readonly backoff: [number, number];
  private informer: HostInformer<T> | undefined;

  private readonly options: ReferenceControllerOptions<T>;

  constructor(options: ReferenceControllerOptions<T>) {
    this.options = options;
    this.logger = options.logger ?? silentLogger;
    this.backoff = options.backoffMs ?? [500, 60_000];
  }

  async start(): Promise<void> {
    // Imported on call: the resolver alone never loads client-node's generated API models.
    const { CustomObjectsApi, makeInformer } = await import("@kubernetes/client-node");
    const { kubeConfig, group, version, plural, namespace } = this.options;
    const api = kubeConfig.makeApiClient(CustomObjectsApi);
    const base = group === "" ? `/api/${version}` : `/apis/${group}/${version}`;
    const informer = makeInformer<T>(
      kubeConfig,
      `${base}${namespace ? `/namespaces/${namespace}` : ""}/${plural}`,
      () =>
        (namespace
          ? api.listNamespacedCustomObject({ group, version, namespace, plural })
          : api.listClusterCustomObject({ group, version, plural })) as never,
    ) as unknown as HostInformer<T>;
    this.informer = informer;
    informer.on("add", (obj) => this.upsert(obj));
    informer.on("update", (obj) => this.upsert(obj));
    informer.on("delete", (obj) => this.remove(keyOf(obj)));
    for (let attempt = 0; ; attempt++) {
      // client-node's informer reports a failed list on "error" and stops, rather than throwing.
      let failure: unknown;
      const onFailure = (err: unknown) => void (failure ??= err);
      informer.on("error", onFailure);
      try {
        await informer.start();
      } finally {
        informer.off("error", onFailure);
      }
      if (failure === undefined) break;
      if (!transient(failure) || this.abort.signal.aborted) throw failure;
      this.logger.warn({ err: messageOf(failure) }, `could not list ${plural} yet; retrying`);
      await sleep(this.delay(attempt), this.abort.signal);
    }
    // From now on a failure stops the informer: start it again (from its last resourceVersion)
    // after a pause, so an outage is not a hot loop.
    let restarts = 0;
    informer.on("error", (err: unknown) => {
      if (this.abort.signal.aborted) return;
      this.logger.warn({ err: messageOf(err) }, `the watch of ${plural} failed; retrying`);
      void sleep(this.delay(restarts++), this.abort.signal).then(async () => {
        if (!this.abort.signal.aborted) await informer.start();
      });
    });
  }

  async stop(): Promise<void> {
    this.abort.abort();
    await this.informer?.stop();
    for (const t of this.timers.values()) clearTimeout(t);
    this.timers.clear();
    for (const subs of this.subs.values()) for (const s of subs.values()) s.close();
    this.subs.clear();
    await Promise.allSettled([...this.running.values()]);
  }

  subscriptionsOf(namespace: string, name: string): number {
    return this.subs.get(`${namespace}/${name}`)?.size ?? 0;
  }

  private upsert(obj: T): void {
    const key = keyOf(obj);
    this.objects.set(key, obj);
    let refs: ReadonlyArray<GenericReference | GenericSelector>;
    try {
      refs = this.options.referencesOf(obj);
    } catch (err) {
      this.logger.warn({ object: key, err: messageOf(err) }, "referencesOf threw; watching no reference");
      refs = [];
    }
    // A reference that stays keeps its subscription; one that goes is closed, one that comes opened.
    const wanted = new Map(refs.map((r) => [JSON.stringify(r), r] as const));
    const have = this.subs.get(key) ?? new Map<string, Subscription>();
    for (const [text, sub] of have)
      if (!wanted.has(text)) {
        sub.close();
        have.delete(text);
      }
    for (const [text, ref] of wanted)
      // Each push only queues the key: the reconcile reads the current state, whatever was pushed.
      if (!have.has(text))
        have.set(
          text,
          this.options.resolver.watch(ref, () => this.enqueue(key)),
        );
    if (have.size > 0) this.subs.set(key, have);
    else this.subs.delete(key);
    this.enqueue(key);
  }

  private remove(key: string): void {
    this.objects.delete(key);
    for (const s of this.subs.get(key)?.values() ?? []) s.close();
    this.subs.delete(key);
    this.failures.delete(key);
    clearTimeout(this.timers.get(key));
    this.timers.delete(key);
  }

  private enqueue(key: string): void {
    if (this.abort.signal.aborted) return;
    if (this.running.has(key)) {
      this.again.add(key);
      return;
    }
    const run = this.run(key).finally(() => {
      this.running.delete(key);
      if (this.again.delete(key)) this.enqueue(key);
    });
    this.running.set(key, run);
  }

  private async run(key: string): Promise<void> {
    const obj = this.objects.get(key);
    if (!obj) return;
    clearTimeout(this.timers.get(key));
    this.timers.delete(key);
    try {
      const result = await this.options.reconcile(obj, this.abort.signal);
      this.failures.delete(key);
      if (result?.requeueAfterMs !== undefined) this.later(key, result.requeueAfterMs);
    } catch (err) {
      if (this.abort.signal.aborted) return;
      const n = this.failures.get(key) ?? 0;
      this.failures.set(key, n + 1);
      const wait = this.delay(n);
      this.logger.warn({ object: key, err: messageOf(err), retryInMs: wait }, "reconcile failed; retrying");
      // Nothing else may bring this object back (its source may never change again): requeue.
      this.later(key, wait);
    }
  }

  private later(key: string, ms: number): void {
    if (this.abort.signal.aborted) return;
    clearTimeout(this.timers.get(key));
    const timer = setTimeout(
      () => {
        this.timers.delete(key);
        this.enqueue(key);
      },
      Math.max(0, ms),
    );
    timer.unref?.();
    this.timers.set(key, timer);
  }

  /** Exponential from the first to the longest wait. */
  private delay(attempt: number): number {
    const [first, longest] = this.backoff;
    return Math.min(longest, first * 2 ** Math.min(attempt, 30));
  }
}

function keyOf(obj: KubernetesObject): string {
  return `${obj.metadata?.namespace ?? ""}/${obj.metadata?.name ?? ""}`;
}

/** Whether waiting can help: no answer at all, too many requests, or a server error. */
function transient(err: unknown): boolean {
  const e = err as { code?: unknown; statusCode?: unknown } | undefined;
  const code =
    typeof e?.code === "number" ? e.code : typeof e?.statusCode === "number" ? e.statusCode : undefined;
  return code === undefined || code === 429 || code >= 500;
}

function messageOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** Resolves after `ms`, or at once when `signal` aborts. */
function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const t = setTimeout(resolve, ms);
    signal.addEventListener("abort", () => (clearTimeout(t), resolve()), { once: true });
  });
}
