/**
 * fieldPath: parse and evaluate the two path syntaxes of a reference, safely.
 *
 * - The field-path syntax of Crossplane and the Kubernetes API conventions
 *   (`metadata.annotations[crossplane.io/external-name]`, `status.conditions[?(@.type=="Ready")].status`).
 * - JSONPath, when a path starts with `$` or `{` (kubectl's `{.status.x}`), evaluated with
 *   jsonpath-plus with script evaluation off; several matches make a list value.
 *
 * A path never runs code, never reads a prototype, and always finishes: every input is bounded
 * by {@link FieldPathLimits}. Errors are `ResolutionError`s with reason `InvalidSpec` (a path that
 * does not parse) or `ValueTooLarge` (a JSONPath that selects too much). This folder depends on
 * nothing above it, and is the only importer of jsonpath-plus.
 *
 * @module
 */
export { compileFieldPath, evaluateFieldPath } from "./compile.ts";
export type { CompiledPath, EvalResult, PathSyntax } from "./compiled-path.ts";
export { isJsonPath } from "./json-path.ts";
export { FieldPathLimits } from "./limits.ts";
