/**
 * The compact record of a Referable this replica does not serve (sharded: its bucket is another
 * replica's). The reference graph is global, so every replica caches every Referable's identity
 * and spec; but of its status a replica that does not write it keeps only a summary: a digest
 * of what a status write would compare, the observed generation, and the conditions without
 * their messages (one frozen skeleton status shared among Referables: most carry the same few). What a reconcile carries
 * over from a stored status (a condition's `lastTransitionTime`) is all there. In the cache the
 * skeleton is the record's `status` (so what reads conditions reads them as ever), and the digest
 * is its `digest`.
 *
 * When the replica takes the bucket over, the reconcile reads the summary as a status
 * ({@link expandStatus}): the desired status it computes is compared with the stored one by
 * digest ({@link sameAsStored}), so a takeover of unchanged Referables writes nothing, with no
 * GET and no re-list. Not in the digest: a condition's `lastTransitionTime` (carried over, so
 * equal whenever the rest is) and the resourceVersion a source was read at (kept while the value
 * stays the same, so a new owner has nothing to correct there).
 *
 * A status of a Referable that exports (`status.exports`, what the key and field outputs let go
 * of, or an Exported condition) is never summarised: it stays whole.
 *
 * The record is one object ({@link compactReferable}): a shard keeps 75,000 of them at 100,000
 * Referables, so every field costs 600 KB. Its metadata is the record itself, its
 * resourceVersion a number when it is a small decimal, what few records have (a deletion
 * timestamp, finalizers) in an object only they pay for, and its spec a frozen shape shared by
 * every spec alike but for the source's name, plus that name. Read it with {@link referableOf}
 * (the reconciler does, through the controller's reader); the informer's listeners, the graph
 * and the gauges read `metadata`, `spec` and `status` off it as off any projection.
 */
import {
  READY,
  REFERABLE_API_VERSION,
  type Condition,
  type Referable,
  type ReferableStatus,
} from "../api/referable.ts";
import { digest } from "../api/digest.ts";
import { stableStringify } from "../api/stable-json.ts";
import type { StringPool } from "../informers/projection.ts";
import type { KubeObject } from "../kube/client.ts";
import { packVersion, unpackVersion, type PackedVersion } from "../kube/packed-version.ts";

/**
 * What a replica keeps of the status of a Referable it does not serve; see the module comment.
 * In the cache, `status` is the skeleton and `digest` sits beside it.
 */
export interface StatusSummary {
  /** The observed generation and the conditions without their messages: shared, frozen. */
  readonly skeleton: ReferableStatus;
  /** {@link statusDigest} of the stored status. */
  readonly digest: string;
}

/**
 * A digest of what a status write compares: the status without its conditions'
 * `lastTransitionTime` and its sources' `resourceVersion` (see the module comment). 120 bits of
 * SHA-256, 20 characters.
 */
export function statusDigest(status: ReferableStatus): string {
  const normalized: Record<string, unknown> = { ...status };
  // Whatever the stored status holds (the schema is the API server's to enforce), never a throw.
  if (Array.isArray(status.conditions))
    normalized.conditions = status.conditions.map((c: unknown) => without(c, "lastTransitionTime"));
  if (Array.isArray(status.sources))
    normalized.sources = status.sources.map((s: unknown) => without(s, "resourceVersion"));
  // A status read from kube-apiserver has its keys in order: stableStringify writes it natively
  // (see there). One that has not (or a status the controller built) is sorted first, to the
  // same text: the key order never changes a digest, so never makes or spares a write.
  // The first 20 characters are the first 15 bytes; a string of its own, 40 bytes (see digest).
  return digest(stableStringify(normalized), 20);
}

/** `entry` without `field`, when it is an object. */
function without(entry: unknown, field: string): unknown {
  return typeof entry === "object" && entry !== null && !Array.isArray(entry)
    ? { ...entry, [field]: undefined }
    : entry;
}

/**
 * The summary of `status` of a Referable at `generation`; undefined when it is not summarised:
 * it exports, is not what the CRD allows, or is of another generation (a spec change not
 * observed yet: a reconcile that cannot resolve at once keeps the value from what is stored).
 */
export function summarizeStatus(
  status: unknown,
  generation: unknown,
  pool: StringPool | undefined,
): StatusSummary | undefined {
  if (typeof status !== "object" || status === null || Array.isArray(status)) return undefined;
  const s = status as ReferableStatus;
  if (s.exports !== undefined || s.observedGeneration !== generation) return undefined;
  if (s.conditions !== undefined && !Array.isArray(s.conditions)) return undefined;
  if (s.conditions?.some((c) => (c as Partial<Condition> | null)?.type !== READY)) return undefined;
  return {
    skeleton: skeletons(pool).intern(s.observedGeneration, s.conditions ?? [], pool),
    digest: statusDigest(s),
  };
}

/** Digests of the statuses {@link expandStatus} made, by the status. */
const expanded = new WeakMap<ReferableStatus, string>();

/**
 * A status for a reconcile to start from, made from a compact record's skeleton (the observed
 * generation and the conditions: no messages, no value): {@link sameAsStored} compares against
 * it by `digest`.
 */
export function expandStatus(skeleton: ReferableStatus, digest: string): ReferableStatus {
  const status: ReferableStatus = { ...skeleton };
  expanded.set(status, digest);
  return status;
}

/**
 * Whether writing `desired` would change nothing that matters over `stored`: by digest when
 * `stored` was expanded from a summary, otherwise field by field (`equals`).
 */
export function sameAsStored(
  stored: ReferableStatus | undefined,
  desired: ReferableStatus,
  equals: (a: ReferableStatus | undefined, b: ReferableStatus) => boolean,
): boolean {
  const digest = stored === undefined ? undefined : expanded.get(stored);
  return digest !== undefined ? statusDigest(desired) === digest : equals(stored, desired);
}

/** Skeletons pooled at most (past it the pool starts again), and the longest pooled (as JSON). */
const SKELETONS_MAX = 2000;
const SKELETON_MAX_CHARS = 1024;

/**
 * Skeleton statuses shared among Referables: a Ready condition that turned True in the same
 * second at generation 1 is one frozen status for all that share it.
 */
class Skeletons {
  private readonly sets = new Map<string, ReferableStatus>();

  intern(
    observedGeneration: number | undefined,
    conditions: readonly unknown[],
    pool: StringPool | undefined,
  ): ReferableStatus {
    const bare = conditions.map((c) => Object.freeze(bareCondition(c, pool)));
    const skeleton: ReferableStatus = {};
    if (observedGeneration !== undefined) skeleton.observedGeneration = observedGeneration;
    if (bare.length > 0) skeleton.conditions = Object.freeze(bare) as Condition[];
    const key = JSON.stringify(skeleton);
    if (key.length > SKELETON_MAX_CHARS) return Object.freeze(skeleton);
    const hit = this.sets.get(key);
    if (hit) return hit;
    if (this.sets.size >= SKELETONS_MAX) this.sets.clear();
    this.sets.set(key, Object.freeze(skeleton));
    return skeleton;
  }
}

function bareCondition(c: unknown, pool: StringPool | undefined): Condition {
  const from = (typeof c === "object" && c !== null ? c : {}) as Partial<Condition>;
  const intern = (s: unknown): string =>
    typeof s === "string" && pool && s.length <= 128 ? (pool.intern(s) as string) : (s as string);
  const out = {
    type: intern(from.type),
    status: intern(from.status),
    reason: intern(from.reason),
    lastTransitionTime: internTime(from.lastTransitionTime, pool) as string,
  } as Condition;
  if (from.observedGeneration !== undefined) out.observedGeneration = from.observedGeneration;
  return out;
}

const withoutPool = new Skeletons();
const pools = new WeakMap<StringPool, Skeletons>();

function skeletons(pool: StringPool | undefined): Skeletons {
  if (!pool) return withoutPool;
  let found = pools.get(pool);
  if (!found) pools.set(pool, (found = new Skeletons()));
  return found;
}

/** Timestamps pooled at most: past it the pool starts again (they recur in bursts, then never). */
const TIMES_MAX = 2000;

/**
 * Timestamps (RFC 3339, to the second) shared among Referables made or changed in the same
 * second, in a pool of their own that starts again when full: in the string pool, a cluster's
 * history of seconds would fill it for good.
 */
export function internTime<T>(s: T, pool: StringPool | undefined): T {
  if (!pool || typeof s !== "string" || s.length > 40) return s;
  let times = timePools.get(pool);
  if (!times) timePools.set(pool, (times = new Map()));
  const hit = times.get(s);
  if (hit !== undefined) return hit as T;
  if (times.size >= TIMES_MAX) times.clear();
  times.set(s, s);
  return s;
}

const timePools = new WeakMap<StringPool, Map<string, string>>();

/**
 * What a compact record keeps of a Referable's metadata, its strings already shared by the
 * caller (spec.ts pools labels and creation times).
 */
export interface CompactMeta {
  readonly name: string;
  readonly uid: string | undefined;
  readonly resourceVersion: string | undefined;
  readonly generation: number | undefined;
  readonly creationTimestamp: string | undefined;
  readonly labels: Readonly<Record<string, string>> | undefined;
  readonly deletionTimestamp: string | undefined;
  readonly finalizers: readonly string[] | undefined;
}

/** The fields most records lack, in one object only the few that have them pay for. */
interface Rare {
  readonly deletionTimestamp: string | undefined;
  readonly finalizers: readonly string[] | undefined;
}

/**
 * The compact record itself: one object, its metadata the record (`metadata` is a getter
 * returning it), the resourceVersion a number when it can be, and the spec split into a shared
 * shape (every field but the source's name) and the source's name, put back together when read.
 * Read it as a Referable with {@link referableOf}; its `spec` is made anew at every read (it is
 * read when a bucket is taken over and when the spec changes, never per event of others).
 */
class CompactReferable {
  readonly name: string;
  readonly uid: string | undefined;
  private readonly rv: PackedVersion;
  readonly generation: number | undefined;
  readonly creationTimestamp: string | undefined;
  readonly labels: Readonly<Record<string, string>> | undefined;
  private readonly rare: Rare | undefined;
  private readonly shape: unknown;
  private readonly sourceName: string | undefined;
  /** The skeleton status ({@link StatusSummary.skeleton}); undefined when none was written. */
  readonly status: ReferableStatus | undefined;
  /** The stored status's {@link statusDigest}; undefined with no status. */
  readonly digest: string | undefined;

  constructor(meta: CompactMeta, spec: SharedSpec, summary: StatusSummary | undefined) {
    this.name = meta.name;
    this.uid = meta.uid;
    this.rv = packVersion(meta.resourceVersion, "smi");
    this.generation = meta.generation;
    this.creationTimestamp = meta.creationTimestamp;
    this.labels = meta.labels;
    this.rare =
      meta.deletionTimestamp === undefined && meta.finalizers === undefined
        ? undefined
        : { deletionTimestamp: meta.deletionTimestamp, finalizers: meta.finalizers };
    this.shape = spec.shape;
    this.sourceName = spec.sourceName;
    this.status = summary?.skeleton;
    this.digest = summary?.digest;
  }

  get apiVersion(): string {
    return REFERABLE_API_VERSION;
  }

  get kind(): string {
    return "Referable";
  }

  get metadata(): this {
    return this;
  }

  /** Cluster-scoped. */
  get namespace(): undefined {
    return undefined;
  }

  get resourceVersion(): string | undefined {
    return unpackVersion(this.rv);
  }

  get deletionTimestamp(): string | undefined {
    return this.rare?.deletionTimestamp;
  }

  get finalizers(): readonly string[] | undefined {
    return this.rare?.finalizers;
  }

  get spec(): unknown {
    return joinSpec(this.shape, this.sourceName);
  }

  /** The spec as kept, for the next version of the same spec to share. */
  sharedSpec(): SharedSpec {
    return { shape: this.shape, sourceName: this.sourceName };
  }

  /** As JSON, the Referable it stands for with its skeleton and digest (never a cycle through `metadata`). */
  toJSON(): unknown {
    return { ...plainOf(this), status: this.status, digest: this.digest };
  }
}

/** A record's identity, metadata and spec as a plain object. */
function plainOf(r: CompactReferable): Referable {
  const metadata: Referable["metadata"] = { name: r.name };
  if (r.uid !== undefined) metadata.uid = r.uid;
  if (r.resourceVersion !== undefined) metadata.resourceVersion = r.resourceVersion;
  if (r.generation !== undefined) metadata.generation = r.generation;
  if (r.creationTimestamp !== undefined) metadata.creationTimestamp = r.creationTimestamp;
  if (r.labels !== undefined) metadata.labels = r.labels as Record<string, string>;
  if (r.deletionTimestamp !== undefined) metadata.deletionTimestamp = r.deletionTimestamp;
  if (r.finalizers !== undefined) metadata.finalizers = [...r.finalizers];
  return { apiVersion: r.apiVersion, kind: r.kind, metadata, spec: r.spec } as Referable;
}

/** A spec as a compact record keeps it: a shared frozen shape, and the source's own name. */
interface SharedSpec {
  readonly shape: unknown;
  readonly sourceName: string | undefined;
}

/** Spec shapes pooled at most (past it the pool starts again), and the longest pooled (as JSON). */
const SHAPES_MAX = 2000;
const SHAPE_MAX_CHARS = 1024;

const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === "object" && v !== null && !Array.isArray(v);

/**
 * Spec shapes shared among Referables: most specs differ only in their source's name (a
 * ConfigMap each, of one namespace, one fieldPath), so all but that name is one frozen object
 * for all of them, made from its JSON (so its fields sit in the objects themselves).
 */
class SpecShapes {
  private readonly shapes = new Map<string, unknown>();

  share(spec: unknown): SharedSpec {
    if (spec === undefined) return { shape: undefined, sourceName: undefined };
    const source = isObject(spec) ? spec.source : undefined;
    let sourceName: string | undefined;
    let shape = spec;
    if (isObject(source) && typeof source.name === "string") {
      const { name, ...rest } = source;
      sourceName = name;
      shape = { ...(spec as Record<string, unknown>), source: rest };
    }
    const key = stableStringify(shape);
    if (key.length > SHAPE_MAX_CHARS) return { shape: deepFreeze(JSON.parse(key)), sourceName };
    let hit = this.shapes.get(key);
    if (hit === undefined) {
      if (this.shapes.size >= SHAPES_MAX) this.shapes.clear();
      this.shapes.set(key, (hit = deepFreeze(JSON.parse(key))));
    }
    return { shape: hit, sourceName };
  }
}

function deepFreeze<T>(value: T): T {
  if (typeof value === "object" && value !== null) {
    for (const v of Object.values(value)) deepFreeze(v);
    Object.freeze(value);
  }
  return value;
}

const shapesWithoutPool = new SpecShapes();
const shapePools = new WeakMap<StringPool, SpecShapes>();

function shareSpec(spec: unknown, pool: StringPool | undefined): SharedSpec {
  if (!pool) return shapesWithoutPool.share(spec);
  let shapes = shapePools.get(pool);
  if (!shapes) shapePools.set(pool, (shapes = new SpecShapes()));
  return shapes.share(spec);
}

/** The spec a shape and a source's name stand for: a new object (the shape stays shared and frozen). */
function joinSpec(shape: unknown, sourceName: string | undefined): unknown {
  if (sourceName === undefined || !isObject(shape) || !isObject(shape.source)) return shape;
  return { ...shape, source: { ...shape.source, name: sourceName } };
}

/**
 * A compact record of a Referable (see the module comment and {@link CompactReferable}) from its
 * metadata (strings pooled), its spec (pooled into a shared shape here) and its status summary;
 * `previous` (the cached record of the same uid and generation) lends its spec, unchanged.
 * The informer caches it as it caches any projection; read it with {@link referableOf}.
 */
export function compactReferable(
  meta: CompactMeta,
  spec: unknown,
  summary: StatusSummary | undefined,
  pool: StringPool | undefined,
  previous?: KubeObject,
): KubeObject {
  const kept =
    previous instanceof CompactReferable &&
    previous.uid === meta.uid &&
    meta.generation !== undefined &&
    previous.generation === meta.generation
      ? previous.sharedSpec()
      : shareSpec(spec, pool);
  return new CompactReferable(meta, kept, summary) as unknown as KubeObject;
}

/**
 * Whether `next` keeps the very spec `old` held: the same spec object, or for two compact records
 * the same shared shape and source name (a compact record's `spec` is made anew at each read, so
 * its identity says nothing). False says only "maybe changed".
 */
export function sameSpecKept(old: KubeObject, next: KubeObject): boolean {
  if (old instanceof CompactReferable && next instanceof CompactReferable) {
    const a = old.sharedSpec();
    const b = next.sharedSpec();
    return a.shape === b.shape && a.sourceName === b.sourceName;
  }
  return !(old instanceof CompactReferable) && !(next instanceof CompactReferable) && old.spec === next.spec;
}

/** Whether `obj` is a compact record ({@link compactReferable}). */
export function isCompactReferable(obj: unknown): boolean {
  return obj instanceof CompactReferable;
}

/**
 * A cached Referable as a plain Referable: a compact record made whole again, its skeleton
 * status expanded ({@link expandStatus}, compared by digest); any other object as it is.
 */
export function referableOf(obj: KubeObject | undefined): Referable | undefined {
  if (obj instanceof CompactReferable) {
    const out = plainOf(obj);
    if (obj.status !== undefined)
      out.status = obj.digest === undefined ? { ...obj.status } : expandStatus(obj.status, obj.digest);
    return out;
  }
  const referable = obj as unknown as Referable | undefined;
  const digest = obj?.digest;
  if (typeof digest !== "string" || !referable?.status) return referable;
  return { ...referable, status: expandStatus(referable.status, digest) };
}
