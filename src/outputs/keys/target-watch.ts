/**
 * Drift: what someone else does to an exported key, seen as it happens.
 *
 * One informer per (kind, namespace) that holds targets, label-selected
 * `referable.dev/exported=true` (every object the controller writes carries that label): started
 * when the first target in that namespace is named, stopped when the last goes (the ownership
 * registry tells). It keeps, per object, only its identity and, for each key a Referable names
 * there, a hash of the key's text and the managers that own it: never a value, never another
 * key, so an object costs at most what the Referables naming it name.
 *
 * An event that changes a key a Referable owns (its text, its managers), or deletes the object,
 * and that is not the echo of the Referable's own write, marks what the Referable knows of the
 * object stale and queues it: the reconcile reads the object and puts the key back (a key or an
 * object deleted), or reports the other manager (`ExportConflict`, never forced) when one took
 * it. A namespace where the controller may not list or watch is re-read instead, every
 * `resyncMs`, and a warning says so.
 */
import { digest } from "../../api/digest.ts";
import { EXPORT_KINDS, type ExportKind } from "../../api/export-kinds.ts";
import { Informer, type InformerEvent, type InformerState } from "../../informers/informer.ts";
import type { KubeClient, KubeObject } from "../../kube/client.ts";
import type { ResourceInfo } from "../../kube/discovery.ts";
import { silentLogger, type Logger } from "../../api/log.ts";
import type { KeyOwnership, NamespaceListener } from "./ownership.ts";
import { EXPORTED_LABEL, type TargetObject } from "./target.ts";

/** What is kept of a target object. */
export interface TargetProjection {
  metadata: { name: string; namespace: string; uid?: string; resourceVersion?: string };
  /** Per key a Referable names: a hash of its text and the managers that own it. */
  keys: Map<string, string>;
}

/** Managers kept per key: more than this is a conflict already, whoever they are. */
const MANAGERS_KEPT = 4;

/** Options for {@link TargetWatch}. */
export interface TargetWatchOptions {
  client: Pick<KubeClient, "request" | "watch">;
  ownership: Pick<KeyOwnership, "keysIn" | "ownersIn" | "objectsIn">;
  /** Whether Secrets are written (and so watched). @default false */
  allowSecrets?: boolean;
  logger?: Logger;
  /** How often a namespace whose watch is refused is re-read. @default 30000 */
  resyncMs?: number;
  /** The resourceVersion the Referable `name`'s last write (or read) of `object` left, if any. */
  lastVersion(name: string, object: TargetObject): string | undefined;
  /**
   * `object` changed under the Referable `name` (to `version`; undefined: deleted, or re-read):
   * forget what it knows of it, and look again.
   */
  drifted(name: string, object: TargetObject, version: string | undefined): void;
}

interface Watch {
  informer: Informer<TargetProjection>;
  /** The re-read timer while the watch is refused. */
  timer: ReturnType<typeof setInterval> | undefined;
}

/** The informers of target namespaces; see the module comment. */
export class TargetWatch implements NamespaceListener {
  private readonly options: TargetWatchOptions;
  private readonly logger: Logger;
  private readonly watches = new Map<string, Watch>();
  private stopped = false;

  constructor(options: TargetWatchOptions) {
    this.options = options;
    this.logger = options.logger ?? silentLogger;
  }

  first(kind: ExportKind, namespace: string): void {
    if (this.stopped || (EXPORT_KINDS[kind].needsSecretExport && !this.options.allowSecrets)) return;
    const id = `${kind}/${namespace}`;
    if (this.watches.has(id)) return;
    const informer = new Informer<TargetProjection>({
      client: this.options.client,
      resource: resourceOf(kind),
      namespace,
      labelSelector: `${EXPORTED_LABEL}=true`,
      logger: this.logger,
      decode: (obj) => projectTarget(kind, obj, this.options.ownership),
    });
    const watch: Watch = { informer, timer: undefined };
    informer.addListener({
      onEvent: (event) => this.onEvent(kind, event),
      onState: (state) => this.onState(kind, namespace, watch, state),
    });
    this.watches.set(id, watch);
    informer.start();
  }

  last(kind: ExportKind, namespace: string): void {
    const id = `${kind}/${namespace}`;
    const watch = this.watches.get(id);
    if (!watch) return;
    this.watches.delete(id);
    if (watch.timer) clearInterval(watch.timer);
    void watch.informer.stop();
  }

  /** The namespaces watched now, as "kind/namespace" (for tests and metrics). */
  get watched(): string[] {
    return [...this.watches.keys()];
  }

  /** Stops every informer and timer. */
  async stop(): Promise<void> {
    this.stopped = true;
    const watches = [...this.watches.values()];
    this.watches.clear();
    for (const w of watches) if (w.timer) clearInterval(w.timer);
    await Promise.all(watches.map((w) => w.informer.stop()));
  }

  private onEvent(kind: ExportKind, event: InformerEvent<TargetProjection>): void {
    const target: TargetObject = {
      kind,
      namespace: event.object.metadata.namespace,
      name: event.object.metadata.name,
    };
    const version = event.type === "DELETED" ? undefined : event.object.metadata.resourceVersion;
    for (const name of driftedOwners(target, event, this.options.ownership, this.options.lastVersion))
      this.options.drifted(name, target, version);
  }

  private onState(kind: ExportKind, namespace: string, watch: Watch, state: InformerState): void {
    if (state.phase === "Synced") {
      if (watch.timer) clearInterval(watch.timer);
      watch.timer = undefined;
      return;
    }
    if (state.phase !== "Failed" || watch.timer || this.stopped) return;
    const resyncMs = this.options.resyncMs ?? 30_000;
    this.logger.warn(
      { kind, namespace, resyncMs, reason: state.reason },
      `cannot watch the exported ${EXPORT_KINDS[kind].resource} of this namespace (the controller needs list and watch there, as the referable-export ClusterRoles grant): keys edited or deleted there are noticed by re-reading every ${Math.round(resyncMs / 1000)} s instead`,
    );
    watch.timer = setInterval(() => {
      for (const object of this.options.ownership.objectsIn(kind, namespace))
        for (const name of this.options.ownership.ownersIn(object).keys())
          this.options.drifted(name, object, undefined);
    }, resyncMs);
    watch.timer.unref?.();
  }
}

/**
 * What is kept of a target object: its identity and, for each key a Referable names in it, a hash
 * of the key's text and the managers that own it (at most {@link MANAGERS_KEPT}).
 */
export function projectTarget(
  kind: ExportKind,
  obj: KubeObject,
  ownership: Pick<KeyOwnership, "keysIn">,
): TargetProjection {
  const m = obj.metadata ?? {};
  const object = { kind, namespace: String(m.namespace ?? ""), name: String(m.name ?? "") };
  const projection: TargetProjection = {
    metadata: { name: object.name, namespace: object.namespace },
    keys: new Map(),
  };
  if (typeof m.uid === "string") projection.metadata.uid = m.uid;
  if (typeof m.resourceVersion === "string") projection.metadata.resourceVersion = m.resourceVersion;
  const named = ownership.keysIn(object);
  if (named.size === 0) return projection;
  const data = (obj.data ?? {}) as Record<string, unknown>;
  const managers = new Map<string, string[]>();
  for (const entry of (m.managedFields ?? []) as Array<{
    manager?: string;
    fieldsV1?: Record<string, unknown>;
  }>) {
    const owned = entry.fieldsV1?.["f:data"];
    if (typeof owned !== "object" || owned === null) continue;
    for (const k of named) {
      if (!(`f:${k}` in owned)) continue;
      const list = managers.get(k) ?? [];
      if (list.length < MANAGERS_KEPT) list.push(String(entry.manager ?? ""));
      managers.set(k, list);
    }
  }
  for (const k of named) {
    const text = data[k];
    const hash = typeof text === "string" ? digest(text, 16) : "-";
    projection.keys.set(k, `${hash} ${(managers.get(k) ?? []).sort().join(" ")}`);
  }
  return projection;
}

/**
 * The Referables for which `event` on `target` is drift: owners of a key of it, unless the event
 * is the echo of their own write (`lastVersion`) or changes none of the keys they own. A deleted
 * object is drift for every owner.
 */
export function driftedOwners(
  target: TargetObject,
  event: InformerEvent<TargetProjection>,
  ownership: Pick<KeyOwnership, "ownersIn">,
  lastVersion: (name: string, object: TargetObject) => string | undefined,
): string[] {
  const { object, old, type } = event;
  const out: string[] = [];
  for (const [name, keys] of ownership.ownersIn(target)) {
    if (type !== "DELETED") {
      const version = object.metadata.resourceVersion;
      if (version !== undefined && lastVersion(name, target) === version) continue;
      if (old && keys.every((k) => old.keys.get(k) === object.keys.get(k))) continue;
    }
    out.push(name);
  }
  return out;
}

function resourceOf(kind: ExportKind): ResourceInfo {
  return {
    group: "",
    version: "v1",
    resource: EXPORT_KINDS[kind].resource,
    kind,
    namespaced: true,
    verbs: ["get", "list", "watch", "create", "patch", "delete"],
  };
}
