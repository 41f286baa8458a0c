/**
 * The GenericReference resolver: references and selectors in, values out, kept current by the
 * source cache (shared informers that keep projections, see src/informers/source-cache.ts).
 *
 * The data path, one file per stage: a request is compiled (request.ts); discovery finds its
 * kind, or the subscription waits for it (attachments.ts, kind-waiter.ts); it joins the index of
 * its kind (kind-index.ts), which tells the cache what to keep of the objects it reads and routes
 * each object's event to the subscriptions it concerns; a subscription that reads as a
 * ServiceAccount is let through only as far as the account may read (access-gate.ts); it
 * recomputes its result from the cache (compute.ts, level-based) and pushes it only when it
 * differs from what it pushed last (subscription.ts).
 */
import { serviceAccountProblem } from "../api/service-account.ts";
import { ResolutionError } from "../api/errors.ts";
import { InformerSourceCache, type SourceCache, type SourceView } from "../informers/source-cache.ts";
import { MAX_LABEL_KEYS_PER_KIND } from "../informers/label-keys.ts";
import { KubeClient } from "../kube/client.ts";
import { Discovery, type KindResolver } from "../kube/discovery.ts";
import { silentLogger, type Logger } from "../api/log.ts";
import { AccessGate } from "./access-gate.ts";
import type { AccessEntry } from "./access-reviews.ts";
import { Attachments } from "./attachments.ts";
import { computeResult, MAX_VALUES, type ComputeLimits } from "./compute.ts";
import { freshResult, PENDING_VIEW } from "./fresh-read.ts";
import { KindChanges } from "./kind-changes.ts";
import { KindWaiter } from "./kind-waiter.ts";
import { compileRequest, type AnyReference, type CompiledRequest } from "./request.ts";
import {
  clientOptions,
  RESOLVE_OPTION_KEYS,
  checkResolverOptions,
  WATCH_OPTION_KEYS,
  type ResolveOptions,
  type ResolverOptions,
  type ResolverWiring,
  type WatchOptions,
} from "./options.ts";
import { checkKeys } from "./strict.ts";
import { firstResult, Sub, type Subscription, type WatchCallback } from "./subscription.ts";
import { placeholderRequest, tooManyLabelKeys, stripOk, toResolutionError } from "./results.ts";
import { TransformPool } from "../transform/pool.ts";
import { applyTransform, needsTransform, type TransformRunner } from "./transform.ts";
import type {
  GenericReference,
  GenericSelector,
  ResolutionResult,
  ResolvedValue,
  ResolvedValues,
} from "./types.ts";

export type { Subscription, WatchCallback } from "./subscription.ts";
export type { ResolveOptions, ResolverOptions, WatchOptions } from "./options.ts";

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
  private readonly attachments: Attachments;
  private readonly subs = new Set<Sub>();
  /** What a subscription's close() calls: one function for them all, not a closure each. */
  private readonly onClose = (sub: Sub): void => this.unsubscribe(sub);
  private readonly dirty = new Set<Sub>();
  private readonly kindChanges: KindChanges;
  private flushScheduled = false;
  private stopped = false;
  private ownPool: TransformPool | undefined;
  /** The access of subscriptions with a ServiceAccount (its reviews made on first use). */
  private readonly access: AccessGate;

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
    this.kindChanges = new KindChanges({
      discovery: this.discovery,
      waiter: () => this.waiter,
      subs: () => this.subs,
      reattach: (sub) => {
        this.attachments.detach(sub);
        void this.attachments.attach(sub);
      },
    });
    this.limits = {
      maxValueBytes: options.maxValueBytes ?? 32 * 1024,
      maxValues: options.maxValues ?? MAX_VALUES,
    };
    this.cache =
      options.cache ??
      new InformerSourceCache({
        client: this.client!,
        logger: this.logger,
        lingerMs: options.informerLingerMs ?? 10_000,
        maxReadBytes: this.limits.maxValueBytes,
        maxLabelKeys: options.maxLabelKeysPerKind,
        maxLabelBytes: options.maxLabelBytesPerObject,
        informer: {
          watchdogMs: options.watchdogMs,
          watchTimeoutSeconds: options.watchTimeoutSeconds,
          onSignal: options.onInformerSignal,
        },
        confirmGone: (resource) => this.kindChanges.confirmGone(resource),
      });
    this.ownsCache = !options.cache;
    this.waiter = new KindWaiter({
      cache: this.cache,
      retry: (sub) => void this.attachments.attach(sub),
      invalidate: (apiVersion) => this.discovery.invalidate(apiVersion),
      onCrdChange: (group, kind) => this.kindChanges.onCrdChange(group, kind),
      watchCustomResourceDefinitions: options.watchCustomResourceDefinitions,
      retryMs: options.kindRetryMs,
    });
    this.attachments = new Attachments({
      discovery: this.discovery,
      cache: this.cache,
      waiter: () => this.waiter,
      options,
      schedule: (sub) => this.schedule(sub),
      recompute: (sub) => this.recompute(sub),
      deliver: (sub, result) => this.deliver(sub, result),
    });
    this.access = new AccessGate({
      accessReviews: options.accessReviews,
      client: () => this.client!,
      logger: this.logger,
      onChange: (entries) => this.regate(entries),
    });
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
    const identity = options.serviceAccount ?? this.options.serviceAccount;
    try {
      checkKeys(options, WATCH_OPTION_KEYS, "the options of watch");
      const problem =
        options.serviceAccount === undefined
          ? undefined
          : serviceAccountProblem(options.serviceAccount, "the serviceAccount option of watch");
      if (problem) throw new ResolutionError("InvalidSpec", problem);
      request = compileRequest(ref, options.fieldPrefix);
    } catch (err) {
      const sub = new Sub(placeholderRequest(ref), callback, () => undefined);
      this.deliver(sub, { ok: false, error: toResolutionError(err) });
      return sub;
    }
    const sub = new Sub(request, callback, this.onClose);
    if (identity && request.target !== "external") sub.identity = identity;
    this.subs.add(sub);
    if (request.target === "external") {
      this.recompute(sub);
      return sub;
    }
    // With the kind already known the first result is computed now, so a new subscriber of a
    // synced kind never sees a Pending it does not need.
    const known = this.discovery.peek?.(request.apiVersion, request.kind);
    if (known) this.attachments.attachResource(sub, known);
    else void this.attachments.attach(sub);
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

  /**
   * The most label keys the objects of one watched kind keep now (at most `maxLabelKeysPerKind`).
   * @internal
   */
  get labelKeysKept(): number {
    return this.cache.labelKeysKept?.() ?? 0;
  }

  /**
   * The transform quarantine (src/transform/pool.ts): expressions quarantined now, and
   * evaluations run in its lane so far. Zeros before the first transform.
   * @internal
   */
  transformQuarantine(): { quarantined: number; evaluations: number } {
    const runner = this.options.transformRunner ?? this.ownPool;
    if (!(runner instanceof TransformPool)) return { quarantined: 0, evaluations: 0 };
    return { quarantined: runner.quarantined, evaluations: runner.quarantineEvaluations };
  }

  /** Keys of the open informers, e.g. `/v1/configmaps@*`. */
  informerKeys(): string[] {
    return this.cache.keys();
  }

  /**
   * The resourceVersion at which the source cache holds the object `source` names, from the
   * cache alone (no request, no informer started): undefined when its kind is not watched now or
   * the object is not cached. A hint for ordering work (a replica that takes a bucket over looks
   * first at the Referables whose source changed after their status was written), never a result.
   * @internal
   */
  cachedVersion(source: {
    apiVersion: string;
    kind: string;
    namespace?: string;
    name: string;
  }): string | undefined {
    const resource = this.discovery.peek?.(source.apiVersion, source.kind);
    if (!resource) return undefined;
    const namespace = resource.namespaced ? source.namespace : undefined;
    const index = this.attachments.indexOf(resource, namespace);
    return index?.handle.get(namespace, source.name)?.metadata.resourceVersion;
  }

  /** How many subscriptions are open. */
  get subscriptionCount(): number {
    return this.subs.size;
  }

  /** Closes every subscription and informer (and the client, if the resolver made it). */
  async stop(): Promise<void> {
    this.stopped = true;
    this.kindChanges.stop();
    for (const sub of [...this.subs]) sub.close();
    this.waiter.stop();
    await this.access.stop();
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
  private once(ref: AnyReference): Promise<ResolutionResult> {
    return firstResult((callback) => this.watch(ref, callback), this.options.resolveTimeoutMs ?? 30_000);
  }

  /** The result of `ref` from a fresh read of the API server (see fresh-read.ts). */
  private fresh(ref: AnyReference): Promise<ResolutionResult> {
    if (this.stopped) throw new Error("the resolver is stopped");
    return freshResult(ref, {
      lookup: (apiVersion, kind) => this.kindChanges.lookupFresh(apiVersion, kind),
      sourcePolicy: this.options.sourcePolicy,
      cache: this.cache,
      compute: (request, view) => this.computeFrom(request, view),
      authorize: async (request, resource) => {
        const identity = this.options.serviceAccount;
        return identity ? this.access.authorize(identity, request, resource) : undefined;
      },
    });
  }

  /** Subscriptions whose access answers changed (or were all dropped) compute again, and so check again. */
  private regate(entries: ReadonlySet<AccessEntry> | "all"): void {
    for (const sub of this.subs) {
      // Only those attached to their kind: one still waiting for it has nothing to check yet.
      if (!sub.identity || sub.closed || !sub.resource) continue;
      if (entries === "all" || sub.accessHeld?.some((e) => entries.has(e))) this.schedule(sub);
    }
  }

  private computeFrom(request: CompiledRequest, view: SourceView): Promise<ResolutionResult> {
    const result = computeResult(request, view, this.limits);
    // Every object of a fresh read was projected with this request's own reads.
    if ("notKept" in result) throw new Error(`a read of ${request.describe} was not kept (a bug)`);
    return applyTransform(request, result, this.limits, this.runner);
  }

  private unsubscribe(sub: Sub): void {
    if (sub.accessHeld) this.access.release(sub);
    this.subs.delete(sub);
    this.dirty.delete(sub);
    this.waiter.done(sub);
    this.attachments.detach(sub);
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
    if (sub.identity && sub.resource) {
      // The account's access first: nothing is computed (or pushed) for a source it may not read.
      const verdict = this.access.check(sub.identity, sub.request, sub.resource, sub, () => {
        if (!sub.closed) this.schedule(sub);
      });
      if (verdict === undefined) return;
      if (verdict !== true) {
        sub.generation++;
        this.deliver(sub, verdict);
        return;
      }
    }
    if (index?.isRefused(sub)) {
      this.deliver(sub, {
        ok: false,
        error: tooManyLabelKeys(sub.request, this.options.maxLabelKeysPerKind ?? MAX_LABEL_KEYS_PER_KIND),
      });
      return;
    }
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
    const runner = this.runner;
    void applyTransform(sub.request, result, this.limits, runner).then((transformed) => {
      sub.transforming = false;
      if (sub.closed || this.stopped) return;
      if (!transformed.ok && transformed.error.reason === "TransformFailed") this.retryLater(sub, runner);
      if (sub.retransform) {
        sub.retransform = false;
        this.recompute(sub);
      } else if (generation === sub.generation) this.deliver(sub, transformed);
    });
  }

  /**
   * Computes `sub` again when its quarantined transform is evaluated again (see the pool): a
   * failure given at once must not outlive the input it was given for. One timer per
   * subscription (the kind waiter's, unused while attached), cleared when it closes.
   */
  private retryLater(sub: Sub, runner: TransformRunner): void {
    const transform = sub.request.transform!;
    const wait = runner.retryAfterMs?.(transform.text, transform.shape);
    if (wait === undefined) return;
    clearTimeout(sub.retryTimer);
    sub.retryTimer = setTimeout(() => {
      if (!sub.closed && !this.stopped && sub.index) this.schedule(sub);
    }, wait + 1);
    sub.retryTimer.unref?.();
  }

  private deliver(sub: Sub, result: ResolutionResult): void {
    sub.push(result, this.logger);
  }
}

/**
 * Makes a resolver; see {@link ResolverOptions} for what it can be told. Make one per process
 * and share it: every reference to a kind then shares one list and one watch.
 */
export function createResolver(options: ResolverOptions): Resolver {
  checkResolverOptions(options);
  return new Resolver(options);
}
