/**
 * Waiting for kinds, and following them: a subscription whose kind the API server does not serve
 * (yet) is retried on a backoff; while any subscription exists, CustomResourceDefinitions are
 * watched, so a waiting one is retried as soon as its CRD is established, and an attached one is
 * checked again when its CRD changes (deleted, recreated with another scope, versions changed).
 */
import type { InformerEvent } from "../informers/informer.ts";
import {
  conditionsExtractor,
  pathExtractor,
  type Extractor,
  type Projection,
} from "../informers/projection.ts";
import type { KindHandle, SourceCache } from "../informers/source-cache.ts";
import type { ResourceInfo } from "../kube/discovery.ts";
import { compileFieldPath } from "../fieldpath/index.ts";
import { backoffDelay, jittered } from "../timing/backoff.ts";
import type { Sub } from "./subscription.ts";

const CRD_RESOURCE: ResourceInfo = {
  group: "apiextensions.k8s.io",
  version: "v1",
  resource: "customresourcedefinitions",
  kind: "CustomResourceDefinition",
  namespaced: false,
  verbs: ["list", "watch"],
};

/** What the CRD cache keeps of each CRD: its group, its kind, and whether it is established. */
const GROUP = pathExtractor(compileFieldPath("spec.group"));
const KIND = pathExtractor(compileFieldPath("spec.names.kind"));
const ESTABLISHED = conditionsExtractor([{ type: "Established", status: "True" }]);
const CRD_READS: readonly Extractor[] = [GROUP, KIND, ESTABLISHED];

/** Options for {@link KindWaiter}. */
export interface KindWaiterOptions {
  cache: SourceCache;
  /** Watch CRDs while some subscription waits. @default true */
  watchCustomResourceDefinitions?: boolean;
  /** First and longest retry. @default [1000, 60000] */
  retryMs?: [number, number];
  /** Tries `sub` again (its kind may be served now). */
  retry(sub: Sub): void;
  /** Forgets what discovery knew of `apiVersion`, before a retry prompted by its CRD. */
  invalidate(apiVersion: string): void;
  /** A CRD of `group` serving `kind` was added, changed or deleted. */
  onCrdChange?(group: string, kind: string): void;
}

/** See the module comment. */
export class KindWaiter {
  private readonly waiting = new Set<Sub>();
  /** Subscriptions attached to a kind, which follow its CRD. */
  private following = 0;
  /** Whether each CRD seen (by `group/kind`) is established. */
  private readonly established = new Map<string, boolean>();
  private crds: KindHandle | undefined;
  private stopped = false;
  private readonly options: KindWaiterOptions;

  constructor(options: KindWaiterOptions) {
    this.options = options;
  }

  /** Retries `sub` later, on its backoff, or as soon as a CRD of its kind is established. */
  wait(sub: Sub): void {
    const [first, max] = this.options.retryMs ?? [1000, 60_000];
    const delay = jittered(backoffDelay(sub.retries++, { baseMs: first, maxMs: max }));
    clearTimeout(sub.retryTimer);
    sub.retryTimer = setTimeout(() => {
      if (!sub.closed) this.options.retry(sub);
    }, delay);
    sub.retryTimer.unref?.();
    this.waiting.add(sub);
    this.update();
  }

  /** `sub` waits no more (attached, or closed). */
  done(sub: Sub): void {
    clearTimeout(sub.retryTimer);
    if (this.waiting.delete(sub)) this.update();
  }

  /** One more (+1) or one less (-1) attached subscription follows its kind's CRD. */
  follow(delta: 1 | -1): void {
    this.following += delta;
    this.update();
  }

  /**
   * What the CRD cache knows of `kind` in `group`: "Established", "Absent" (no CRD serves it: it
   * was deleted, or it is built in or aggregated), or "Unknown" (CRDs are not watched or not
   * listed yet).
   */
  crdOf(group: string, kind: string): "Established" | "Absent" | "Unknown" {
    if (this.crds?.state.phase !== "Synced") return "Unknown";
    const established = this.established.get(`${group}/${kind}`);
    return established === undefined ? "Absent" : established ? "Established" : "Unknown";
  }

  /** Stops watching CRDs. */
  stop(): void {
    this.stopped = true;
    this.crds?.release();
    this.crds = undefined;
  }

  /** Holds the CRD cache exactly while some subscription waits or is attached. */
  private update(): void {
    if (this.options.watchCustomResourceDefinitions === false || this.stopped) return;
    const wanted = this.waiting.size > 0 || this.following > 0;
    if (wanted && !this.crds) {
      this.crds = this.options.cache.acquire(CRD_RESOURCE, undefined, {
        extractorsFor: () => CRD_READS,
        onEvent: (event) => this.onCrdEvent(event),
        onState: () => undefined,
      });
    } else if (!wanted && this.crds) {
      this.crds.release();
      this.crds = undefined;
      this.established.clear();
    }
  }

  private onCrdEvent(event: InformerEvent<Projection>): void {
    const reads = (event.type === "DELETED" ? (event.old ?? event.object) : event.object).reads;
    const value = (x: Extractor) => {
      const read = reads?.get(x.key);
      return read?.kind === "Value" ? read.value : undefined;
    };
    const group = value(GROUP);
    const kind = value(KIND);
    if (typeof group === "string" && typeof kind === "string") {
      if (event.type === "DELETED") this.established.delete(`${group}/${kind}`);
      else this.established.set(`${group}/${kind}`, value(ESTABLISHED) === null);
      // The first list tells of every CRD there is: no change to follow (attached
      // subscriptions found their kinds in discovery as it is).
      if (this.crds?.state.phase === "Synced") this.options.onCrdChange?.(group, kind);
    }
    // The conditions read is null when every wanted condition is met.
    if (event.type === "DELETED" || value(ESTABLISHED) !== null) return;
    for (const sub of [...this.waiting]) {
      const [subGroup] = sub.request.apiVersion.includes("/") ? sub.request.apiVersion.split("/") : [""];
      if (subGroup !== group || sub.request.kind !== kind) continue;
      this.options.invalidate(sub.request.apiVersion);
      clearTimeout(sub.retryTimer);
      sub.retries = 0;
      this.options.retry(sub);
    }
  }
}
