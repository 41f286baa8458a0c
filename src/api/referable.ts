/**
 * The Referable resource (`referable.dev/v1alpha1`, cluster-scoped): its names, its spec and
 * status as the controller reads and writes them, and the names of what it puts on other
 * objects. The CRD in crds/ and docs/api.md describe the same; this is their one copy in code.
 */
import type { LabelSelectorRequirement } from "./label-selector.ts";
import type { RequiredCondition, SourceRef } from "./references.ts";

export const REFERABLE_GROUP = "referable.dev";
export const REFERABLE_VERSION = "v1alpha1";
export const REFERABLE_API_VERSION = `${REFERABLE_GROUP}/${REFERABLE_VERSION}`;

/** How the Referable kind is served: fixed by our own CRD, so no discovery is needed. */
export const REFERABLE_RESOURCE = {
  group: REFERABLE_GROUP,
  version: REFERABLE_VERSION,
  resource: "referables",
  kind: "Referable",
  namespaced: false,
  verbs: ["get", "list", "watch", "patch", "update"] as readonly string[],
};

/** Whether an apiVersion and kind name the Referable kind (any version of the group). */
export function isReferableKind(apiVersion: string | undefined, kind: string | undefined): boolean {
  return kind === "Referable" && apiVersion?.split("/")[0] === REFERABLE_GROUP;
}

/** The condition type the controller owns. */
export const READY = "Ready";
/** The condition type of spec.export, present only on a Referable that exports (or did). */
export const EXPORTED = "Exported";
/** The finalizer that keeps a Referable until its exported keys are removed. */
export const EXPORT_FINALIZER = "referable.dev/export";
/** The finalizer that keeps a Referable until the fields it wrote (spec.export with fieldPath) are released. */
export const FIELD_EXPORT_FINALIZER = "referable.dev/export-fields";
/** Label put on every object a value is exported into: written by referable. */
export const EXPORTED_LABEL = "referable.dev/exported";
/** Annotation naming the writer that created the object, which may delete it once it holds nothing else. */
export const CREATED_BY_ANNOTATION = "referable.dev/created-by";

/** `spec` of a Referable (see crds/). */
export interface ReferableSpec {
  source?: {
    apiVersion?: string;
    kind?: string;
    namespace?: string;
    name?: string;
    selector?: { matchLabels?: Record<string, string>; matchExpressions?: LabelSelectorRequirement[] };
    fieldPath?: string;
    requireConditions?: RequiredCondition[];
  };
  selection?: {
    mode?: "Single" | "Multiple";
    sortByFieldPath?: string;
    minMatch?: number;
    maxMatch?: number;
  };
  policy?: { resolution?: "Required" | "Optional" };
  default?: unknown;
  /** A CEL expression that shapes the value (see "Transforms" in docs/api.md). */
  transform?: string;
  /**
   * Keys of ConfigMaps and Secrets (`key`), and fields of any object (`apiVersion` and
   * `fieldPath`), that receive the value (see "Export" in docs/api.md).
   */
  export?: Array<{
    apiVersion?: string;
    kind?: string;
    namespace?: string;
    name?: string;
    key?: string;
    fieldPath?: string;
    policy?: "Always" | "IfNotPresent";
  }>;
  /**
   * The ServiceAccount the Referable reads and writes as (see "Acting as a ServiceAccount" in
   * docs/api.md): its source is used only while that account may read it, and every export
   * write impersonates it. @default none: the controller's own rights, or --default-service-account
   */
  serviceAccountRef?: ServiceAccountRef;
}

/** A ServiceAccount by namespace and name. */
export interface ServiceAccountRef {
  /** The ServiceAccount's namespace (a DNS label). */
  namespace: string;
  /** The ServiceAccount's name (a DNS subdomain). */
  name: string;
}

/** A metav1.Condition. */
export interface Condition {
  type: string;
  status: "True" | "False" | "Unknown";
  reason: string;
  message: string;
  observedGeneration?: number;
  lastTransitionTime: string;
}

/**
 * One key (`key`) or one field (`apiVersion`, `fieldPath`) that holds the value, or is about to
 * (a field is recorded before its first write), at the version of its object that the value was
 * written at.
 */
export interface ExportRecord {
  /** A field's object only (a key's object is core v1). */
  apiVersion?: string;
  kind: string;
  /** "" for a cluster-scoped object. */
  namespace: string;
  name: string;
  /** A key of a ConfigMap or Secret. */
  key?: string;
  /** A field of the object (spec.export[].fieldPath, as written there). */
  fieldPath?: string;
  resourceVersion?: string;
}

/** `status` of a Referable. */
export interface ReferableStatus {
  value?: unknown;
  values?: unknown[];
  /** `value` (or `values`) as text: a string as it is, any other JSON value as its JSON text. */
  text?: string;
  sources?: SourceRef[];
  /** The keys that hold the value now (spec.export). */
  exports?: ExportRecord[];
  observedGeneration?: number;
  conditions?: Condition[];
}

/** A Referable as read from the API server. */
export interface Referable {
  apiVersion?: string;
  kind?: string;
  metadata: {
    name: string;
    uid?: string;
    generation?: number;
    resourceVersion?: string;
    deletionTimestamp?: string;
    finalizers?: string[];
    [key: string]: unknown;
  };
  spec?: ReferableSpec;
  status?: ReferableStatus;
}
