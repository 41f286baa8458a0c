/**
 * The field output: a Referable's value delivered into fields of existing objects of any kind
 * (the entries of `spec.export` with a `fieldPath`), under the Referable's own field manager
 * (`fieldManagerFor`, the same as its keys'), released when there is no value, when the spec no
 * longer names the field, and, through the finalizer `referable.dev/export-fields`, before the
 * Referable goes. See writer.ts for how one object is written.
 *
 * - **Intent before write.** A field is recorded in `status.exports` before its first write (one
 *   status write, then the field on the next look), so `status.exports` always holds at least
 *   what was written, and whatever releases a Referable's writes (this output, a sweep) finds them.
 * - **One owner per field.** Among Referables naming the same field of the same object, the first
 *   created (creationTimestamp, then name) owns it; the others are `ExportConflict` naming it. A
 *   field another manager owns (not such a Referable) is `ExportConflict` naming that manager, never
 *   forced; the owner Referable takes a field over only from a later Referable's manager.
 * - **Drift.** Targets are not watched (the controller may patch them, not list them, and an
 *   informer of whole objects of any kind would hold everyone's data): each object is read again
 *   at least every `rereadMs` (30 s), one GET, so a hand edit (the editor then owns the field:
 *   `ExportConflict`) or a deleted object (`TargetNotFound`) is seen within that bound.
 * - **Writes** share the write policy: a bucket per object (one write per 100 ms), and the
 *   controller's budget. Memory per Referable: a hash per object, never a value.
 */
import { FIELD_EXPORT_FINALIZER, type ExportRecord, type Referable } from "../../api/referable.ts";
import { asError, isResolutionError } from "../../api/errors.ts";
import type { KubeClient } from "../../kube/client.ts";
import type { KindResolver } from "../../kube/discovery.ts";
import type { Logger } from "../../api/log.ts";
import type { ResolutionResult } from "../../resolver/types.ts";
import type { Output } from "../output.ts";
import { addFinalizer, finalizerMessage, hasFinalizer, removeFinalizer } from "../keys/finalizer.ts";
import { ExportOutput, type ExportOutputOptions, type TargetWriter } from "../export-output.ts";
import { ReadBudget } from "../read-budget.ts";
import type { WritePolicy } from "../write-policy.ts";
import type { FieldClaims } from "./ownership.ts";
import { fieldWriteOptions, syncFieldObject } from "./sync.ts";
import {
  asObject,
  compareFieldRecords,
  findRecord,
  hashOf,
  isFieldRecord,
  newFieldsMemory,
  pathOfRecord,
  plan,
  recordOf,
  valueOf,
  type FieldsMemory,
  type FieldsStep,
  type Gathered,
  type Known,
  type ObjectPlan,
  type Problem,
} from "./plan.ts";
import { failure, summarize } from "./problems.ts";
import {
  describeFieldObject,
  fieldKey,
  fieldObjectKey,
  fieldTargetsOf,
  isFieldEntry,
  isSecret,
  parseFieldTarget,
  type FieldObject,
  type ParsedFieldTarget,
} from "./target.ts";
import { applyFields, readFieldObject, type AskedField } from "./writer.ts";

export { FIELD_EXPORT_FINALIZER } from "../../api/referable.ts";
export {
  compareFieldRecords,
  isFieldRecord,
  newFieldsMemory,
  type FieldsMemory,
  type FieldsStep,
} from "./plan.ts";

/** The longest time an object written into goes without being read again. */
export const FIELD_REREAD_MS = 30_000;
/** The first wait before a missing object is read again; doubles at each read that finds it missing. */
export const MISSING_FIRST_MS = 1000;
/** The longest wait before a missing object is read again. */
export const MISSING_MAX_MS = 300_000;

/** Options for {@link FieldOutput}. */
export interface FieldOutputOptions {
  client: Pick<KubeClient, "request">;
  /** The ServiceAccount each Referable's target requests impersonate (see ExportOutputOptions). @default none */
  actAs?: ExportOutputOptions["actAs"];
  /** Maps a target's apiVersion/kind to its resource (share the resolver's). */
  discovery: KindResolver;
  /**
   * Who owns each field: the claims of every Referable naming it, kept by whoever sees them all
   * (the controller's reference edges, fed from its whole cache). The output only reads them.
   */
  claims: FieldClaims;
  logger?: Logger;
  /** The write policy whose budget field writes share. @default one of its own */
  policy?: WritePolicy;
  /** Monotonic clock in milliseconds. @default performance.now */
  clock?: () => number;
  /** Shortest time between two writes of one object by one Referable. @default 100 */
  minWriteIntervalMs?: number;
  /** First wait before a failed export is tried again; doubles up to maxRetryMs. @default 1000 */
  minRetryMs?: number;
  /** @default 300000 */
  maxRetryMs?: number;
  /** Longest time between two reads of an object (drift). @default 30000 */
  rereadMs?: number;
  /**
   * Whether fields of Secrets may be written (--allow-secret-export), as keys of Secrets are.
   * Without it a field target in a Secret is `ExportForbidden`: nothing is read or written there
   * but the release of what was written before the flag was turned off. @default false
   */
  allowSecrets?: boolean;
  /**
   * The controller's budget for drift reads, shared with whatever else reads on its own
   * initiative. @default a budget of its own, of 10 reads a second
   */
  reads?: ReadBudget;
  /** Told of every write and failure, for metrics. Must not throw. */
  onWrite?: (result: "success" | "conflict" | "forbidden" | "error") => void;
}

/** Writes and releases the fields of spec.export; one per controller. See the module comment. */
export class FieldOutput
  extends ExportOutput<FieldOutputOptions>
  implements Output<ResolutionResult, FieldsStep, FieldsMemory>
{
  private readonly reads: ReadBudget;

  constructor(options: FieldOutputOptions) {
    super(options, FIELD_EXPORT_FINALIZER);
    this.reads = options.reads ?? new ReadBudget(undefined, () => this.pacing.policy.clock());
  }

  async write(obj: Referable, result: ResolutionResult, memory: FieldsMemory): Promise<FieldsStep> {
    const entries = (obj.spec?.export ?? []).map((e, i) => ({ e, i })).filter(({ e }) => isFieldEntry(e));
    const previous = (obj.status?.exports ?? []).filter(isFieldRecord);
    if (entries.length === 0 && previous.length === 0) return this.exportsNothing(obj, memory);
    const writer = this.writerFor(obj);
    if (typeof writer === "string") return this.invalid(writer, previous);
    const targets = fieldTargetsOf(obj);
    if (typeof targets === "string") return this.invalid(targets, previous);
    let metadata: FieldsStep["metadata"];
    if (targets.length > 0 && !hasFinalizer(obj, FIELD_EXPORT_FINALIZER)) {
      const patch = await addFinalizer(this.options.client, obj, this.logger, FIELD_EXPORT_FINALIZER);
      if (!patch.ok) {
        if (patch.changed) return { state: undefined, retryAfterMs: undefined, requeue: true };
        return {
          state: {
            exports: previous,
            status: "False",
            reason: "ExportFailed",
            message: finalizerMessage(patch.problem),
          },
          retryAfterMs: this.pacing.afterFailure(memory),
        };
      }
      metadata = { resourceVersion: patch.resourceVersion, finalizers: patch.finalizers };
    }
    // Intent before write: a field not yet in status.exports is recorded there first.
    const recorded = new Set(previous.map((r) => fieldKey(asObject(r), r.fieldPath!)));
    const unrecorded = targets.filter((t) => !recorded.has(fieldKey(t, t.fieldPath)) && !this.withheld(t));
    if (unrecorded.length > 0) {
      const exports = [...previous, ...unrecorded.map((t) => recordOf(t, undefined))].sort(
        compareFieldRecords,
      );
      const step: FieldsStep = {
        state: {
          exports,
          status: "Unknown",
          reason: "Pending",
          message: "recording the fields in status.exports before writing them",
        },
        retryAfterMs: undefined,
        thenRequeue: true,
      };
      return metadata ? { ...step, metadata } : step;
    }
    const value = valueOf(result);
    const gathered: Gathered = { records: [], problems: [], deferredMs: undefined };
    await Promise.all(
      [...plan(targets, previous)].map(([key, p]) =>
        this.writeObject(obj, key, p, value, memory, previous, gathered, writer),
      ),
    );
    const step = summarize(targets, value, gathered, memory, this.options.rereadMs ?? FIELD_REREAD_MS, (m) =>
      this.pacing.afterFailure(m),
    );
    if (step.state === null && hasFinalizer(obj, FIELD_EXPORT_FINALIZER)) step.thenRequeue = true;
    return metadata ? { ...step, metadata } : step;
  }

  /**
   * Releases every field the Referable wrote, then its finalizer. Returns when to try again, if
   * something failed; `removed` is told the metadata the finalizer's removal made, so the caller
   * records its own write and goes on from it (never waiting for the echo).
   */
  async release(
    obj: Referable,
    memory: FieldsMemory,
    removed?: (metadata: { resourceVersion: string | undefined; finalizers: string[] }) => void,
  ): Promise<number | undefined> {
    const name = obj.metadata.name;
    const previous = (obj.status?.exports ?? []).filter(isFieldRecord);
    const targets: ParsedFieldTarget[] = [];
    for (const e of obj.spec?.export ?? []) {
      if (!isFieldEntry(e)) continue;
      const parsed = parseFieldTarget(e, "spec.export");
      if (typeof parsed !== "string") targets.push(parsed);
    }
    // Objects written into: a record with a resourceVersion. One recorded without (the intent
    // before a first write that never came: a kind not opted in, a missing object) holds nothing.
    const written = new Set(
      previous.filter((r) => r.resourceVersion !== undefined).map((r) => fieldObjectKey(asObject(r))),
    );
    const writer = this.writerFor(obj);
    if (typeof writer === "string") {
      this.logger.warn(
        { referable: name, problem: writer },
        "cannot release exported fields; the Referable keeps its finalizer until its spec is fixed",
      );
      return this.pacing.afterFailure(memory);
    }
    const options = fieldWriteOptions(name, writer);
    let failed = false;
    for (const p of plan(targets, previous).values()) {
      // A Secret without --allow-secret-export and nothing written there: not even read.
      if (this.withheld(p.object) && !written.has(fieldObjectKey(p.object))) continue;
      // Every field is released: the Referable's own manager lets go of all it applied there.
      const all = [
        ...p.targets.map((t) => ({ fieldPath: t.fieldPath, path: t.path })),
        ...p.dropped.map(pathOfRecord),
      ];
      try {
        const resource = await this.options.discovery.lookup(p.object.apiVersion, p.object.kind);
        const asked: AskedField[] = all
          .filter((a) => a.path !== undefined)
          .map((a) => ({ ...a, path: a.path!, value: undefined }));
        const state = await readFieldObject(writer.client, resource, p.object, asked, options);
        if (state.exists && state.applied.size > 0 && state.uid) {
          await applyFields(writer.client, resource, p.object, {}, state.uid, options);
          this.logger.info(
            { referable: name, target: describeFieldObject(p.object) },
            "released exported fields",
          );
        }
      } catch (err) {
        // Never written (e.g. a kind never opted in): nothing to keep the Referable for.
        if (!written.has(fieldObjectKey(p.object))) continue;
        if (isResolutionError(err) && (err.reason === "KindNotFound" || err.reason === "InvalidSpec"))
          continue;
        this.logger.warn(
          { referable: name, target: describeFieldObject(p.object), err: asError(err).message.slice(0, 300) },
          "could not release exported fields; the Referable keeps its finalizer until they are",
        );
        failed = true;
      }
    }
    if (failed) return this.pacing.afterFailure(memory);
    // Its claims go with it from the cache (referable/edges.ts): another claimant takes over
    // when the Referable is gone, so the fields are never written by two.
    const patch = await removeFinalizer(this.options.client, obj, this.logger, FIELD_EXPORT_FINALIZER);
    if (!patch.ok && !patch.changed) return this.pacing.afterFailure(memory);
    // Changed meanwhile (someone else's write): its own event brings the Referable back.
    if (patch.ok) removed?.({ resourceVersion: patch.resourceVersion, finalizers: patch.finalizers });
    return undefined;
  }

  /** Nothing to export into fields and nothing exported: let go of the finalizer, if held. */
  private async exportsNothing(obj: Referable, memory: FieldsMemory): Promise<FieldsStep> {
    if (memory.objects.size > 0 || memory.gates.size > 0 || memory.failures > 0)
      Object.assign(memory, newFieldsMemory());
    if (!hasFinalizer(obj, FIELD_EXPORT_FINALIZER)) return { state: null, retryAfterMs: undefined };
    const patch = await removeFinalizer(this.options.client, obj, this.logger, FIELD_EXPORT_FINALIZER);
    if (!patch.ok)
      return patch.changed
        ? { state: undefined, retryAfterMs: undefined, requeue: true }
        : { state: null, retryAfterMs: this.pacing.afterFailure(memory) };
    return {
      state: null,
      retryAfterMs: undefined,
      metadata: { resourceVersion: patch.resourceVersion, finalizers: patch.finalizers },
    };
  }

  private invalid(message: string, previous: ExportRecord[]): FieldsStep {
    // The records stay: what was written is released once the spec is fixed, or the Referable goes.
    return {
      state: { exports: previous, status: "False", reason: "InvalidSpec", message },
      retryAfterMs: undefined,
    };
  }

  /** Whether nothing is written into `object`: a Secret, without --allow-secret-export. */
  private withheld(object: FieldObject): boolean {
    return isSecret(object) && !(this.options.allowSecrets ?? false);
  }

  /**
   * A Secret without --allow-secret-export: its targets are `ExportForbidden`, and what was
   * written there before the flag was turned off is released (the flag gates writing values, not
   * cleaning up, as for keys). Nothing is read unless a record says something was written.
   */
  private async withhold(
    name: string,
    key: string,
    p: ObjectPlan,
    memory: FieldsMemory,
    previous: ExportRecord[],
    gathered: Gathered,
    writer: TargetWriter,
  ): Promise<void> {
    const what = describeFieldObject(p.object);
    if (p.targets.length > 0)
      gathered.problems.push({
        reason: "ExportForbidden",
        message: `${what}: the controller does not write Secrets unless started with --allow-secret-export (and RBAC lets it patch Secrets there)`,
        retry: false,
      });
    const mine = previous.filter((r) => fieldObjectKey(asObject(r)) === key);
    if (!mine.some((r) => r.resourceVersion !== undefined)) {
      gathered.records.push(...p.targets.map((t) => recordOf(t, undefined)));
      return;
    }
    if (!this.pacing.admit(key, memory, gathered)) {
      gathered.records.push(...mine);
      return;
    }
    memory.objects.delete(key);
    try {
      const resource = await this.options.discovery.lookup(p.object.apiVersion, p.object.kind);
      const asked: AskedField[] = [...p.targets, ...p.dropped.map(pathOfRecord)]
        .filter((a) => a.path !== undefined)
        .map((a) => ({ fieldPath: a.fieldPath!, path: a.path!, value: undefined }));
      const options = fieldWriteOptions(name, writer);
      const state = await readFieldObject(writer.client, resource, p.object, asked, options);
      if (state.exists && state.applied.size > 0 && state.uid) {
        await applyFields(writer.client, resource, p.object, {}, state.uid, options);
        this.options.onWrite?.("success");
        this.logger.info(
          { referable: name, target: what },
          "released exported fields written before --allow-secret-export was turned off",
        );
      }
      gathered.records.push(...p.targets.map((t) => recordOf(t, undefined)));
    } catch (err) {
      gathered.problems.push(failure(this.options.onWrite, this.logger, name, p.object, err));
      gathered.records.push(...mine);
    }
  }

  /** Brings one object to what it should hold, gathering its records and problems. */
  private async writeObject(
    obj: Referable,
    key: string,
    p: ObjectPlan,
    value: unknown,
    memory: FieldsMemory,
    previous: ExportRecord[],
    gathered: Gathered,
    writer: TargetWriter,
  ): Promise<void> {
    const name = obj.metadata.name;
    if (this.withheld(p.object)) return this.withhold(name, key, p, memory, previous, gathered, writer);
    const hash = hashOf(p, value);
    const generation = obj.metadata.generation;
    const known = memory.objects.get(key);
    const now = this.pacing.policy.clock();
    // Nothing changed since the last read (the value, the fields, the Referable's spec): a read
    // now is a drift read, on the controller's own initiative.
    const unchanged = known?.hash === hash && known.generation === generation;
    if (unchanged) {
      const interval = known.missingMs ?? this.options.rereadMs ?? FIELD_REREAD_MS;
      const left = interval - (now - known.verifiedAt);
      const wait = left > 0 ? left : this.reads.admit(memory.reads);
      if (wait > 0) {
        gathered.records.push(...known.records);
        gathered.problems.push(...known.problems);
        if (known.missingMs !== undefined || left <= 0)
          gathered.dueMs = Math.min(gathered.dueMs ?? wait, wait);
        return;
      }
    }
    if (!this.pacing.admit(key, memory, gathered)) {
      // Held back: what the status says of this object stays until the write.
      gathered.records.push(...previous.filter((r) => fieldObjectKey(asObject(r)) === key));
      return;
    }
    memory.objects.delete(key);
    const problems: Problem[] = [];
    let records: ExportRecord[];
    try {
      const resource = await this.options.discovery.lookup(p.object.apiVersion, p.object.kind);
      const sync = { claims: this.options.claims, logger: this.logger, onWrite: this.options.onWrite };
      records = await syncFieldObject(sync, name, resource, p, value, previous, problems, writer);
    } catch (err) {
      problems.push(failure(this.options.onWrite, this.logger, name, p.object, err));
      // Nothing is known to have changed: the records stay as they were.
      records = [
        ...p.targets.map((t) => recordOf(t, findRecord(previous, t)?.resourceVersion)),
        ...p.dropped,
      ];
    }
    gathered.records.push(...records);
    gathered.problems.push(...problems);
    if (problems.every((x) => !x.retry)) {
      const entry: Known = { hash, verifiedAt: now, records, problems, generation };
      if (problems.some((x) => x.reason === "TargetNotFound")) {
        // Missing again, with nothing changed: twice as long as last time; else from the start.
        entry.missingMs =
          unchanged && known.missingMs !== undefined
            ? Math.min(MISSING_MAX_MS, known.missingMs * 2)
            : MISSING_FIRST_MS;
        gathered.dueMs = Math.min(gathered.dueMs ?? entry.missingMs, entry.missingMs);
      }
      memory.objects.set(key, entry);
    }
  }
}
