/**
 * The Referable resource (`referable.dev/v1alpha1`, cluster-scoped) as the controller reads
 * it, and the translation of its spec into a resolver request.
 */
import type { ReferableSpec } from "../api/referable.ts";
import { ResolutionError } from "../errors.ts";
import type { KubeObject } from "../kube/client.ts";
import type { AnyReference } from "../resolver/request.ts";

export {
  REFERABLE_API_VERSION,
  REFERABLE_GROUP,
  REFERABLE_RESOURCE,
  REFERABLE_VERSION,
  type Condition,
  type ExportRecord,
  type Referable,
  type ReferableSpec,
  type ReferableStatus,
} from "../api/referable.ts";

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
    matchLabels: source.selector.matchLabels,
    matchExpressions: source.selector.matchExpressions,
    mode: selection.mode,
    minMatch: selection.minMatch,
    maxMatch: selection.maxMatch,
    sortByFieldPath: selection.sortByFieldPath,
  };
}
