/**
 * The admission check of a Referable's `spec.transform`: an expression that does not parse or
 * type-check is refused when it is written, with the message (and position) the controller
 * would otherwise report as `InvalidSpec`.
 */
import { isResolutionError } from "../errors.ts";
import { compileTransform } from "../transform/index.ts";

/**
 * Why the transform of the Referable `object` cannot be compiled, or undefined when it can (or
 * there is none: a malformed spec is the CRD schema's to refuse, not this check's).
 */
export function transformProblem(object: unknown): string | undefined {
  const spec = (object as { spec?: unknown } | null | undefined)?.spec as Record<string, unknown> | undefined;
  if (typeof spec !== "object" || spec === null) return undefined;
  const text = spec.transform;
  if (typeof text !== "string" || text === "") return undefined;
  const selection = spec.selection as { mode?: unknown } | undefined;
  const mode = selection?.mode === "Multiple" ? "Multiple" : "Single";
  try {
    compileTransform(
      text,
      { mode, hasDefault: spec.default !== undefined && spec.default !== null },
      "spec.transform",
    );
    return undefined;
  } catch (err) {
    if (isResolutionError(err) && err.reason === "InvalidSpec") return err.message;
    return `spec.transform could not be checked: ${(err as Error).message}`;
  }
}
