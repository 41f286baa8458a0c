/**
 * Typed errors shared by every layer. Each carries the contract's condition `reason` and whether
 * retrying the same operation later can help, so callers branch on data, not on message text.
 *
 * Test with {@link isResolutionError}, not `instanceof` alone: `instanceof` fails across two
 * copies of this module (Jest's module registry, or two installed versions of the package).
 */

/** Every `Ready` reason of the contract (section 2 of the API document). */
export const Reasons = {
  /** Ready=True: the value was read from the source(s). */
  Available: "Available",
  /** Ready=True: the source or field is missing and the `default` was used. */
  Defaulted: "Defaulted",
  /** Ready=True: the source or field is missing, the policy is `Optional`, no default: no value. */
  Optional: "Optional",
  /** No object of that name, or none matches the selector. */
  SourceNotFound: "SourceNotFound",
  /** The object exists but has nothing at `fieldPath`. */
  FieldNotFound: "FieldNotFound",
  /** The object does not yet report `requireConditions`. */
  SourceNotReady: "SourceNotReady",
  /** The API server serves no such apiVersion/kind (yet). */
  KindNotFound: "KindNotFound",
  /** Mode `Single` and more than one object matches. */
  AmbiguousSelector: "AmbiguousSelector",
  /** Mode `Multiple` and fewer than `minMatch` objects match. */
  TooFewMatches: "TooFewMatches",
  /** The reference cannot be resolved as written (the only reason that is not retryable). */
  InvalidSpec: "InvalidSpec",
  /** The resolver may not list and watch the kind (RBAC), or `sourcePolicy` refused it. */
  Forbidden: "Forbidden",
  /** The value is over `maxValueBytes`, or a `Multiple` selector gives more than `maxValues`. */
  ValueTooLarge: "ValueTooLarge",
  /** The `transform` failed on this value. */
  TransformFailed: "TransformFailed",
  /** The kind's first list has not completed. */
  Pending: "Pending",
} as const;

/** A condition reason of the contract. */
export type Reason = (typeof Reasons)[keyof typeof Reasons];

/** The reasons a resolution can fail with (every reason but the three `Ready=True` ones). */
export type FailureReason = Exclude<Reason, "Available" | "Defaulted" | "Optional">;

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
