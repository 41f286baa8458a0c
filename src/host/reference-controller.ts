/**
 * The plumbing every controller that holds references needs, once: list and watch its own
 * objects, keep one resolver subscription per object on the references it names, and run a
 * reconcile per object, one at a time, again when anything changed meanwhile, with a per-object
 * backoff when it fails. Level-based: an event (of the object or of a source) only queues the
 * object's key; the reconcile gets the object as it is now.
 *
 * It is the Referable controller's runtime (src/runtime/) adapted: the engine's own informer is
 * its source, a resolver push a channel, and the runtime's queue, workers, backoff and result
 * switch run the reconcile. It has none of its own.
 */
import type { KubeConfig, KubernetesObject } from "@kubernetes/client-node";
import { Informer } from "../informers/informer.ts";
import type { RestartReason } from "../informers/restart-reason.ts";
import { KubeClient, type KubeObject } from "../kube/client.ts";
import { silentLogger, type Logger } from "../api/log.ts";
import { controller, type Controller } from "../runtime/controller.ts";
import { enqueueKey, enqueueObject } from "../runtime/handler.ts";
import { ItemExponentialFailureRateLimiter } from "../runtime/rate-limiter.ts";
import { DONE, type Result } from "../runtime/reconciler.ts";
import { Channel, informerSource } from "../runtime/source.ts";
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
   * once for one object, and at most 16 run at once; an event during a run makes it run once
   * more after. A throw is logged (its message only) and retried with backoff; return
   * `{ requeueAfterMs }` to run again later. Not called for a deleted object.
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

/** What a list refused for good answers: no CRD, no RBAC, a bad request. */
const REFUSED: ReadonlySet<RestartReason> = new Set(["unauthorized", "forbidden", "not-found", "rejected"]);

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
  private readonly options: ReferenceControllerOptions<T>;
  private readonly logger: Logger;
  /** Per object, its open subscriptions by the JSON of the reference each watches. */
  private readonly subs = new Map<string, Map<string, Subscription>>();
  /** Resolver pushes: the key of the object whose reference moved on. */
  private readonly pushed = new Channel<string>();
  private client: KubeClient | undefined;
  private informer: Informer | undefined;
  private runtime: Controller | undefined;
  private stopped = false;

  constructor(options: ReferenceControllerOptions<T>) {
    this.options = options;
    this.logger = options.logger ?? silentLogger;
  }

  async start(): Promise<void> {
    const { kubeConfig, group, version, plural, namespace } = this.options;
    const [firstMs, longestMs] = this.options.backoffMs ?? [500, 60_000];
    let refused: ((reason: RestartReason) => void) | undefined;
    const client = (this.client = new KubeClient({ kubeConfig }));
    const informer = (this.informer = new Informer({
      client,
      // Namespaced or not, the path without a namespace lists every object the kind has.
      resource: { group, version, resource: plural, kind: "", namespaced: true, verbs: [] },
      namespace,
      logger: this.logger,
      minBackoffMs: firstMs,
      maxBackoffMs: longestMs,
      // The objects as the API server sent them: they are the host's to read.
      decode: (obj) => obj,
      onSignal: (_signal, reason) => {
        if (REFUSED.has(reason)) refused?.(reason);
      },
    }));
    // Before the watch: an object's subscriptions follow it before its key is reconciled.
    informer.addListener({
      onEvent: (event) => {
        if (event.type === "DELETED") this.remove(keyOf(event.object));
        else this.follow(event.object as unknown as T);
      },
      onState: () => undefined,
    });
    this.runtime = controller(plural)
      .watches(
        informerSource(informer),
        enqueueObject((event) => keyOf(event.object)),
      )
      .watches(this.pushed, enqueueKey())
      .with({
        logger: this.logger,
        rateLimiter: new ItemExponentialFailureRateLimiter({ baseDelayMs: firstMs, maxDelayMs: longestMs }),
      })
      .build({ reconcile: (key, signal) => this.reconcile(key, signal) });
    this.runtime.start();
    // The first list, retried on the informer's backoff while the server is away; refused for
    // good (a 4xx other than 429), it ends the start.
    const refusal = new Promise<RestartReason>((resolve) => (refused = resolve));
    informer.start();
    const reason = await Promise.race([this.runtime.whenSynced().then(() => undefined), refusal]);
    refused = undefined;
    if (reason !== undefined && informer.state.phase !== "Synced") {
      await this.stop();
      throw new Error(
        `could not list ${plural}${group ? `.${group}` : ""}: the API server refused it (${reason})`,
      );
    }
  }

  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    await this.informer?.stop();
    for (const subs of this.subs.values()) for (const s of subs.values()) s.close();
    this.subs.clear();
    await this.runtime?.stop();
    await this.client?.close();
  }

  subscriptionsOf(namespace: string, name: string): number {
    return this.subs.get(`${namespace}/${name}`)?.size ?? 0;
  }

  /** The object of `key` as the watch last delivered it; a deleted one is not reconciled. */
  private async reconcile(key: string, signal: AbortSignal): Promise<Result> {
    const slash = key.indexOf("/");
    const obj = this.informer?.get(key.slice(0, slash) || undefined, key.slice(slash + 1));
    if (!obj || signal.aborted) return DONE;
    const result = await this.options.reconcile(obj as unknown as T, signal);
    return result?.requeueAfterMs !== undefined
      ? { requeueAfterMs: Math.max(0, result.requeueAfterMs) }
      : DONE;
  }

  /** Opens and closes the object's subscriptions to match the references it names now. */
  private follow(obj: T): void {
    const key = keyOf(obj);
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
          this.options.resolver.watch(ref, () => this.pushed.emit(key)),
        );
    if (have.size > 0) this.subs.set(key, have);
    else this.subs.delete(key);
  }

  private remove(key: string): void {
    for (const s of this.subs.get(key)?.values() ?? []) s.close();
    this.subs.delete(key);
  }
}

function keyOf(obj: KubernetesObject | KubeObject): string {
  return `${obj.metadata?.namespace ?? ""}/${obj.metadata?.name ?? ""}`;
}

function messageOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
