/**
 * The GenericReference resolver: references and selectors in, values out, kept current by the
 * source cache (shared informers that keep projections, see src/informers/source-cache.ts).
 *
 * The data path, one file per stage: a request is compiled (request.ts); discovery finds its
 * kind, or the subscription waits for it (kind-waiter.ts); it joins the index of its kind
 * (kind-index.ts), which tells the cache what to keep of the objects it reads and routes each
 * object's event to the subscriptions it concerns; a subscription recomputes its result from the
 * cache (compute.ts, level-based) and pushes it only when it differs from what it pushed last.
 */
import type { KubeConfig } from "@kubernetes/client-node";
import { asError, isResolutionError, ResolutionError } from "../errors.ts";
import type { Projection } from "../informers/projection.ts";
import {
  InformerSourceCache,
  type RefreshTarget,
  type SourceCache,
  type SourceView,
} from "../informers/source-cache.ts";
import { informerKey } from "../informers/pool.ts";
import { isApiError, KubeClient } from "../kube/client.ts";
import { Discovery, type KindResolver, type ResourceInfo } from "../kube/discovery.ts";
import { silentLogger, type Logger } from "../log.ts";
import { computeResult, MAX_VALUES, type ComputeLimits } from "./compute.ts";
import { KindIndex } from "./kind-index.ts";
import { KindWaiter } from "./kind-waiter.ts";
import { compileRequest, type AnyReference, type CompiledRequest } from "./request.ts";
import { checkKeys, everyKey } from "./strict.ts";
import { Sub, type Subscription, type WatchCallback } from "./subscription.ts";
import { TransformPool, type TransformPoolOptions } from "../transform/pool.ts";
import { applyTransform, needsTransform, type TransformRunner } from "./transform.ts";
import type {
  GenericReference,
  GenericSelector,
  ResolutionResult,
  ResolvedValue,
  ResolvedValues,
} from "./types.ts";

export type { Subscription, WatchCallback } from "./subscription.ts";

/** Options for {@link createResolver}; every one has a default but the connection. */
export interface ResolverOptions {
  /**
   * The context of `kubeConfig` to connect with, instead of its current context (kubectl's
   * `--context`); the KubeConfig itself is not changed. @default the kubeConfig's current context
   */
  context?: string;
  /**
   * Where to connect, with whose credentials: a `KubeConfig` of `@kubernetes/client-node` (2.x),
   * for example one that `loadFromDefault()` filled. The resolver makes its own connection from
   * it and closes it on {@link Resolver.stop}.
   */
  kubeConfig: KubeConfig;
  /** Structured logger (pino-compatible). @default a silent logger */
  logger?: Logger;
  /** Largest value, in bytes of JSON; larger gives `ValueTooLarge`. @default 32768 */
  maxValueBytes?: number;
  /** Most values of a `Multiple` selector; more gives `ValueTooLarge`. @default 4096 */
  maxValues?: number;
  /**
   * `Cluster`: one informer per source kind across all namespaces (needs cluster-wide list and
   * watch). `Namespace`: one per kind and namespace (works with namespaced RBAC).
   * @default "Cluster"
   */
  informerScope?: "Cluster" | "Namespace";
  /** How long an informer no subscription uses is kept before it is closed. @default 10000 */
  informerLingerMs?: number;
  /** A watch silent this long is reopened. @default 90000 */
  watchdogMs?: number;
  /**
   * The lifetime the API server gives each source watch, in seconds, as [least, most]. Reopening
   * is re-authorised, so this bounds how long a watch outlives the access it was opened with
   * (RBAC revoked mid-watch keeps delivering until the watch ends). @default [30, 50]
   */
  watchTimeoutSeconds?: [number, number];
  /** How long {@link Resolver.resolve} waits for a kind's first list. @default 30000 */
  resolveTimeoutMs?: number;
  /**
   * Refuses some sources: returns a message for a resource the resolver must not read, which
   * then resolves to `Forbidden` with that message. @default every resource is allowed
   */
  sourcePolicy?: (
    resource: ResourceInfo,
    source: { namespace?: string; name?: string },
  ) => string | undefined;
  /**
   * Watch CustomResourceDefinitions while some reference waits for a kind that is not served,
   * so it resolves as soon as its CRD is established (a backoff retry covers the rest).
   * @default true
   */
  watchCustomResourceDefinitions?: boolean;
  /** First and longest retry of a reference whose kind is not found. @default [1000, 60000] */
  kindRetryMs?: [number, number];
  /** Counts informer signals, for metrics. */
  onInformerSignal?: (signal: "relist" | "watchdog" | "error" | "expired") => void;
  /**
   * The worker threads transforms run in, off the event loop, and their limits: each evaluation
   * has a deadline (`timeoutMs`, CPU time of its worker) and each worker a heap ceiling
   * (`maxHeapMiB`); an evaluation past either is `TransformFailed`. The pool starts with the
   * first transform, never keeps the process alive, and closes on {@link Resolver.stop}.
   * @default \{ workers: 1, timeoutMs: 50, maxHeapMiB: 64 \}
   */
  transformPool?: TransformPoolOptions;
}

/**
 * How the controller and the tests wire a resolver to parts they share (a client with its
 * request metrics, discovery, a source cache, or fakes of the last two): not part of the package's
 * API, which takes a `kubeConfig` only.
 * @internal
 */
export interface ResolverWiring extends Omit<ResolverOptions, "kubeConfig"> {
  /** Where to connect; give this or `client` (or both `cache` and `discovery`). */
  kubeConfig?: KubeConfig;
  /** A client to share (it is not closed by {@link Resolver.stop}); give this or `kubeConfig`. */
  client?: KubeClient;
  /** Discovery to share; one over the client is made when absent. */
  discovery?: KindResolver;
  /**
   * The source cache to read from (shared with other resolvers; not stopped by
   * {@link Resolver.stop}); one over the client is made when absent.
   */
  cache?: SourceCache;
  /** What evaluates transforms (not closed by {@link Resolver.stop}); a pool of its own when absent. */
  transformRunner?: TransformRunner;
}

/** Every key of {@link ResolverOptions}: any other is refused (see strict.ts). */
const RESOLVER_OPTION_KEYS = everyKey<ResolverOptions>()([
  "context",
  "kubeConfig",
  "logger",
  "maxValueBytes",
  "maxValues",
  "informerScope",
  "informerLingerMs",
  "watchdogMs",
  "watchTimeoutSeconds",
  "resolveTimeoutMs",
  "sourcePolicy",
  "watchCustomResourceDefinitions",
  "kindRetryMs",
  "onInformerSignal",
  "transformPool",
]);
const TRANSFORM_POOL_KEYS = everyKey<TransformPoolOptions>()([
  "workers",
  "timeoutMs",
  "maxHeapMiB",
  "cooldownMs",
  "keepAlive",
]);
const RESOLVE_OPTION_KEYS = everyKey<ResolveOptions>()(["consistent"]);
const WATCH_OPTION_KEYS = everyKey<WatchOptions>()(["fieldPrefix"]);

/** Options of one {@link Resolver.watch}. */
export interface WatchOptions {
  /** Prefix of field names in InvalidSpec messages, e.g. "spec.source". @default "" */
  fieldPrefix?: string;
}

/** Options of one {@link Resolver.resolve} or {@link Resolver.resolveSelector}. */
export interface ResolveOptions {
  /**
   * Answer from the API server rather than from the cache: the source is read with one `list`
   * request (no resourceVersion, so a quorum read), and the answer is at least as new as the
   * moment of the call: a write that completed before the call is seen, an object deleted or
   * unlabelled before it is not. Costs one request per call (and a discovery lookup the first
   * time a kind is met); the cache is neither used nor changed, and no informer is started.
   * Without it, the answer comes from the shared cache, which trails the API server by the
   * watch's delay (see docs/library.md, "How fresh an answer is").
   * @default false
   */
  consistent?: boolean;
}

/** The resolver; make one with {@link createResolver}. */
export class Resolver {
  private readonly client: KubeClient | undefined;
  private readonly ownsClient: boolean;
  private readonly discovery: KindResolver;
  private readonly cache: SourceCache;
  private readonly ownsCache: boolean;
  private readonly waiter: KindWaiter;
  private readonly logger: Logger;
  private readonly options: ResolverWiring;
  private readonly limits: ComputeLimits;
  private readonly indexes = new Map<string, KindIndex>();
  private readonly subs = new Set<Sub>();
  private readonly dirty = new Set<Sub>();
  private readonly crdChecks = new Map<string, NodeJS.Timeout[]>();
  private flushScheduled = false;
  private stopped = false;
  private ownPool: TransformPool | undefined;

  /**
   * Use {@link createResolver}; the constructor also takes the internal wiring.
   * @internal
   */
  constructor(options: ResolverWiring) {
    if (!options.client && !options.kubeConfig && (!options.cache || !options.discovery))
      throw new Error("createResolver needs a kubeConfig or a client");
    if (options.context !== undefined && (options.client || !options.kubeConfig))
      throw new Error(
        "createResolver's context chooses a context of its kubeConfig: give a kubeConfig, not a client",
      );
    this.options = options;
    const needsClient = !options.cache || !options.discovery;
    this.client =
      options.client ??
      (needsClient || options.kubeConfig ? new KubeClient(clientOptions(options)) : undefined);
    this.ownsClient = !options.client && this.client !== undefined;
    this.logger = options.logger ?? silentLogger;
    this.discovery = options.discovery ?? new Discovery({ client: this.client! });
    this.limits = {
      maxValueBytes: options.maxValueBytes ?? 32 * 1024,
      maxValues: options.maxValues ?? MAX_VALUES,
    };
    const informer: NonNullable<ConstructorParameters<typeof InformerSourceCache>[0]["informer"]> = {};
    if (options.watchdogMs !== undefined) informer.watchdogMs = options.watchdogMs;
    if (options.watchTimeoutSeconds) informer.watchTimeoutSeconds = options.watchTimeoutSeconds;
    if (options.onInformerSignal) informer.onSignal = options.onInformerSignal;
    this.cache =
      options.cache ??
      new InformerSourceCache({
        client: this.client!,
        logger: this.logger,
        lingerMs: options.informerLingerMs ?? 10_000,
        maxReadBytes: this.limits.maxValueBytes,
        informer,
        confirmGone: (resource) => this.confirmGone(resource),
      });
    this.ownsCache = !options.cache;
    const waiterOptions: ConstructorParameters<typeof KindWaiter>[0] = {
      cache: this.cache,
      retry: (sub) => void this.attach(sub),
      invalidate: (apiVersion) => this.discovery.invalidate(apiVersion),
      onCrdChange: (group, kind) => this.onCrdChange(group, kind),
    };
    if (options.watchCustomResourceDefinitions !== undefined)
      waiterOptions.watchCustomResourceDefinitions = options.watchCustomResourceDefinitions;
    if (options.kindRetryMs) waiterOptions.retryMs = options.kindRetryMs;
    this.waiter = new KindWaiter(waiterOptions);
  }

  /** Checks that the API server answers; resolves when it does. */
  async start(): Promise<void> {
    await this.client?.request("GET", "/version");
  }

  /**
   * Pushes the result of `ref` (a reference or a selector) to `callback` now and on every change
   * of the value or of its error, until the subscription is closed. Never throws for a bad
   * reference: that is pushed as an `InvalidSpec` result. The first push may run before
   * `watch` returns (an invalid reference, or a kind whose informer is already synced), so a
   * callback must not rely on the returned subscription being assigned yet.
   */
  watch(
    ref: GenericReference | GenericSelector,
    callback: WatchCallback,
    options: WatchOptions = {},
  ): Subscription {
    if (this.stopped) throw new Error("the resolver is stopped");
    let request: CompiledRequest;
    try {
      checkKeys(options, WATCH_OPTION_KEYS, "the options of watch");
      request = compileRequest(ref, options.fieldPrefix);
    } catch (err) {
      const sub = new Sub(placeholderRequest(ref), callback, () => undefined);
      this.deliver(sub, { ok: false, error: toResolutionError(err) });
      return sub;
    }
    const sub = new Sub(request, callback, (s) => this.unsubscribe(s));
    this.subs.add(sub);
    if (request.target === "external") {
      this.recompute(sub);
      return sub;
    }
    // With the kind already known the first result is computed now, so a new subscriber of a
    // synced kind never sees a Pending it does not need.
    const known = this.discovery.peek?.(request.apiVersion, request.kind);
    if (known) this.attachResource(sub, known);
    else void this.attach(sub);
    return sub;
  }

  /**
   * Resolves a reference once: the value with its source, or throws a ResolutionError. Answers
   * from the cache (which may trail a write just made) unless `options.consistent`.
   */
  async resolve(ref: GenericReference, options: ResolveOptions = {}): Promise<ResolvedValue> {
    checkKeys(options, RESOLVE_OPTION_KEYS, "the options of resolve");
    const result = options.consistent ? await this.fresh(ref) : await this.once(ref);
    if (!result.ok) throw result.error;
    if ("values" in result)
      throw new ResolutionError(
        "InvalidSpec",
        "resolve() takes a reference; use resolveSelector() for a selector",
      );
    return stripOk(result) as ResolvedValue;
  }

  /**
   * Resolves a selector once: every value with its source, in order, or throws a
   * ResolutionError. Answers from the cache (which may trail a write just made) unless
   * `options.consistent`.
   */
  async resolveSelector(selector: GenericSelector, options: ResolveOptions = {}): Promise<ResolvedValues> {
    checkKeys(options, RESOLVE_OPTION_KEYS, "the options of resolveSelector");
    const result = options.consistent ? await this.fresh(selector) : await this.once(selector);
    if (!result.ok) throw result.error;
    if ("values" in result) return stripOk(result) as ResolvedValues;
    const one = result as ResolvedValue;
    return {
      values: one.value === undefined ? [] : [one.value],
      sources: one.source ? [one.source] : [],
      reason: one.reason,
    };
  }

  /** How many informers are open (lingering ones included). */
  get informerCount(): number {
    return this.cache.size;
  }

  /** Keys of the open informers, e.g. `/v1/configmaps@*`. */
  informerKeys(): string[] {
    return this.cache.keys();
  }

  /** How many subscriptions are open. */
  get subscriptionCount(): number {
    return this.subs.size;
  }

  /** Closes every subscription and informer (and the client, if the resolver made it). */
  async stop(): Promise<void> {
    this.stopped = true;
    for (const timers of this.crdChecks.values()) for (const t of timers) clearTimeout(t);
    for (const sub of [...this.subs]) sub.close();
    this.waiter.stop();
    if (this.ownsCache) await this.cache.stop();
    if (this.ownsClient) await this.client?.close();
    await this.ownPool?.close();
  }

  /** The runner transforms go to: the wired one, else a pool of its own made on first use. */
  private get runner(): TransformRunner {
    if (this.options.transformRunner) return this.options.transformRunner;
    this.ownPool ??= new TransformPool({ ...this.options.transformPool, keepAlive: false });
    return this.ownPool;
  }

  /** The first result that is not Pending, or Pending after `resolveTimeoutMs`. */
  private async once(ref: AnyReference): Promise<ResolutionResult> {
    const timeoutMs = this.options.resolveTimeoutMs ?? 30_000;
    const isPending = (r: ResolutionResult) => !r.ok && r.error.reason === "Pending";
    let finish: (result: ResolutionResult) => void = () => undefined;
    const settled = new Promise<ResolutionResult>((resolve) => (finish = resolve));
    const sub = this.watch(ref, (result) => {
      if (!isPending(result)) finish(result);
    });
    const timer = setTimeout(() => {
      const pending = new ResolutionError(
        "Pending",
        `no result within ${timeoutMs} ms: the first list of ${sub.current ? "the source kind" : "it"} has not completed`,
      );
      finish({ ok: false, error: pending });
    }, timeoutMs);
    if (sub.current && !isPending(sub.current)) finish(sub.current);
    try {
      return await settled;
    } finally {
      clearTimeout(timer);
      sub.close();
    }
  }

  /**
   * The result of `ref` computed from a fresh read of the API server (see
   * {@link ResolveOptions.consistent}): the objects listed now are the whole truth for a name or
   * a selector, so nothing cached (an object since deleted, a label since removed) can linger.
   */
  private async fresh(ref: AnyReference): Promise<ResolutionResult> {
    if (this.stopped) throw new Error("the resolver is stopped");
    let request: CompiledRequest;
    try {
      request = compileRequest(ref);
    } catch (err) {
      return { ok: false, error: toResolutionError(err) };
    }
    if (request.target === "external") return await this.computeFrom(request, PENDING_VIEW);
    let resource: ResourceInfo;
    try {
      resource = await this.lookupFresh(request.apiVersion, request.kind);
    } catch (err) {
      return { ok: false, error: toResolutionError(err) };
    }
    const problem = this.checkResource(request, resource);
    if (problem) return { ok: false, error: problem };
    const namespace = resource.namespaced ? request.namespace : undefined;
    const target: RefreshTarget =
      request.target === "name"
        ? { namespace, name: request.name! }
        : { namespace, labelSelector: request.selector!.key };
    let items: Projection[];
    try {
      items = await this.cache.readFresh(resource, target, request.extractors, request.selector?.keys ?? []);
    } catch (err) {
      return { ok: false, error: freshReadError(err, resource, namespace) };
    }
    const view: SourceView = {
      state: { phase: "Synced" },
      get: (_ns, name) => items.find((p) => p.metadata.name === name),
      list: () => items,
    };
    return await this.computeFrom(request, view);
  }

  /** Discovery, asked afresh when it says the kind is not served (its CRD may be minutes old). */
  private async lookupFresh(apiVersion: string, kind: string): Promise<ResourceInfo> {
    try {
      return await this.discovery.lookup(apiVersion, kind);
    } catch (err) {
      if (!isResolutionError(err) || err.reason !== "KindNotFound") throw err;
      const now = await this.recheck(apiVersion, kind);
      if (typeof now === "object") return now;
      throw err;
    }
  }

  private computeFrom(request: CompiledRequest, view: SourceView): Promise<ResolutionResult> {
    const result = computeResult(request, view, this.limits);
    // Every object of a fresh read was projected with this request's own reads.
    if ("notKept" in result) throw new Error(`a read of ${request.describe} was not kept (a bug)`);
    return applyTransform(request, result, this.limits, this.runner);
  }

  private async attach(sub: Sub): Promise<void> {
    // A retry timer and a CRD event may both try; one attach at a time, and only once.
    if (sub.attaching || sub.index || sub.closed) return;
    sub.attaching = true;
    try {
      await this.attachOnce(sub);
    } finally {
      sub.attaching = false;
    }
  }

  private async attachOnce(sub: Sub): Promise<void> {
    const req = sub.request;
    let resource: ResourceInfo;
    try {
      resource = await this.discovery.lookup(req.apiVersion, req.kind);
    } catch (err) {
      if (sub.closed) return;
      const error = toResolutionError(err);
      this.deliver(sub, { ok: false, error });
      if (error.retryable) this.waiter.wait(sub);
      return;
    }
    if (sub.closed) return;
    this.attachResource(sub, resource);
  }

  /** Joins `sub` to the index of `resource` and computes its first result. */
  private attachResource(sub: Sub, resource: ResourceInfo): void {
    const req = sub.request;
    this.waiter.done(sub);
    const problem = this.checkResource(req, resource);
    if (problem) {
      this.deliver(sub, { ok: false, error: problem });
      return;
    }
    sub.resource = resource;
    const scopeNs =
      this.options.informerScope === "Namespace" && resource.namespaced ? req.namespace : undefined;
    const key = informerKey(resource, scopeNs);
    let index = this.indexes.get(key);
    if (!index) {
      index = new KindIndex(this.cache, resource, scopeNs, (s) => this.schedule(s));
      this.indexes.set(key, index);
    }
    sub.index = index;
    // Interest first: every object decoded from now on keeps what `sub` reads.
    index.add(sub);
    // Only a group with a dot can be a CRD's (the API server requires one): built-in kinds
    // (ConfigMaps, Deployments, ...) need no CRD watch.
    if (resource.group.includes(".")) {
      sub.followsCrd = true;
      this.waiter.follow(1);
    }
    this.recompute(sub);
  }

  /**
   * Whether a resource that answered 404 is gone: discovery, asked afresh, no longer serves its
   * kind. One 404 is not enough: custom resources answer 404 for a moment after an API server
   * restart, until their CRD handlers sync.
   */
  private async confirmGone(resource: ResourceInfo): Promise<boolean> {
    // An established CRD is the authority for a custom kind: discovery itself can lack the group
    // for a moment after a restart, as the resource does.
    if (this.waiter.crdOf(resource.group, resource.kind) === "Established") return false;
    const apiVersion = resource.group ? `${resource.group}/${resource.version}` : resource.version;
    const now = await this.recheck(apiVersion, resource.kind);
    return now === "Absent" || (typeof now === "object" && now.resource !== resource.resource);
  }

  /** Discovery asked afresh; "Unknown" (withdraw nothing) when it could not tell. */
  private async recheck(apiVersion: string, kind: string): Promise<ResourceInfo | "Absent" | "Unknown"> {
    if (this.discovery.recheck) return this.discovery.recheck(apiVersion, kind);
    this.discovery.invalidate(apiVersion);
    try {
      return await this.discovery.lookup(apiVersion, kind);
    } catch (err) {
      return isResolutionError(err) && err.reason === "KindNotFound" ? "Absent" : "Unknown";
    }
  }

  /**
   * A CRD serving `kind` in `group` changed: the subscriptions attached to that kind look it up
   * again (now, and twice more as discovery catches up) and attach afresh when it is gone or
   * served differently (another scope, plural or verbs), so a CRD recreated cluster-scoped is an
   * InvalidSpec in seconds rather than a SourceNotFound until a restart.
   */
  private onCrdChange(group: string, kind: string): void {
    const key = `${group}/${kind}`;
    if (this.crdChecks.has(key)) return;
    const check = async () => {
      // One lookup per apiVersion, however many subscriptions read the kind.
      const byApiVersion = new Map<string, Sub[]>();
      for (const sub of this.subs) {
        const req = sub.request;
        const subGroup = req.apiVersion.includes("/") ? req.apiVersion.split("/")[0] : "";
        if (subGroup !== group || req.kind !== kind || !sub.index || !sub.resource) continue;
        let list = byApiVersion.get(req.apiVersion);
        if (!list) byApiVersion.set(req.apiVersion, (list = []));
        list.push(sub);
      }
      for (const [apiVersion, subs] of byApiVersion) {
        const now = await this.recheck(apiVersion, kind);
        // Withdraw only on a definite answer: an unreachable server, or discovery that has not
        // caught up with an established CRD, changes nothing (the later checks look again).
        if (now === "Unknown") continue;
        if (now === "Absent" && this.waiter.crdOf(group, kind) === "Established") continue;
        for (const sub of subs) {
          const was = sub.resource;
          if (sub.closed || !was) continue;
          if (
            typeof now === "object" &&
            now.resource === was.resource &&
            now.namespaced === was.namespaced &&
            now.verbs.join() === was.verbs.join()
          )
            continue;
          this.detach(sub);
          void this.attach(sub);
        }
      }
    };
    const timers = [0, 1000, 3000].map((delay) => {
      const t = setTimeout(() => {
        if (!this.stopped) void check();
      }, delay);
      t.unref?.();
      return t;
    });
    this.crdChecks.set(key, timers);
    const done = setTimeout(() => this.crdChecks.delete(key), 3100);
    done.unref?.();
  }

  private checkResource(req: CompiledRequest, resource: ResourceInfo): ResolutionError | undefined {
    if (resource.namespaced && !req.namespace) {
      return new ResolutionError("InvalidSpec", `${req.kind} is namespaced: set the source's namespace`);
    }
    if (!resource.namespaced && req.namespace) {
      return new ResolutionError(
        "InvalidSpec",
        `${req.kind} is cluster-scoped: remove the source's namespace`,
      );
    }
    if (!resource.verbs.includes("list") || !resource.verbs.includes("watch")) {
      return new ResolutionError(
        "InvalidSpec",
        `${req.kind} (${resource.resource}) cannot be watched: the API server offers only ${resource.verbs.join(", ") || "no verbs"} on it`,
        { retryable: false },
      );
    }
    const source: { namespace?: string; name?: string } = {};
    if (req.namespace !== undefined) source.namespace = req.namespace;
    if (req.name !== undefined) source.name = req.name;
    const refusal = this.options.sourcePolicy?.(resource, source);
    if (refusal) return new ResolutionError("Forbidden", refusal);
    return undefined;
  }

  private unsubscribe(sub: Sub): void {
    this.subs.delete(sub);
    this.dirty.delete(sub);
    this.waiter.done(sub);
    this.detach(sub);
  }

  /** Takes `sub` off its kind index (closing the index with its last subscription). */
  private detach(sub: Sub): void {
    const index = sub.index;
    if (!index) return;
    sub.index = undefined;
    sub.resource = undefined;
    if (sub.followsCrd) {
      sub.followsCrd = false;
      this.waiter.follow(-1);
    }
    index.remove(sub);
    if (index.all.size === 0) {
      index.close();
      for (const [key, i] of this.indexes) if (i === index) this.indexes.delete(key);
    }
  }

  private schedule(sub: Sub): void {
    this.dirty.add(sub);
    if (this.flushScheduled) return;
    this.flushScheduled = true;
    // Collect a whole synchronous burst (a relist emits every object at once) before computing.
    setImmediate(() => {
      this.flushScheduled = false;
      const batch = [...this.dirty];
      this.dirty.clear();
      for (const s of batch) if (!s.closed) this.recompute(s);
    });
  }

  private recompute(sub: Sub): void {
    const index = sub.index;
    const result = computeResult(sub.request, index ? index.handle : PENDING_VIEW, this.limits);
    if ("notKept" in result) {
      // Some object it reads was decoded before it wanted it: read it again; the refresh's event
      // recomputes. Nothing is pushed meanwhile, so no guess is ever published.
      index?.refresh(sub);
      return;
    }
    sub.generation++;
    if (!needsTransform(sub.request, result)) {
      this.deliver(sub, result);
      return;
    }
    // One evaluation at a time per subscription: a change while one runs is taken up when it
    // ends (from the cache as it is then), so a source that changes faster than its transform
    // evaluates queues nothing.
    if (sub.transforming) {
      sub.retransform = true;
      return;
    }
    sub.transforming = true;
    const generation = sub.generation;
    void applyTransform(sub.request, result, this.limits, this.runner).then((transformed) => {
      sub.transforming = false;
      if (sub.closed || this.stopped) return;
      if (sub.retransform) {
        sub.retransform = false;
        this.recompute(sub);
      } else if (generation === sub.generation) this.deliver(sub, transformed);
    });
  }

  private deliver(sub: Sub, result: ResolutionResult): void {
    const print = fingerprint(result);
    if (print === sub.fingerprint) return;
    sub.fingerprint = print;
    sub.current = result;
    try {
      sub.callback(result);
    } catch (err) {
      this.logger.error(
        { err: asError(err).message, source: sub.request.describe },
        "a watch callback threw",
      );
    }
  }
}

const PENDING_VIEW: SourceView = {
  state: { phase: "Pending" },
  get: () => undefined,
  list: () => [],
};

/**
 * What makes two results different for a subscriber: the value(s), the sources' identities
 * (not their resourceVersions: an update that leaves the value alone is no change), the reason,
 * and the error's message.
 */
function fingerprint(result: ResolutionResult): string {
  if (!result.ok) return JSON.stringify(["error", result.error.reason, result.error.message]);
  const sources = "sources" in result ? result.sources : result.source ? [result.source] : [];
  const ids = sources.map((s) => [s.namespace ?? "", s.name, s.uid]);
  const payload = "values" in result ? result.values : result.value;
  return JSON.stringify([
    "ok",
    result.reason,
    ids,
    payload === undefined ? null : payload,
    "values" in result,
  ]);
}

function stripOk(result: ResolutionResult): unknown {
  const { ok: _ok, ...rest } = result as { ok: true } & Record<string, unknown>;
  return rest;
}

function toResolutionError(err: unknown): ResolutionError {
  if (isResolutionError(err)) return err;
  return new ResolutionError("Pending", `could not resolve yet: ${asError(err).message}`, { cause: err });
}

/** A fresh read's failure as the reason the informer would have given for it. */
function freshReadError(
  err: unknown,
  resource: ResourceInfo,
  namespace: string | undefined,
): ResolutionError {
  const gr = resource.group ? `${resource.resource}.${resource.group}` : resource.resource;
  const where = namespace ? `${gr} in namespace ${namespace}` : gr;
  if (isApiError(err, 403))
    return new ResolutionError(
      "Forbidden",
      `the resolver may not list ${where}: grant it list on that resource`,
      {
        cause: err,
      },
    );
  if (isApiError(err, 404))
    return new ResolutionError("KindNotFound", `the API server does not serve ${where} (404 on list)`, {
      cause: err,
    });
  return toResolutionError(err);
}

function placeholderRequest(ref: unknown): CompiledRequest {
  const raw = (typeof ref === "object" && ref !== null ? ref : {}) as Record<string, unknown>;
  return {
    target: "external",
    apiVersion: String(raw.apiVersion ?? ""),
    kind: String(raw.kind ?? ""),
    namespace: undefined,
    name: undefined,
    selector: undefined,
    external: undefined,
    fieldPath: undefined,
    fieldPathText: "",
    mode: "Single",
    minMatch: 1,
    maxMatch: undefined,
    sortBy: undefined,
    requireConditions: [],
    hasDefault: false,
    defaultValue: undefined,
    resolution: "Required",
    describe: "an invalid reference",
    extractors: [],
    fieldKey: undefined,
    sortKey: undefined,
    conditionsKey: undefined,
  };
}

function clientOptions(options: ResolverWiring): ConstructorParameters<typeof KubeClient>[0] {
  const out: ConstructorParameters<typeof KubeClient>[0] = { kubeConfig: options.kubeConfig! };
  if (options.context !== undefined) out.context = options.context;
  return out;
}

/**
 * Makes a resolver; see {@link ResolverOptions} for what it can be told. Make one per process
 * and share it: every reference to a kind then shares one list and one watch.
 */
export function createResolver(options: ResolverOptions): Resolver {
  if (typeof options !== "object" || options === null)
    throw new ResolutionError("InvalidSpec", "createResolver takes an options object with a kubeConfig");
  checkKeys(options, RESOLVER_OPTION_KEYS, "the options of createResolver");
  if (typeof options.transformPool === "object" && options.transformPool !== null)
    checkKeys(options.transformPool, TRANSFORM_POOL_KEYS, "the transformPool option of createResolver");
  return new Resolver(options);
}
