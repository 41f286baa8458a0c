/**
 * Transforms: CEL expressions that shape a resolved value on its way to `status.value`.
 *
 * The CEL standard library, the strings extension, cel-go's `base64.decode`/`base64.encode` and
 * optional types (`?.`, `orValue`), on `@marcbachmann/cel-js` with a cost meter of our own. This
 * folder depends on nothing but `../api/errors.ts`.
 */
export {
  compileTransform,
  COMPILE_CACHE_SIZE,
  MAX_TRANSFORM_LENGTH,
  type CompiledTransform,
  type EvaluateLimits,
  type TransformInput,
  type TransformMode,
  type TransformOutput,
  type TransformShape,
} from "./engine.ts";
export { DEFAULT_COST_BUDGET } from "./cost.ts";
export { MAX_BUILT_STRING } from "./extensions.ts";
