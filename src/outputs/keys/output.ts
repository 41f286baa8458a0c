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
import { EXPORT_FINALIZER, type ExportRecord, type Referable } from "../../api/referable.ts";
import type { KubeClient } from "../../kube/client.ts";
import type { Logger } from "../../api/log.ts";
import type { ResolutionResult } from "../../resolver/types.ts";
import type { Output } from "../output.ts";
import { ExportOutput, type ExportOutputOptions, type TargetWriter } from "../export-output.ts";
import type { WritePolicy } from "../write-policy.ts";
import { isExportError } from "./errors.ts";
import {
  addFinalizer,
  finalizerMessage,
  hasFinalizer,
  removeFinalizer,
  type FinalizerPatch,
} from "./finalizer.ts";
import { recordedObjects, sweepObject, type Recorded } from "./sweep.ts";
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
  hashOf,
  newKeysMemory,
  planObjects,
  readObjects,
  valueText,
  type KeysMemory,
  type Written,
} from "./memory.ts";
import { ownedTargets, type KeyOwnership } from "./ownership.ts";
import { conflictingKeys, intentOf, recordIntent, unrecorded } from "./intent.ts";
import { releaseObject, releaseProblem, releaseTargets } from "./release.ts";
import { failure, summarize, type Gathered, type KeysStep } from "./summary.ts";
import { takeOverLegacy } from "./takeover.ts";
import { syncObject, type KnownObject } from "./writer.ts";

export { newKeysMemory, type KeysMemory } from "./memory.ts";
export { conflictingKeys } from "./intent.ts";
export type { KeysStep } from "./summary.ts";

/** Remembers what a write left in an object; the watch event of this very write, seen before its answer, is not drift. */
function remember(memory: KeysMemory, key: string, written: Written): void {
  if (written.version !== undefined && memory.stale.get(key) === written.version) memory.stale.delete(key);
  memory.objects.set(key, written);
}

export { EXPORT_FINALIZER } from "../../api/referable.ts";

/** Options for {@link KeysOutput}. */
export interface KeysOutputOptions {
  client: Pick<KubeClient, "request">;
  /** The ServiceAccount each Referable's target requests impersonate (see ExportOutputOptions). @default none */
  actAs?: ExportOutputOptions["actAs"];
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

/** What a pass of {@link KeysOutput.write} shares among its objects. */
interface WriteContext {
  text: string | undefined;
  read: Set<string>;
  memory: KeysMemory;
  previous: ExportRecord[];
  recorded: Recorded;
  gathered: Gathered;
  /** Whom the requests on targets go as. */
  writer: TargetWriter;
}

/** Writes and releases the keys of spec.export; one per controller. See the module comment. */
export class KeysOutput
  extends ExportOutput<KeysOutputOptions>
  implements Output<ResolutionResult, KeysStep, KeysMemory>
{
  constructor(options: KeysOutputOptions) {
    super(options, EXPORT_FINALIZER);
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
    const writer = this.writerFor(obj);
    if (typeof writer === "string")
      return {
        state: { exports: previous, status: "False", reason: "InvalidSpec", message: writer },
        retryAfterMs: undefined,
      };
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
    const recorded = recordedObjects(previous);
    // Intent first: an object about to get a key status.exports does not name yet waits for the
    // status write that names it (see sweep.ts); everything else is written now.
    const intents =
      text === undefined ? new Set<string>() : unrecorded(plan, previous, read, this.options.allowSecrets);
    await Promise.all(
      [...plan]
        .filter(([key]) => !intents.has(key))
        .map(([key, { object, keys }]) =>
          this.writeObject(obj, key, object, keys, {
            text,
            read,
            memory,
            previous,
            recorded,
            gathered,
            writer,
          }),
        ),
    );
    if (intents.size > 0) {
      const step = recordIntent(obj, plan, intents, previous, gathered, memory, (m) =>
        this.pacing.afterFailure(m),
      );
      return metadata ? { ...step, metadata } : step;
    }
    const step = summarize(targets, text, gathered, memory, (m) => this.pacing.afterFailure(m));
    if (step.state === null && hasFinalizer(obj)) step.thenRequeue = true;
    return metadata ? { ...step, metadata } : step;
  }

  /**
   * Removes every key the Referable exported (deleting an object it created once that holds
   * nothing else), then its finalizer. Returns when to try again, if something failed.
   */
  async release(obj: Referable, memory: KeysMemory): Promise<number | undefined> {
    const { objects, keysOf } = releaseTargets(obj);
    // Objects the status says may hold a key of this Referable; the others are only named in the spec.
    const recorded = recordedObjects(obj.status?.exports ?? []);
    const problems: Array<{ reason: string; message: string }> = [];
    const writer = this.writerFor(obj);
    if (typeof writer === "string") {
      memory.releaseProblem = releaseProblem([{ reason: "InvalidSpec", message: writer }]);
      return this.pacing.afterFailure(memory);
    }
    // Removals and deletions share the write policy with every other write: an object whose
    // turn has not come is released on the look after the wait.
    const held: Gathered = { records: [], problems: [], deferredMs: undefined };
    for (const [key, object] of objects) {
      if (!this.admitted(key, memory, held, [])) continue;
      const problem = await releaseObject(
        writer.client,
        this.logger,
        this.options.allowSecrets,
        obj.metadata.name,
        object,
        keysOf.get(key) ?? [],
        recorded,
        writer.serviceAccount,
      );
      if (problem !== undefined) problems.push(problem);
    }
    if (problems.length === 0 && held.deferredMs !== undefined) return held.deferredMs;
    memory.releaseProblem = releaseProblem(problems);
    if (problems.length > 0) return this.pacing.afterFailure(memory);
    const patch = await removeFinalizer(this.options.client, obj, this.logger);
    if (!patch.ok && !patch.changed) {
      memory.releaseProblem = { reason: "ExportFailed", message: finalizerMessage(patch.problem) };
      return this.pacing.afterFailure(memory);
    }
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
      retryAfterMs: this.pacing.afterFailure(memory),
    };
  }

  /** Brings one object to what it should hold, gathering its records and problems. */
  private async writeObject(
    obj: Referable,
    key: string,
    object: TargetObject,
    keys: string[],
    ctx: WriteContext,
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
      // No value is written into a Secret; keys written before the flag was turned off are
      // removed (the flag gates writing values, not cleaning up).
      memory.objects.delete(key);
      if (keys.length > 0)
        gathered.problems.push({
          reason: "ExportForbidden",
          message: `${describeObject(object)}: the controller does not write Secrets unless started with --allow-secret-export (and ${kind.optIn})`,
        });
      if (!ctx.recorded.any.has(key) || !this.admitted(key, memory, gathered, ctx.previous)) return;
      await this.sweep(obj, key, object, ctx, "written before --allow-secret-export was turned off");
      return;
    }
    if (!this.admitted(key, memory, gathered, ctx.previous)) return;
    memory.objects.delete(key);
    // From here the object is read (or written) afresh; a change seen meanwhile marks it again.
    memory.stale.delete(key);
    // A target dropped from the spec: its keys go, and an object the Referable created goes with
    // them once it holds nothing else, as when the Referable is deleted.
    if (keys.length === 0) {
      memory.gates.delete(key);
      await this.sweep(obj, key, object, ctx, "of a target dropped from spec.export");
      return;
    }
    try {
      const written = await this.apply(
        obj,
        object,
        stored,
        keys.length > 0 ? known?.known : undefined,
        ctx.previous,
        ctx.writer,
      );
      remember(memory, key, { object, hash, ...written });
      gathered.records.push(...written.records);
    } catch (err) {
      gathered.problems.push(failure(this.options.onWrite, this.logger, obj.metadata.name, object, err));
      // What the records said may be there still may be: they stay, so a later sweep finds it.
      // A key another manager owns (an apply conflict names it) holds nothing of this Referable:
      // its record stays as an intent only (no resourceVersion), for the write once they let go.
      const theirs = isExportError(err) && err.reason === "ExportConflict" ? conflictingKeys(err) : new Set();
      for (const r of ctx.previous)
        if (objectKey(r as TargetObject) === key) gathered.records.push(theirs.has(r.key) ? intentOf(r) : r);
    }
  }

  /** Removes the Referable's keys from `object` (see sweep.ts), gathering what is left on failure. */
  private async sweep(
    obj: Referable,
    key: string,
    object: TargetObject,
    ctx: { previous: ExportRecord[]; recorded: Recorded; gathered: Gathered; writer: TargetWriter },
    why: string,
  ): Promise<void> {
    const name = obj.metadata.name;
    const { serviceAccount } = ctx.writer;
    try {
      const outcome = await sweepObject(ctx.writer.client, object, name, ctx.recorded, {
        fieldManager: fieldManagerFor(name),
        forbiddenHint: EXPORT_KINDS[object.kind].optIn,
        serviceAccount,
      });
      if (outcome === "released" || outcome === "deleted") {
        this.options.onWrite?.("success");
        this.logger.info(
          { referable: name, target: describeObject(object), outcome },
          "removed exported keys",
        );
      }
    } catch (err) {
      const problem = failure(this.options.onWrite, this.logger, name, object, err);
      ctx.gathered.problems.push({
        reason: problem.reason,
        message: `could not remove the keys ${why}: ${problem.message}`,
      });
      ctx.gathered.records.push(...ctx.previous.filter((r) => objectKey(r as TargetObject) === key));
    }
  }

  /**
   * Whether the object's share of the write policy lets it be written now; else the wait is
   * gathered, and the object's records carried over as they are (it holds what it held).
   */
  private admitted(key: string, memory: KeysMemory, gathered: Gathered, previous: ExportRecord[]): boolean {
    if (this.pacing.admit(key, memory, gathered)) return true;
    // Written moments ago: this change waits (a later one may replace it).
    gathered.records.push(...previous.filter((r) => objectKey(r as TargetObject) === key));
    return false;
  }

  /** Applies `stored` to `object`, and the records of the keys that hold the value now. */
  private async apply(
    obj: Referable,
    object: TargetObject,
    stored: Record<string, string>,
    known: KnownObject | undefined,
    previous: ExportRecord[],
    writer: TargetWriter,
  ): Promise<{ records: ExportRecord[]; known: KnownObject | undefined; version: string | undefined }> {
    const name = obj.metadata.name;
    const { client, serviceAccount } = writer;
    const options = {
      fieldManager: fieldManagerFor(name),
      forbiddenHint: EXPORT_KINDS[object.kind].optIn,
      serviceAccount,
    };
    // A name too long for referable.dev/<name> had another manager in earlier releases: what it
    // wrote under that one is taken over once (the first write after a start) and let go of.
    if (known === undefined && (await takeOverLegacy(client, object, stored, name, options)))
      this.logger.info(
        { referable: name, target: describeObject(object) },
        "took the exported keys over from the field manager of earlier releases",
      );
    // Not for a target dropped from the spec: its removal reads first, so a key of an object
    // someone else re-created is never touched blindly.
    const done = await syncObject(client, object, stored, name, options, known);
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
}
