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
 */
import { createHash } from "node:crypto";
import { READY, type Condition, type ReferableStatus } from "../api/referable.ts";
import { stableStringify } from "../api/stable-json.ts";
import type { StringPool } from "../informers/projection.ts";

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
  return createHash("sha256").update(stableStringify(normalized)).digest("base64url").slice(0, 20);
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
