/**
 * The admission check of a Referable's `spec.transform`: an expression that does not parse or
 * type-check, or whose worst-case cost estimated with inputs of `--max-value-bytes` is over the
 * budget, is refused when it is written, with the message (and position, or estimate) the
 * controller would otherwise report as `InvalidSpec`. Nothing is evaluated here: parsing and
 * the estimate are bounded by the expression's length (4096 characters).
 */
import { isResolutionError } from "../api/errors.ts";
import { compileTransform, type EvaluateLimits } from "../transform/index.ts";

/**
 * Why the transform of the Referable `object` cannot be compiled, or undefined when it can (or
 * there is none: a malformed spec is the CRD schema's to refuse, not this check's).
 */
export function transformProblem(object: unknown, limits: EvaluateLimits): string | undefined {
  const spec = (object as { spec?: unknown } | null | undefined)?.spec as Record<string, unknown> | undefined;
  if (typeof spec !== "object" || spec === null) return undefined;
  const text = spec.transform;
  if (typeof text !== "string" || text === "") return undefined;
  const selection = spec.selection as { mode?: unknown } | undefined;
  const mode = selection?.mode === "Multiple" ? "Multiple" : "Single";
  try {
    const compiled = compileTransform(
      text,
      { mode, hasDefault: spec.default !== undefined && spec.default !== null },
      "spec.transform",
    );
    return compiled.overBudget(limits);
  } catch (err) {
    if (isResolutionError(err) && err.reason === "InvalidSpec") return err.message;
    return `spec.transform could not be checked: ${(err as Error).message}`;
  }
}
