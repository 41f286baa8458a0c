/**
 * The admission check of the field targets of a Referable's `spec.export`: an entry the
 * controller would report as `InvalidSpec` (a `stringData` field of a Secret, a list index, a
 * path under status, ...) is refused when it is written, with the controller's own message. The
 * parsing is the controller's (`parseFieldTarget`), so the two never disagree.
 */
import { isFieldEntry, parseFieldTarget } from "../outputs/field/target.ts";
import { exportEntries } from "./admission-export.ts";

/**
 * What to fix in the first field target of the Referable `object` the controller would refuse,
 * or undefined when there is none (a malformed spec is the CRD schema's to refuse).
 */
export function fieldTargetProblem(object: unknown): string | undefined {
  const entries = exportEntries(object);
  for (let i = 0; i < entries.length; i++) {
    if (!isFieldEntry(entries[i])) continue;
    const parsed = parseFieldTarget(entries[i], `spec.export[${i}]`);
    if (typeof parsed === "string") return parsed;
  }
  return undefined;
}
