/**
 * What the key output remembers of a Referable, and the pure steps of a write: which objects
 * it touches, what the result puts there, and the Exported state when all went well.
 */
import { digest } from "../../api/digest.ts";
import { isExportKind } from "../../api/export-kinds.ts";
import type { ExportRecord } from "../../api/referable.ts";
import type { ResolutionResult, SourceRef } from "../../resolver/types.ts";
import type { ExportState } from "../export-state.ts";
import type { WriteGate } from "../write-policy.ts";
import { exportText, objectKey, type ExportTarget, type TargetObject } from "./target.ts";
import type { KnownObject } from "./writer.ts";

/** One object the Referable writes into, and what it remembers of it. */
export interface Written {
  object: TargetObject;
  /** Hash of the keys and texts last found in, or applied to, the object. */
  hash: string;
  records: ExportRecord[];
  /** The object's uid and whether the Referable created it: the next change applies without a read. */
  known: KnownObject | undefined;
  /** The object's resourceVersion after the last write (or read): its watch event is the echo. */
  version: string | undefined;
}

/**
 * What the key output remembers of one Referable: a hash per target object, never a value.
 * Owned by the Referable's state (src/referable/state.ts), forgotten with it, and dropped on a
 * change of leader (another leader may have written the targets).
 */
export interface KeysMemory {
  objects: Map<string, Written>;
  /** Per object: its share of the write policy. */
  gates: Map<string, WriteGate>;
  /** Failed attempts in a row, for the backoff. */
  failures: number;
  /**
   * Objects changed by someone else since last read (the target watch says so): the next write
   * reads them again, whatever {@link objects} remembers. Each with the resourceVersion of the
   * change seen (undefined: a deletion, or a periodic re-read): a write in flight that made that
   * very version was its own echo.
   */
  stale: Map<string, string | undefined>;
  /** Why the last release (on deletion) left something, for the Exported condition. */
  releaseProblem?: { reason: string; message: string } | undefined;
}

/** A Referable's empty memory. */
export function newKeysMemory(): KeysMemory {
  return { objects: new Map(), gates: new Map(), failures: 0, stale: new Map() };
}

/** Every object the Referable writes into, or wrote into (a target removed from the spec). */
export function planObjects(
  targets: ExportTarget[],
  previous: ExportRecord[],
  memory: KeysMemory,
): ObjectPlan {
  const objects: ObjectPlan = new Map();
  const entry = (o: TargetObject) => {
    const k = objectKey(o);
    let e = objects.get(k);
    if (!e)
      objects.set(k, (e = { object: { kind: o.kind, namespace: o.namespace, name: o.name }, keys: [] }));
    return e;
  };
  for (const t of targets) entry(t).keys.push(t.key);
  for (const p of previous) if (isExportKind(p.kind)) entry(p as TargetObject);
  // And what this process wrote, should a status recording it have failed to be written.
  for (const w of memory.objects.values()) entry(w.object);
  return objects;
}

/** The Exported state of a write without problems. */
export function exportedState(
  targets: ExportTarget[],
  text: string | undefined,
  records: ExportRecord[],
): ExportState | null {
  // spec.export was emptied and its keys are removed: the status drops the export part, and
  // the same look lets go of the finalizer once the status says so.
  if (targets.length === 0) return null;
  if (text === undefined)
    return {
      exports: records,
      status: "False",
      reason: "NoValue",
      message: "the Referable has no value (see the Ready condition): its exported keys are removed",
    };
  return { exports: records, status: "True", reason: "Exported", message: "" };
}

/** The ConfigMaps and Secrets the result was read from, as object keys. */
export function readObjects(result: ResolutionResult): Set<string> {
  const keys = new Set<string>();
  if (!result.ok) return keys;
  const sources: SourceRef[] =
    "sources" in result && result.sources
      ? result.sources
      : "source" in result && result.source
        ? [result.source]
        : [];
  for (const s of sources)
    if (s.apiVersion === "v1" && isExportKind(s.kind) && s.namespace)
      keys.add(objectKey({ kind: s.kind, namespace: s.namespace, name: s.name }));
  return keys;
}

/** The text to export, or undefined when the Referable has no value. */
export function valueText(result: ResolutionResult): string | undefined {
  if (!result.ok) return undefined;
  if ("values" in result) return exportText(result.values);
  return result.value === undefined || result.value === null ? undefined : exportText(result.value);
}

export function hashOf(keys: Record<string, string>): string {
  return digest(
    Object.keys(keys)
      .sort()
      .flatMap((k) => [k, keys[k]!]),
    22,
  );
}

/** One string per record's key: object and key. */
export function recordKey(r: Pick<ExportRecord, "kind" | "namespace" | "name" | "key">): string {
  return `${r.kind}/${r.namespace}/${r.name}/${r.key}`;
}

export function compareRecords(a: ExportRecord, b: ExportRecord): number {
  return (
    a.kind.localeCompare(b.kind) ||
    a.namespace.localeCompare(b.namespace) ||
    a.name.localeCompare(b.name) ||
    (a.key ?? "").localeCompare(b.key ?? "")
  );
}

/** The objects of one write, with the keys each should hold. */
export type ObjectPlan = Map<string, { object: TargetObject; keys: string[] }>;
