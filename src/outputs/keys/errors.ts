/**
 * Why an export could not be done: the `Exported` condition's reason, with a message that says
 * what to fix and never holds the value. Checked with {@link isExportError}, not `instanceof`
 * alone, for the same reason as `isResolutionError` (two copies of the module under Jest).
 */

import type { ExportFailureReason } from "../../api/reasons.ts";

export type { ExportFailureReason } from "../../api/reasons.ts";

const BRAND = Symbol.for("referable.dev/ExportError");

/** An export that failed, with the condition reason and whether retrying later can help. */
export class ExportError extends Error {
  /** The `Exported` condition reason. */
  readonly reason: ExportFailureReason;
  /** Whether the same write may succeed later without anyone editing the Referable. */
  readonly retryable: boolean;

  constructor(
    reason: ExportFailureReason,
    message: string,
    options?: { cause?: unknown; retryable?: boolean },
  ) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.name = "ExportError";
    this.reason = reason;
    // RBAC may be granted, the other writer may let go of the key, a 5xx may pass.
    this.retryable = options?.retryable ?? true;
    // Defined, not declared, so the brand stays out of the class's public type.
    Object.defineProperty(this, BRAND, { value: true });
  }
}

/** True for an {@link ExportError} from any copy of this module. */
export function isExportError(err: unknown): err is ExportError {
  return typeof err === "object" && err !== null && (err as Record<symbol, unknown>)[BRAND] === true;
}
