/**
 * A Referable's spec as the reconciler reads it: what the cache keeps of the object, the
 * resolver request its spec makes, and what it reads among Referables (the reference graph's
 * edges, and the one rule that a Referable cannot read itself).
 */
import { isExportKind } from "../api/export-kinds.ts";
import { EXPORTED_LABEL, isReferableKind, type Referable, type ReferableSpec } from "../api/referable.ts";
import { ResolutionError } from "../errors.ts";
import { compileLabelSelector } from "../informers/label-selector.ts";
import type { KubeObject } from "../kube/client.ts";
import type { AnyReference } from "../resolver/request.ts";
import { exportObjectNode, exportScopeNode, type ReadsReferables } from "./reference-graph.ts";

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
    "creationTimestamp", // the one-owner rule of exported fields: the first created owns
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

/** The labels of an object export creates: a selector that matches them reads what export writes. */
const EXPORTED_ONLY = Object.freeze({ [EXPORTED_LABEL]: "true" });

/**
 * What a Referable reads among Referables, and where it exports, from its spec: the reference
 * graph's edges (see reference-graph.ts for which sources read exported objects).
 */
export function readsOf(obj: Referable): ReadsReferables | undefined {
  const reads: ReadsReferables = {};
  const source = obj.spec?.source;
  let kind: string | undefined;
  if (source && isReferableKind(source.apiVersion, source.kind)) {
    if (source.name) reads.name = source.name;
    else if (source.selector) {
      const selector = compileOrUndefined(source.selector);
      if (selector) reads.selector = selector;
    }
  } else if (
    source?.apiVersion === "v1" &&
    isExportKind(source.kind) &&
    typeof source.namespace === "string"
  ) {
    kind = source.kind;
    if (source.name) reads.object = exportObjectNode(kind, source.namespace, source.name);
    else if (source.selector && compileOrUndefined(source.selector)?.matches(EXPORTED_ONLY))
      reads.scope = exportScopeNode(kind, source.namespace);
  }
  const writes: Array<{ object: string; scope: string }> = [];
  const seen = new Set<string>();
  for (const t of Array.isArray(obj.spec?.export) ? obj.spec.export : []) {
    if (!isExportKind(t?.kind) || typeof t.namespace !== "string" || typeof t.name !== "string") continue;
    const object = exportObjectNode(t.kind, t.namespace, t.name);
    const scope = exportScopeNode(t.kind, t.namespace);
    // Into what its own source reads, the key output writes nothing (InvalidSpec): no edge.
    if (object === reads.object || scope === reads.scope || seen.has(object)) continue;
    seen.add(object);
    writes.push({ object, scope });
  }
  if (writes.length > 0) reads.writes = writes.sort((a, b) => (a.object < b.object ? -1 : 1));
  return Object.keys(reads).length > 0 ? reads : undefined;
}

function compileOrUndefined(selector: NonNullable<NonNullable<ReferableSpec["source"]>["selector"]>) {
  try {
    return compileLabelSelector(selector);
  } catch {
    return undefined; // an invalid selector reads nothing: the resolver reports it (InvalidSpec)
  }
}

/**
 * InvalidSpec when the spec names the Referable itself as its source. A selector that matches
 * it, or a cycle through others, is the reference graph's to find (same rule, same edges: {@link readsOf}).
 */
export function refuseSelfRead(obj: Referable): void {
  if (readsOf(obj)?.name === obj.metadata.name)
    throw new ResolutionError(
      "InvalidSpec",
      "a Referable cannot read itself: point spec.source at another object",
    );
}
