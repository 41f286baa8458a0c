/**
 * Projections: what a source cache keeps of an object instead of the object.
 *
 * An informer that kept whole objects would make the controller's memory follow the cluster's
 * content (every ConfigMap of every tenant, 1 MiB each) rather than its references. A projection
 * keeps the identity and what selection needs (namespace, name, uid, resourceVersion, generation,
 * the labels its kind's selectors name, deletion timestamp) for every object, and only for the
 * objects someone reads, the results of the reads they need ({@link Extractor}s: a fieldPath, a
 * sort path, a condition check), each bounded in size. The decoded object is dropped as soon as
 * it is projected. Every part has a bound whatever the object holds: see "What the controller
 * keeps, and its bounds" in SECURITY.md.
 */
import { isResolutionError, type ResolutionError } from "../api/errors.ts";
import type { CompiledPath } from "../fieldpath/index.ts";
import type { KubeObject } from "../kube/client.ts";
import { stableStringify } from "../api/stable-json.ts";
import { packVersion, unpackVersion, type PackedVersion } from "../kube/packed-version.ts";
import { keptLabels, LabelSetPool, NO_LABEL_KEYS, type LabelKeys } from "./label-keys.ts";

/** The identity of a cached object and what label selection needs. */
export interface ProjectedMeta {
  readonly name: string;
  readonly namespace: string | undefined;
  readonly uid: string | undefined;
  readonly resourceVersion: string | undefined;
  readonly generation: number | undefined;
  /**
   * The labels whose keys are in {@link labelKeys}, and only those (see label-keys.ts); a key
   * outside `labelKeys` may be on the object all the same.
   */
  readonly labels: Readonly<Record<string, string>> | undefined;
  /** Which label keys were kept: a selector naming another key cannot be decided here. */
  readonly labelKeys: LabelKeys;
  readonly deletionTimestamp: string | undefined;
}

/**
 * The outcome of one read, kept in place of the data it was read from. `Value` holds the value
 * and its size as JSON; `TooLarge` only the size (over the cache's byte cap, so never kept);
 * `Missing` says in words which step found nothing; `Failed` holds the evaluation's error.
 */
export type Read =
  | { readonly kind: "Value"; readonly value: unknown; readonly bytes: number }
  | { readonly kind: "TooLarge"; readonly bytes: number; readonly limit: number }
  | { readonly kind: "Missing"; readonly missing: string }
  | { readonly kind: "Failed"; readonly error: ResolutionError };

/** One read someone needs from the objects of a kind; equal keys read the same thing. */
export interface Extractor {
  /** Identifies the read: extractors with equal keys are interchangeable. */
  readonly key: string;
  /** Reads from a whole decoded object; must not keep a reference into it beyond the result. */
  read(obj: KubeObject, maxBytes: number): Read;
  /**
   * True when the read can never see `metadata.labels` or `metadata.managedFields`, so an
   * object read only by such reads may lose them before it is parsed. @default false
   */
  readonly blindToLabels?: boolean;
}

/**
 * Whether a path (either syntax) may see `metadata.labels` or `metadata.managedFields`: when it
 * names them, reads `metadata` or the whole object, or uses what could reach anything
 * (wildcards, recursive descent, filters, escapes). Errs on the side of yes.
 */
export function pathMaySeeLabels(text: string): boolean {
  if (/labels|managedFields|\.\.|\*|\?|\\|@|\(/.test(text)) return true;
  const rest = text.replace(/^[\s{$]+/, "").replace(/[\s}"'\]]+$/, "");
  return rest.replace(/[.["'\]]/g, "") === "" || /metadata$/.test(rest);
}

/** What the cache keeps of one object. Immutable once made, except that reads can be pruned. */
export interface Projection {
  readonly metadata: ProjectedMeta;
  /** The reads kept, by extractor key; undefined when nobody reads this object. */
  readonly reads: ReadonlyMap<string, Read> | undefined;
}

/**
 * Values that recur across objects shared rather than kept once per object: namespace names
 * (at most `max` of them, each at most 63 characters: past `max` it stops pooling) and kept
 * label sets (a {@link LabelSetPool}, bounded on its own).
 */
export class StringPool {
  private readonly strings = new Map<string, string>();
  private readonly max: number;
  readonly labelSets = new LabelSetPool();

  constructor(max = 10_000) {
    this.max = max;
  }

  /** The pooled copy of `s`. */
  intern(s: string | undefined): string | undefined {
    if (s === undefined) return undefined;
    const hit = this.strings.get(s);
    if (hit !== undefined) return hit;
    if (this.strings.size < this.max) this.strings.set(s, s);
    return s;
  }
}

/**
 * One class for a projection and its identity, with every field assigned in one order so all
 * projections share one small hidden class: this is what the cache keeps for each of the
 * cluster's objects, read or not, so every field costs (see BENCHMARKS.md, bytes per object).
 */
class Proj implements Projection, ProjectedMeta {
  readonly name: string;
  readonly namespace: string | undefined;
  readonly uid: string | undefined;
  /** A resourceVersion that is a small decimal is kept as a number: no string per object. */
  private readonly rv: PackedVersion;
  readonly generation: number | undefined;
  labels: Readonly<Record<string, string>> | undefined;
  labelKeys: LabelKeys;
  readonly deletionTimestamp: string | undefined;
  reads: Map<string, Read> | OneRead | undefined;

  constructor(m: ProjectedMeta, reads: Map<string, Read> | OneRead | undefined) {
    this.name = m.name;
    this.namespace = m.namespace;
    this.uid = m.uid;
    this.rv = packVersion(m.resourceVersion, "safe");
    this.generation = m.generation;
    this.labels = m.labels;
    this.labelKeys = m.labelKeys;
    this.deletionTimestamp = m.deletionTimestamp;
    this.reads = reads;
  }

  get resourceVersion(): string | undefined {
    return unpackVersion(this.rv);
  }

  get metadata(): ProjectedMeta {
    return this;
  }
}

/**
 * What the cache keeps of an object nobody reads, with no kept label and no deletion timestamp:
 * most of a shard's sources (the other shards' Referables read them). Five fields, not nine, and
 * no uid: a uid is only ever read from a projection with reads (a result's source), and an object
 * someone starts reading is read again first (its reads were not kept), which brings it.
 * 64 bytes less for each such object (BENCHMARKS.md, "Sources nobody on a shard reads").
 */
class Bare implements Projection, ProjectedMeta {
  readonly name: string;
  readonly namespace: string | undefined;
  private readonly rv: PackedVersion;
  readonly generation: number | undefined;
  labelKeys: LabelKeys;

  constructor(m: ProjectedMeta) {
    this.name = m.name;
    this.namespace = m.namespace;
    this.rv = packVersion(m.resourceVersion, "safe");
    this.generation = m.generation;
    this.labelKeys = m.labelKeys;
  }

  get uid(): undefined {
    return undefined;
  }

  get labels(): undefined {
    return undefined;
  }

  get deletionTimestamp(): undefined {
    return undefined;
  }

  get reads(): undefined {
    return undefined;
  }

  get resourceVersion(): string | undefined {
    return unpackVersion(this.rv);
  }

  get metadata(): ProjectedMeta {
    return this;
  }
}

const str = (v: unknown): string | undefined => (typeof v === "string" ? v : undefined);

/** How to project: what to share values through, and which label keys to keep. */
export interface ProjectOptions {
  /** Shares recurring values (namespaces, label sets) between projections. */
  pool?: StringPool | undefined;
  /** The label keys to keep (only these: see label-keys.ts). @default none */
  labelKeys?: LabelKeys | undefined;
  /** The most bytes of labels one projection keeps (see label-keys.ts). @default MAX_LABEL_BYTES_PER_OBJECT */
  maxLabelBytes?: number | undefined;
}

/** The identity part of `obj`, sharing recurring values through the options' pool. */
export function projectMeta(obj: KubeObject, options: ProjectOptions = {}): ProjectedMeta {
  const m = obj.metadata ?? {};
  const pool = options.pool;
  const labelKeys = options.labelKeys ?? NO_LABEL_KEYS;
  return {
    name: str(m.name) ?? "",
    namespace: pool ? pool.intern(str(m.namespace)) : str(m.namespace),
    uid: str(m.uid),
    resourceVersion: str(m.resourceVersion),
    generation: typeof m.generation === "number" ? m.generation : undefined,
    labels: keptLabels(m.labels, labelKeys, pool?.labelSets, options.maxLabelBytes),
    labelKeys,
    deletionTimestamp: str(m.deletionTimestamp),
  };
}

/**
 * Projects `obj` for `extractors` (duplicates by key are read once). `obj` is not referenced by
 * the result except through read values, which are bounded by `maxBytes` each.
 */
export function project(
  obj: KubeObject,
  extractors: Iterable<Extractor>,
  maxBytes: number,
  options?: ProjectOptions,
): Projection {
  return projectFor(obj, () => extractors, maxBytes, options);
}

/**
 * {@link project}, with the extractors chosen from the object's identity (`wanted` is asked
 * once, with the identity the projection then keeps: it is read from the object only once).
 */
export function projectFor(
  obj: KubeObject,
  wanted: (meta: ProjectedMeta) => Iterable<Extractor>,
  maxBytes: number,
  options?: ProjectOptions,
): Projection {
  const meta = projectMeta(obj, options);
  let one: OneRead | undefined;
  let reads: Map<string, Read> | undefined;
  for (const x of wanted(meta)) {
    if (one?.key === x.key || reads?.has(x.key)) continue;
    if (!one) one = new OneRead(x.key, x.read(obj, maxBytes));
    else (reads ??= new Map([[one.key, one.value]])).set(x.key, x.read(obj, maxBytes));
  }
  if (!one && meta.labels === undefined && meta.deletionTimestamp === undefined) return new Bare(meta);
  return new Proj(meta, reads ?? one);
}

/**
 * Narrows what `projection` keeps of its labels to `keys`, which must be a subset of the keys it
 * was made with (a selector went away): no read of the object is needed to drop labels.
 */
export function narrowLabels(
  projection: Projection,
  keys: LabelKeys,
  pool?: StringPool,
  maxLabelBytes?: number,
): void {
  const p = projection as Proj | Bare;
  if (p.labelKeys === keys) return;
  if (p instanceof Bare) {
    p.labelKeys = keys; // it kept no label: none to drop
    return;
  }
  p.labels = keptLabels(p.labels, keys, pool?.labelSets, maxLabelBytes);
  p.labelKeys = keys;
}

/** Keeps only the reads whose keys `keep` accepts; true when anything was dropped. */
export function pruneReads(projection: Projection, keep: (key: string) => boolean): boolean {
  const p = projection as Proj | Bare;
  if (!p.reads) return false;
  if (p.reads instanceof OneRead) {
    if (keep(p.reads.key)) return false;
    p.reads = undefined;
    return true;
  }
  let dropped = false;
  for (const key of [...p.reads.keys()]) {
    if (!keep(key)) {
      p.reads.delete(key);
      dropped = true;
    }
  }
  if (p.reads.size === 0) p.reads = undefined;
  return dropped;
}

/**
 * The reads of an object read once, which is most objects read (a Referable reads one field of
 * its source): the key and the read, without a Map (whose table alone is about 150 bytes).
 */
class OneRead implements ReadonlyMap<string, Read> {
  readonly key: string;
  readonly value: Read;

  constructor(key: string, value: Read) {
    this.key = key;
    this.value = value;
  }

  get size(): number {
    return 1;
  }

  get(key: string): Read | undefined {
    return key === this.key ? this.value : undefined;
  }

  has(key: string): boolean {
    return key === this.key;
  }

  forEach(
    callback: (value: Read, key: string, map: ReadonlyMap<string, Read>) => void,
    thisArg?: unknown,
  ): void {
    callback.call(thisArg, this.value, this.key, this);
  }

  *entries(): MapIterator<[string, Read]> {
    yield [this.key, this.value];
  }

  *keys(): MapIterator<string> {
    yield this.key;
  }

  *values(): MapIterator<Read> {
    yield this.value;
  }

  [Symbol.iterator](): MapIterator<[string, Read]> {
    return this.entries();
  }
}

/** A path read's outcome, sized; a value over `maxBytes` is not kept, only its size. */
function sizedRead(value: unknown, maxBytes: number): Read {
  const text = JSON.stringify(value);
  const bytes = text === undefined ? 0 : Buffer.byteLength(text, "utf8");
  if (bytes > maxBytes) return { kind: "TooLarge", bytes, limit: maxBytes };
  // A copy through JSON, so a kept value never shares structure (or a V8 sliced string) with
  // the decoded object it came from, which must be free to go.
  return { kind: "Value", value: text === undefined ? value : JSON.parse(text), bytes };
}

const pathExtractors = new Map<string, Extractor>();

/** The extractor reading `path`; shared by every request that reads the same path text. */
export function pathExtractor(path: CompiledPath): Extractor {
  const key = `path:${path.source}`;
  let x = pathExtractors.get(key);
  if (x) return x;
  x = {
    key,
    blindToLabels: !pathMaySeeLabels(path.source),
    read(obj: KubeObject, maxBytes: number): Read {
      try {
        const result = path.evaluate(obj);
        return result.found
          ? sizedRead(result.value, maxBytes)
          : { kind: "Missing", missing: result.missing };
      } catch (err) {
        if (isResolutionError(err)) return { kind: "Failed", error: err };
        throw err;
      }
    },
  };
  // Bounded like the compiled-path cache: paths come from users.
  if (pathExtractors.size >= 4096) pathExtractors.clear();
  pathExtractors.set(key, x);
  return x;
}

/** A condition a source must report, e.g. Ready=True. */
export interface ConditionRequirement {
  readonly type: string;
  readonly status: string;
}

/**
 * The extractor checking `conditions` against `status.conditions`: its value is the first
 * unmet condition as text (`condition Ready=True`), or null when every one is met.
 */
export function conditionsExtractor(conditions: readonly ConditionRequirement[]): Extractor {
  const key = `conditions:${stableStringify(conditions.map((c) => [c.type, c.status]))}`;
  return {
    key,
    blindToLabels: true,
    read(obj: KubeObject): Read {
      const raw = (obj.status as { conditions?: unknown } | undefined)?.conditions;
      const list = Array.isArray(raw) ? (raw as Array<{ type?: unknown; status?: unknown }>) : [];
      for (const want of conditions) {
        if (!list.some((c) => c?.type === want.type && c?.status === want.status))
          return { kind: "Value", value: `condition ${want.type}=${want.status}`, bytes: 0 };
      }
      return { kind: "Value", value: null, bytes: 0 };
    },
  };
}
