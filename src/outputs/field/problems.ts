/**
 * The field output's problems: an error of one object as a problem, and a pass's records and
 * problems as the step (the Exported condition and when to look again).
 */
import { asError, isResolutionError } from "../../api/errors.ts";
import type { Logger } from "../../api/log.ts";
import { problemsState } from "../export-state.ts";
import { isExportError } from "../keys/errors.ts";
import {
  compareFieldRecords,
  type FieldsMemory,
  type FieldsStep,
  type Gathered,
  type Problem,
} from "./plan.ts";
import { describeFieldObject, type FieldObject, type ParsedFieldTarget } from "./target.ts";

/** The problem an error of one object is, told to `onWrite` (for metrics) and logged. */
export function failure(
  onWrite: ((result: "success" | "conflict" | "forbidden" | "error") => void) | undefined,
  logger: Logger,
  name: string,
  object: FieldObject,
  err: unknown,
): Problem {
  const what = describeFieldObject(object);
  if (isResolutionError(err)) {
    // Discovery: the kind is not served (yet), or the apiVersion cannot be one.
    const reason = err.reason === "InvalidSpec" ? "InvalidSpec" : "TargetNotFound";
    return { reason, message: `${what}: ${err.message}`, retry: err.reason !== "InvalidSpec" };
  }
  const reason = isExportError(err) ? err.reason : undefined;
  onWrite?.(reason === "ExportConflict" ? "conflict" : reason === "ExportForbidden" ? "forbidden" : "error");
  if (!isExportError(err))
    return {
      reason: "ExportFailed",
      message: `${what}: ${asError(err).message.slice(0, 300)}; retrying`,
      retry: true,
    };
  logger.warn(
    { referable: name, target: what, reason: err.reason },
    "could not export the value into a field",
  );
  return {
    reason: err.reason,
    message: err.message,
    retry: err.retryable && err.reason !== "ExportConflict",
  };
}

/** The step a pass comes to: its records, and its problems folded into one condition. */
export function summarize(
  targets: ParsedFieldTarget[],
  value: unknown,
  gathered: Gathered,
  memory: FieldsMemory,
  reread: number,
  retryDelayOf: (memory: FieldsMemory) => number,
): FieldsStep {
  const { records, problems, deferredMs, dueMs } = gathered;
  if (targets.length === 0 && problems.length === 0 && deferredMs === undefined) {
    // spec names no field any more, and every recorded one is released.
    return { state: null, retryAfterMs: undefined };
  }
  // Some object waits for the write policy: the status keeps saying what the fields hold until then.
  if (deferredMs !== undefined && problems.length === 0)
    return { state: undefined, retryAfterMs: deferredMs };
  const next = (ms: number | undefined) =>
    Math.min(reread, ms ?? reread, deferredMs ?? reread, dueMs ?? reread);
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
  const state = problemsState(records, problems);
  const retry = problems.some((x) => x.retry) ? retryDelayOf(memory) : undefined;
  return { state, retryAfterMs: next(retry) };
}
