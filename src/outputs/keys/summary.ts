/**
 * What the key output asks of the reconcile, and how a write comes to it: a failed write as a
 * problem, and the problems and records of a pass as the Exported state.
 */
import type { ExportRecord } from "../../api/referable.ts";
import { asError } from "../../api/errors.ts";
import type { Logger } from "../../api/log.ts";
import { problemsState } from "../export-state.ts";
import type { ExportStep } from "../export-output.ts";
import { isExportError } from "./errors.ts";
import { compareRecords, exportedState, type KeysMemory } from "./memory.ts";
import { describeObject, type ExportTarget, type TargetObject } from "./target.ts";

/** What the key output asks of the reconcile. */
export type KeysStep = ExportStep;

/** What one write gathers, object by object. */
export interface Gathered {
  records: ExportRecord[];
  problems: Array<{ reason: string; message: string }>;
  /** The soonest a write held back by the write policy is due. */
  deferredMs: number | undefined;
}

/** A failed write as a problem for the Exported condition, counted and logged. */
export function failure(
  onWrite: ((result: "success" | "conflict" | "forbidden" | "error") => void) | undefined,
  logger: Logger,
  name: string,
  object: TargetObject,
  err: unknown,
): { reason: string; message: string } {
  const reason = isExportError(err) ? err.reason : undefined;
  onWrite?.(reason === "ExportConflict" ? "conflict" : reason === "ExportForbidden" ? "forbidden" : "error");
  // A network error, a timeout: tried again on the backoff.
  if (!isExportError(err))
    return {
      reason: "ExportFailed",
      message: `${describeObject(object)}: ${asError(err).message.slice(0, 300)}; retrying`,
    };
  logger.warn(
    { referable: name, target: describeObject(object), reason: err.reason },
    "could not export the value",
  );
  return { reason: err.reason, message: err.message };
}

/** The Exported state of a write, and when to look again. */
export function summarize(
  targets: ExportTarget[],
  text: string | undefined,
  gathered: Gathered,
  memory: KeysMemory,
  retryDelayOf: (memory: KeysMemory) => number,
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
  const state = problemsState(records, problems);
  const retry = retryDelayOf(memory);
  return { state, retryAfterMs: deferredMs === undefined ? retry : Math.min(retry, deferredMs) };
}
