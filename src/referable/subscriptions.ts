/**
 * A Referable's resolver subscription, made when the controller first sees it and made again
 * when its spec (or uid) changes: the state's owner calls {@link track}, the reconciler reads
 * `subscription.current`.
 */
import type { Referable, ServiceAccountRef } from "../api/referable.ts";
import { actingAccount } from "../api/service-account.ts";
import { stableStringify } from "../api/stable-json.ts";
import { asError, isResolutionError, ResolutionError } from "../api/errors.ts";
import type { Resolver } from "../resolver/resolver.ts";
import { refuseSelfRead, requestFor } from "./spec.ts";
import { newState, type ReferableState, type ReferableStates } from "./state.ts";

/** Makes and remakes subscriptions; see the module comment. */
export class Subscriptions {
  private readonly states: ReferableStates;
  private readonly resolver: Pick<Resolver, "watch">;
  private readonly enqueue: (name: string) => void;
  private readonly defaultAccount: ServiceAccountRef | undefined;

  /**
   * `enqueue` is told the name of a Referable whose result moved on; a Referable that names no
   * ServiceAccount reads as `defaultAccount` (--default-service-account), if given.
   */
  constructor(
    states: ReferableStates,
    resolver: Pick<Resolver, "watch">,
    enqueue: (name: string) => void,
    defaultAccount?: ServiceAccountRef,
  ) {
    this.states = states;
    this.resolver = resolver;
    this.enqueue = enqueue;
    this.defaultAccount = defaultAccount;
  }

  /** The state of `obj`, its subscription made or remade when its spec (or uid) changed. */
  track(obj: Referable): ReferableState {
    const name = obj.metadata.name;
    // The API server moves metadata.generation on every spec change (the status subresource
    // keeps status writes out of it): a key that costs nothing to build or to keep, where the
    // spec's JSON would cost both, 10,000 times over.
    const specKey =
      obj.metadata.generation !== undefined
        ? String(obj.metadata.generation)
        : stableStringify(obj.spec ?? null);
    const existing = this.states.get(name);
    if (existing && existing.specKey === specKey && existing.uid === obj.metadata.uid) return existing;
    existing?.subscription?.close();
    const state = newState(obj, specKey, existing);
    this.states.set(name, state);
    try {
      const request = requestFor(obj.spec);
      refuseSelfRead(obj);
      const account = actingAccount(obj.spec, this.defaultAccount);
      if (typeof account === "string") throw new ResolutionError("InvalidSpec", account);
      state.subscription = this.subscribe(name, request, state, account);
    } catch (err) {
      state.fixed = {
        ok: false,
        error: isResolutionError(err) ? err : new ResolutionError("InvalidSpec", asError(err).message),
      };
    }
    return state;
  }

  private subscribe(
    name: string,
    request: ReturnType<typeof requestFor>,
    state: ReferableState,
    account: ServiceAccountRef | undefined,
  ): ReferableState["subscription"] {
    // A push made while watch() runs (a synced kind gives its first result at once) is read by
    // the reconcile running now. Queueing the name for it would run a second reconcile right
    // after this one, and, if this one's write failed, retry that write without its backoff.
    let subscribing = true;
    try {
      return this.resolver.watch(
        request,
        () => {
          state.pushedAt ??= performance.now();
          if (!subscribing) this.enqueue(name);
        },
        account ? { fieldPrefix: "spec.source", serviceAccount: account } : { fieldPrefix: "spec.source" },
      );
    } finally {
      subscribing = false;
    }
  }
}
