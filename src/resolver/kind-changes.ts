/**
 * How the resolver notices that a kind it reads changed under it: a 404 confirmed by discovery
 * asked afresh (custom resources answer 404 for a moment after an API server restart), and a
 * CRD changed, which makes the subscriptions of its kind look it up again.
 */
import { isResolutionError } from "../api/errors.ts";
import type { KindResolver, ResourceInfo } from "../kube/discovery.ts";
import type { KindWaiter } from "./kind-waiter.ts";
import type { Sub } from "./subscription.ts";

/** What {@link KindChanges} needs of the resolver. */
export interface KindChangesDeps {
  discovery: KindResolver;
  /** The kind waiter (made after this, hence a function). */
  waiter(): Pick<KindWaiter, "crdOf">;
  /** Every open subscription. */
  subs(): Iterable<Sub>;
  /** Detaches a subscription and attaches it afresh (its kind is served differently now). */
  reattach(sub: Sub): void;
}

/** See the module comment. */
export class KindChanges {
  private readonly deps: KindChangesDeps;
  private readonly crdChecks = new Map<string, NodeJS.Timeout[]>();
  private stopped = false;

  constructor(deps: KindChangesDeps) {
    this.deps = deps;
  }

  /** Cancels the checks still due. */
  stop(): void {
    this.stopped = true;
    for (const timers of this.crdChecks.values()) for (const t of timers) clearTimeout(t);
  }

  /**
   * Whether a resource that answered 404 is gone: discovery, asked afresh, no longer serves its
   * kind. One 404 is not enough: custom resources answer 404 for a moment after an API server
   * restart, until their CRD handlers sync.
   */
  async confirmGone(resource: ResourceInfo): Promise<boolean> {
    // An established CRD is the authority for a custom kind: discovery itself can lack the group
    // for a moment after a restart, as the resource does.
    if (this.deps.waiter().crdOf(resource.group, resource.kind) === "Established") return false;
    const apiVersion = resource.group ? `${resource.group}/${resource.version}` : resource.version;
    const now = await this.recheck(apiVersion, resource.kind);
    return now === "Absent" || (typeof now === "object" && now.resource !== resource.resource);
  }

  /** Discovery asked afresh; "Unknown" (withdraw nothing) when it could not tell. */
  async recheck(apiVersion: string, kind: string): Promise<ResourceInfo | "Absent" | "Unknown"> {
    if (this.deps.discovery.recheck) return this.deps.discovery.recheck(apiVersion, kind);
    this.deps.discovery.invalidate(apiVersion);
    try {
      return await this.deps.discovery.lookup(apiVersion, kind);
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
  onCrdChange(group: string, kind: string): void {
    const key = `${group}/${kind}`;
    if (this.crdChecks.has(key)) return;
    const check = async () => {
      // One lookup per apiVersion, however many subscriptions read the kind.
      const byApiVersion = new Map<string, Sub[]>();
      for (const sub of this.deps.subs()) {
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
        if (now === "Absent" && this.deps.waiter().crdOf(group, kind) === "Established") continue;
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
          this.deps.reattach(sub);
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

  /** Discovery, asked afresh when it says the kind is not served (its CRD may be minutes old). */
  async lookupFresh(apiVersion: string, kind: string): Promise<ResourceInfo> {
    try {
      return await this.deps.discovery.lookup(apiVersion, kind);
    } catch (err) {
      if (!isResolutionError(err) || err.reason !== "KindNotFound") throw err;
      const now = await this.recheck(apiVersion, kind);
      if (typeof now === "object") return now;
      throw err;
    }
  }
}
