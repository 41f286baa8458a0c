/**
 * The export step of a reconcile: a Referable's value delivered into the ConfigMap and Secret
 * keys its `spec.export` names (server-side apply under the field manager `referable.dev/<name>`,
 * see src/export/), its keys removed when it has no value, and, through the finalizer
 * `referable.dev/export`, removed before the Referable goes.
 *
 * How the controller knows a key already holds the value without writing: it reads the target
 * (GET) and remembers, per object, a hash of what it applied there. It cannot watch targets (it
 * may write only where an administrator opted a namespace in, and has no list right anywhere),
 * and an informer of whole ConfigMaps and Secrets would hold every other writer's data. The GET
 * runs only when the text to export changes (or after a restart, or a change of leader, when the
 * memory is empty), so a source that changes costs one read and one apply per target, a restart
 * one read and no write, and memory holds a hash per target, never a value. A target someone
 * else edits is put right at the next change of the value, or the next restart.
 */
import { createHash } from "node:crypto";
import { asError } from "../errors.ts";
import { isExportError } from "../export/errors.ts";
import {
  describeObject,
  exportText,
  fieldManagerFor,
  objectKey,
  parseTarget,
  storedText,
  type ExportTarget,
  type TargetObject,
} from "../export/target.ts";
import { releaseObject, syncObject, type KnownObject } from "../export/writer.ts";
import { isApiError, type KubeClient } from "../kube/client.ts";
import { silentLogger, type Logger } from "../log.ts";
import type { ResolutionResult, SourceRef } from "../resolver/types.ts";
import { REFERABLE_API_VERSION, type ExportRecord, type Referable } from "./referable.ts";
import type { ExportState } from "./status.ts";

/** The finalizer that keeps a Referable until its keys are removed. */
export const EXPORT_FINALIZER = "referable.dev/export";

/** Options for {@link Exporter}. */
export interface ExporterOptions {
  client: Pick<KubeClient, "request">;
  logger?: Logger;
  /** Whether Secrets may be written (--allow-secret-export). @default false */
  allowSecrets?: boolean;
  /** First wait before a failed export is tried again; it doubles up to maxRetryMs. @default 1000 */
  minRetryMs?: number;
  /** @default 300000 */
  maxRetryMs?: number;
  /**
   * Shortest time between two writes of one target object by one Referable: the first change
   * after a quiet spell is written at once, a source changing faster has its changes coalesced,
   * and the last one is always written. Bounds the writes a hot source causes, as
   * minWriteIntervalMs bounds status writes.
   * @default 100
   */
  minWriteIntervalMs?: number;
  /** Monotonic clock in milliseconds. @default performance.now */
  clock?: () => number;
  /** Told of every write of a target object and of every failure, for metrics. Must not throw. */
  onWrite?: (result: "success" | "conflict" | "forbidden" | "error") => void;
}

/** What the export step asks of the reconcile. */
export type ExportStep =
  /** The Referable was changed (the finalizer added): its next event reconciles it again. */
  | "restart"
  /**
   * The export part of the status to write (null: none; undefined: as it is), and when to try
   * again after a failure.
   */
  | { state: ExportState | null | undefined; retryAfterMs: number | undefined };

/** One object the Referable writes into, and what it remembers of it. */
interface Written {
  object: TargetObject;
  /** Hash of the keys and texts last found in, or applied to, the object. */
  hash: string;
  records: ExportRecord[];
  /** The object's uid and whether the Referable created it: the next change applies without a read. */
  known: KnownObject | undefined;
  /** When the Referable last wrote the object (clock), or undefined when it only read it. */
  writtenAt: number | undefined;
}

const OPT_IN_HINT =
  "opt the namespace in with a RoleBinding of the ClusterRole referable-export-configmaps to the controller's ServiceAccount (deploy/examples/export-namespace)";
const SECRET_OPT_IN_HINT =
  "opt the namespace in with a RoleBinding of the ClusterRole referable-export-secrets to the controller's ServiceAccount (deploy/examples/allow-secret-export)";

/** Runs the export step; one per controller. See the module comment. */
export class Exporter {
  private readonly options: ExporterOptions;
  private readonly logger: Logger;
  /** Per Referable: per object key, what it holds. */
  private readonly written = new Map<string, Map<string, Written>>();
  /** Per Referable: failed attempts in a row, for the backoff. */
  private readonly failures = new Map<string, number>();

  constructor(options: ExporterOptions) {
    this.options = options;
    this.logger = options.logger ?? silentLogger;
  }

  /** Forgets what the targets hold: a new leader reads them again (another leader may have written). */
  reset(): void {
    this.written.clear();
    this.failures.clear();
  }

  /** Forgets a Referable that is gone. */
  forget(name: string): void {
    this.written.delete(name);
    this.failures.delete(name);
  }

  /** Whether the Referable holds the export finalizer while being deleted: {@link finalize} must run. */
  finalizing(obj: Referable): boolean {
    return obj.metadata.deletionTimestamp !== undefined && hasFinalizer(obj);
  }

  /**
   * Writes `result`'s value into every target of `obj.spec.export` (removes the keys when there is
   * no value, and from targets no longer listed), and says what the status should report.
   * `result` must be an observed one (not Pending).
   */
  async sync(obj: Referable, result: ResolutionResult): Promise<ExportStep> {
    const name = obj.metadata.name;
    const raw = obj.spec?.export ?? [];
    const previous = obj.status?.exports ?? [];
    if (raw.length === 0 && previous.length === 0) {
      this.written.delete(name);
      this.failures.delete(name);
      if (!hasFinalizer(obj)) return { state: null, retryAfterMs: undefined };
      const problem = await this.removeFinalizer(obj);
      return problem === undefined ? "restart" : this.finalizerProblem(name, problem);
    }
    const targets: ExportTarget[] = [];
    for (const [i, t] of (Array.isArray(raw) ? raw : []).entries()) {
      const parsed = parseTarget(t, `spec.export[${i}]`);
      if (typeof parsed === "string")
        return {
          state: { exports: [], status: "False", reason: "InvalidSpec", message: parsed },
          retryAfterMs: undefined,
        };
      targets.push(parsed);
    }
    if (targets.length > 0 && !hasFinalizer(obj)) {
      // Before any key is written: a Referable deleted from now on keeps until its keys are removed.
      const problem = await this.addFinalizer(obj);
      return problem === undefined ? "restart" : this.finalizerProblem(name, problem);
    }

    const text = valueText(result);
    const read = readObjects(result);
    // Every object the Referable writes into, or wrote into (a target removed from the spec).
    const objects = new Map<string, { object: TargetObject; keys: string[] }>();
    const entry = (o: TargetObject) => {
      const k = objectKey(o);
      let e = objects.get(k);
      if (!e)
        objects.set(k, (e = { object: { kind: o.kind, namespace: o.namespace, name: o.name }, keys: [] }));
      return e;
    };
    const memory = this.written.get(name) ?? new Map<string, Written>();
    this.written.set(name, memory);
    for (const t of targets) entry(t).keys.push(t.key);
    for (const p of previous) if (p.kind === "ConfigMap" || p.kind === "Secret") entry(p as TargetObject);
    // And what this process wrote, should a status recording it have failed to be written.
    for (const w of memory.values()) entry(w.object);
    const records: ExportRecord[] = [];
    const problems: Array<{ reason: string; message: string }> = [];
    const clock = this.options.clock ?? (() => performance.now());
    const interval = this.options.minWriteIntervalMs ?? 100;
    /** The soonest a write held back by the interval is due. */
    let deferredMs: number | undefined;
    await Promise.all(
      [...objects].map(async ([key, { object, keys }]) => {
        // Writing into an object the value is read from changes what is read, and with a
        // fieldPath that takes the written key in (data, say) the value grows with every write.
        const readsIt = keys.length > 0 && read.has(key);
        if (readsIt)
          problems.push({
            reason: "InvalidSpec",
            message: `${describeObject(object)} is a source of this Referable: a Referable cannot export into an object it reads; export into another object`,
          });
        const stored: Record<string, string> = {};
        if (text !== undefined && !readsIt) for (const k of keys) stored[k] = storedText(object.kind, text);
        const hash = hashOf(stored);
        const known = memory.get(key);
        if (known?.hash === hash) {
          records.push(...known.records);
          return;
        }
        const wait = known?.writtenAt === undefined ? 0 : known.writtenAt + interval - clock();
        if (wait > 0) {
          // Written moments ago: this change waits for the interval (a later one may replace it).
          deferredMs = Math.min(deferredMs ?? wait, wait);
          return;
        }
        memory.delete(key);
        // Not for a target dropped from the spec: its removal reads first, so a key of an
        // object someone else re-created is never touched blindly.
        const previouslyKnown = keys.length > 0 ? known?.known : undefined;
        if (object.kind === "Secret" && !this.options.allowSecrets) {
          // Nothing is written into a Secret, and nothing there removed: the controller stays out.
          if (keys.length > 0)
            problems.push({
              reason: "ExportForbidden",
              message: `${describeObject(object)}: the controller does not write Secrets unless started with --allow-secret-export (and ${SECRET_OPT_IN_HINT})`,
            });
          return;
        }
        try {
          const done = await syncObject(
            this.options.client,
            object,
            stored,
            name,
            {
              fieldManager: fieldManagerFor(name),
              forbiddenHint: object.kind === "Secret" ? SECRET_OPT_IN_HINT : OPT_IN_HINT,
            },
            previouslyKnown,
          );
          const written = Object.keys(stored).map((k) => {
            // A key that already held the value keeps the resourceVersion recorded when it was written.
            const before = done.written
              ? undefined
              : previous.find(
                  (p) =>
                    p.kind === object.kind &&
                    p.namespace === object.namespace &&
                    p.name === object.name &&
                    p.key === k,
                );
            const record: ExportRecord = {
              kind: object.kind,
              namespace: object.namespace,
              name: object.name,
              key: k,
            };
            const version = before?.resourceVersion ?? done.resourceVersion;
            if (version !== undefined) record.resourceVersion = version;
            return record;
          });
          // A target dropped from the spec, its keys removed: nothing more to remember of it.
          if (keys.length === 0) memory.delete(key);
          else
            memory.set(key, {
              object,
              hash,
              records: written,
              known: done.uid === undefined ? undefined : { uid: done.uid, created: done.created },
              writtenAt: done.written ? clock() : known?.writtenAt,
            });
          records.push(...written);
          if (done.written) {
            this.options.onWrite?.("success");
            this.logger.info(
              { referable: name, target: describeObject(object), keys: Object.keys(stored).length },
              Object.keys(stored).length === 0 ? "removed exported keys" : "exported the value",
            );
          }
        } catch (err) {
          this.options.onWrite?.(
            !isExportError(err)
              ? "error"
              : err.reason === "ExportConflict"
                ? "conflict"
                : err.reason === "ExportForbidden"
                  ? "forbidden"
                  : "error",
          );
          if (!isExportError(err)) {
            // A network error, a timeout: tried again on the backoff.
            problems.push({
              reason: "ExportFailed",
              message: `${describeObject(object)}: ${asError(err).message.slice(0, 300)}; retrying`,
            });
            return;
          }
          problems.push({ reason: err.reason, message: err.message });
          this.logger.warn(
            { referable: name, target: describeObject(object), reason: err.reason },
            "could not export the value",
          );
        }
      }),
    );
    // Some object waits for its interval: the status keeps saying what the keys hold until then.
    if (deferredMs !== undefined && problems.length === 0)
      return { state: undefined, retryAfterMs: deferredMs };
    records.sort(compareRecords);
    let state: ExportState | null;
    if (targets.length === 0 && problems.length === 0) {
      // spec.export was emptied and its keys are removed: the status drops the export part, and
      // the next reconcile lets go of the finalizer.
      state = null;
    } else if (problems.length > 0) {
      problems.sort((a, b) => a.message.localeCompare(b.message));
      state = {
        exports: records,
        status: "False",
        reason: problems[0]!.reason,
        message: problems
          .map((p) => p.message)
          .join("; ")
          .slice(0, 4000),
      };
    } else if (text === undefined) {
      state = {
        exports: records,
        status: "False",
        reason: "NoValue",
        message: "the Referable has no value (see the Ready condition): its exported keys are removed",
      };
    } else {
      state = { exports: records, status: "True", reason: "Exported", message: "" };
    }
    if (problems.length === 0) {
      this.failures.delete(name);
      return { state, retryAfterMs: undefined };
    }
    const backoff = this.backoff(name);
    return { state, retryAfterMs: deferredMs === undefined ? backoff : Math.min(backoff, deferredMs) };
  }

  /**
   * Removes every key the Referable exported (deleting an object it created once that holds
   * nothing else), then its finalizer. Returns when to try again, if something failed.
   */
  async finalize(obj: Referable): Promise<number | undefined> {
    const name = obj.metadata.name;
    const objects = new Map<string, TargetObject>();
    for (const t of [...(obj.spec?.export ?? []), ...(obj.status?.exports ?? [])]) {
      const parsed = parseTarget(t, "export");
      if (typeof parsed !== "string") objects.set(objectKey(parsed), parsed);
    }
    // Objects the status says hold a key of this Referable; the others are only named in the spec.
    const recorded = new Set((obj.status?.exports ?? []).map((r) => objectKey(r as TargetObject)));
    let failed = false;
    for (const object of objects.values()) {
      if (object.kind === "Secret" && !this.options.allowSecrets) continue; // never written
      try {
        const outcome = await releaseObject(this.options.client, object, name, {
          fieldManager: fieldManagerFor(name),
          forbiddenHint: object.kind === "Secret" ? SECRET_OPT_IN_HINT : OPT_IN_HINT,
        });
        if (outcome !== "absent")
          this.logger.info(
            { referable: name, target: describeObject(object), outcome },
            "removed exported keys",
          );
      } catch (err) {
        // A target never written (its namespace never opted in, so it is not in status.exports)
        // holds nothing of this Referable: a refusal there must not keep the Referable forever.
        // (A key written just before a crash, before the status recorded it, is left then.)
        if (isExportError(err) && err.reason === "ExportForbidden" && !recorded.has(objectKey(object)))
          continue;
        failed = true;
        this.logger.warn(
          { referable: name, target: describeObject(object), err: asError(err).message.slice(0, 300) },
          "could not remove exported keys; the Referable keeps its finalizer until they are",
        );
      }
    }
    if (failed || (await this.removeFinalizer(obj)) !== undefined) return this.backoff(name);
    this.forget(name);
    return undefined;
  }

  /** The wait before the next attempt of a Referable whose export failed. */
  backoff(name: string): number {
    const n = this.failures.get(name) ?? 0;
    this.failures.set(name, n + 1);
    const min = this.options.minRetryMs ?? 1000;
    return Math.min(this.options.maxRetryMs ?? 300_000, min * 2 ** Math.min(n, 20));
  }

  /** Exported=False for a finalizer the controller could not add or remove, tried again on the backoff. */
  private finalizerProblem(name: string, problem: string): ExportStep {
    return {
      state: {
        exports: [],
        status: "False",
        reason: "ExportFailed",
        message: `could not update the finalizer ${EXPORT_FINALIZER}, which keeps a Referable until its exported keys are removed: ${problem}`,
      },
      retryAfterMs: this.backoff(name),
    };
  }

  /** Adds the finalizer; resolves with what went wrong, if anything. */
  private async addFinalizer(obj: Referable): Promise<string | undefined> {
    const finalizers = obj.metadata.finalizers;
    return this.patchFinalizers(
      obj,
      finalizers === undefined
        ? [{ op: "add", path: "/metadata/finalizers", value: [EXPORT_FINALIZER] }]
        : [
            { op: "test", path: "/metadata/finalizers", value: finalizers },
            { op: "add", path: "/metadata/finalizers/-", value: EXPORT_FINALIZER },
          ],
    );
  }

  /** Removes the finalizer; resolves with what went wrong, if anything. */
  private async removeFinalizer(obj: Referable): Promise<string | undefined> {
    const finalizers = obj.metadata.finalizers ?? [];
    return this.patchFinalizers(obj, [
      { op: "test", path: "/metadata/finalizers", value: finalizers },
      {
        op: "replace",
        path: "/metadata/finalizers",
        value: finalizers.filter((f) => f !== EXPORT_FINALIZER),
      },
    ]);
  }

  /**
   * A JSON patch of the finalizers, tested against the list read (and the uid): no one else's
   * edit is lost. Resolves with what went wrong, if anything.
   */
  private async patchFinalizers(obj: Referable, ops: unknown[]): Promise<string | undefined> {
    try {
      await this.options.client.request(
        "PATCH",
        `/apis/${REFERABLE_API_VERSION}/referables/${obj.metadata.name}`,
        {
          body: [{ op: "test", path: "/metadata/uid", value: obj.metadata.uid }, ...ops],
          contentType: "application/json-patch+json",
        },
      );
      return undefined;
    } catch (err) {
      // 404: gone. 409, 422 (a failed test): changed since it was read, and the change's own
      // event reconciles it again, from the new version; nothing to report. An admission
      // webhook's refusal is also a 422, but nothing changed: reported, logged and retried on
      // the backoff (deploy/'s webhook never sees finalizer changes; an older configuration may).
      if (isApiError(err, 404) || isApiError(err, 409)) return undefined;
      if (isApiError(err, 422) && !/admission webhook/i.test(asError(err).message)) return undefined;
      const message = asError(err).message.slice(0, 300);
      this.logger.warn(
        { referable: obj.metadata.name, err: message },
        "could not update the export finalizer",
      );
      if (isApiError(err, 403))
        return `${message}: the controller needs patch on referables.referable.dev (deploy/base/rbac-controller.yaml)`;
      return message;
    }
  }
}

function hasFinalizer(obj: Referable): boolean {
  return obj.metadata.finalizers?.includes(EXPORT_FINALIZER) ?? false;
}

/** The ConfigMaps and Secrets the result was read from, as object keys. */
function readObjects(result: ResolutionResult): Set<string> {
  const keys = new Set<string>();
  if (!result.ok) return keys;
  const sources: SourceRef[] =
    "sources" in result && result.sources
      ? result.sources
      : "source" in result && result.source
        ? [result.source]
        : [];
  for (const s of sources)
    if (s.apiVersion === "v1" && (s.kind === "ConfigMap" || s.kind === "Secret") && s.namespace)
      keys.add(objectKey({ kind: s.kind, namespace: s.namespace, name: s.name }));
  return keys;
}

/** The text to export, or undefined when the Referable has no value. */
function valueText(result: ResolutionResult): string | undefined {
  if (!result.ok) return undefined;
  if ("values" in result) return exportText(result.values);
  return result.value === undefined || result.value === null ? undefined : exportText(result.value);
}

function hashOf(keys: Record<string, string>): string {
  const h = createHash("sha256");
  for (const k of Object.keys(keys).sort()) h.update(k).update("\0").update(keys[k]!).update("\0");
  return h.digest("base64").slice(0, 22);
}

function compareRecords(a: ExportRecord, b: ExportRecord): number {
  return (
    a.kind.localeCompare(b.kind) ||
    a.namespace.localeCompare(b.namespace) ||
    a.name.localeCompare(b.name) ||
    a.key.localeCompare(b.key)
  );
}
