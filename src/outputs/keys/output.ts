/**
 * The key output: a Referable's value delivered into the ConfigMap and Secret keys its
 * `spec.export` names (server-side apply under the Referable's own field manager, see writer.ts),
 * only the keys it owns (one key, one owner: ownership.ts), its keys removed when it has no
 * value, and, through the finalizer `referable.dev/export`, removed before the Referable goes.
 *
 * It remembers, per object, a hash of what it applied there, never a value, and reads the target
 * (GET) only when the text to export changes, after a restart or a change of leader (the memory
 * is empty), or when the target watch (target-watch.ts) saw someone else change a key it owns.
 */
import { EXPORT_KINDS } from "../../api/export-kinds.ts";
import { Limits } from "../../api/limits.ts";
import type { ExportRecord, Referable } from "../../api/referable.ts";
import { asError } from "../../errors.ts";
import type { KubeClient } from "../../kube/client.ts";
import { silentLogger, type Logger } from "../../log.ts";
import type { ResolutionResult } from "../../resolver/types.ts";
import type { ExportState } from "../../referable/status.ts";
import { backoffDelay } from "../../runtime/backoff.ts";
import type { Output } from "../output.ts";
import { pass, WritePolicy } from "../write-policy.ts";
import { isExportError } from "./errors.ts";
import {
  addFinalizer,
  finalizerMessage,
  hasFinalizer,
  removeFinalizer,
  type FinalizerPatch,
} from "./finalizer.ts";
import {
  describeObject,
  fieldManagerFor,
  objectKey,
  parseTarget,
  storedText,
  type ExportTarget,
  type TargetObject,
} from "./target.ts";
import {
  compareRecords,
  exportedState,
  hashOf,
  newKeysMemory,
  planObjects,
  readObjects,
  valueText,
  type KeysMemory,
} from "./memory.ts";
import { ownedTargets, type KeyOwnership } from "./ownership.ts";
import { releaseLegacy, takeOverLegacy } from "./takeover.ts";
import { releaseObject, syncObject, type KnownObject } from "./writer.ts";

export { newKeysMemory, type KeysMemory } from "./memory.ts";

export { EXPORT_FINALIZER } from "../../api/referable.ts";

/** Options for {@link KeysOutput}. */
export interface KeysOutputOptions {
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
   * and the last one is always written (a bucket of the write policy, burst 1). 0: none.
   * @default 100
   */
  minWriteIntervalMs?: number;
  /** The write policy whose budget key writes share with status writes. @default one of its own */
  policy?: WritePolicy;
  /** Monotonic clock in milliseconds, for a policy of its own. @default performance.now */
  clock?: () => number;
  /**
   * Who owns each key (one key, one owner: see ownership.ts). A key another Referable owns is
   * never applied: ExportConflict naming the owner. @default every key is its namer's
   */
  ownership?: Pick<KeyOwnership, "ownerOf">;
  /** Told of every write of a target object and of every failure, for metrics. Must not throw. */
  onWrite?: (result: "success" | "conflict" | "forbidden" | "error") => void;
}

/** What the key output asks of the reconcile. */
export interface KeysStep {
  /** The export part of the status to write (null: none; undefined: as it is). */
  state: ExportState | null | undefined;
  /** When to look again: a failure's backoff, or a write waiting for the write policy. */
  retryAfterMs: number | undefined;
  /** The Referable's metadata after the finalizer patch this step made: the reconcile goes on from it. */
  metadata?: { resourceVersion: string | undefined; finalizers: string[] };
  /** The Referable changed since it was read: look again (on the backoff) from the newer version. */
  requeue?: boolean;
  /** Another step follows once the status records this one (the finalizer let go of): look again then. */
  thenRequeue?: boolean;
}

/** What one write gathers, object by object. */
interface Gathered {
  records: ExportRecord[];
  problems: Array<{ reason: string; message: string }>;
  /** The soonest a write held back by the write policy is due. */
  deferredMs: number | undefined;
}

/** Writes and releases the keys of spec.export; one per controller. See the module comment. */
export class KeysOutput implements Output<ResolutionResult, KeysStep, KeysMemory> {
  private readonly options: KeysOutputOptions;
  private readonly logger: Logger;
  private readonly policy: WritePolicy;

  constructor(options: KeysOutputOptions) {
    this.options = options;
    this.logger = options.logger ?? silentLogger;
    this.policy = options.policy ?? new WritePolicy({}, options.clock);
  }

  /** Whether the Referable holds the export finalizer while being deleted: {@link release} must run. */
  finalizing(obj: Referable): boolean {
    return obj.metadata.deletionTimestamp !== undefined && hasFinalizer(obj);
  }

  /**
   * Writes `result`'s value into every target of `obj.spec.export` (removes the keys when there is
   * no value, and from targets no longer listed), and says what the status should report. The
   * finalizer comes first, in the same pass. `result` must be an observed one (not Pending).
   */
  async write(obj: Referable, result: ResolutionResult, memory: KeysMemory): Promise<KeysStep> {
    const raw = obj.spec?.export ?? [];
    const previous = obj.status?.exports ?? [];
    if (raw.length === 0 && previous.length === 0) return this.exportsNothing(obj, memory);
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
    let metadata: KeysStep["metadata"];
    if (targets.length > 0 && !hasFinalizer(obj)) {
      // Before any key is written: a Referable deleted from now on keeps until its keys are removed.
      const patch = await addFinalizer(this.options.client, obj, this.logger);
      if (!patch.ok) return this.finalizerFailed(patch, memory);
      metadata = { resourceVersion: patch.resourceVersion, finalizers: patch.finalizers };
    }
    const gathered: Gathered = { records: [], problems: [], deferredMs: undefined };
    const owned = ownedTargets(this.options.ownership, obj.metadata.name, targets, gathered.problems);
    const plan = planObjects(owned, previous, memory);
    // Drift seen in an object no longer written: nothing to read again there.
    for (const k of memory.stale.keys()) if (!plan.has(k)) memory.stale.delete(k);
    const text = valueText(result);
    const read = readObjects(result);
    await Promise.all(
      [...plan].map(([key, { object, keys }]) =>
        this.writeObject(obj, key, object, keys, { text, read, memory, previous, gathered }),
      ),
    );
    const step = this.summarize(targets, text, gathered, memory);
    if (step.state === null && hasFinalizer(obj)) step.thenRequeue = true;
    return metadata ? { ...step, metadata } : step;
  }

  /**
   * Removes every key the Referable exported (deleting an object it created once that holds
   * nothing else), then its finalizer. Returns when to try again, if something failed.
   */
  async release(obj: Referable, memory: KeysMemory): Promise<number | undefined> {
    const objects = new Map<string, TargetObject>();
    const keysOf = new Map<string, string[]>();
    for (const t of [...(obj.spec?.export ?? []), ...(obj.status?.exports ?? [])]) {
      const parsed = parseTarget(t, "export");
      if (typeof parsed === "string") continue;
      const k = objectKey(parsed);
      objects.set(k, parsed);
      keysOf.set(k, [...(keysOf.get(k) ?? []), parsed.key]);
    }
    // Objects the status says hold a key of this Referable; the others are only named in the spec.
    const recorded = new Set((obj.status?.exports ?? []).map((r) => objectKey(r as TargetObject)));
    let failed = false;
    for (const [k, object] of objects)
      if (!(await this.releaseObject(obj.metadata.name, object, keysOf.get(k) ?? [], recorded)))
        failed = true;
    if (failed) return this.backoff(memory);
    const patch = await removeFinalizer(this.options.client, obj, this.logger);
    if (!patch.ok && !patch.changed) return this.backoff(memory);
    return undefined;
  }

  /** Nothing to export and nothing exported: let go of the finalizer, if held. */
  private async exportsNothing(obj: Referable, memory: KeysMemory): Promise<KeysStep> {
    if (memory.objects.size > 0 || memory.gates.size > 0 || memory.failures > 0 || memory.stale.size > 0)
      Object.assign(memory, newKeysMemory());
    if (!hasFinalizer(obj)) return { state: null, retryAfterMs: undefined };
    const patch = await removeFinalizer(this.options.client, obj, this.logger);
    if (!patch.ok) return this.finalizerFailed(patch, memory);
    return {
      state: null,
      retryAfterMs: undefined,
      metadata: { resourceVersion: patch.resourceVersion, finalizers: patch.finalizers },
    };
  }

  /** A finalizer patch that did not go through: look again, or Exported=False on the backoff. */
  private finalizerFailed(patch: Exclude<FinalizerPatch, { ok: true }>, memory: KeysMemory): KeysStep {
    if (patch.changed) return { state: undefined, retryAfterMs: undefined, requeue: true };
    return {
      state: {
        exports: [],
        status: "False",
        reason: "ExportFailed",
        message: finalizerMessage(patch.problem),
      },
      retryAfterMs: this.backoff(memory),
    };
  }

  /** Brings one object to what it should hold, gathering its records and problems. */
  private async writeObject(
    obj: Referable,
    key: string,
    object: TargetObject,
    keys: string[],
    ctx: {
      text: string | undefined;
      read: Set<string>;
      memory: KeysMemory;
      previous: ExportRecord[];
      gathered: Gathered;
    },
  ): Promise<void> {
    const { memory, gathered } = ctx;
    // Writing into an object the value is read from changes what is read, and with a
    // fieldPath that takes the written key in (data, say) the value grows with every write.
    const readsIt = keys.length > 0 && ctx.read.has(key);
    if (readsIt)
      gathered.problems.push({
        reason: "InvalidSpec",
        message: `${describeObject(object)} is a source of this Referable: a Referable cannot export into an object it reads; export into another object`,
      });
    // No prototype: "__proto__" is a valid key to export into.
    const stored: Record<string, string> = Object.create(null);
    if (ctx.text !== undefined && !readsIt)
      for (const k of keys) stored[k] = storedText(object.kind, ctx.text);
    const hash = hashOf(stored);
    // Changed by someone else since (the target watch): read again, whatever is remembered.
    const known = memory.stale.has(key) ? undefined : memory.objects.get(key);
    if (known?.hash === hash) {
      gathered.records.push(...known.records);
      return;
    }
    const kind = EXPORT_KINDS[object.kind];
    if (kind.needsSecretExport && !this.options.allowSecrets) {
      // Nothing is written into a Secret, and nothing there removed: the controller stays out.
      memory.objects.delete(key);
      if (keys.length > 0)
        gathered.problems.push({
          reason: "ExportForbidden",
          message: `${describeObject(object)}: the controller does not write Secrets unless started with --allow-secret-export (and ${kind.optIn})`,
        });
      return;
    }
    if (!this.admitted(key, memory, gathered)) return;
    memory.objects.delete(key);
    // From here the object is read (or written) afresh; a change seen meanwhile marks it again.
    memory.stale.delete(key);
    try {
      const written = await this.apply(
        obj,
        object,
        stored,
        keys.length > 0 ? known?.known : undefined,
        ctx.previous,
      );
      // The watch event of this very write, seen before the write's answer: not drift.
      if (written.version !== undefined && memory.stale.get(key) === written.version)
        memory.stale.delete(key);
      // A target dropped from the spec, its keys removed: nothing more to remember of it.
      if (keys.length === 0) memory.gates.delete(key);
      else
        memory.objects.set(key, {
          object,
          hash,
          records: written.records,
          known: written.known,
          version: written.version,
        });
      gathered.records.push(...written.records);
    } catch (err) {
      gathered.problems.push(this.failure(obj.metadata.name, object, err));
    }
  }

  /** Whether the object's share of the write policy lets it be written now; else the wait is gathered. */
  private admitted(key: string, memory: KeysMemory, gathered: Gathered): boolean {
    let gate = memory.gates.get(key);
    if (!gate) {
      const interval = this.options.minWriteIntervalMs ?? 100;
      memory.gates.set(key, (gate = this.policy.gate(interval > 0 ? 1000 / interval : 0)));
    }
    const admission = pass(this.policy, gate);
    if (admission.write) return true;
    // Written moments ago: this change waits (a later one may replace it).
    gathered.deferredMs = Math.min(gathered.deferredMs ?? admission.retryAfterMs, admission.retryAfterMs);
    return false;
  }

  /** Applies `stored` to `object`, and the records of the keys that hold the value now. */
  private async apply(
    obj: Referable,
    object: TargetObject,
    stored: Record<string, string>,
    known: KnownObject | undefined,
    previous: ExportRecord[],
  ): Promise<{ records: ExportRecord[]; known: KnownObject | undefined; version: string | undefined }> {
    const name = obj.metadata.name;
    const options = { fieldManager: fieldManagerFor(name), forbiddenHint: EXPORT_KINDS[object.kind].optIn };
    // A name too long for referable.dev/<name> had another manager in earlier releases: what it
    // wrote under that one is taken over once (the first write after a start) and let go of.
    if (known === undefined && (await takeOverLegacy(this.options.client, object, stored, name, options)))
      this.logger.info(
        { referable: name, target: describeObject(object) },
        "took the exported keys over from the field manager of earlier releases",
      );
    // Not for a target dropped from the spec: its removal reads first, so a key of an object
    // someone else re-created is never touched blindly.
    const done = await syncObject(this.options.client, object, stored, name, options, known);
    const records = Object.keys(stored).map((k) => {
      // A key that already held the value keeps the resourceVersion recorded when it was written.
      const before = done.written
        ? undefined
        : previous.find((p) => objectKey(p as TargetObject) === objectKey(object) && p.key === k);
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
    if (done.written) {
      this.options.onWrite?.("success");
      this.logger.info(
        { referable: name, target: describeObject(object), keys: Object.keys(stored).length },
        Object.keys(stored).length === 0 ? "removed exported keys" : "exported the value",
      );
    }
    return {
      records,
      known: done.uid === undefined ? undefined : { uid: done.uid, created: done.created },
      version: done.resourceVersion,
    };
  }

  /** A failed write as a problem for the Exported condition, counted and logged. */
  private failure(name: string, object: TargetObject, err: unknown): { reason: string; message: string } {
    const reason = isExportError(err) ? err.reason : undefined;
    this.options.onWrite?.(
      reason === "ExportConflict" ? "conflict" : reason === "ExportForbidden" ? "forbidden" : "error",
    );
    // A network error, a timeout: tried again on the backoff.
    if (!isExportError(err))
      return {
        reason: "ExportFailed",
        message: `${describeObject(object)}: ${asError(err).message.slice(0, 300)}; retrying`,
      };
    this.logger.warn(
      { referable: name, target: describeObject(object), reason: err.reason },
      "could not export the value",
    );
    return { reason: err.reason, message: err.message };
  }

  /** The Exported state of a write, and when to look again. */
  private summarize(
    targets: ExportTarget[],
    text: string | undefined,
    gathered: Gathered,
    memory: KeysMemory,
  ): KeysStep {
    const { records, problems, deferredMs } = gathered;
    // Some object waits for the write policy: the status keeps saying what the keys hold until then.
    if (deferredMs !== undefined && problems.length === 0)
      return { state: undefined, retryAfterMs: deferredMs };
    records.sort(compareRecords);
    if (problems.length === 0) {
      memory.failures = 0;
      return { state: exportedState(targets, text, records), retryAfterMs: undefined };
    }
    problems.sort((a, b) => a.message.localeCompare(b.message));
    const state: ExportState = {
      exports: records,
      status: "False",
      reason: problems[0]!.reason,
      message: problems
        .map((p) => p.message)
        .join("; ")
        .slice(0, Limits.conditionMessage),
    };
    const backoff = this.backoff(memory);
    return { state, retryAfterMs: deferredMs === undefined ? backoff : Math.min(backoff, deferredMs) };
  }

  /** Lets go of one object's keys; false when that failed and must be tried again. */
  private async releaseObject(
    name: string,
    object: TargetObject,
    keys: readonly string[],
    recorded: Set<string>,
  ): Promise<boolean> {
    const kind = EXPORT_KINDS[object.kind];
    if (kind.needsSecretExport && !this.options.allowSecrets) return true; // never written
    try {
      const options = { fieldManager: fieldManagerFor(name), forbiddenHint: kind.optIn };
      // Keys left under the manager of earlier releases (never taken over): those go too.
      await releaseLegacy(this.options.client, object, keys, name, options);
      const outcome = await releaseObject(this.options.client, object, name, options);
      if (outcome !== "absent")
        this.logger.info(
          { referable: name, target: describeObject(object), outcome },
          "removed exported keys",
        );
      return true;
    } catch (err) {
      // A target never written (its namespace never opted in, so it is not in status.exports)
      // holds nothing of this Referable: a refusal there must not keep the Referable forever.
      // (A key written just before a crash, before the status recorded it, is left then.)
      if (isExportError(err) && err.reason === "ExportForbidden" && !recorded.has(objectKey(object)))
        return true;
      this.logger.warn(
        { referable: name, target: describeObject(object), err: asError(err).message.slice(0, 300) },
        "could not remove exported keys; the Referable keeps its finalizer until they are",
      );
      return false;
    }
  }

  /** The wait before the next attempt of a Referable whose export failed. */
  private backoff(memory: KeysMemory): number {
    const attempt = memory.failures++;
    return backoffDelay(attempt, {
      baseMs: this.options.minRetryMs ?? 1000,
      maxMs: this.options.maxRetryMs ?? 300_000,
    });
  }
}
