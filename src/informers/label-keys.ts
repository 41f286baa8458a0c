/**
 * Which labels a projection keeps: only those a selector on its kind can read.
 *
 * An object's labels are the tenant's to write: 845 KB of them fit in one ConfigMap (keys of up
 * to 317 characters, values of up to 63, as many as the object size allows), and a cache that
 * kept them whole kept every tenant's labels for every watched kind. A selector reads only the
 * keys it names (`In`, `NotIn`, `Exists`, `DoesNotExist` and `matchLabels` need the key's
 * presence and its value, nothing else), and the selectors of a kind are known: its
 * subscriptions. So a kind's projections keep the labels whose keys its selectors name, and a
 * projection records which {@link LabelKeys} it was made with, so a reader can tell a label that
 * is absent from one that was not kept (and have the object read again, never guess).
 *
 * What one object keeps is bounded by the selectors' authors, not by the tenant: at most one
 * entry per key the kind's selectors name, the key being the selector's own string (shared, not
 * copied per object), the value at most 63 characters (a longer or malformed value, which no
 * selector value can equal, is kept as one shared marker).
 *
 * And bounded whatever the authors do, since many authors together multiply it: a kind keeps at
 * most {@link MAX_LABEL_KEYS_PER_KIND} keys (the source cache refuses a selector whose new keys
 * do not fit, and only that selector), and one object keeps at most
 * {@link MAX_LABEL_BYTES_PER_OBJECT} bytes of label values (with their keys' length): the values
 * past that are kept as the marker too, so the key still exists for `Exists` and `NotIn`, but no
 * `In` or `matchLabels` value equals it. A tenant's object can never cost more than that.
 */

/** Kubernetes' longest label value (apimachinery `IsValidLabelValue`). */
export const MAX_LABEL_VALUE_LENGTH = 63;
const LABEL_VALUE = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/;

/**
 * Kept in place of a label value no selector can name (longer than 63 characters, malformed, or
 * not a string: an aggregated API may serve what kube-apiserver would refuse). It equals no
 * valid selector value, and the key still exists, so every operator decides as on the original.
 */
export const UNSELECTABLE_VALUE = "\u0000";

/** The most label keys the objects of one watched kind keep (--max-label-keys-per-kind). @default */
export const MAX_LABEL_KEYS_PER_KIND = 256;
/**
 * The most bytes of labels (key and value lengths) one object keeps (--max-label-bytes-per-object);
 * the values past it are kept as {@link UNSELECTABLE_VALUE}. @default
 */
export const MAX_LABEL_BYTES_PER_OBJECT = 4096;

let nextId = 1;

/** A set of label keys kept for a kind; immutable and shared by the projections made with it. */
export class LabelKeys {
  /** The keys, sorted. */
  readonly keys: readonly string[];
  /** Distinguishes sets within a process (the label-set pool's keys start with it). */
  readonly id: number;
  private readonly set: ReadonlySet<string>;

  constructor(keys: Iterable<string>) {
    this.set = new Set(keys);
    this.keys = Object.freeze([...this.set].sort());
    this.id = nextId++;
  }

  get size(): number {
    return this.keys.length;
  }

  has(key: string): boolean {
    return this.set.has(key);
  }

  /** Whether every key of `keys` is in this set. */
  includesAll(keys: readonly string[]): boolean {
    for (const k of keys) if (!this.set.has(k)) return false;
    return true;
  }

  /** Whether both hold the same keys. */
  sameAs(other: LabelKeys): boolean {
    return other === this || (other.size === this.size && this.includesAll(other.keys));
  }
}

/** No label kept: the kind has no selector. */
export const NO_LABEL_KEYS = new LabelKeys([]);

/** The most label sets {@link LabelSetPool} holds before it starts afresh. @default */
export const LABEL_SET_POOL_MAX_SETS = 1024;
/** The longest pool key (kept values and separators); a longer set is not pooled. */
export const LABEL_SET_POOL_MAX_KEY = 1024;

/**
 * Equal kept label sets shared rather than kept once per object (Helm and Argo stamp the same
 * labels on many objects). Keyed by the kept values only, never by the whole label set: a key
 * is the {@link LabelKeys} id and one value (or an absence mark) per kept key, at most
 * {@link LABEL_SET_POOL_MAX_KEY} characters. Holds at most {@link LABEL_SET_POOL_MAX_SETS} sets,
 * then is emptied (sets still in use stay with their projections): so at most about 1 MiB of
 * keys and the sets they name, whatever the cluster holds.
 */
export class LabelSetPool {
  private readonly sets = new Map<string, Readonly<Record<string, string>>>();
  private readonly maxSets: number;

  constructor(maxSets = LABEL_SET_POOL_MAX_SETS) {
    this.maxSets = maxSets;
  }

  /** How many sets are pooled now. */
  get size(): number {
    return this.sets.size;
  }

  /** The pooled copy of `labels` (made with `keys`), frozen so that sharing it is safe. */
  intern(keys: LabelKeys, labels: Record<string, string>): Readonly<Record<string, string>> {
    // Kept values are valid label values or the marker, so ',' and '!' cannot occur in them.
    let key = `${keys.id}|`;
    for (const k of keys.keys) {
      key += Object.hasOwn(labels, k) ? (labels[k] as string) + "," : "!";
      if (key.length > LABEL_SET_POOL_MAX_KEY) return Object.freeze(labels);
    }
    const hit = this.sets.get(key);
    if (hit) return hit;
    if (this.sets.size >= this.maxSets) this.sets.clear();
    const frozen = Object.freeze(labels);
    this.sets.set(key, frozen);
    return frozen;
  }
}

/**
 * The labels of `raw` (an object's `metadata.labels`, as decoded) that `keys` names, with values
 * bounded as the module comment says, at most `maxBytes` of them (keys and values; the values
 * past it are the marker); undefined when none is kept. The result has no prototype, so
 * `constructor` or `toString` are ordinary keys in it.
 */
export function keptLabels(
  raw: unknown,
  keys: LabelKeys,
  pool?: LabelSetPool,
  maxBytes: number = MAX_LABEL_BYTES_PER_OBJECT,
): Readonly<Record<string, string>> | undefined {
  if (keys.size === 0 || typeof raw !== "object" || raw === null || Array.isArray(raw)) return undefined;
  const labels = raw as Record<string, unknown>;
  let out: Record<string, string> | undefined;
  let bytes = 0;
  // Walk the kept keys, not the object's: the work is bounded by the selectors, not the tenant.
  for (const k of keys.keys) {
    if (!Object.hasOwn(labels, k)) continue;
    out ??= Object.create(null) as Record<string, string>;
    const value = boundedValue(labels[k]);
    bytes += k.length + value.length;
    out[k] = bytes <= maxBytes ? value : UNSELECTABLE_VALUE;
  }
  if (!out) return undefined;
  return pool ? pool.intern(keys, out) : Object.freeze(out);
}

function boundedValue(v: unknown): string {
  return typeof v === "string" && v.length <= MAX_LABEL_VALUE_LENGTH && LABEL_VALUE.test(v)
    ? v
    : UNSELECTABLE_VALUE;
}
