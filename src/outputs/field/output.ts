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
import { createHash } from "node:crypto";
import { Limits } from "../../api/limits.ts";
import { FIELD_EXPORT_FINALIZER, type ExportRecord, type Referable } from "../../api/referable.ts";
import { stableStringify } from "../../api/stable-json.ts";
import { asError, isResolutionError } from "../../errors.ts";
import type { KubeClient } from "../../kube/client.ts";
import type { KindResolver, ResourceInfo } from "../../kube/discovery.ts";
import { silentLogger, type Logger } from "../../log.ts";
import type { ExportState } from "../../referable/status.ts";
import type { ResolutionResult } from "../../resolver/types.ts";
import { backoffDelay } from "../../runtime/backoff.ts";
import type { Output } from "../output.ts";
import { isExportError } from "../keys/errors.ts";
import { addFinalizer, finalizerMessage, hasFinalizer, removeFinalizer } from "../keys/finalizer.ts";
import { fieldManagerFor } from "../keys/target.ts";
import { pass, WritePolicy, type WriteGate } from "../write-policy.ts";
import {
  describeFieldObject,
  fieldKey,
  fieldObjectKey,
  isFieldEntry,
  mergeInto,
  nest,
  overlapping,
  parseFieldTarget,
  parseWritePath,
  type FieldObject,
  type ParsedFieldTarget,
} from "./target.ts";
import { applyFields, fillField, readFieldObject, type AskedField, type FieldObjectState } from "./writer.ts";

export { FIELD_EXPORT_FINALIZER } from "../../api/referable.ts";

/** The longest time an object written into goes without being read again. */
export const FIELD_REREAD_MS = 30_000;

/** Options for {@link FieldOutput}. */
export interface FieldOutputOptions {
  client: Pick<KubeClient, "request">;
  /** Maps a target's apiVersion/kind to its resource (share the resolver's). */
  discovery: KindResolver;
  /** Asks for a look at a Referable (a Referable it shares a field with changed its claim). */
  enqueue?: (name: string) => void;
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
  /** Told of every write and failure, for metrics. Must not throw. */
  onWrite?: (result: "success" | "conflict" | "forbidden" | "error") => void;
}

/** What the output remembers of one object: a hash of what it should hold, never a value. */
interface Known {
  hash: string;
  /** When the object was last read (policy clock). */
  verifiedAt: number;
  records: ExportRecord[];
  problems: Problem[];
}

/** What the field output remembers of one Referable; dropped on a change of leader. */
export interface FieldsMemory {
  objects: Map<string, Known>;
  gates: Map<string, WriteGate>;
  failures: number;
}

/** A Referable's empty memory. */
export function newFieldsMemory(): FieldsMemory {
  return { objects: new Map(), gates: new Map(), failures: 0 };
}

/** What the field output asks of the reconcile; the same shape as the key output's step. */
export interface FieldsStep {
  state: ExportState | null | undefined;
  retryAfterMs: number | undefined;
  metadata?: { resourceVersion: string | undefined; finalizers: string[] };
  requeue?: boolean;
  thenRequeue?: boolean;
}

interface Problem {
  reason: string;
  message: string;
  /** Whether the backoff applies (a refusal to retry), not the reread interval alone. */
  retry: boolean;
}

interface Gathered {
  records: ExportRecord[];
  problems: Problem[];
  deferredMs: number | undefined;
}

/** The fields of one object this pass is about. */
interface ObjectPlan {
  object: FieldObject;
  targets: ParsedFieldTarget[];
  /** Fields recorded before that the spec no longer names: released. */
  dropped: ExportRecord[];
}

/** Whether a status record is a field's (not a key's). */
export function isFieldRecord(r: ExportRecord): boolean {
  return r.fieldPath !== undefined;
}

/** Writes and releases the fields of spec.export; one per controller. See the module comment. */
export class FieldOutput implements Output<ResolutionResult, FieldsStep, FieldsMemory> {
  private readonly options: FieldOutputOptions;
  private readonly logger: Logger;
  private readonly policy: WritePolicy;
  /** Per field of an object: the Referables naming it, with their creation order key. Bounded by 16 per Referable. */
  private readonly claims = new Map<string, Map<string, string>>();
  /** Per Referable: the fields it claims. */
  private readonly claimed = new Map<string, Set<string>>();

  constructor(options: FieldOutputOptions) {
    this.options = options;
    this.logger = options.logger ?? silentLogger;
    this.policy = options.policy ?? new WritePolicy({}, options.clock);
  }

  /** Whether the Referable holds the field finalizer while being deleted: {@link release} must run. */
  finalizing(obj: Referable): boolean {
    return obj.metadata.deletionTimestamp !== undefined && hasFinalizer(obj, FIELD_EXPORT_FINALIZER);
  }

  /** Forgets a Referable that is gone (its claims). */
  forget(name: string): void {
    this.claim(name, "", []);
  }

  async write(obj: Referable, result: ResolutionResult, memory: FieldsMemory): Promise<FieldsStep> {
    const name = obj.metadata.name;
    const entries = (obj.spec?.export ?? []).map((e, i) => ({ e, i })).filter(({ e }) => isFieldEntry(e));
    const previous = (obj.status?.exports ?? []).filter(isFieldRecord);
    if (entries.length === 0 && previous.length === 0) return this.exportsNothing(obj, memory);
    const targets: ParsedFieldTarget[] = [];
    for (const { e, i } of entries) {
      const parsed = parseFieldTarget(e, `spec.export[${i}]`);
      if (typeof parsed === "string") return this.invalid(parsed, previous);
      const clash = targets.find(
        (t) => fieldObjectKey(t) === fieldObjectKey(parsed) && overlapping(t.path, parsed.path),
      );
      if (clash)
        return this.invalid(
          `spec.export[${i}].fieldPath ${JSON.stringify(parsed.fieldPath)} overlaps ${JSON.stringify(clash.fieldPath)} of the same object: name each field once, and none inside another`,
          previous,
        );
      targets.push(parsed);
    }
    this.claim(name, createdKey(obj), targets);
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
          retryAfterMs: this.backoff(memory),
        };
      }
      metadata = { resourceVersion: patch.resourceVersion, finalizers: patch.finalizers };
    }
    // Intent before write: a field not yet in status.exports is recorded there first.
    const recorded = new Set(previous.map((r) => fieldKey(asObject(r), r.fieldPath!)));
    const unrecorded = targets.filter((t) => !recorded.has(fieldKey(t, t.fieldPath)));
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
        this.writeObject(obj, key, p, value, memory, previous, gathered),
      ),
    );
    const step = this.summarize(targets, value, gathered, memory);
    if (step.state === null && hasFinalizer(obj, FIELD_EXPORT_FINALIZER)) step.thenRequeue = true;
    return metadata ? { ...step, metadata } : step;
  }

  /** Releases every field the Referable wrote, then its finalizer. Returns when to try again, if something failed. */
  async release(obj: Referable, memory: FieldsMemory): Promise<number | undefined> {
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
    let failed = false;
    for (const p of plan(targets, previous).values()) {
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
        const state = await readFieldObject(
          this.options.client,
          resource,
          p.object,
          asked,
          this.writeOptions(name),
        );
        if (state.exists && state.applied.size > 0 && state.uid) {
          await applyFields(this.options.client, resource, p.object, {}, state.uid, this.writeOptions(name));
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
    if (failed) return this.backoff(memory);
    this.forget(name);
    const patch = await removeFinalizer(this.options.client, obj, this.logger, FIELD_EXPORT_FINALIZER);
    if (!patch.ok && !patch.changed) return this.backoff(memory);
    return undefined;
  }

  /** Nothing to export into fields and nothing exported: let go of the finalizer, if held. */
  private async exportsNothing(obj: Referable, memory: FieldsMemory): Promise<FieldsStep> {
    this.forget(obj.metadata.name);
    if (memory.objects.size > 0 || memory.gates.size > 0 || memory.failures > 0)
      Object.assign(memory, newFieldsMemory());
    if (!hasFinalizer(obj, FIELD_EXPORT_FINALIZER)) return { state: null, retryAfterMs: undefined };
    const patch = await removeFinalizer(this.options.client, obj, this.logger, FIELD_EXPORT_FINALIZER);
    if (!patch.ok)
      return patch.changed
        ? { state: undefined, retryAfterMs: undefined, requeue: true }
        : { state: null, retryAfterMs: this.backoff(memory) };
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

  /** Records `name`'s claims (replacing the earlier ones) and asks every Referable sharing one to look again. */
  private claim(name: string, created: string, targets: readonly ParsedFieldTarget[]): void {
    const next = new Set(targets.map((t) => fieldKey(t, t.fieldPath)));
    const before = this.claimed.get(name) ?? new Set<string>();
    const touched = new Set<string>();
    for (const k of before) {
      if (next.has(k)) continue;
      const c = this.claims.get(k);
      c?.delete(name);
      if (c?.size === 0) this.claims.delete(k);
      else if (c) for (const other of c.keys()) touched.add(other);
    }
    for (const k of next) {
      let c = this.claims.get(k);
      if (!c) this.claims.set(k, (c = new Map()));
      if (c.get(name) !== created) for (const other of c.keys()) if (other !== name) touched.add(other);
      c.set(name, created);
    }
    if (next.size > 0) this.claimed.set(name, next);
    else this.claimed.delete(name);
    for (const other of touched) this.options.enqueue?.(other);
  }

  /** The Referable that owns a field by the one-owner rule (the first created naming it). */
  private ownerOf(key: string): string | undefined {
    const c = this.claims.get(key);
    if (!c) return undefined;
    let best: [string, string] | undefined;
    for (const [name, created] of c) if (!best || created < best[1]) best = [name, created];
    return best?.[0];
  }

  /** The Referable a field manager belongs to, among those claiming `key`. */
  private claimantOf(key: string, manager: string): string | undefined {
    for (const name of this.claims.get(key)?.keys() ?? []) if (fieldManagerFor(name) === manager) return name;
    return undefined;
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
  ): Promise<void> {
    const name = obj.metadata.name;
    const hash = hashOf(p, value);
    const known = memory.objects.get(key);
    const now = this.policy.clock();
    if (known?.hash === hash && now - known.verifiedAt < (this.options.rereadMs ?? FIELD_REREAD_MS)) {
      gathered.records.push(...known.records);
      gathered.problems.push(...known.problems);
      return;
    }
    if (!this.admitted(key, memory, gathered)) {
      // Held back: what the status says of this object stays until the write.
      gathered.records.push(...previous.filter((r) => fieldObjectKey(asObject(r)) === key));
      return;
    }
    memory.objects.delete(key);
    const problems: Problem[] = [];
    let records: ExportRecord[];
    try {
      const resource = await this.options.discovery.lookup(p.object.apiVersion, p.object.kind);
      records = await this.sync(name, resource, p, value, previous, problems);
    } catch (err) {
      problems.push(this.failure(name, p.object, err));
      // Nothing is known to have changed: the records stay as they were.
      records = [
        ...p.targets.map((t) => recordOf(t, findRecord(previous, t)?.resourceVersion)),
        ...p.dropped,
      ];
    }
    gathered.records.push(...records);
    gathered.problems.push(...problems);
    if (problems.every((x) => !x.retry))
      memory.objects.set(key, { hash, verifiedAt: now, records, problems });
  }

  /** Reads the object, then applies (and fills) what differs. Throws what the status reports for the whole object. */
  private async sync(
    name: string,
    resource: ResourceInfo,
    p: ObjectPlan,
    value: unknown,
    previous: ExportRecord[],
    problems: Problem[],
  ): Promise<ExportRecord[]> {
    const options = this.writeOptions(name);
    const asked: AskedField[] = [
      ...p.targets.map((t) => ({ fieldPath: t.fieldPath, path: t.path, value })),
      ...p.dropped
        .map(pathOfRecord)
        .filter((a) => a.path !== undefined)
        .map((a) => ({ ...a, path: a.path!, value: undefined })),
    ];
    const state = await readFieldObject(this.options.client, resource, p.object, asked, options);
    const what = describeFieldObject(p.object);
    if (!state.exists || !state.uid) {
      if (p.targets.length > 0)
        problems.push({
          reason: "TargetNotFound",
          message: `${what} does not exist: objects are never created for a field; create it, or export to another object`,
          retry: false,
        });
      return p.targets.map((t) => recordOf(t, undefined));
    }
    const { body, included, fills, force } = this.decide(name, what, p, state, value, problems);
    const stale = [...state.applied].some((fp) => !included.has(fp));
    const differs = [...included].some((fp) => {
      const f = state.fields.get(fp)!;
      return !(f.mine && f.equal);
    });
    let resourceVersion = state.resourceVersion;
    let written = false;
    if (differs || stale) {
      resourceVersion = await applyFields(
        this.options.client,
        resource,
        p.object,
        body,
        state.uid,
        { ...options, force },
        [value],
      );
      written = true;
    }
    for (const t of fills) {
      resourceVersion = await fillField(
        this.options.client,
        resource,
        p.object,
        t.path,
        value,
        resourceVersion!,
        options,
      );
      written = true;
    }
    if (written) {
      this.options.onWrite?.("success");
      this.logger.info(
        { referable: name, target: what, fields: included.size + fills.length },
        "exported the value into fields",
      );
    }
    return p.targets.map((t) => {
      const wroteIt = written && (included.has(t.fieldPath) || fills.includes(t));
      return recordOf(
        t,
        wroteIt ? resourceVersion : (findRecord(previous, t)?.resourceVersion ?? resourceVersion),
      );
    });
  }

  /**
   * What one object gets: the body to apply (the Referable's fields there that it owns and that
   * have a value), the IfNotPresent fields to fill, and whether the apply takes a field from a
   * later Referable (force). A field owned elsewhere is a problem, left out.
   */
  private decide(
    name: string,
    what: string,
    p: ObjectPlan,
    state: FieldObjectState,
    value: unknown,
    problems: Problem[],
  ): { body: Record<string, unknown>; included: Set<string>; fills: ParsedFieldTarget[]; force: boolean } {
    const body: Record<string, unknown> = {};
    const included = new Set<string>();
    const fills: ParsedFieldTarget[] = [];
    let force = false;
    for (const t of p.targets) {
      const f = state.fields.get(t.fieldPath)!;
      const owner = this.ownerOf(fieldKey(t, t.fieldPath));
      if (owner !== undefined && owner !== name) {
        problems.push({
          reason: "ExportConflict",
          message: `${what}: ${t.fieldPath} is exported by the Referable ${owner}, created first: one field has one owner; export to another field`,
          retry: false,
        });
        continue;
      }
      if (value === undefined) continue; // no value: released (Always), left (IfNotPresent)
      if (t.policy === "IfNotPresent") {
        if (!f.present) fills.push(t);
        continue;
      }
      if (f.others.length > 0 && !f.equal) {
        const strangers = f.others.filter((m) => this.claimantOf(fieldKey(t, t.fieldPath), m) === undefined);
        if (strangers.length > 0) {
          problems.push({
            reason: "ExportConflict",
            message: `${what}: ${t.fieldPath} is owned by the field manager ${strangers.map((m) => JSON.stringify(m)).join(", ")}: it is never taken; remove the field there (or hand it over), or export to another field`,
            retry: false,
          });
          continue;
        }
        force = true; // held by a later Referable only: the owner takes it over
      }
      mergeInto(body, nest(t.path, value));
      included.add(t.fieldPath);
    }
    return { body, included, fills, force };
  }

  /** Whether the object's share of the write policy lets it be written now; else the wait is gathered. */
  private admitted(key: string, memory: FieldsMemory, gathered: Gathered): boolean {
    let gate = memory.gates.get(key);
    if (!gate) {
      const interval = this.options.minWriteIntervalMs ?? 100;
      memory.gates.set(key, (gate = this.policy.gate(interval > 0 ? 1000 / interval : 0)));
    }
    const admission = pass(this.policy, gate);
    if (admission.write) return true;
    gathered.deferredMs = Math.min(gathered.deferredMs ?? admission.retryAfterMs, admission.retryAfterMs);
    return false;
  }

  private failure(name: string, object: FieldObject, err: unknown): Problem {
    const what = describeFieldObject(object);
    if (isResolutionError(err)) {
      // Discovery: the kind is not served (yet), or the apiVersion cannot be one.
      const reason = err.reason === "InvalidSpec" ? "InvalidSpec" : "TargetNotFound";
      return { reason, message: `${what}: ${err.message}`, retry: err.reason !== "InvalidSpec" };
    }
    const reason = isExportError(err) ? err.reason : undefined;
    this.options.onWrite?.(
      reason === "ExportConflict" ? "conflict" : reason === "ExportForbidden" ? "forbidden" : "error",
    );
    if (!isExportError(err))
      return {
        reason: "ExportFailed",
        message: `${what}: ${asError(err).message.slice(0, 300)}; retrying`,
        retry: true,
      };
    this.logger.warn(
      { referable: name, target: what, reason: err.reason },
      "could not export the value into a field",
    );
    return {
      reason: err.reason,
      message: err.message,
      retry: err.retryable && err.reason !== "ExportConflict",
    };
  }

  private summarize(
    targets: ParsedFieldTarget[],
    value: unknown,
    gathered: Gathered,
    memory: FieldsMemory,
  ): FieldsStep {
    const { records, problems, deferredMs } = gathered;
    const reread = this.options.rereadMs ?? FIELD_REREAD_MS;
    if (targets.length === 0 && problems.length === 0 && deferredMs === undefined) {
      // spec names no field any more, and every recorded one is released.
      return { state: null, retryAfterMs: undefined };
    }
    // Some object waits for the write policy: the status keeps saying what the fields hold until then.
    if (deferredMs !== undefined && problems.length === 0)
      return { state: undefined, retryAfterMs: deferredMs };
    const next = (ms: number | undefined) => Math.min(reread, ms ?? reread, deferredMs ?? reread);
    records.sort(compareFieldRecords);
    if (problems.length === 0) {
      memory.failures = 0;
      if (value === undefined)
        return {
          state: {
            exports: records,
            status: "False",
            reason: "NoValue",
            message: "the Referable has no value (see the Ready condition): its exported fields are released",
          },
          retryAfterMs: next(undefined),
        };
      return {
        state: { exports: records, status: "True", reason: "Exported", message: "" },
        retryAfterMs: next(undefined),
      };
    }
    problems.sort((a, b) => a.message.localeCompare(b.message));
    const state: ExportState = {
      exports: records,
      status: "False",
      reason: problems[0]!.reason,
      message: problems
        .map((x) => x.message)
        .join("; ")
        .slice(0, Limits.conditionMessage),
    };
    const retry = problems.some((x) => x.retry) ? this.backoff(memory) : undefined;
    return { state, retryAfterMs: next(retry) };
  }

  private writeOptions(name: string): { fieldManager: string; forbiddenHint: string } {
    return {
      fieldManager: fieldManagerFor(name),
      forbiddenHint:
        "opt the kind in: an administrator grants the controller get and patch on it (a ClusterRole labelled referable.dev/aggregate-to-export-fields, deploy/examples/export-fields)",
    };
  }

  private backoff(memory: FieldsMemory): number {
    const attempt = memory.failures++;
    return backoffDelay(attempt, {
      baseMs: this.options.minRetryMs ?? 1000,
      maxMs: this.options.maxRetryMs ?? 300_000,
    });
  }
}

/** The objects of one pass: the spec's targets, and the recorded fields the spec dropped. */
function plan(targets: ParsedFieldTarget[], previous: ExportRecord[]): Map<string, ObjectPlan> {
  const out = new Map<string, ObjectPlan>();
  const entry = (o: FieldObject) => {
    const k = fieldObjectKey(o);
    let e = out.get(k);
    if (!e)
      out.set(
        k,
        (e = {
          object: { apiVersion: o.apiVersion, kind: o.kind, namespace: o.namespace, name: o.name },
          targets: [],
          dropped: [],
        }),
      );
    return e;
  };
  const named = new Set(targets.map((t) => fieldKey(t, t.fieldPath)));
  for (const t of targets) entry(t).targets.push(t);
  for (const r of previous) {
    const o = asObject(r);
    if (!named.has(fieldKey(o, r.fieldPath!))) entry(o).dropped.push(r);
  }
  return out;
}

function asObject(r: ExportRecord): FieldObject {
  return { apiVersion: r.apiVersion ?? "v1", kind: r.kind, namespace: r.namespace, name: r.name };
}

function pathOfRecord(r: ExportRecord): { fieldPath: string; path: string[] | undefined } {
  const path = parseWritePath(r.fieldPath!);
  return { fieldPath: r.fieldPath!, path: typeof path === "string" ? undefined : path };
}

function recordOf(t: ParsedFieldTarget, resourceVersion: string | undefined): ExportRecord {
  const r: ExportRecord = {
    apiVersion: t.apiVersion,
    kind: t.kind,
    namespace: t.namespace,
    name: t.name,
    fieldPath: t.fieldPath,
  };
  if (resourceVersion !== undefined) r.resourceVersion = resourceVersion;
  return r;
}

function findRecord(previous: ExportRecord[], t: ParsedFieldTarget): ExportRecord | undefined {
  const k = fieldKey(t, t.fieldPath);
  return previous.find((r) => fieldKey(asObject(r), r.fieldPath!) === k);
}

/** The order of creation: creationTimestamp (RFC 3339, so it sorts as text), then name. */
function createdKey(obj: Referable): string {
  const ts = obj.metadata.creationTimestamp;
  return `${typeof ts === "string" ? ts : "9999"}\u0000${obj.metadata.name}`;
}

/** The value to write, or undefined when the Referable has none (with its JSON type, not text). */
function valueOf(result: ResolutionResult): unknown {
  if (!result.ok) return undefined;
  if ("values" in result) return result.values;
  return result.value === null ? undefined : result.value;
}

function hashOf(p: ObjectPlan, value: unknown): string {
  const h = createHash("sha256");
  h.update(stableStringify(p.targets.map((t) => [t.fieldPath, t.policy])));
  h.update("\0").update(stableStringify(p.dropped.map((r) => r.fieldPath)));
  h.update("\0").update(value === undefined ? "" : stableStringify(value));
  return h.digest("base64").slice(0, 22);
}

export function compareFieldRecords(a: ExportRecord, b: ExportRecord): number {
  return (
    (a.apiVersion ?? "").localeCompare(b.apiVersion ?? "") ||
    a.kind.localeCompare(b.kind) ||
    a.namespace.localeCompare(b.namespace) ||
    a.name.localeCompare(b.name) ||
    (a.fieldPath ?? "").localeCompare(b.fieldPath ?? "")
  );
}
