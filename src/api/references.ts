/** The plain values a Referable's spec and status share with the resolver's public types. */

/** A condition the source must report before its value is taken, such as `{ type: "Ready", status: "True" }`. */
export interface RequiredCondition {
  /** The condition type, matched exactly (`Ready`, `ACK.ResourceSynced`). */
  type: string;
  /** The status the condition must have (`"True"`, `"False"` or `"Unknown"`). */
  status: string;
}

/** An object a value was read from, pinned at the version it was read at. */
export interface SourceRef {
  /** The source's API version. */
  apiVersion: string;
  /** The source's kind. */
  kind: string;
  /** The source's namespace; absent for a cluster-scoped kind. */
  namespace?: string;
  /** The source's name. */
  name: string;
  /** The source's UID, which tells a re-created object of the same name from the one read. */
  uid: string;
  /** The `metadata.resourceVersion` the value was read at. */
  resourceVersion: string;
}
