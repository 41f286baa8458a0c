/**
 * The two export outputs (keys, fields) report one `Exported` condition and one
 * `status.exports`: their steps combined. False wins over Unknown over True; each part's
 * problems are named in the message. A part that did not run (held back by the write policy)
 * keeps its records from the stored status.
 */
import { EXPORTED, type ExportRecord, type ReferableStatus } from "../api/referable.ts";
import type { ExportState } from "../outputs/export-state.ts";

/** What one export output asks of the reconcile (KeysStep, FieldsStep). */
export interface ExportStep {
  state: ExportState | null | undefined;
  retryAfterMs: number | undefined;
  thenRequeue?: boolean;
}

/** One step for both outputs, or undefined when neither ran. */
export function combineExports(
  keys: ExportStep | undefined,
  fields: ExportStep | undefined,
  stored: ReferableStatus | undefined,
): ExportStep | undefined {
  if (!keys) return fields;
  if (!fields) return keys;
  const waits = [keys.retryAfterMs, fields.retryAfterMs].filter((w): w is number => w !== undefined);
  const step: ExportStep = {
    state: combineStates(keys.state, fields.state, stored),
    retryAfterMs: waits.length > 0 ? Math.min(...waits) : undefined,
  };
  if (keys.thenRequeue || fields.thenRequeue) step.thenRequeue = true;
  return step;
}

const isField = (r: ExportRecord) => r.fieldPath !== undefined;

function combineStates(
  keys: ExportState | null | undefined,
  fields: ExportState | null | undefined,
  stored: ReferableStatus | undefined,
): ExportState | null | undefined {
  if (keys === undefined && fields === undefined) return undefined;
  // One part held back and the other with nothing to export: the stored state is all the first's.
  if ((keys === undefined && fields === null) || (keys === null && fields === undefined)) return undefined;
  const k = keys === undefined ? carried(stored, (r) => !isField(r)) : keys;
  const f = fields === undefined ? carried(stored, isField) : fields;
  if (!k) return f;
  if (!f) return k;
  const parts = [k, f];
  const failed = parts.find((p) => p.status === "False") ?? parts.find((p) => p.status === "Unknown");
  return {
    exports: [...k.exports, ...f.exports],
    status: failed?.status ?? "True",
    reason: failed?.reason ?? "Exported",
    message: parts
      .filter((p) => p.status !== "True" && p.message)
      .map((p) => p.message)
      .join("; "),
  };
}

/** The stored part of a status an output did not recompute this time. */
function carried(
  stored: ReferableStatus | undefined,
  mine: (r: ExportRecord) => boolean,
): ExportState | null {
  const records = (stored?.exports ?? []).filter(mine);
  const c = stored?.conditions?.find((x) => x.type === EXPORTED);
  if (!c) return null;
  return { exports: records, status: c.status, reason: c.reason, message: c.message };
}
