/**
 * One subscription: a compiled request, its callback, where it is attached, and what it last
 * pushed (a push of what it pushed last is none). The resolver owns the life cycle.
 */
import type { ServiceAccountRef } from "../api/referable.ts";
import { asError, ResolutionError } from "../api/errors.ts";
import type { ResourceInfo } from "../kube/discovery.ts";
import type { AccessEntry, AccessHolder } from "./access-reviews.ts";
import type { Logger } from "../api/log.ts";
import type { KindIndex } from "./kind-index.ts";
import type { CompiledRequest } from "./request.ts";
import { fingerprint } from "./results.ts";
import { digest } from "../api/digest.ts";
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

const CLOSED = 1;
const FOLLOWS_CRD = 2;
const ATTACHING = 4;
const TRANSFORMING = 8;
const RETRANSFORM = 16;

/** One subscription's state. */
export class Sub implements Subscription, AccessHolder {
  /** The ServiceAccount whose access gates its results (see access-reviews.ts), if any. */
  identity: ServiceAccountRef | undefined;
  /** The access answers it holds now. */
  accessHeld: AccessEntry[] | undefined;
  /** The source resource, once discovery found it. */
  resource: ResourceInfo | undefined;
  /** The kind index it is attached to, while attached. */
  index: KindIndex<Sub> | undefined;
  current: ResolutionResult | undefined;
  /** A digest of what makes two pushed results differ (see the resolver's fingerprint). */
  fingerprint: string | undefined;
  retryTimer: NodeJS.Timeout | undefined;
  /** Counts results computed, so a transform that ends after a newer result is dropped. */
  generation = 0;
  retries = 0;
  /**
   * The flags below, as bits of one field: a resolver keeps a subscription for each Referable,
   * and five fields of their own cost each of them 40 bytes where this costs 8.
   */
  private flags = 0;

  get closed(): boolean {
    return this.has(CLOSED);
  }
  set closed(on: boolean) {
    this.mark(CLOSED, on);
  }
  /** Counted among the subscriptions that keep CRDs watched (its kind may be a CRD's). */
  get followsCrd(): boolean {
    return this.has(FOLLOWS_CRD);
  }
  set followsCrd(on: boolean) {
    this.mark(FOLLOWS_CRD, on);
  }
  /** An attach (discovery lookup) is under way. */
  get attaching(): boolean {
    return this.has(ATTACHING);
  }
  set attaching(on: boolean) {
    this.mark(ATTACHING, on);
  }
  /** A transform of its result is being evaluated. */
  get transforming(): boolean {
    return this.has(TRANSFORMING);
  }
  set transforming(on: boolean) {
    this.mark(TRANSFORMING, on);
  }
  /** The result changed while a transform was evaluated: compute again when it ends. */
  get retransform(): boolean {
    return this.has(RETRANSFORM);
  }
  set retransform(on: boolean) {
    this.mark(RETRANSFORM, on);
  }
  private has(bit: number): boolean {
    return (this.flags & bit) !== 0;
  }
  private mark(bit: number, on: boolean): void {
    this.flags = on ? this.flags | bit : this.flags & ~bit;
  }
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

  /** Pushes `result` to the callback unless it is what was pushed last; a callback that throws is logged. */
  push(result: ResolutionResult, logger: Logger): void {
    // A digest, not the fingerprint itself: the fingerprint holds the value (up to
    // --max-value-bytes), and every subscription keeps the last one it pushed. Its first 16
    // bytes as text of their own (22 characters, 40 bytes): a slice of the whole digest's text
    // would keep that text too (64 bytes more per subscription).
    const print = digest(fingerprint(result), 22);
    if (print === this.fingerprint) return;
    this.fingerprint = print;
    this.current = result;
    try {
      this.callback(result);
    } catch (err) {
      logger.error({ err: asError(err).message, source: this.request.describe }, "a watch callback threw");
    }
  }
}

/**
 * The first result a subscription made by `watch` pushes that is not Pending, or Pending after
 * `timeoutMs`; the subscription is closed when it is known.
 */
export async function firstResult(
  watch: (callback: WatchCallback) => Subscription,
  timeoutMs: number,
): Promise<ResolutionResult> {
  const isPending = (r: ResolutionResult) => !r.ok && r.error.reason === "Pending";
  let finish: (result: ResolutionResult) => void = () => undefined;
  const settled = new Promise<ResolutionResult>((resolve) => (finish = resolve));
  const sub = watch((result) => {
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
