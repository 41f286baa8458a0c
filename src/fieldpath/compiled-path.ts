/** The shapes a compiled fieldPath and its evaluation take. */

/** Which syntax a path is written in: decided by its first character alone. */
export type PathSyntax = "fieldPath" | "jsonPath";

/**
 * The outcome of evaluating a path. `found: false` is an observed fact (the object has nothing
 * there), never an error; `missing` says which step found nothing, in words fit for a
 * FieldNotFound message. Neither field ever holds a value read from the object.
 */
export type EvalResult =
  { readonly found: true; readonly value: unknown } | { readonly found: false; readonly missing: string };

/** A path parsed once and evaluated many times. Immutable and safe to share. */
export interface CompiledPath {
  /** The path as written. */
  readonly source: string;
  /** The syntax it was parsed as. */
  readonly syntax: PathSyntax;
  /**
   * Reads the path from a parsed JSON value. Returns references into `obj` (callers must not
   * mutate them). Never runs code from the path, never follows a prototype, always finishes.
   * Throws only a ResolutionError: `ValueTooLarge` when a JSONPath selects more than
   * `FieldPathLimits.maxJsonPathMatches` values or descends through an absurdly deep object
   * (and `InvalidSpec`, with the cause attached, should evaluation ever fail in an unforeseen way).
   */
  evaluate(obj: unknown): EvalResult;
}
