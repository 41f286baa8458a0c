/**
 * The export part of a Referable's status as the export outputs find it (status.exports and the
 * Exported condition), and how the problems of a pass become it. The outputs make it; the
 * Referable's status (src/referable/status.ts) carries it.
 */
import { Limits } from "../api/limits.ts";
import type { Condition, ExportRecord } from "../api/referable.ts";

/** What the export step found: the keys that hold the value, and the Exported condition. */
export interface ExportState {
  exports: ExportRecord[];
  status: Condition["status"];
  reason: string;
  message: string;
}

/**
 * The Exported state of a pass that met problems: False, under the reason of the first problem
 * by message order, with every message joined (cut at the condition message's limit). Sorts
 * `problems` in place, so the state is the same whatever order the writes ended in.
 */
export function problemsState(
  records: ExportRecord[],
  problems: Array<{ reason: string; message: string }>,
): ExportState {
  problems.sort((a, b) => a.message.localeCompare(b.message));
  return {
    exports: records,
    status: "False",
    reason: problems[0]!.reason,
    message: problems
      .map((p) => p.message)
      .join("; ")
      .slice(0, Limits.conditionMessage),
  };
}
