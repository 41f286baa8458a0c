/**
 * Kubernetes Events for Ready transitions of Referables: `Normal` when a Referable becomes
 * Available, `Warning` with the reason otherwise. Rate-limited per object and overall, so a
 * flapping source cannot flood the API server; best effort (a failed Event never fails a
 * reconcile). Messages are condition messages, which never hold a value, with control and bidi
 * characters escaped.
 */
import { asError } from "../api/errors.ts";
import type { KubeClient } from "../kube/client.ts";
import { EVENTS, resourcePath } from "../kube/resource-path.ts";
import { silentLogger, type Logger } from "../api/log.ts";
import { TokenBucket } from "../timing/token-bucket.ts";
import { REFERABLE_API_VERSION, type Referable } from "../api/referable.ts";
import { escapeUnsafeText } from "./safe-text.ts";

/** Options for {@link EventRecorder}. */
export interface EventRecorderOptions {
  client: Pick<KubeClient, "request">;
  /** Who reports: the controller's name and this replica's identity. */
  component?: string;
  instance?: string;
  /** Namespace Events of cluster-scoped objects go to, as client-go does. @default "default" */
  namespace?: string;
  /** Events one object may emit per `perObjectWindowMs`. @default 5 */
  perObjectBurst?: number;
  /** @default 60000 */
  perObjectWindowMs?: number;
  /** Events per second over all objects (token bucket, burst = 5 × rate). @default 10 */
  qps?: number;
  /**
   * The part of `qps` this replica spends, from 0 to 1, asked at each Event: sharded, the buckets
   * it serves over all buckets, so that the replicas of a set together emit no more Events than
   * one leader (four shards emitted four times the budget: at 100,000 Referables about 10,000
   * Event creates beside the 100,000 status writes of a cold start). An Event then takes 1/share
   * tokens (at most the burst). @default () => 1
   */
  share?: () => number;
  logger?: Logger;
  onEmit?: (type: "Normal" | "Warning" | "Dropped") => void;
}

/** Emits rate-limited Events; see the module comment. */
export class EventRecorder {
  private readonly options: EventRecorderOptions;
  private readonly logger: Logger;
  private readonly perObject = new Map<string, number[]>();
  /** The overall budget of Events. */
  private readonly bucket: TokenBucket;
  private readonly burst: number;

  constructor(options: EventRecorderOptions) {
    this.options = options;
    this.logger = options.logger ?? silentLogger;
    const qps = options.qps ?? 10;
    this.burst = qps * 5;
    this.bucket = new TokenBucket(qps, this.burst, performance.now());
  }

  /** Tokens an Event takes: 1 over this replica's share of the budget, at most the burst. */
  private cost(): number {
    const share = this.options.share?.() ?? 1;
    return share >= 1 ? 1 : Math.min(this.burst, share > 0 ? 1 / share : Infinity);
  }

  /** Records a Ready transition of `obj` to `reason`; never throws. */
  transition(obj: Referable, reason: string, message: string): void {
    const type = reason === "Available" ? "Normal" : "Warning";
    if (!this.allow(obj.metadata.uid ?? obj.metadata.name)) {
      this.options.onEmit?.("Dropped");
      return;
    }
    this.options.onEmit?.(type);
    const now = new Date().toISOString();
    const namespace = this.options.namespace ?? "default";
    const component = this.options.component ?? "referable-controller";
    const body = {
      apiVersion: "v1",
      kind: "Event",
      metadata: { generateName: `${obj.metadata.name}.`, namespace },
      involvedObject: {
        apiVersion: REFERABLE_API_VERSION,
        kind: "Referable",
        name: obj.metadata.name,
        uid: obj.metadata.uid,
        resourceVersion: obj.metadata.resourceVersion,
      },
      reason,
      // Escaped here too, whoever the caller: an Event is read in terminals as much as a condition.
      message: escapeUnsafeText(message || (type === "Normal" ? "the value is available" : reason)),
      type,
      source: { component },
      reportingComponent: component,
      reportingInstance: this.options.instance ?? component,
      firstTimestamp: now,
      lastTimestamp: now,
      count: 1,
    };
    this.options.client
      .request("POST", resourcePath(EVENTS, { namespace }), { body })
      .catch((err: unknown) => {
        this.logger.warn(
          { referable: obj.metadata.name, reason, err: asError(err).message },
          "could not record an Event",
        );
      });
  }

  private allow(key: string): boolean {
    const now = Date.now();
    const windowMs = this.options.perObjectWindowMs ?? 60_000;
    const recent = (this.perObject.get(key) ?? []).filter((t) => now - t < windowMs);
    if (
      recent.length >= (this.options.perObjectBurst ?? 5) ||
      this.bucket.tryTake(performance.now(), this.cost()) > 0
    ) {
      // An object with nothing recent is not remembered: a cold start of 100,000 Referables,
      // nearly all over the overall budget, would otherwise keep an empty list for each.
      if (recent.length > 0) this.perObject.set(key, recent);
      else this.perObject.delete(key);
      return false;
    }
    recent.push(now);
    this.perObject.set(key, recent);
    if (this.perObject.size > 10_000) this.prune(now, windowMs);
    return true;
  }

  private prune(now: number, windowMs: number): void {
    for (const [key, times] of this.perObject)
      if (times.every((t) => now - t >= windowMs)) this.perObject.delete(key);
  }

  /** Forgets an object (it was deleted). */
  forget(uidOrName: string): void {
    this.perObject.delete(uidOrName);
  }
}
