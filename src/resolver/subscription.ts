/**
 * One subscription: a compiled request, its callback, where it is attached, and what it last
 * pushed. The resolver owns the life cycle; this file only holds the state.
 */
import type { ResourceInfo } from "../kube/discovery.ts";
import type { KindIndex } from "./kind-index.ts";
import type { CompiledRequest } from "./request.ts";
import type { ResolutionResult } from "./types.ts";

/** A push subscription; close it when done. */
export interface Subscription {
  /** The latest result pushed, if any yet. */
  readonly current: ResolutionResult | undefined;
  /** Stops pushes and releases the informer claim; idempotent. */
  close(): void;
}

/** The callback of a watch: runs on every change of the value or of its error. */
export type WatchCallback = (result: ResolutionResult) => void;

/** One subscription's state. */
export class Sub implements Subscription {
  /** The source resource, once discovery found it. */
  resource: ResourceInfo | undefined;
  /** The kind index it is attached to, while attached. */
  index: KindIndex | undefined;
  current: ResolutionResult | undefined;
  /** A digest of what makes two pushed results differ (see the resolver's fingerprint). */
  fingerprint: string | undefined;
  closed = false;
  /** Counted among the subscriptions that keep CRDs watched (its kind may be a CRD's). */
  followsCrd = false;
  /** An attach (discovery lookup) is under way. */
  attaching = false;
  retryTimer: NodeJS.Timeout | undefined;
  /** Counts results computed, so a transform that ends after a newer result is dropped. */
  generation = 0;
  /** A transform of its result is being evaluated. */
  transforming = false;
  /** The result changed while a transform was evaluated: compute again when it ends. */
  retransform = false;
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
