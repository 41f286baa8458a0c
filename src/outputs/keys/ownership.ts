/**
 * One key, one owner: which Referable may write each exported key, decided from the specs the
 * controller already caches (no target is read for it).
 *
 * Among the Referables whose `spec.export` names the same key of the same object, the owner is
 * the one created first (`creationTimestamp`, then name: a total order every replica computes
 * alike). Every other one never applies that key and reports `ExportConflict` naming the owner,
 * at once; no two Referables ever apply one key, so they never deadlock, and a deleted target is
 * re-created by its owner only. A Referable being deleted stays the owner until it is gone from
 * the cache (its finalizer removes its keys first), then the next in line takes the key.
 *
 * Bounded by construction: a Referable names at most 16 targets, so this holds at most 16
 * entries per exporting Referable, and nothing of the targets themselves.
 */
import { describeObject, objectKey, type ExportTarget, type TargetObject } from "./target.ts";

/** A Referable that names a key, and where it stands in line. */
interface Claim {
  name: string;
  /** Its creationTimestamp (RFC 3339, which orders as text). */
  created: string;
}

/** What one Referable names. */
interface Named {
  created: string;
  /** Target keys ({@link targetKey}). */
  keys: Set<string>;
}

/** One string per key of one object. */
export function targetKey(t: ExportTarget): string {
  return `${objectKey(t)}/${t.key}`;
}

function before(a: Claim, b: Claim): number {
  return a.created < b.created
    ? -1
    : a.created > b.created
      ? 1
      : a.name < b.name
        ? -1
        : a.name > b.name
          ? 1
          : 0;
}

/** Told when the first key of a (kind, namespace) is named, and when the last goes. */
export interface NamespaceListener {
  first(kind: TargetObject["kind"], namespace: string): void;
  last(kind: TargetObject["kind"], namespace: string): void;
}

/** Who owns each exported key; see the module comment. */
export class KeyOwnership {
  /** Target key → its claimants, first in line first. */
  private readonly claims = new Map<string, Claim[]>();
  private readonly named = new Map<string, Named>();
  /** Object key → the Referables naming a key of it, with those keys. */
  private readonly objects = new Map<string, Map<string, Set<string>>>();
  /** "kind/namespace" → how many objects there are named. */
  private readonly namespaces = new Map<string, number>();
  private listener: NamespaceListener | undefined;

  /** Listens to the namespaces that hold targets (one listener; the target watch). */
  listen(listener: NamespaceListener): void {
    this.listener = listener;
  }

  /**
   * Records what the Referable `name` names now (all of it: it replaces what it named before).
   * Returns the Referables to look at again: every claimant of a key whose owner changed.
   */
  set(name: string, created: string, targets: readonly ExportTarget[]): Set<string> {
    const old = this.named.get(name);
    const keys = new Map(targets.map((t) => [targetKey(t), t] as const));
    if (
      old?.created === created &&
      old.keys.size === keys.size &&
      [...keys.keys()].every((k) => old.keys.has(k))
    )
      return new Set();
    const owners = this.ownersOf([...(old?.keys ?? []), ...keys.keys()]);
    this.drop(name);
    if (keys.size > 0) {
      this.named.set(name, { created, keys: new Set(keys.keys()) });
      for (const [k, t] of keys) {
        let line = this.claims.get(k);
        if (!line) this.claims.set(k, (line = []));
        const claim = { name, created };
        const at = line.findIndex((c) => before(claim, c) < 0);
        line.splice(at < 0 ? line.length : at, 0, claim);
        this.addToObject(name, t);
      }
    }
    return this.changed(owners, name);
  }

  /** Forgets the Referable `name`; returns the Referables to look at again (as {@link set}). */
  delete(name: string): Set<string> {
    const owners = this.ownersOf(this.named.get(name)?.keys ?? []);
    this.drop(name);
    return this.changed(owners, name);
  }

  /** The Referable that owns the key, if any names it. */
  ownerOf(t: ExportTarget): string | undefined {
    return this.claims.get(targetKey(t))?.[0]?.name;
  }

  /** The Referables naming a key of `object`, each with the keys of it that it owns. */
  ownersIn(object: TargetObject): Map<string, string[]> {
    const out = new Map<string, string[]>();
    const prefix = `${objectKey(object)}/`;
    for (const [name, keys] of this.objects.get(objectKey(object)) ?? []) {
      const owned = [...keys].filter((k) => this.claims.get(prefix + k)?.[0]?.name === name);
      if (owned.length > 0) out.set(name, owned);
    }
    return out;
  }

  /** Every key of `object` a Referable names (a target watch keeps these, and only these). */
  keysIn(object: TargetObject): Set<string> {
    const out = new Set<string>();
    for (const keys of this.objects.get(objectKey(object))?.values() ?? []) for (const k of keys) out.add(k);
    return out;
  }

  /** The objects of `kind` in `namespace` a Referable names a key of. */
  objectsIn(kind: TargetObject["kind"], namespace: string): TargetObject[] {
    const out: TargetObject[] = [];
    const prefix = `${kind}/${namespace}/`;
    for (const object of this.objects.keys())
      if (object.startsWith(prefix)) out.push({ kind, namespace, name: object.slice(prefix.length) });
    return out;
  }

  private ownersOf(keys: Iterable<string>): Map<string, string | undefined> {
    const owners = new Map<string, string | undefined>();
    for (const k of keys) owners.set(k, this.claims.get(k)?.[0]?.name);
    return owners;
  }

  /** Every claimant but `self` of a key whose owner is no longer the one in `owners`. */
  private changed(owners: Map<string, string | undefined>, self: string): Set<string> {
    const affected = new Set<string>();
    for (const [k, owner] of owners) {
      const line = this.claims.get(k) ?? [];
      if (line[0]?.name !== owner) for (const c of line) if (c.name !== self) affected.add(c.name);
    }
    return affected;
  }

  private drop(name: string): void {
    const old = this.named.get(name);
    if (!old) return;
    this.named.delete(name);
    for (const k of old.keys) {
      const line = this.claims.get(k);
      const i = line?.findIndex((c) => c.name === name) ?? -1;
      if (line && i >= 0) line.splice(i, 1);
      if (line?.length === 0) this.claims.delete(k);
      this.removeFromObject(name, k);
    }
  }

  private addToObject(name: string, t: ExportTarget): void {
    const o = objectKey(t);
    let namers = this.objects.get(o);
    if (!namers) {
      this.objects.set(o, (namers = new Map()));
      const ns = `${t.kind}/${t.namespace}`;
      const count = this.namespaces.get(ns) ?? 0;
      this.namespaces.set(ns, count + 1);
      if (count === 0) this.listener?.first(t.kind, t.namespace);
    }
    let keys = namers.get(name);
    if (!keys) namers.set(name, (keys = new Set()));
    keys.add(t.key);
  }

  private removeFromObject(name: string, k: string): void {
    const cut = k.lastIndexOf("/");
    const o = k.slice(0, cut);
    const namers = this.objects.get(o);
    const keys = namers?.get(name);
    if (!namers || !keys) return;
    keys.delete(k.slice(cut + 1));
    if (keys.size > 0) return;
    namers.delete(name);
    if (namers.size > 0) return;
    this.objects.delete(o);
    const [kind, namespace] = o.split("/") as [TargetObject["kind"], string];
    const ns = `${kind}/${namespace}`;
    const count = (this.namespaces.get(ns) ?? 1) - 1;
    if (count > 0) this.namespaces.set(ns, count);
    else {
      this.namespaces.delete(ns);
      this.listener?.last(kind, namespace);
    }
  }
}

/**
 * The targets whose key the Referable `name` owns; each other one adds an ExportConflict naming
 * its owner to `problems`. Without `ownership`, every key is its namer's.
 */
export function ownedTargets(
  ownership: Pick<KeyOwnership, "ownerOf"> | undefined,
  name: string,
  targets: ExportTarget[],
  problems: Array<{ reason: string; message: string }>,
): ExportTarget[] {
  if (!ownership) return targets;
  return targets.filter((t) => {
    const owner = ownership.ownerOf(t) ?? name;
    if (owner === name) return true;
    problems.push({
      reason: "ExportConflict",
      message: `the key ${t.key} of ${describeObject(t)} is exported by the Referable ${owner}, created before this one: one key has one owner, and this Referable never writes it; export to another key, or remove the target from one of them`,
    });
    return false;
  });
}
