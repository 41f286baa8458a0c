/**
 * The GenericReference resolver: references and selectors in, values out, kept current by
 * shared informers. One informer per source resource (and scope) serves every subscription
 * that reads that kind; a reverse index sends each event only to the subscriptions it concerns;
 * a subscription recomputes its result from the cache (level-based) and pushes it only when it
 * differs from what it pushed last.
 */
import type { KubeConfig } from "@kubernetes/client-node";
import { asError, isReferenceError, ReferenceError } from "../errors.ts";
import { KubeClient, type KubeObject } from "../kube/client.ts";
import { Discovery, type KindResolver, type ResourceInfo } from "../kube/discovery.ts";
import type { Informer, InformerEvent, InformerListener, InformerState } from "../informers/informer.ts";
import { informerKey, InformerPool, type InformerLease } from "../informers/pool.ts";
import { objectKey } from "../informers/informer.ts";
import { silentLogger, type Logger } from "../log.ts";
import { computeResult, MAX_VALUES, type ComputeLimits } from "./compute.ts";
import { compileRequest, type AnyReference, type CompiledRequest } from "./request.ts";
import { applyTransform } from "./transform.ts";
import type {
  GenericReference,
  GenericSelector,
  ResolutionResult,
  ResolvedValue,
  ResolvedValues,
} from "./types.ts";

/** Options for {@link createResolver}; every one has a default but the connection. */
export interface ResolverOptions {
  /** Where to connect; give this or `client`. */
  kubeConfig?: KubeConfig;
  /** A client to share (it is not closed by {@link Resolver.stop}); give this or `kubeConfig`. */
  client?: KubeClient;
  /** Discovery to share; one over the client is made when absent. */
  discovery?: KindResolver;
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
}

/** A push subscription; close it when done. */
export interface Subscription {
  /** The latest result pushed, if any yet. */
  readonly current: ResolutionResult | undefined;
  /** Stops pushes and releases the informer claim; idempotent. */
  close(): void;
}

/** Options of one {@link Resolver.watch}. */
export interface WatchOptions {
  /** Prefix of field names in InvalidSpec messages, e.g. "spec.source". @default "" */
  fieldPrefix?: string;
}

/** The callback of {@link Resolver.watch}: runs on every change of the value or of its error. */
export type WatchCallback = (result: ResolutionResult) => void;

const CRD_RESOURCE: ResourceInfo = {
  group: "apiextensions.k8s.io",
  version: "v1",
  resource: "customresourcedefinitions",
  kind: "CustomResourceDefinition",
  namespaced: false,
  verbs: ["list", "watch"],
};

/** Subscriptions of one informer, indexed so that an event finds only those it concerns. */
class KindIndex implements InformerListener {
  readonly byName = new Map<string, Set<Sub>>();
  /** Selector subscriptions by namespace ("" for all namespaces or a cluster-scoped kind). */
  readonly selectors = new Map<string, Set<Sub>>();
  readonly all = new Set<Sub>();
  readonly informer: Informer;
  private readonly schedule: (sub: Sub) => void;
  constructor(informer: Informer, schedule: (sub: Sub) => void) {
    this.informer = informer;
    this.schedule = schedule;
  }

  add(sub: Sub): void {
    this.all.add(sub);
    const req = sub.request;
    if (req.target === "name")
      addTo(this.byName, objectKey(sub.resource!.namespaced ? req.namespace : undefined, req.name!), sub);
    else addTo(this.selectors, sub.resource!.namespaced ? (req.namespace ?? "") : "", sub);
  }

  remove(sub: Sub): void {
    this.all.delete(sub);
    const req = sub.request;
    if (req.target === "name")
      removeFrom(
        this.byName,
        objectKey(sub.resource!.namespaced ? req.namespace : undefined, req.name!),
        sub,
      );
    else removeFrom(this.selectors, sub.resource!.namespaced ? (req.namespace ?? "") : "", sub);
  }

  onEvent(event: InformerEvent): void {
    const meta = event.object.metadata;
    for (const sub of this.byName.get(objectKey(meta?.namespace, meta?.name ?? "")) ?? []) this.schedule(sub);
    const scopes = [
      this.selectors.get(meta?.namespace ?? ""),
      meta?.namespace ? this.selectors.get("") : undefined,
    ];
    for (const subs of scopes) {
      for (const sub of subs ?? []) {
        const selector = sub.request.selector!;
        if (
          selector.matches(meta?.labels) ||
          (event.old !== undefined && selector.matches(event.old.metadata?.labels))
        )
          this.schedule(sub);
      }
    }
  }

  onState(_state: InformerState): void {
    for (const sub of this.all) this.schedule(sub);
  }
}

function addTo<K>(map: Map<K, Set<Sub>>, key: K, sub: Sub): void {
  let set = map.get(key);
  if (!set) map.set(key, (set = new Set()));
  set.add(sub);
}

function removeFrom<K>(map: Map<K, Set<Sub>>, key: K, sub: Sub): void {
  const set = map.get(key);
  set?.delete(sub);
  if (set?.size === 0) map.delete(key);
}

/** One subscription's state. */
class Sub implements Subscription {
  resource: ResourceInfo | undefined;
  index: KindIndex | undefined;
  lease: InformerLease | undefined;
  current: ResolutionResult | undefined;
  fingerprint: string | undefined;
  closed = false;
  attaching = false;
  retryTimer: NodeJS.Timeout | undefined;
  retries = 0;
  readonly request: CompiledRequest;
  readonly callback: WatchCallback;
  private readonly onClose: (sub: Sub) => void;
  constructor(request: CompiledRequest, callback: WatchCallback, onClose: (sub: Sub) => void) {
    this.request = request;
    this.callback = callback;
    this.onClose = onClose;
  }
  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.onClose(this);
  }
}

/** The resolver; make one with {@link createResolver}. */
export class Resolver {
  private readonly client: KubeClient;
  private readonly ownsClient: boolean;
  private readonly discovery: KindResolver;
  private readonly pool: InformerPool;
  private readonly logger: Logger;
  private readonly options: ResolverOptions;
  private readonly limits: ComputeLimits;
  private readonly indexes = new Map<string, KindIndex>();
  private readonly subs = new Set<Sub>();
  private readonly dirty = new Set<Sub>();
  private flushScheduled = false;
  private readonly waitingForKind = new Set<Sub>();
  private crdLease: InformerLease | undefined;
  private stopped = false;

  constructor(options: ResolverOptions) {
    if (!options.client && !options.kubeConfig)
      throw new Error("createResolver needs a kubeConfig or a client");
    this.options = options;
    this.client = options.client ?? new KubeClient({ kubeConfig: options.kubeConfig! });
    this.ownsClient = !options.client;
    this.logger = options.logger ?? silentLogger;
    this.discovery = options.discovery ?? new Discovery({ client: this.client });
    this.limits = {
      maxValueBytes: options.maxValueBytes ?? 32 * 1024,
      maxValues: options.maxValues ?? MAX_VALUES,
    };
    const informer: NonNullable<ConstructorParameters<typeof InformerPool>[0]["informer"]> = {};
    if (options.watchdogMs !== undefined) informer.watchdogMs = options.watchdogMs;
    if (options.onInformerSignal) informer.onSignal = options.onInformerSignal;
    this.pool = new InformerPool({
      client: this.client,
      logger: this.logger,
      lingerMs: options.informerLingerMs ?? 10_000,
      informer,
    });
  }

  /** Checks that the API server answers; resolves when it does. */
  async start(): Promise<void> {
    await this.client.request("GET", "/version");
  }

  /**
   * Pushes the result of `ref` (a reference or a selector) to `callback` now and on every change
   * of the value or of its error, until the subscription is closed. Never throws for a bad
   * reference: that is pushed as an `InvalidSpec` result. The first push may run before
   * `watch` returns (an invalid reference, or a kind whose informer is already synced), so a
   * callback must not rely on the returned subscription being assigned yet.
   */
  watch(ref: AnyReference, callback: WatchCallback, options: WatchOptions = {}): Subscription {
    if (this.stopped) throw new Error("the resolver is stopped");
    let request: CompiledRequest;
    try {
      request = compileRequest(ref, options.fieldPrefix);
    } catch (err) {
      const sub = new Sub(placeholderRequest(ref), callback, () => undefined);
      this.deliver(sub, { ok: false, error: toReferenceError(err) });
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

  /** Resolves a reference once: the value with its source, or throws a ReferenceError. */
  async resolve(ref: GenericReference): Promise<ResolvedValue> {
    const result = await this.once(ref);
    if (!result.ok) throw result.error;
    if ("values" in result)
      throw new ReferenceError(
        "InvalidSpec",
        "resolve() takes a reference; use resolveSelector() for a selector",
      );
    return stripOk(result) as ResolvedValue;
  }

  /** Resolves a selector once: every value with its source, in order, or throws a ReferenceError. */
  async resolveSelector(selector: GenericSelector): Promise<ResolvedValues> {
    const result = await this.once(selector);
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
    return this.pool.size;
  }

  /** Keys of the open informers, e.g. `/v1/configmaps@*`. */
  informerKeys(): string[] {
    return this.pool.keys();
  }

  /** How many subscriptions are open. */
  get subscriptionCount(): number {
    return this.subs.size;
  }

  /** Closes every subscription and informer (and the client, if the resolver made it). */
  async stop(): Promise<void> {
    this.stopped = true;
    for (const sub of [...this.subs]) sub.close();
    this.crdLease?.release();
    await this.pool.stop();
    if (this.ownsClient) await this.client.close();
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
      const pending = new ReferenceError(
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
      const error = toReferenceError(err);
      this.deliver(sub, { ok: false, error });
      if (error.retryable) this.retryKindLater(sub);
      return;
    }
    if (sub.closed) return;
    this.attachResource(sub, resource);
  }

  /** Joins `sub` to the informer of `resource` and computes its first result. */
  private attachResource(sub: Sub, resource: ResourceInfo): void {
    const req = sub.request;
    this.waitingForKind.delete(sub);
    this.updateCrdWatch();
    const problem = this.checkResource(req, resource);
    if (problem) {
      this.deliver(sub, { ok: false, error: problem });
      return;
    }
    sub.resource = resource;
    const scopeNs =
      this.options.informerScope === "Namespace" && resource.namespaced ? req.namespace : undefined;
    const lease = this.pool.acquire(resource, scopeNs);
    sub.lease = lease;
    const key = informerKey(resource, scopeNs);
    let index = this.indexes.get(key);
    if (!index || index.informer !== lease.informer) {
      index?.informer.removeListener(index);
      index = new KindIndex(lease.informer, (s) => this.schedule(s));
      lease.informer.addListener(index);
      this.indexes.set(key, index);
    }
    sub.index = index;
    index.add(sub);
    this.recompute(sub);
  }

  private checkResource(req: CompiledRequest, resource: ResourceInfo): ReferenceError | undefined {
    if (resource.namespaced && !req.namespace) {
      return new ReferenceError("InvalidSpec", `${req.kind} is namespaced: set the source's namespace`);
    }
    if (!resource.namespaced && req.namespace) {
      return new ReferenceError(
        "InvalidSpec",
        `${req.kind} is cluster-scoped: remove the source's namespace`,
      );
    }
    if (!resource.verbs.includes("list") || !resource.verbs.includes("watch")) {
      return new ReferenceError(
        "InvalidSpec",
        `${req.kind} (${resource.resource}) cannot be watched: the API server offers only ${resource.verbs.join(", ") || "no verbs"} on it`,
        { retryable: false },
      );
    }
    const source: { namespace?: string; name?: string } = {};
    if (req.namespace !== undefined) source.namespace = req.namespace;
    if (req.name !== undefined) source.name = req.name;
    const refusal = this.options.sourcePolicy?.(resource, source);
    if (refusal) return new ReferenceError("Forbidden", refusal);
    return undefined;
  }

  private unsubscribe(sub: Sub): void {
    this.subs.delete(sub);
    this.dirty.delete(sub);
    this.waitingForKind.delete(sub);
    clearTimeout(sub.retryTimer);
    const index = sub.index;
    if (index) {
      index.remove(sub);
      sub.index = undefined;
      if (index.all.size === 0) {
        index.informer.removeListener(index);
        const key = informerKey(index.informer.resource, index.informer.namespace);
        if (this.indexes.get(key) === index) this.indexes.delete(key);
      }
    }
    sub.lease?.release();
    sub.lease = undefined;
    this.updateCrdWatch();
  }

  private retryKindLater(sub: Sub): void {
    const [first, max] = this.options.kindRetryMs ?? [1000, 60_000];
    const base = Math.min(max, first * 2 ** Math.min(sub.retries++, 20));
    const delay = base / 2 + Math.random() * (base / 2);
    clearTimeout(sub.retryTimer);
    sub.retryTimer = setTimeout(() => {
      if (!sub.closed) void this.attach(sub);
    }, delay);
    sub.retryTimer.unref?.();
    this.waitingForKind.add(sub);
    this.updateCrdWatch();
  }

  /** Holds a CRD informer exactly while some subscription waits for a kind. */
  private updateCrdWatch(): void {
    if (this.options.watchCustomResourceDefinitions === false || this.stopped) return;
    if (this.waitingForKind.size > 0 && !this.crdLease) {
      this.crdLease = this.pool.acquire(CRD_RESOURCE);
      this.crdLease.informer.addListener({
        onEvent: (event) => this.onCrdEvent(event),
        onState: () => undefined,
      });
    } else if (this.waitingForKind.size === 0 && this.crdLease) {
      this.crdLease.release();
      this.crdLease = undefined;
    }
  }

  private onCrdEvent(event: InformerEvent): void {
    if (event.type === "DELETED") return;
    const crd = event.object as KubeObject & {
      spec?: { group?: string; names?: { kind?: string } };
      status?: { conditions?: Array<{ type?: string; status?: string }> };
    };
    const established = crd.status?.conditions?.some((c) => c.type === "Established" && c.status === "True");
    if (!established) return;
    const group = crd.spec?.group;
    const kind = crd.spec?.names?.kind;
    for (const sub of [...this.waitingForKind]) {
      const [subGroup] = sub.request.apiVersion.includes("/") ? sub.request.apiVersion.split("/") : [""];
      if (subGroup !== group || sub.request.kind !== kind) continue;
      this.discovery.invalidate(sub.request.apiVersion);
      clearTimeout(sub.retryTimer);
      sub.retries = 0;
      void this.attach(sub);
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
    const informer = sub.index?.informer;
    const result = informer
      ? computeResult(sub.request, informer, this.limits)
      : computeResult(sub.request, PENDING_VIEW, this.limits);
    this.deliver(sub, applyTransform(sub.request, result, this.limits));
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

const PENDING_VIEW = {
  state: { phase: "Pending" } as InformerState,
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

function toReferenceError(err: unknown): ReferenceError {
  if (isReferenceError(err)) return err;
  return new ReferenceError("Pending", `could not resolve yet: ${asError(err).message}`, { cause: err });
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
  };
}

/** Makes a resolver; see {@link ResolverOptions} for what it can be told. */
export function createResolver(options: ResolverOptions): Resolver {
  return new Resolver(options);
}
