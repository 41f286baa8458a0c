/**
 * The Referable resource (`referable.dev/v1alpha1`, cluster-scoped) as the controller reads
 * it, and the translation of its spec into a resolver request.
 */
import { ResolutionError } from "../errors.ts";
import type { LabelSelectorRequirement } from "../informers/label-selector.ts";
import type { KubeObject } from "../kube/client.ts";
import type { ResourceInfo } from "../kube/discovery.ts";
import type { AnyReference } from "../resolver/request.ts";
import type { RequiredCondition, SourceRef } from "../resolver/types.ts";

export const REFERABLE_GROUP = "referable.dev";
export const REFERABLE_VERSION = "v1alpha1";
export const REFERABLE_API_VERSION = `${REFERABLE_GROUP}/${REFERABLE_VERSION}`;

/** How the Referable kind is served: fixed by our own CRD, so no discovery is needed. */
export const REFERABLE_RESOURCE: ResourceInfo = {
  group: REFERABLE_GROUP,
  version: REFERABLE_VERSION,
  resource: "referables",
  kind: "Referable",
  namespaced: false,
  verbs: ["get", "list", "watch", "patch", "update"],
};

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
  /** Keys of ConfigMaps and Secrets that receive the value (see "Export" in docs/api.md). */
  export?: Array<{ kind?: string; namespace?: string; name?: string; key?: string }>;
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

/** One key that holds the value, at the version of its object that the value was written at. */
export interface ExportRecord {
  kind: string;
  namespace: string;
  name: string;
  key: string;
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

/**
 * What the controller keeps of a Referable: identity, spec, status and finalizers (the export
 * finalizer is the controller's own). Annotations (kubectl's last-applied-configuration is a
 * second copy of the object), managedFields and owner references are never read, so never cached.
 */
export function slimReferable(obj: KubeObject): KubeObject {
  const m = obj.metadata ?? {};
  const metadata: Record<string, unknown> = { name: m.name };
  for (const key of [
    "uid",
    "resourceVersion",
    "generation",
    "labels",
    "deletionTimestamp",
    "finalizers",
  ] as const)
    if (m[key] !== undefined) metadata[key] = m[key];
  const slim: KubeObject = { apiVersion: obj.apiVersion, kind: obj.kind, metadata };
  if (obj.spec !== undefined) slim.spec = obj.spec;
  if (obj.status !== undefined) slim.status = obj.status;
  return slim;
}

/**
 * The resolver request for a Referable's spec. Throws `InvalidSpec` for what the CRD's
 * validation would refuse but an older CRD version (or a server without CEL) might let by.
 */
export function requestFor(spec: ReferableSpec | undefined): AnyReference {
  const source = spec?.source;
  if (!source) throw new ResolutionError("InvalidSpec", "spec.source is required");
  const base = {
    apiVersion: source.apiVersion as string,
    kind: source.kind as string,
    namespace: source.namespace,
    fieldPath: source.fieldPath as string,
    requireConditions: source.requireConditions,
    default: spec?.default,
    policy: spec?.policy?.resolution ? { resolution: spec.policy.resolution } : undefined,
    transform: spec?.transform,
  };
  const hasName = source.name !== undefined && source.name !== "";
  if (hasName && source.selector !== undefined) {
    throw new ResolutionError(
      "InvalidSpec",
      "set exactly one of spec.source.name and spec.source.selector, not both",
    );
  }
  if (hasName) {
    if (spec?.selection !== undefined) {
      throw new ResolutionError(
        "InvalidSpec",
        "spec.selection applies only with spec.source.selector: remove it or use a selector",
      );
    }
    return { ...base, name: source.name as string };
  }
  if (source.selector === undefined) {
    throw new ResolutionError("InvalidSpec", "set one of spec.source.name and spec.source.selector");
  }
  const selection = spec?.selection ?? {};
  return {
    ...base,
    // spec.source.selector: {} is the author's explicit "every object"; the library asks for it
    // in so many words (matchLabels: {}), so a typo there never matches everything.
    matchLabels: source.selector.matchLabels ?? {},
    matchExpressions: source.selector.matchExpressions,
    mode: selection.mode,
    minMatch: selection.minMatch,
    maxMatch: selection.maxMatch,
    sortByFieldPath: selection.sortByFieldPath,
  };
}
