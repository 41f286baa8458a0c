/**
 * Typed errors shared by every layer. Each carries the contract's condition `reason` and whether
 * retrying the same operation later can help, so callers branch on data, not on message text.
 *
 * Test with {@link isResolutionError}, not `instanceof` alone: `instanceof` fails across two
 * copies of this module (Jest's module registry, or two installed versions of the package).
 */

import type { FailureReason } from "./reasons.ts";

export { Reasons } from "./reasons.ts";
export type { FailureReason, Reason } from "./reasons.ts";

/**
 * Whether waiting can change the outcome without anyone editing the reference: a missing
 * source may appear, a CRD may be installed, RBAC may be granted. Only a spec that cannot
 * parse stays wrong until its author fixes it.
 */
const RETRYABLE: Record<FailureReason, boolean> = {
  SourceNotFound: true,
  FieldNotFound: true,
  SourceNotReady: true,
  KindNotFound: true,
  AmbiguousSelector: true,
  TooFewMatches: true,
  InvalidSpec: false,
  Forbidden: true,
  ValueTooLarge: true,
  // The data may change into something the expression handles; the author may fix it too.
  TransformFailed: true,
  // Another selector of the kind may go, or the author may select on keys already kept.
  TooManyLabelKeys: true,
  Pending: true,
};

const BRAND = Symbol.for("referable.dev/ResolutionError");

/** A resolution failure with a stable machine reason and a message that says what to fix. */
export class ResolutionError extends Error {
  /** The contract's condition reason. */
  readonly reason: FailureReason;
  /** Whether a later retry of the same reference can succeed without a spec change. */
  readonly retryable: boolean;

  constructor(reason: FailureReason, message: string, options?: { cause?: unknown; retryable?: boolean }) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.name = "ResolutionError";
    this.reason = reason;
    this.retryable = options?.retryable ?? RETRYABLE[reason];
    // Defined, not declared, so the brand stays out of the class's public type.
    Object.defineProperty(this, BRAND, { value: true });
  }
}

/** True for a {@link ResolutionError} from any copy of this module. */
export function isResolutionError(err: unknown): err is ResolutionError {
  return typeof err === "object" && err !== null && (err as Record<symbol, unknown>)[BRAND] === true;
}

/** Turns anything thrown into an Error, so no code path ever rethrows a non-Error. */
export function asError(err: unknown): Error {
  if (err instanceof Error) return err;
  return new Error(typeof err === "string" ? err : `non-error thrown: ${safeDescribe(err)}`);
}

function safeDescribe(value: unknown): string {
  try {
    return typeof value === "object" ? Object.prototype.toString.call(value) : String(value);
  } catch {
    return "unprintable value";
  }
}
