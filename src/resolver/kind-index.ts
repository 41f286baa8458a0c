/**
 * The subscriptions of one source kind (and scope), indexed so that an object's event reaches
 * only the subscriptions it concerns, and so that the source cache can ask, for each object it
 * decodes, which reads those subscriptions want kept of it.
 */
import type { InformerEvent, InformerState } from "../informers/informer.ts";
import type { Extractor, ProjectedMeta, Projection } from "../informers/projection.ts";
import type { KindHandle, KindInterest, RefreshTarget, SourceCache } from "../informers/source-cache.ts";
import type { ResourceInfo } from "../kube/discovery.ts";
import type { CompiledRequest } from "./request.ts";

/** What the index reads of a subscription: its compiled request. */
export interface IndexedSub {
  readonly request: CompiledRequest;
}

/**
 * See the module comment. Holds its claim on the cache while it has subscriptions. Generic in the
 * subscription it holds, so that it reads only the request of one (and hands the resolver back its
 * own kind of subscription to schedule) without importing the subscription's class.
 */
export class KindIndex<Sub extends IndexedSub> implements KindInterest {
  /**
   * Name subscriptions by namespace ("" for a cluster-scoped kind), then by object name: the one
   * subscription of an object most objects have, or a Set of them when several read it (a Set
   * each would cost the 100,000 Referables of a large cluster a Set each). By namespace first so
   * the keys are the request's own strings: a "namespace/name" key cost each subscription a
   * string of its own, and each event one more to look it up.
   */
  private readonly byName = new Map<string, Map<string, Sub | Set<Sub>>>();
  /** Selector subscriptions by namespace ("" for all namespaces or a cluster-scoped kind). */
  readonly selectors = new Map<string, Set<Sub>>();
  readonly all = new Set<Sub>();
  /**
   * Selector subscriptions whose new label keys did not fit the kind's total (in the order they
   * came): they keep nothing and resolve to `TooManyLabelKeys`, and are let in, first come first,
   * when a selector that held keys goes.
   */
  private readonly refused = new Set<Sub>();
  readonly handle: KindHandle;
  private readonly namespaced: boolean;
  private readonly schedule: (sub: Sub) => void;
  /** Subscriptions with a read that may see labels or managedFields (asked for every object listed). */
  private seeingLabels = 0;

  constructor(
    cache: SourceCache,
    resource: ResourceInfo,
    namespace: string | undefined,
    schedule: (sub: Sub) => void,
  ) {
    this.namespaced = resource.namespaced;
    this.schedule = schedule;
    this.handle = cache.acquire(resource, namespace, this);
  }

  /** Adds `sub`: from now on the objects it reads keep what it reads. */
  add(sub: Sub): void {
    if (!this.all.has(sub) && seesLabels(sub)) this.seeingLabels++;
    this.all.add(sub);
    const req = sub.request;
    if (req.target === "name") this.addName(this.scopeOf(sub), req.name!, sub);
    else {
      // Before anything is decoded for it: the labels it selects on are kept from now on.
      if (this.handle.addLabelKeys(req.selector!.keys)) addTo(this.selectors, this.scopeOf(sub), sub);
      else this.refused.add(sub);
    }
  }

  /** Whether `sub`'s label keys did not fit the kind's total: it resolves to `TooManyLabelKeys`. */
  isRefused(sub: Sub): boolean {
    return this.refused.has(sub);
  }

  /** Removes `sub` and drops the reads nobody else wants from the objects it read. */
  remove(sub: Sub): void {
    if (!this.all.delete(sub)) return;
    if (seesLabels(sub)) this.seeingLabels--;
    const req = sub.request;
    if (req.target === "name") this.removeName(this.scopeOf(sub), req.name!, sub);
    else if (!this.refused.delete(sub)) {
      removeFrom(this.selectors, this.scopeOf(sub), sub);
      this.handle.removeLabelKeys(req.selector!.keys);
      this.admitRefused();
    }
    if (this.all.size > 0) this.handle.prune(this.targetOf(sub));
  }

  /** Lets in the refused selectors whose keys fit now, in the order they came. */
  private admitRefused(): void {
    for (const sub of this.refused) {
      if (!this.handle.addLabelKeys(sub.request.selector!.keys)) continue;
      this.refused.delete(sub);
      addTo(this.selectors, this.scopeOf(sub), sub);
      this.schedule(sub);
    }
  }

  /** Asks the cache to read again what `sub` reads (its data was not kept). */
  refresh(sub: Sub): void {
    this.handle.refresh(this.targetOf(sub));
  }

  /** Ends the claim on the cache. */
  close(): void {
    this.handle.release();
  }

  readsLabels(): boolean {
    return this.seeingLabels > 0;
  }

  *extractorsFor(meta: ProjectedMeta): Iterable<Extractor> {
    for (const sub of this.namedFor(meta)) yield* sub.request.extractors;
    for (const sub of this.selectorsFor(meta.namespace)) {
      if (sub.request.selector!.matches(meta.labels)) yield* sub.request.extractors;
    }
  }

  onEvent(event: InformerEvent<Projection>): void {
    const meta = event.object.metadata;
    for (const sub of this.namedFor(meta)) this.schedule(sub);
    const old = event.old?.metadata;
    // The object was decoded before with other label keys kept: a selector whose keys it lacked
    // could not tell whether it selects it, and computed nothing (NOT_KEPT) until it is read
    // again. That read is this event, whether the object matches or not: a selector that it
    // does not match must hear of it too, or it waits for an event that never comes.
    const unjudged = old !== undefined && old.labelKeys !== meta.labelKeys ? old.labelKeys : undefined;
    for (const sub of this.selectorsFor(meta.namespace)) {
      const selector = sub.request.selector!;
      if (
        selector.matches(meta.labels) ||
        (old !== undefined && selector.matches(old.labels)) ||
        (unjudged !== undefined && !unjudged.includesAll(selector.keys))
      )
        this.schedule(sub);
    }
  }

  onState(_state: InformerState): void {
    for (const sub of this.all) this.schedule(sub);
  }

  /** The name subscriptions of the object `meta` names. */
  private namedFor(meta: { namespace?: string | undefined; name: string }): Iterable<Sub> {
    const entry = this.byName.get(this.namespaced ? (meta.namespace ?? "") : "")?.get(meta.name);
    return entry === undefined ? [] : entry instanceof Set ? entry : [entry];
  }

  private addName(namespace: string, name: string, sub: Sub): void {
    let names = this.byName.get(namespace);
    if (!names) this.byName.set(namespace, (names = new Map()));
    const entry = names.get(name);
    if (entry === undefined) names.set(name, sub);
    else if (entry instanceof Set) entry.add(sub);
    else if (entry !== sub) names.set(name, new Set([entry, sub]));
  }

  private removeName(namespace: string, name: string, sub: Sub): void {
    const names = this.byName.get(namespace);
    const entry = names?.get(name);
    if (entry === sub) names!.delete(name);
    else if (entry instanceof Set) {
      entry.delete(sub);
      if (entry.size === 1) names!.set(name, entry.values().next().value!);
    }
    if (names?.size === 0) this.byName.delete(namespace);
  }

  private *selectorsFor(namespace: string | undefined): Iterable<Sub> {
    yield* this.selectors.get(namespace ?? "") ?? [];
    if (namespace) yield* this.selectors.get("") ?? [];
  }

  private scopeOf(sub: Sub): string {
    return this.namespaced ? (sub.request.namespace ?? "") : "";
  }

  private targetOf(sub: Sub): RefreshTarget {
    const req = sub.request;
    const namespace = this.namespaced ? req.namespace : undefined;
    return req.target === "name"
      ? { namespace, name: req.name! }
      : { namespace, labelSelector: req.selector!.key };
  }
}

function addTo<K, Sub>(map: Map<K, Set<Sub>>, key: K, sub: Sub): void {
  let set = map.get(key);
  if (!set) map.set(key, (set = new Set()));
  set.add(sub);
}

function removeFrom<K, Sub>(map: Map<K, Set<Sub>>, key: K, sub: Sub): void {
  const set = map.get(key);
  set?.delete(sub);
  if (set?.size === 0) map.delete(key);
}

/** Whether a read of `sub` may see labels or managedFields (see projection.ts). */
function seesLabels(sub: IndexedSub): boolean {
  return sub.request.extractors.some((x) => x.blindToLabels !== true);
}
