/**
 * The condition reasons of the contract (docs/api.md): the `Ready` reasons a resolution ends
 * with, and the `Exported` reasons of spec.export. Errors elsewhere carry one of these.
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
  /**
   * The selector names label keys the controller does not keep for its kind yet, and they do not
   * fit the kind's total of label keys (`--max-label-keys-per-kind`), which other selectors hold.
   */
  TooManyLabelKeys: "TooManyLabelKeys",
  /** The kind's first list has not completed. */
  Pending: "Pending",
} as const;

/** A condition reason of the contract. */
export type Reason = (typeof Reasons)[keyof typeof Reasons];

/** The reasons a resolution can fail with (every reason but the three `Ready=True` ones). */
export type FailureReason = Exclude<Reason, "Available" | "Defaulted" | "Optional">;

/** The reasons an export fails with: the `Exported=False` reasons of the contract. */
export type ExportFailureReason =
  /** RBAC (or the controller's own policy, for Secrets) does not let the writer write there. */
  | "ExportForbidden"
  /** Another field manager owns the key: server-side apply refused, without forcing. */
  | "ExportConflict"
  /** The API server refused the write for another reason (an immutable object, a key in binaryData...). */
  | "ExportFailed"
  /** A field target's object does not exist: objects are never created for a field. */
  | "TargetNotFound"
  /** The API server refused the value for a field (its schema, a webhook): the message carries its reason. */
  | "ExportRejected";
