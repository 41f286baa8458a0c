/**
 * The field output's plan of one pass (the objects it is about, their fields and dropped records),
 * what it remembers of a Referable, and the status records it writes. Pure: no I/O.
 */
import type { ExportRecord, Referable } from "../../api/referable.ts";
import { digest } from "../../api/digest.ts";
import { stableStringify } from "../../api/stable-json.ts";
import type { ResolutionResult } from "../../resolver/types.ts";
import type { ExportStep } from "../export-output.ts";
import type { ReadGate } from "../read-budget.ts";
import type { WriteGate } from "../write-policy.ts";
import {
  fieldKey,
  fieldObjectKey,
  parseWritePath,
  type FieldObject,
  type ParsedFieldTarget,
} from "./target.ts";

/** What the output remembers of one object: a hash of what it should hold, never a value. */
export interface Known {
  hash: string;
  /** When the object was last read (policy clock). */
  verifiedAt: number;
  records: ExportRecord[];
  problems: Problem[];
  /**
   * The object did not exist: how long until it is read again (1 s, doubling up to 5 min at each
   * read that finds it still missing), instead of the reread interval.
   */
  missingMs?: number;
  /** The Referable's generation when it was read: a spec change reads it again at once. */
  generation?: number | undefined;
}

/** What the field output remembers of one Referable; dropped on a change of leader. */
export interface FieldsMemory {
  objects: Map<string, Known>;
  gates: Map<string, WriteGate>;
  failures: number;
  /** Its place in the line of the controller's read budget (read-budget.ts). */
  reads: ReadGate;
}

/** A Referable's empty memory. */
export function newFieldsMemory(): FieldsMemory {
  return { objects: new Map(), gates: new Map(), failures: 0, reads: { readUntil: undefined } };
}

/** What the field output asks of the reconcile: the key output's shape. */
export type FieldsStep = ExportStep;

export interface Problem {
  reason: string;
  message: string;
  /** Whether the backoff applies (a refusal to retry), not the reread interval alone. */
  retry: boolean;
}

export interface Gathered {
  records: ExportRecord[];
  problems: Problem[];
  deferredMs: number | undefined;
  /** The soonest a missing object is due to be read again, in ms. */
  dueMs?: number | undefined;
}

/** The fields of one object this pass is about. */
export interface ObjectPlan {
  object: FieldObject;
  targets: ParsedFieldTarget[];
  /** Fields recorded before that the spec no longer names: released. */
  dropped: ExportRecord[];
}

/** Whether a status record is a field's (not a key's). */
export function isFieldRecord(r: ExportRecord): boolean {
  return r.fieldPath !== undefined;
}

/** The objects of one pass: the spec's targets, and the recorded fields the spec dropped. */
export function plan(targets: ParsedFieldTarget[], previous: ExportRecord[]): Map<string, ObjectPlan> {
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

export function asObject(r: ExportRecord): FieldObject {
  return { apiVersion: r.apiVersion ?? "v1", kind: r.kind, namespace: r.namespace, name: r.name };
}

export function pathOfRecord(r: ExportRecord): { fieldPath: string; path: string[] | undefined } {
  const path = parseWritePath(r.fieldPath!);
  return { fieldPath: r.fieldPath!, path: typeof path === "string" ? undefined : path };
}

export function recordOf(t: ParsedFieldTarget, resourceVersion: string | undefined): ExportRecord {
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

export function findRecord(previous: ExportRecord[], t: ParsedFieldTarget): ExportRecord | undefined {
  const k = fieldKey(t, t.fieldPath);
  return previous.find((r) => fieldKey(asObject(r), r.fieldPath!) === k);
}

/** The order of creation: creationTimestamp (RFC 3339, so it sorts as text), then name. */
export function createdKey(obj: Referable): string {
  const ts = obj.metadata.creationTimestamp;
  return `${typeof ts === "string" ? ts : "9999"}\u0000${obj.metadata.name}`;
}

/** The value to write, or undefined when the Referable has none (with its JSON type, not text). */
export function valueOf(result: ResolutionResult): unknown {
  if (!result.ok) return undefined;
  if ("values" in result) return result.values;
  return result.value === null ? undefined : result.value;
}

export function hashOf(p: ObjectPlan, value: unknown): string {
  const parts = [
    stableStringify(p.targets.map((t) => [t.fieldPath, t.policy])),
    stableStringify(p.dropped.map((r) => r.fieldPath)),
    value === undefined ? "" : stableStringify(value),
  ];
  return digest(parts, 22);
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
