/**
 * The source cache: shared informers of source kinds that keep {@link Projection}s, not objects.
 *
 * This is the seam between the resolver and the cluster. A user of a kind (the resolver keeps one
 * per kind and scope) acquires it with a {@link KindInterest}: a listener that is also asked,
 * each time an object of the kind is decoded, which reads it wants kept of that object. So what
 * the cache holds is what its users read, whatever else the cluster keeps in that kind. When a
 * user starts reading an object whose data was not kept, it asks for a {@link KindHandle.refresh}
 * (a targeted read of that object, or of a selector's objects); when it stops, a
 * {@link KindHandle.prune} drops the reads nobody wants any more.
 *
 * Labels are kept the same way: a user names the label keys its selectors read
 * ({@link KindHandle.addLabelKeys}), and the kind's projections keep those keys only (see
 * label-keys.ts). A key named for the first time makes the cache read the kind's objects again
 * (one list, paged), since those decoded before kept no such label; until then a projection's
 * {@link ProjectedMeta.labelKeys} says what it lacks, so no selector decides on a label that was
 * not kept. A key nobody names any more is dropped from the projections in place.
 *
 * The keys of a kind are bounded in total ({@link InformerSourceCacheOptions.maxLabelKeys}): a
 * user whose new keys do not fit is refused ({@link KindHandle.addLabelKeys} says so), and keeps
 * nothing; the users that came before it are unaffected. So many authors together cannot make
 * every object of a kind keep thousands of labels.
 */
import type { KubeClient, KubeObject } from "../kube/client.ts";
import type { ResourceInfo } from "../kube/discovery.ts";
import { nameFieldSelector } from "../kube/field-selector.ts";
import { resourcePath } from "../kube/resource-path.ts";
import type { Logger } from "../api/log.ts";
import type { InformerListener, InformerOptions, InformerState, RefreshTarget } from "./informer.ts";
import type { Informer } from "./informer.ts";
import {
  LabelKeys,
  MAX_LABEL_BYTES_PER_OBJECT,
  MAX_LABEL_KEYS_PER_KIND,
  NO_LABEL_KEYS,
} from "./label-keys.ts";
import { informerKey, InformerPool, type InformerLease } from "./pool.ts";
import {
  narrowLabels,
  projectFor,
  pruneReads,
  StringPool,
  type Extractor,
  type ProjectedMeta,
  type Projection,
} from "./projection.ts";

export type { RefreshTarget } from "./informer.ts";

/** A user of a kind: told of its changes, and asked what to keep of each object. */
export interface KindInterest extends InformerListener<Projection> {
  /** The reads wanted of the object with this identity; asked each time one is decoded. */
  extractorsFor(meta: ProjectedMeta): Iterable<Extractor>;
  /**
   * Whether some read of this user may see an object's labels or managedFields whole (a path
   * naming them, or reading metadata or everything); then the kind's objects keep them until
   * decoded. @default true
   */
  readsLabels?(): boolean;
}

/** What a source view offers to read: the cache's state and its projections. */
export interface SourceView {
  readonly state: InformerState;
  get(namespace: string | undefined, name: string): Projection | undefined;
  list(namespace?: string): Iterable<Projection>;
}

/** A claim on one kind (in one namespace, or all) of a {@link SourceCache}. */
export interface KindHandle extends SourceView {
  /** The claimed resource. */
  readonly resource: ResourceInfo;
  /** Reads `target` again, so objects decoded before this user wanted them get its reads. */
  refresh(target: RefreshTarget): void;
  /** Drops, from the objects `target` names, the reads no user of the kind wants now. */
  prune(target: RefreshTarget): void;
  /**
   * Keeps, from now on, the labels with these keys (a selector that reads them joined); counted,
   * so each call that returns true needs one {@link removeLabelKeys} with the same keys. False
   * when the keys new to the kind do not fit its total of label keys: then nothing is counted.
   */
  addLabelKeys(keys: readonly string[]): boolean;
  /** Undoes one {@link addLabelKeys}. */
  removeLabelKeys(keys: readonly string[]): void;
  /** Ends the claim (the interest stops being asked); idempotent. */
  release(): void;
}

/** The narrow interface the resolver needs of a source cache. */
export interface SourceCache {
  /** Claims the cache of `resource` (in `namespace`, or all) for `interest`. */
  acquire(resource: ResourceInfo, namespace: string | undefined, interest: KindInterest): KindHandle;
  /**
   * Reads the objects `target` names from the API server now, past the cache: a list without a
   * resourceVersion, which the server answers from a quorum read of etcd (or from its watch cache
   * once that has caught up with etcd), so the answer is at least as new as the call. Every
   * object is projected with `extractors`, keeping the labels `labelKeys` names. What is cached
   * is left alone. Throws the API error (403, 404, ...) as it came.
   */
  readFresh(
    resource: ResourceInfo,
    target: RefreshTarget,
    extractors: readonly Extractor[],
    labelKeys?: readonly string[],
  ): Promise<Projection[]>;
  /** How many kinds are cached now (lingering ones included). */
  readonly size: number;
  /** Keys of the cached kinds, e.g. `/v1/configmaps@*`. */
  keys(): string[];
  /** The most label keys one cached kind keeps now (a figure for metrics). */
  labelKeysKept?(): number;
  /** Stops every informer. */
  stop(): Promise<void>;
}

/** Options for {@link InformerSourceCache}. */
export interface InformerSourceCacheOptions {
  client: Pick<KubeClient, "request" | "watch">;
  logger?: Logger;
  /** How long a kind nobody claims is kept before its informer is stopped. @default 10000 */
  lingerMs?: number;
  /**
   * The largest read kept, as JSON bytes; a larger one keeps only its size (and resolves to
   * `ValueTooLarge`). @default 32768
   */
  maxReadBytes?: number;
  /**
   * The most label keys the objects of one kind (and scope) keep, over all its users; a user whose
   * new keys do not fit is refused. @default 256
   */
  maxLabelKeys?: number;
  /** The most bytes of labels one object keeps (see label-keys.ts). @default 4096 */
  maxLabelBytes?: number;
  /** Passed to every informer. */
  informer?: Pick<
    InformerOptions,
    | "watchdogMs"
    | "minBackoffMs"
    | "maxBackoffMs"
    | "pageSize"
    | "pageBytes"
    | "onSignal"
    | "watchTimeoutSeconds"
  >;
  /**
   * Whether a resource that answered 404 is really gone (e.g. asked of discovery): one 404 is
   * not enough, since custom resources answer 404 for a moment after an API server restart.
   * @default every 404 means gone
   */
  confirmGone?: (resource: ResourceInfo) => Promise<boolean>;
}

/** Same resourceVersion, the same label keys and the same reads kept: nothing new to tell. */
function sameProjection(a: Projection, b: Projection): boolean {
  if (a.metadata.resourceVersion !== b.metadata.resourceVersion) return false;
  if (!a.metadata.labelKeys.sameAs(b.metadata.labelKeys)) return false;
  const x = a.reads;
  const y = b.reads;
  if (!x || !y) return x === y;
  if (x.size !== y.size) return false;
  for (const key of x.keys()) if (!y.has(key)) return false;
  return true;
}

/** Objects per page of a fresh read: a selector over many objects is read in bounded pages. */
const FRESH_PAGE = 500;

/** The label keys kept for one informer: how many users name each, and the set made of them. */
class KindLabels {
  readonly counts = new Map<string, number>();
  current: LabelKeys = NO_LABEL_KEYS;
  /** `counts` changed since `current` was made. */
  dirty = false;
  /** A pass that narrows the cached projections to `current` is scheduled. */
  narrowing = false;
  informer: Informer<Projection> | undefined;
}

/** The {@link SourceCache} of this project: shared, supervised informers keeping projections. */
export class InformerSourceCache implements SourceCache {
  private readonly client: Pick<KubeClient, "request">;
  private readonly pool: InformerPool<Projection>;
  private readonly interests = new Map<string, Set<KindInterest>>();
  private readonly labels = new Map<string, KindLabels>();
  private readonly maxReadBytes: number;
  private readonly maxLabelKeys: number;
  private readonly maxLabelBytes: number;
  private readonly strings = new StringPool();

  constructor(options: InformerSourceCacheOptions) {
    this.maxReadBytes = options.maxReadBytes ?? 32 * 1024;
    this.maxLabelKeys = options.maxLabelKeys ?? MAX_LABEL_KEYS_PER_KIND;
    this.maxLabelBytes = options.maxLabelBytes ?? MAX_LABEL_BYTES_PER_OBJECT;
    this.client = options.client;
    const poolOptions: ConstructorParameters<typeof InformerPool<Projection>>[0] = {
      client: options.client,
      perInformer: (key, resource) => {
        const o: Pick<InformerOptions<Projection>, "decode" | "same" | "confirmGone" | "itemFilter"> = {
          decode: (obj) =>
            projectFor(obj, (meta) => this.extractorsFor(key, meta), this.maxReadBytes, {
              pool: this.strings,
              labelKeys: this.labelKeysOf(key),
              maxLabelBytes: this.maxLabelBytes,
            }),
          same: sameProjection,
          // The labels decode keeps, asked as the same object is scanned (decode follows in the
          // same turn), so a label no selector names never becomes a string; unless a read may
          // see them, when the object stays whole until decoded, as it always was.
          itemFilter: {
            keepLabels: () => (this.readsLabels(key) ? undefined : this.labelKeysOf(key)),
            dropManagedFields: () => !this.readsLabels(key),
          },
        };
        const confirm = options.confirmGone;
        if (confirm) o.confirmGone = () => confirm(resource);
        return o;
      },
    };
    if (options.logger) poolOptions.logger = options.logger;
    if (options.lingerMs !== undefined) poolOptions.lingerMs = options.lingerMs;
    if (options.informer) poolOptions.informer = options.informer;
    this.pool = new InformerPool<Projection>(poolOptions);
  }

  get size(): number {
    return this.pool.size;
  }

  keys(): string[] {
    return this.pool.keys();
  }

  labelKeysKept(): number {
    let most = 0;
    for (const labels of this.labels.values()) most = Math.max(most, labels.counts.size);
    return most;
  }

  async stop(): Promise<void> {
    await this.pool.stop();
  }

  acquire(resource: ResourceInfo, namespace: string | undefined, interest: KindInterest): KindHandle {
    const key = informerKey(resource, namespace);
    let set = this.interests.get(key);
    if (!set) this.interests.set(key, (set = new Set()));
    set.add(interest);
    const lease: InformerLease<Projection> = this.pool.acquire(resource, namespace);
    const informer = lease.informer;
    informer.addListener(interest);
    let kindLabels = this.labels.get(key);
    if (!kindLabels) this.labels.set(key, (kindLabels = new KindLabels()));
    kindLabels.informer = informer;
    const labels = kindLabels;
    /** This claim's label keys, given back on release. */
    const mine = new Map<string, number>();
    let released = false;
    const wanted = (meta: ProjectedMeta): Set<string> =>
      new Set(Array.from(this.extractorsFor(key, meta), (x) => x.key));
    return {
      resource,
      get state() {
        return informer.state;
      },
      get: (ns, name) => informer.get(ns, name),
      list: (ns) => informer.list(ns),
      refresh: (target) => {
        if (released) return;
        // Objects decoded before a selector's keys were kept lack them whether it matches or not,
        // and the server answers a selector with the objects that match only: read them all.
        if ("labelSelector" in target && this.lacksLabelKeys(key, informer, target.namespace))
          informer.refresh({ namespace: target.namespace, labelSelector: "" });
        else informer.refresh(target);
      },
      addLabelKeys: (keys) => {
        if (released) return false;
        let fresh = 0;
        for (const k of new Set(keys)) if (!labels.counts.has(k)) fresh++;
        if (fresh > 0 && labels.counts.size + fresh > this.maxLabelKeys) return false;
        for (const k of keys) {
          mine.set(k, (mine.get(k) ?? 0) + 1);
          this.countLabelKey(key, labels, k, 1);
        }
        return true;
      },
      removeLabelKeys: (keys) => {
        if (released) return;
        for (const k of keys) {
          const n = mine.get(k);
          if (!n) continue;
          if (n === 1) mine.delete(k);
          else mine.set(k, n - 1);
          this.countLabelKey(key, labels, k, -1);
        }
      },
      prune: (target) => {
        const objects =
          "name" in target
            ? [informer.get(target.namespace, target.name)]
            : informer.list(informer.resource.namespaced ? target.namespace : undefined);
        for (const p of objects) {
          if (!p?.reads) continue;
          const keep = wanted(p.metadata);
          pruneReads(p, (k) => keep.has(k));
        }
      },
      release: () => {
        if (released) return;
        released = true;
        informer.removeListener(interest);
        for (const [k, n] of mine) this.countLabelKey(key, labels, k, -n);
        mine.clear();
        const current = this.interests.get(key);
        current?.delete(interest);
        if (current?.size === 0) {
          this.interests.delete(key);
          this.labels.delete(key);
        }
        lease.release();
      },
    };
  }

  async readFresh(
    resource: ResourceInfo,
    target: RefreshTarget,
    extractors: readonly Extractor[],
    labelKeys: readonly string[] = [],
  ): Promise<Projection[]> {
    const keys = labelKeys.length ? new LabelKeys(labelKeys) : NO_LABEL_KEYS;
    const path = resourcePath(resource, { namespace: resource.namespaced ? target.namespace : undefined });
    const query =
      "name" in target
        ? { fieldSelector: nameFieldSelector(target.name) }
        : { labelSelector: target.labelSelector || undefined };
    const out: Projection[] = [];
    const blind = extractors.every((x) => x.blindToLabels === true);
    let continueToken: string | undefined;
    do {
      // No resourceVersion: "most recent", never served from a stale cache. Later pages are
      // served at the first page's snapshot, so the pages together are one consistent list.
      const project = (item: KubeObject) =>
        out.push(
          projectFor(item, () => extractors, this.maxReadBytes, {
            labelKeys: keys,
            maxLabelBytes: this.maxLabelBytes,
          }),
        );
      const page = await this.client.request<{ metadata?: { continue?: string }; items?: KubeObject[] }>(
        "GET",
        path,
        {
          query: { ...query, limit: FRESH_PAGE, continue: continueToken },
          onItem: project,
          itemFilter: blind ? { keepLabels: () => keys, dropManagedFields: () => true } : undefined,
        },
      );
      for (const item of page.items ?? []) project(item);
      continueToken = page.metadata?.continue || undefined;
    } while (continueToken);
    return out;
  }

  /** Whether a user of `key` may read its objects' labels or managedFields whole. */
  private readsLabels(key: string): boolean {
    for (const interest of this.interests.get(key) ?? []) if (interest.readsLabels?.() ?? true) return true;
    return false;
  }

  private countLabelKey(key: string, labels: KindLabels, labelKey: string, delta: number): void {
    const n = (labels.counts.get(labelKey) ?? 0) + delta;
    if (n > 0) labels.counts.set(labelKey, n);
    else labels.counts.delete(labelKey);
    if (labels.dirty) return;
    labels.dirty = true;
    // Settled once per burst (a controller subscribes thousands at once): the next decode or
    // this microtask, whichever comes first, makes the set and reads again what it widened.
    queueMicrotask(() => {
      if (this.labels.get(key) === labels) this.labelKeysOf(key);
    });
  }

  /** The label keys decoded objects of `key` keep now; widening reads the objects again. */
  private labelKeysOf(key: string): LabelKeys {
    const labels = this.labels.get(key);
    if (!labels) return NO_LABEL_KEYS;
    if (!labels.dirty) return labels.current;
    labels.dirty = false;
    const was = labels.current;
    const now = new LabelKeys(labels.counts.keys());
    if (now.sameAs(was)) return was;
    labels.current = now.size === 0 ? NO_LABEL_KEYS : now;
    const informer = labels.informer;
    if (!informer) return labels.current;
    if (!was.includesAll(now.keys)) {
      // Wider: what is cached was decoded without the new keys. One read of the whole scope
      // (requests made meanwhile join it); selectors needing the keys wait for it (NOT_KEPT).
      if (informer.size > 0) informer.refresh({ namespace: informer.namespace, labelSelector: "" });
    } else if (!labels.narrowing) {
      labels.narrowing = true;
      setImmediate(() => {
        labels.narrowing = false;
        const keys = this.labelKeysOf(key);
        for (const p of informer.list()) {
          // A projection still lacking some kept key waits for its read; the rest drop labels.
          if (p.metadata.labelKeys.includesAll(keys.keys))
            narrowLabels(p, keys, this.strings, this.maxLabelBytes);
        }
      }).unref?.();
    }
    return labels.current;
  }

  /** Whether some cached object of `namespace` (all, when undefined) lacks a kept label key. */
  private lacksLabelKeys(
    key: string,
    informer: Informer<Projection>,
    namespace: string | undefined,
  ): boolean {
    const keys = this.labelKeysOf(key);
    let seen: LabelKeys | undefined;
    for (const p of informer.list(namespace)) {
      const kept = p.metadata.labelKeys;
      if (kept === keys || kept === seen) continue;
      if (!kept.includesAll(keys.keys)) return true;
      seen = kept;
    }
    return false;
  }

  private *extractorsFor(key: string, meta: ProjectedMeta): Iterable<Extractor> {
    for (const interest of this.interests.get(key) ?? []) yield* interest.extractorsFor(meta);
  }
}
