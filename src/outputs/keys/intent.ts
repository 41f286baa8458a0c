/**
 * Intent before write, for the key output: the objects that would get a key status.exports does
 * not name yet, the status step that records them first (see sweep.ts), and the records of keys
 * another manager owns (an intent only).
 */
import { EXPORT_KINDS } from "../../api/export-kinds.ts";
import { isApiError, type ApiError } from "../../kube/client.ts";
import { EXPORTED, type ExportRecord, type Referable } from "../../api/referable.ts";
import { compareRecords, recordKey, type KeysMemory, type ObjectPlan } from "./memory.ts";
import { summarize, type Gathered, type KeysStep } from "./summary.ts";
import { ExportLimits, objectKey, type TargetObject } from "./target.ts";

/**
 * The objects of `plan` that would get a key now that `previous` (status.exports) does not
 * name: each waits for a status write that names it. Not those written nowhere (an object
 * the value is read from, a Secret without --allow-secret-export).
 */
export function unrecorded(
  plan: ObjectPlan,
  previous: ExportRecord[],
  read: Set<string>,
  allowSecrets: boolean | undefined,
): Set<string> {
  const named = new Set(previous.map(recordKey));
  const out = new Set<string>();
  for (const [key, { object, keys }] of plan) {
    if (keys.length === 0 || read.has(key)) continue;
    if (EXPORT_KINDS[object.kind].needsSecretExport && !allowSecrets) continue;
    if (keys.some((k) => !named.has(recordKey({ ...object, key: k })))) out.add(key);
  }
  return out;
}

/**
 * The status step that records the intent to write `intents`: the records of what was written
 * now, the previous records of the objects that wait, and for each key they will get a record
 * without a resourceVersion. The writes follow on the next look, once the status says so.
 * Never more records than the CRD allows: a key that does not fit waits for keys of dropped
 * targets to be removed.
 */
export function recordIntent(
  obj: Referable,
  plan: ObjectPlan,
  intents: Set<string>,
  previous: ExportRecord[],
  gathered: Gathered,
  memory: KeysMemory,
  retryDelayOf: (memory: KeysMemory) => number,
): KeysStep {
  const records = [...gathered.records];
  const pending: ExportRecord[] = [];
  for (const key of intents) {
    const { object, keys } = plan.get(key)!;
    const before = previous.filter((r) => objectKey(r as TargetObject) === key);
    records.push(...before);
    const named = new Set(before.map((r) => r.key));
    for (const k of keys)
      if (!named.has(k))
        pending.push({ kind: object.kind, namespace: object.namespace, name: object.name, key: k });
  }
  pending.sort(compareRecords);
  records.push(...pending.slice(0, Math.max(0, ExportLimits.targets - records.length)));
  records.sort(compareRecords);
  if (gathered.problems.length > 0) {
    // On the backoff as well: should no record fit (dropped targets' keys not yet removed),
    // the status may not change, and no write would call for the next look.
    const step = summarize(
      [],
      undefined,
      { ...gathered, records, deferredMs: undefined },
      memory,
      retryDelayOf,
    );
    return { ...step, thenRequeue: true };
  }
  const shown = obj.status?.conditions?.find((c) => c.type === EXPORTED);
  return {
    state: {
      exports: records,
      status: shown?.status ?? "Unknown",
      reason: shown?.reason ?? "Pending",
      message: shown?.message ?? "recording the keys of spec.export in status.exports before writing them",
    },
    retryAfterMs: undefined,
    thenRequeue: true,
  };
}

/**
 * The keys of `data` a server-side apply conflict names (each conflict is a cause of the refusal,
 * `FieldManagerConflict` at `.data.K`): another manager owns them, not the writer. `err` is the
 * export's error, or the API error itself.
 */
export function conflictingKeys(err: unknown): Set<string> {
  const keys = new Set<string>();
  const api = isApiError(err)
    ? err
    : isApiError((err as { cause?: unknown } | undefined)?.cause)
      ? (err as { cause: ApiError }).cause
      : undefined;
  for (const c of api?.causes ?? []) {
    const m = c.reason === "FieldManagerConflict" ? /^\.data\.([-._a-zA-Z0-9]+)$/.exec(c.field ?? "") : null;
    if (m) keys.add(m[1]!);
  }
  return keys;
}

/** A record as an intent only: the key is to be written, and holds nothing of the Referable now. */
export function intentOf(r: ExportRecord): ExportRecord {
  return { kind: r.kind, namespace: r.namespace, name: r.name, key: r.key };
}
