/**
 * The entry points: compile a fieldPath once (cached), evaluate it many times.
 */
import { LRUCache } from "lru-cache";
import { ResolutionError, asError, isResolutionError } from "../api/errors.ts";
import type { CompiledPath, EvalResult, PathSyntax } from "./compiled-path.ts";
import { compileFieldPathSyntax } from "./field-path.ts";
import { compileJsonPathSyntax, isJsonPath } from "./json-path.ts";
import { FieldPathLimits } from "./limits.ts";
import { quote } from "./quote.ts";

const compiled = new LRUCache<string, CompiledPath>({ max: FieldPathLimits.compiledCacheSize });

/**
 * Parses `path` (JSONPath if it starts with `$` or `{`, else the field-path syntax) into a
 * reusable {@link CompiledPath}. Results are cached by path string, at most
 * {@link FieldPathLimits.compiledCacheSize} of them.
 *
 * @throws ResolutionError with reason `InvalidSpec` if the path does not parse or is over a limit;
 *   the message gives the 1-based position (in Unicode code points) and what was expected there.
 */
export function compileFieldPath(path: string): CompiledPath {
  if (typeof path !== "string") throw new ResolutionError("InvalidSpec", "fieldPath must be a string");
  const hit = compiled.get(path);
  if (hit !== undefined) return hit;
  if (path.length > FieldPathLimits.maxLength) {
    throw new ResolutionError(
      "InvalidSpec",
      `fieldPath ${quote(path.slice(0, 40))}... is ${path.length} characters long, over the limit of ${FieldPathLimits.maxLength}`,
    );
  }
  const syntax: PathSyntax = isJsonPath(path) ? "jsonPath" : "fieldPath";
  const run = syntax === "jsonPath" ? compileJsonPathSyntax(path) : compileFieldPathSyntax(path);
  const result: CompiledPath = Object.freeze({
    source: path,
    syntax,
    evaluate(obj: unknown): EvalResult {
      try {
        return run(obj);
      } catch (err) {
        if (isResolutionError(err)) throw err;
        // Not reachable by design; if a bug or a non-JSON input gets here, the caller still
        // gets the one error type it handles, with the cause attached for debugging.
        throw new ResolutionError(
          "InvalidSpec",
          `fieldPath ${quote(path)} could not be evaluated: ${asError(err).message}`,
          { cause: err },
        );
      }
    },
  });
  compiled.set(path, result);
  return result;
}

/** Compiles (or reuses) `path` and evaluates it against `obj`; see {@link compileFieldPath}. */
export function evaluateFieldPath(obj: unknown, path: string): EvalResult {
  return compileFieldPath(path).evaluate(obj);
}

/** How many compiled paths the cache holds (for tests). */
export function compiledPathCacheSize(): number {
  return compiled.size;
}
