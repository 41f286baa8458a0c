/**
 * Applies a request's `transform` to its result: the one place where a resolved value is
 * shaped by CEL. Only `Available` results are transformed: a `Defaulted` value is the author's
 * own literal, already in the shape they want, and an `Optional` result has no value to shape.
 * The evaluation runs off the event loop (see src/transform/pool.ts), so this is asynchronous;
 * a failure is `TransformFailed` (or whatever the engine reports), never a rejection.
 */
import { ResolutionError, isResolutionError } from "../api/errors.ts";
import type { EvaluateLimits, TransformInput, TransformOutput, TransformShape } from "../transform/index.ts";
import type { CompiledRequest } from "./request.ts";
import type { ResolutionResult, SourceRef } from "./types.ts";

/** Limits of a transform's evaluation. */
export interface TransformLimits {
  /** The largest result, in bytes of JSON; larger is `TransformFailed`. */
  maxValueBytes: number;
  /** The cost budget of one evaluation. @default 1000000 (Kubernetes' per-call limit) */
  costBudget?: number;
}

/**
 * What evaluates a transform: the worker pool (src/transform/pool.ts), or an in-process fake
 * in tests. Rejects only with a `ResolutionError`.
 */
export interface TransformRunner {
  evaluate(
    text: string,
    shape: TransformShape,
    input: TransformInput,
    limits: EvaluateLimits,
  ): Promise<TransformOutput>;
  /**
   * How long until an expression that failed is evaluated again rather than failed at once (the
   * pool's quarantine); undefined when it is not held back. The resolver computes again then.
   */
  retryAfterMs?(text: string, shape: TransformShape): number | undefined;
}

/** Whether `result` of `request` goes through a transform (else {@link applyTransform} returns it as it is). */
export function needsTransform(request: CompiledRequest, result: ResolutionResult): boolean {
  return request.transform !== undefined && result.ok && result.reason === "Available";
}

/**
 * `result` with `request.transform` applied: unchanged without a transform or unless it is an
 * `Available` success. In mode Multiple a result that is a list becomes `values` (beside the
 * same `sources`), anything else the single `value` with `sources`. An expression whose
 * worst-case cost, estimated with the value's size limit, is over the budget is `InvalidSpec`
 * and never evaluated. Never rejects.
 */
export async function applyTransform(
  request: CompiledRequest,
  result: ResolutionResult,
  limits: TransformLimits,
  runner: TransformRunner,
): Promise<ResolutionResult> {
  const transform = request.transform;
  if (transform === undefined || !result.ok || result.reason !== "Available") return result;
  const many = "values" in result;
  const sources: SourceRef[] = many ? result.sources : result.source ? [result.source] : [];
  try {
    const refusal = transform.overBudget(limits);
    if (refusal) throw new ResolutionError("InvalidSpec", refusal);
    const evaluateLimits: EvaluateLimits = { maxValueBytes: limits.maxValueBytes };
    if (limits.costBudget !== undefined) evaluateLimits.costBudget = limits.costBudget;
    const { value } = await runner.evaluate(
      transform.text,
      transform.shape,
      {
        value: many ? undefined : result.value,
        values: many ? result.values : undefined,
        sources,
        default: request.defaultValue,
      },
      evaluateLimits,
    );
    if (!many) return { ok: true, reason: "Available", value, source: result.source };
    if (Array.isArray(value)) return { ok: true, reason: "Available", values: value, sources };
    return { ok: true, reason: "Available", value, sources };
  } catch (err) {
    const error = isResolutionError(err)
      ? new ResolutionError(err.reason, `${request.describe}: ${err.message}`)
      : new ResolutionError("TransformFailed", `${request.describe}: the transform failed unexpectedly`, {
          cause: err,
        });
    return { ok: false, error };
  }
}
