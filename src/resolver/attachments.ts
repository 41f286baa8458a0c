/**
 * How a subscription joins its source kind: discovery finds the kind, or the subscription waits
 * for it (kind-waiter.ts); a kind the source policy refuses is an error pushed, never watched;
 * otherwise the subscription joins the index of its kind and scope (kind-index.ts, one per
 * informer), which is closed with its last subscription.
 */
import type { SourceCache } from "../informers/source-cache.ts";
import { informerKey } from "../informers/pool.ts";
import type { KindResolver, ResourceInfo } from "../kube/discovery.ts";
import { KindIndex } from "./kind-index.ts";
import type { KindWaiter } from "./kind-waiter.ts";
import type { ResolverWiring } from "./options.ts";
import { checkResource, toResolutionError } from "./results.ts";
import type { Sub } from "./subscription.ts";
import type { ResolutionResult } from "./types.ts";

/** What {@link Attachments} works with. */
export interface AttachmentsOptions {
  discovery: KindResolver;
  cache: SourceCache;
  waiter: () => KindWaiter;
  options: Pick<ResolverWiring, "sourcePolicy" | "informerScope">;
  /** Computes a subscription again soon (an event of its kind). */
  schedule: (sub: Sub) => void;
  /** Computes a subscription now (it just joined its kind). */
  recompute: (sub: Sub) => void;
  /** Pushes a result (an error finding or admitting the kind). */
  deliver: (sub: Sub, result: ResolutionResult) => void;
}

/** The kind indexes of a resolver, and the subscriptions' way into them; see the module comment. */
export class Attachments {
  private readonly options: AttachmentsOptions;
  private readonly indexes = new Map<string, KindIndex<Sub>>();

  constructor(options: AttachmentsOptions) {
    this.options = options;
  }

  /** The index of `resource` in the informer scope of `namespace`, if open. */
  indexOf(resource: ResourceInfo, namespace: string | undefined): KindIndex<Sub> | undefined {
    const scopeNs = this.options.options.informerScope === "Namespace" ? namespace : undefined;
    return this.indexes.get(informerKey(resource, scopeNs));
  }

  /** Finds `sub`'s kind and joins it; a kind not found is waited for when that can help. */
  async attach(sub: Sub): Promise<void> {
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
      resource = await this.options.discovery.lookup(req.apiVersion, req.kind);
    } catch (err) {
      if (sub.closed) return;
      const error = toResolutionError(err);
      this.options.deliver(sub, { ok: false, error });
      if (error.retryable) this.options.waiter().wait(sub);
      return;
    }
    if (sub.closed) return;
    this.attachResource(sub, resource);
  }

  /** Joins `sub` to the index of `resource` and computes its first result. */
  attachResource(sub: Sub, resource: ResourceInfo): void {
    const req = sub.request;
    const waiter = this.options.waiter();
    waiter.done(sub);
    const problem = checkResource(req, resource, this.options.options.sourcePolicy);
    if (problem) {
      this.options.deliver(sub, { ok: false, error: problem });
      return;
    }
    sub.resource = resource;
    const scopeNs =
      this.options.options.informerScope === "Namespace" && resource.namespaced ? req.namespace : undefined;
    const key = informerKey(resource, scopeNs);
    let index = this.indexes.get(key);
    if (!index) {
      index = new KindIndex<Sub>(this.options.cache, resource, scopeNs, this.options.schedule);
      this.indexes.set(key, index);
    }
    sub.index = index;
    // Interest first: every object decoded from now on keeps what `sub` reads.
    index.add(sub);
    // Only a group with a dot can be a CRD's (the API server requires one): built-in kinds
    // (ConfigMaps, Deployments, ...) need no CRD watch.
    if (resource.group.includes(".")) {
      sub.followsCrd = true;
      waiter.follow(1);
    }
    this.options.recompute(sub);
  }

  /** Takes `sub` off its kind index (closing the index with its last subscription). */
  detach(sub: Sub): void {
    const index = sub.index;
    if (!index) return;
    sub.index = undefined;
    sub.resource = undefined;
    if (sub.followsCrd) {
      sub.followsCrd = false;
      this.options.waiter().follow(-1);
    }
    index.remove(sub);
    if (index.all.size === 0) {
      index.close();
      for (const [key, i] of this.indexes) if (i === index) this.indexes.delete(key);
    }
  }
}
