/**
 * What an informer keeps: cached objects by namespace and name, and how their resourceVersions
 * order (resourceVersions compare as integers since Kubernetes 1.35, KEP-5504; ones that do not
 * parse as integers are never compared).
 */

/** What an informer can key and order: the identity fields of ObjectMeta. */
export interface Cached {
  readonly metadata?:
    | {
        readonly name?: string | undefined;
        readonly namespace?: string | undefined;
        readonly resourceVersion?: string | undefined;
      }
    | undefined;
}

/** The cache key of an object: "namespace/name", or "name" when cluster-scoped. */
export function objectKey(namespace: string | undefined, name: string): string {
  return namespace ? `${namespace}/${name}` : name;
}

const DECIMAL = /^[0-9]{1,30}$/;

/**
 * Orders two resourceVersions: negative when `a` is older, positive when newer, 0 when equal or
 * not comparable (either absent or not a decimal integer, as an aggregated API may send).
 */
export function compareResourceVersions(a: string | undefined, b: string | undefined): number {
  if (a === undefined || b === undefined || a === b || !DECIMAL.test(a) || !DECIMAL.test(b)) return 0;
  const x = a.replace(/^0+(?=.)/, "");
  const y = b.replace(/^0+(?=.)/, "");
  return x.length !== y.length ? x.length - y.length : x < y ? -1 : x > y ? 1 : 0;
}

/**
 * Cached objects by namespace, then name. Two levels rather than one map keyed by
 * "namespace/name": the inner key is the object's own name string, so no key string is made and
 * kept per object (a cache of many small projections pays for every byte of its index).
 */
export class ObjectStore<T extends Cached> {
  private readonly byNamespace = new Map<string, Map<string, T>>();
  private count = 0;

  get(namespace: string | undefined, name: string): T | undefined {
    return this.byNamespace.get(namespace ?? "")?.get(name);
  }

  getLike(obj: Cached): T | undefined {
    return this.get(obj.metadata?.namespace, obj.metadata?.name ?? "");
  }

  set(obj: T): void {
    const ns = obj.metadata?.namespace ?? "";
    let names = this.byNamespace.get(ns);
    if (!names) this.byNamespace.set(ns, (names = new Map()));
    const name = obj.metadata?.name ?? "";
    if (!names.has(name)) this.count++;
    names.set(name, obj);
  }

  delete(obj: Cached): void {
    const ns = obj.metadata?.namespace ?? "";
    const names = this.byNamespace.get(ns);
    if (names?.delete(obj.metadata?.name ?? "")) this.count--;
    if (names?.size === 0) this.byNamespace.delete(ns);
  }

  *values(namespace?: string): Iterable<T> {
    if (namespace !== undefined) {
      yield* this.byNamespace.get(namespace)?.values() ?? [];
      return;
    }
    for (const names of this.byNamespace.values()) yield* names.values();
  }

  get size(): number {
    return this.count;
  }

  /** Objects in `namespace` (all, when undefined). */
  countIn(namespace: string | undefined): number {
    return namespace === undefined ? this.count : (this.byNamespace.get(namespace)?.size ?? 0);
  }
}
