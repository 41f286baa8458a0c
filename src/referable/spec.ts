/**
 * A Referable's spec as the reconciler reads it: what the cache keeps of the object, the
 * resolver request its spec makes, and what it reads among Referables (the reference graph's
 * edges, and the one rule that a Referable cannot read itself).
 */
import { isExportKind } from "../api/export-kinds.ts";
import { stableStringify } from "../api/stable-json.ts";
import {
  EXPORTED_LABEL,
  isReferableKind,
  REFERABLE_API_VERSION,
  type Referable,
  type ReferableSpec,
} from "../api/referable.ts";
import { ResolutionError } from "../api/errors.ts";
import { compileLabelSelector } from "../informers/label-selector.ts";
import type { StringPool } from "../informers/projection.ts";
import type { KubeObject } from "../kube/client.ts";
import type { AnyReference } from "../resolver/request.ts";
import { compactReferable, internTime, summarizeStatus, type CompactMeta } from "./compact.ts";
import { exportObjectNode, exportScopeNode, type ReadsReferables } from "./reference-graph.ts";

/**
 * What the controller keeps of a Referable: identity, spec, status and finalizers (the export
 * finalizer is the controller's own). Annotations (kubectl's last-applied-configuration is a
 * second copy of the object), managedFields and owner references are never read, so never cached.
 * Without a pool, every string is the decoded one; {@link projectReferable} shares them.
 */
export function slimReferable(obj: KubeObject): KubeObject {
  return projectReferable(obj, undefined, undefined);
}

/** Strings longer than this are never pooled: they are rarely shared, and the pool stays small. */
const POOLED_MAX = 128;

/**
 * {@link slimReferable}, sharing what recurs. At 100,000 Referables the cache is most of the
 * controller's heap, and a decoded object holds a fresh copy of every string, 10,000 copies of
 * "referable.dev/v1alpha1" among them:
 *
 * - strings that recur across Referables (apiVersion, kind, label keys and values, the short
 *   strings of the spec, the condition fields of the status) come from `pool`, bounded by its
 *   own size and by {@link POOLED_MAX} characters a string;
 * - against `previous` (the cached version of the same object, same uid), the name, uid and
 *   labels are kept when equal, and the spec when the generation is the same (the API server
 *   moves metadata.generation on every spec change): a status write's echo costs a new status
 *   and resourceVersion, not a second copy of the object.
 *
 * The controller then shares the status with the one it wrote, when they are equal.
 *
 * `compact` (sharded, a Referable of a bucket this replica does not serve): the status is kept
 * as a summary instead, when it can be: a shared skeleton in `status` and a digest in `digest`
 * (see compact.ts).
 */
export function projectReferable(
  obj: KubeObject,
  pool: StringPool | undefined,
  previous: KubeObject | undefined,
  compact = false,
): KubeObject {
  const m = obj.metadata ?? {};
  const pm = previous?.metadata;
  const same = pm !== undefined && pm.uid !== undefined && pm.uid === m.uid ? pm : undefined;
  // Every field in one literal, in one order, an absent one undefined (a delete would turn the
  // object into a dictionary): all projections share one hidden class with the fields in the
  // object itself (added one by one, they would spill into a second array each).
  const metadata: Record<string, unknown> = {
    name: same?.name ?? m.name,
    uid: same?.uid ?? m.uid,
    // The one-owner rule of exported fields: the first created owns. Pooled: Referables created
    // together share the second.
    creationTimestamp: internTime(m.creationTimestamp, pool),
    resourceVersion: m.resourceVersion,
    generation: m.generation,
    labels:
      m.labels === undefined
        ? undefined
        : same && sameStrings(same.labels, m.labels)
          ? same.labels
          : pooledLabels(m.labels, pool),
    deletionTimestamp: m.deletionTimestamp,
    finalizers: m.finalizers,
  };
  const summary =
    compact && obj.status !== undefined ? summarizeStatus(obj.status, m.generation, pool) : undefined;
  if (
    compact &&
    (obj.status === undefined || summary !== undefined) &&
    typeof metadata.name === "string" &&
    obj.apiVersion === REFERABLE_API_VERSION &&
    obj.kind === "Referable"
  )
    return compactReferable(metadata as unknown as CompactMeta, obj.spec, summary, pool, same && previous);
  const spec =
    obj.spec === undefined
      ? undefined
      : same && m.generation !== undefined && same.generation === m.generation && previous!.spec !== undefined
        ? previous!.spec
        : pooled(obj.spec, pool, 0);
  const status =
    obj.status === undefined
      ? undefined
      : (summary?.skeleton ?? pooledStatus(obj.status as Record<string, unknown>, pool));
  const slim: KubeObject = {
    apiVersion: intern(obj.apiVersion, pool),
    kind: intern(obj.kind, pool),
    metadata,
    spec,
    status,
    digest: summary?.digest,
  };
  return slim;
}

/** Label sets pooled at most, and the longest set (as JSON) pooled. */
const LABEL_SETS_MAX = 1000;
const LABEL_SET_MAX_CHARS = 1024;

/**
 * Label sets shared among Referables (most carry the same few: a team, an app, a chart's
 * labels): one frozen object per distinct set, at most {@link LABEL_SETS_MAX} of them (past it
 * the pool starts again), none longer than {@link LABEL_SET_MAX_CHARS}.
 */
class LabelSets {
  private readonly sets = new Map<string, Readonly<Record<string, string>>>();

  intern(labels: Record<string, string>, pool: StringPool): Record<string, string> {
    const key = stableStringify(labels);
    if (key.length > LABEL_SET_MAX_CHARS) return labels;
    const hit = this.sets.get(key);
    if (hit) return hit as Record<string, string>;
    if (this.sets.size >= LABEL_SETS_MAX) this.sets.clear();
    const out: Record<string, string> = {};
    for (const [k, v] of Object.entries(labels)) out[k] = intern(v, pool);
    this.sets.set(key, Object.freeze(out));
    return out;
  }
}

const labelSets = new WeakMap<StringPool, LabelSets>();

function pooledLabels(labels: Record<string, string>, pool: StringPool | undefined): Record<string, string> {
  if (!pool) return labels;
  let sets = labelSets.get(pool);
  if (!sets) labelSets.set(pool, (sets = new LabelSets()));
  return sets.intern(labels, pool);
}

function intern<T>(s: T, pool: StringPool | undefined): T {
  return pool && typeof s === "string" && s.length <= POOLED_MAX ? (pool.intern(s) as T) : s;
}

/**
 * `value` with its short strings pooled, to a depth of 8 (a spec is small and schema-bound),
 * except names (`name` fields: a source's, an export target's), which are each Referable's own
 * and would only fill the pool.
 */
function pooled(value: unknown, pool: StringPool | undefined, depth: number): unknown {
  if (!pool || depth > 8) return value;
  if (typeof value === "string") return intern(value, pool);
  if (Array.isArray(value)) return value.map((v) => pooled(v, pool, depth + 1));
  if (typeof value !== "object" || value === null) return value;
  // A copy made whole, then its values replaced: the fields stay in the object itself (added
  // one by one to an empty literal, past the fourth they would spill into an array of their own).
  const out: Record<string, unknown> = { ...value };
  for (const k of Object.keys(out)) if (k !== "name") out[k] = pooled(out[k], pool, depth + 1);
  return out;
}

/**
 * The status with its conditions' and sources' short strings pooled, and `text` the same string
 * as `value` when equal; the value itself is left as decoded (it can be large, and is the
 * Referable's own).
 */
function pooledStatus(
  status: Record<string, unknown>,
  pool: StringPool | undefined,
): Record<string, unknown> {
  if (!pool || typeof status !== "object" || status === null) return status;
  const out: Record<string, unknown> = { ...status };
  if (Array.isArray(status.conditions))
    out.conditions = status.conditions.map((c: unknown) => pooledFields(c, pool, CONDITION_FIELDS));
  if (Array.isArray(status.sources))
    out.sources = status.sources.map((s: unknown) => pooledFields(s, pool, SOURCE_FIELDS));
  if (typeof status.value === "string" && status.text === status.value) out.text = status.value;
  return out;
}

const CONDITION_FIELDS = ["type", "status", "reason"] as const;
const SOURCE_FIELDS = ["apiVersion", "kind", "namespace"] as const;

function pooledFields(entry: unknown, pool: StringPool, fields: readonly string[]): unknown {
  if (typeof entry !== "object" || entry === null) return entry;
  const out: Record<string, unknown> = { ...(entry as Record<string, unknown>) };
  for (const f of fields) if (typeof out[f] === "string") out[f] = intern(out[f], pool);
  return out;
}

/** Two label maps with the same keys and values. */
function sameStrings(a: Record<string, string> | undefined, b: Record<string, string>): boolean {
  if (a === undefined) return false;
  const keys = Object.keys(a);
  if (keys.length !== Object.keys(b).length) return false;
  return keys.every((k) => Object.hasOwn(b, k) && a[k] === b[k]);
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
    if (source.name) {
      reads.object = exportObjectNode(kind, source.namespace, source.name);
      if (typeof source.name === "string") reads.objectName = source.name;
    } else if (source.selector && compileOrUndefined(source.selector)?.matches(EXPORTED_ONLY))
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
