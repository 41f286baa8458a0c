/**
 * The graph of Referables reading Referables, directly or through the keys they export, and
 * the cycles in it.
 *
 * A Referable reads another by name (`spec.source.name`) or by a label selector that matches it.
 * It also reads, through an object, every Referable that exports into that object: its source
 * is a ConfigMap or Secret by name that another Referable names in `spec.export`, or a label
 * selector on ConfigMaps or Secrets of a namespace that matches the labels an object created by
 * export carries (`referable.dev/exported: "true"` and nothing else), where another Referable
 * exports. Such a loop never settles when the field read changes with every write (its
 * `metadata.resourceVersion`, its status, a key incremented by a transform), so every member of
 * a cycle, of any length, is refused.
 *
 * The objects between are nodes of their own (`ConfigMap ns/name`, and `ConfigMaps selected in
 * ns` for a selector): a reader points at the object, the object at its writers, so a thousand
 * readers of one object with a thousand writers cost two thousand edges, not a million, and a
 * cycle's message names the objects it runs through. A Referable's writes into an object its own
 * source may read are not edges: the key output refuses to write there (InvalidSpec on the
 * Exported condition), so they never feed anything back.
 *
 * The edges come from the specs and labels alone, never from a resolution result: a result can
 * be an error (an ambiguous selector, the very InvalidSpec this graph causes), and a cycle that
 * vanished whenever its members stopped resolving would flap. Edges are kept up to date as
 * Referables change (a selector is matched against each Referable once, and again only when its
 * labels or the selector change); the cycles, the strongly connected components, are recomputed
 * in one linear pass (Tarjan's) only when an edge changed, at the next question asked.
 */
import type { CompiledSelector } from "../informers/label-selector.ts";

/** What one Referable reads among Referables (by name, by selector, through exports), and where it exports. */
export interface ReadsReferables {
  /** The Referable it names (`spec.source.name` of a Referable source). */
  name?: string;
  /** The selector of a Referable source. */
  selector?: CompiledSelector;
  /** Its source, a ConfigMap or Secret by name, as {@link exportObjectNode} names it. */
  object?: string;
  /**
   * The source's name, which `object` ends with: given, a node that reads only `object` keeps
   * this string (the Referable's cached spec holds it already) and the start of `object`, shared
   * by all that read the same namespace, rather than a string of its own.
   */
  objectName?: string;
  /** Its source, a selector on ConfigMaps or Secrets that matches exported objects, as {@link exportScopeNode} names it. */
  scope?: string;
  /** The objects it exports into (but not those its own source may read), as {@link exportObjectNode} names them. */
  writes?: ReadonlyArray<{ object: string; scope: string }>;
}

/** The node of one ConfigMap or Secret in the graph (and in a cycle's message): `ConfigMap ns/name`. */
export function exportObjectNode(kind: string, namespace: string, name: string): string {
  return `${kind} ${namespace}/${name}`;
}

/** The node of every exported ConfigMap (or Secret) of a namespace: `ConfigMaps selected in ns`. */
export function exportScopeNode(kind: string, namespace: string): string {
  return `${kind}s selected in ${namespace}`;
}

/** Whether a node is an object (or a namespace of them) rather than a Referable, whose names have no space. */
export function isObjectNode(node: string): boolean {
  return node.includes(" ");
}

interface Component {
  members: readonly string[];
  /** Size and a hash of the sorted members: comparing components costs O(1) per member. */
  key: string;
  /** The members as a set, made when a cycle is first searched in the component. */
  set?: ReadonlySet<string>;
}

interface Node {
  labels: Readonly<Record<string, string>> | undefined;
  /**
   * What it reads; only the object node when that is all (most read a ConfigMap or Secret by
   * name), then as its start (`ConfigMap ns/`, shared) when {@link objectName} is its end: see {@link kept}.
   */
  reads: ReadsReferables | string | undefined;
  /** The end of the object node in {@link reads}, when that is its start. */
  objectName: string | undefined;
  /** The Referables its selector matches now. */
  matched: Set<string>;
}

/**
 * The matches of a Referable that selects nothing (most read by name): one empty Set shared by
 * them all, never added to (only a selecting node gets a Set of its own, in matchAll), rather
 * than an empty Set each.
 */
const NONE: Set<string> = new Set();

/** How many names a cycle shows in a message before the middle is abbreviated. */
const SHOWN_AT_MOST = 8;

/** Referables and what they read among themselves; see the module comment. */
export class ReferenceGraph {
  private readonly nodes = new Map<string, Node>();
  /** The Referables that read Referables by selector. */
  private readonly selecting = new Set<string>();
  /** Writers of each object node and of each namespace node, by node. */
  private readonly writers = new Map<string, Set<string>>();
  /** The Referables that name each Referable as their source, by the name read. */
  private readonly namedBy = new Map<string, Set<string>>();
  /** Whether an edge changed since the components were computed. */
  private dirty = false;
  /** The component of each Referable on a cycle (its members, shared by them all). */
  private cyclic = new Map<string, Component>();
  /** A cycle through each member, computed when first asked for. */
  private readonly paths = new Map<string, string[]>();

  /** Adds or updates a Referable: its labels and what it reads. */
  set(
    name: string,
    labels: Readonly<Record<string, string>> | undefined,
    reads: ReadsReferables | undefined,
  ): void {
    const old = this.nodes.get(name);
    if (!old) {
      const node: Node = { labels, reads: undefined, objectName: undefined, matched: NONE };
      keep(node, reads);
      this.nodes.set(name, node);
      this.matchAll(name, node);
      this.matchAgainstSelectors(name, labels);
      this.index(name, undefined, reads);
      this.dirty = true;
      return;
    }
    const before = readsOfNode(old);
    if (!sameReads(before, reads)) {
      this.index(name, before, reads);
      keep(old, reads);
      this.matchAll(name, old);
      this.dirty = true;
    }
    if (!sameLabels(old.labels, labels)) {
      old.labels = labels;
      if (this.matchAgainstSelectors(name, labels)) this.dirty = true;
    }
  }

  /** Removes a Referable (it was deleted). */
  delete(name: string): void {
    const node = this.nodes.get(name);
    if (!node) return;
    this.index(name, readsOfNode(node), undefined);
    this.nodes.delete(name);
    this.selecting.delete(name);
    for (const s of this.selecting) this.nodes.get(s)!.matched.delete(name);
    this.dirty = true;
  }

  /**
   * Recomputes the cycles if an edge changed since the last time; returns the Referables whose
   * cycle changed (joined one, left one, or are in one whose members changed), which need a new
   * status.
   */
  flush(): Set<string> {
    const changed = new Set<string>();
    if (!this.dirty) return changed;
    this.dirty = false;
    const before = this.cyclic;
    this.cyclic = this.components();
    this.paths.clear();
    for (const [name, component] of this.cyclic)
      if (before.get(name)?.key !== component.key) changed.add(name);
    for (const name of before.keys()) if (!this.cyclic.has(name)) changed.add(name);
    return changed;
  }

  /**
   * A shortest cycle from `name` back to itself (`[name, ..., name]`), or undefined when it is
   * on none. Call {@link flush} first to see the latest changes.
   */
  cycleOf(name: string): string[] | undefined {
    const component = this.cyclic.get(name);
    if (!component) return undefined;
    let path = this.paths.get(name);
    if (!path) {
      component.set ??= new Set(component.members);
      path = this.shortestCycle(name, component.set);
      this.paths.set(name, path);
    }
    return path;
  }

  /** Whether another Referable reads `name`, by name or by a selector that matches it. */
  readBy(name: string): boolean {
    for (const reader of this.namedBy.get(name) ?? []) if (reader !== name) return true;
    for (const s of this.selecting) if (s !== name && this.nodes.get(s)!.matched.has(name)) return true;
    return false;
  }

  /** The Referables `name` reads, by name (whether it exists or not) or by its selector. */
  readTargets(name: string): string[] {
    const node = this.nodes.get(name);
    if (!node) return [];
    const target = readsOfNode(node)?.name;
    if (node.matched.size === 0) return target === undefined ? [] : [target];
    const out = [...node.matched];
    if (target !== undefined && !node.matched.has(target)) out.push(target);
    return out;
  }

  /** How many Referables are on a cycle now (as of the last {@link flush}). */
  get cyclicCount(): number {
    return this.cyclic.size;
  }

  /**
   * The nodes `name` reads: by name (whether that Referable exists or not), by selector, and the
   * object or namespace of objects it reads; for an object node, the Referables writing it.
   */
  private out(name: string): Iterable<string> {
    if (isObjectNode(name)) return this.writers.get(name) ?? [];
    const node = this.nodes.get(name);
    if (!node) return [];
    const reads = readsOfNode(node);
    const target = reads?.name;
    if (reads?.object === undefined && reads?.scope === undefined)
      return target === undefined || node.matched.has(target) ? node.matched : [target, ...node.matched];
    const out: string[] = [];
    if (target !== undefined && !node.matched.has(target)) out.push(target);
    out.push(...node.matched);
    if (reads.object !== undefined) out.push(reads.object);
    if (reads.scope !== undefined) out.push(reads.scope);
    return out;
  }

  /** Moves `name` from the writers of what `before` writes to those of what `after` writes. */
  private index(name: string, before: ReadsReferables | undefined, after: ReadsReferables | undefined): void {
    if (before?.name !== after?.name) {
      const set = before?.name === undefined ? undefined : this.namedBy.get(before.name);
      set?.delete(name);
      if (set?.size === 0) this.namedBy.delete(before!.name!);
      if (after?.name !== undefined) {
        let readers = this.namedBy.get(after.name);
        if (!readers) this.namedBy.set(after.name, (readers = new Set()));
        readers.add(name);
      }
    }
    for (const w of before?.writes ?? [])
      for (const node of [w.object, w.scope]) {
        const set = this.writers.get(node);
        set?.delete(name);
        if (set?.size === 0) this.writers.delete(node);
      }
    for (const w of after?.writes ?? [])
      for (const node of [w.object, w.scope]) {
        let set = this.writers.get(node);
        if (!set) this.writers.set(node, (set = new Set()));
        set.add(name);
      }
  }

  /** Matches `node`'s selector (if any) against every Referable. */
  private matchAll(name: string, node: Node): void {
    const selector = readsOfNode(node)?.selector;
    if (!selector) {
      node.matched = NONE;
      this.selecting.delete(name);
      return;
    }
    node.matched = new Set();
    this.selecting.add(name);
    for (const [other, o] of this.nodes) if (selector.matches(o.labels)) node.matched.add(other);
  }

  /** Matches every selector against `name`'s labels; true when a match changed. */
  private matchAgainstSelectors(name: string, labels: Readonly<Record<string, string>> | undefined): boolean {
    let changed = false;
    for (const s of this.selecting) {
      const node = this.nodes.get(s)!;
      const matches = readsOfNode(node)!.selector!.matches(labels);
      if (matches === node.matched.has(name)) continue;
      if (matches) node.matched.add(name);
      else node.matched.delete(name);
      changed = true;
    }
    return changed;
  }

  /**
   * Tarjan's strongly connected components, iteratively (a ring of ten thousand must not
   * overflow the stack): every component of two or more, or of one that reads itself, by member.
   */
  private components(): Map<string, Component> {
    const index = new Map<string, number>();
    const low = new Map<string, number>();
    const onStack = new Set<string>();
    const stack: string[] = [];
    const result = new Map<string, Component>();
    let next = 0;
    for (const root of this.nodes.keys()) {
      if (index.has(root)) continue;
      const frames: Array<{ name: string; edges: Iterator<string> }> = [];
      const visit = (name: string) => {
        index.set(name, next);
        low.set(name, next);
        next++;
        stack.push(name);
        onStack.add(name);
        frames.push({ name, edges: this.out(name)[Symbol.iterator]() });
      };
      visit(root);
      while (frames.length > 0) {
        const frame = frames[frames.length - 1]!;
        const step = frame.edges.next();
        if (!step.done) {
          const to = step.value;
          if (!this.nodes.has(to) && !isObjectNode(to)) continue; // names a Referable that does not exist (yet)
          if (!index.has(to)) visit(to);
          else if (onStack.has(to)) low.set(frame.name, Math.min(low.get(frame.name)!, index.get(to)!));
          continue;
        }
        frames.pop();
        const parent = frames[frames.length - 1];
        if (parent) low.set(parent.name, Math.min(low.get(parent.name)!, low.get(frame.name)!));
        if (low.get(frame.name) !== index.get(frame.name)) continue;
        const members: string[] = [];
        let member: string;
        do {
          member = stack.pop()!;
          onStack.delete(member);
          members.push(member);
        } while (member !== frame.name);
        if (members.length === 1 && ![...this.out(frame.name)].includes(frame.name)) continue;
        // An object with no writers is a component of its own: only Referables are on a cycle.
        if (members.length === 1 && isObjectNode(frame.name)) continue;
        members.sort();
        const component: Component = { members, key: componentKey(members) };
        for (const m of members) if (!isObjectNode(m)) result.set(m, component);
      }
    }
    return result;
  }

  /** Breadth-first search from `start` back to itself, within its component. */
  private shortestCycle(start: string, members: ReadonlySet<string>): string[] {
    const parent = new Map<string, string>();
    const queue = [start];
    for (let i = 0; i < queue.length; i++) {
      const at = queue[i]!;
      for (const to of this.out(at)) {
        if (to === start) {
          const back: string[] = [];
          for (let n = at; n !== start; n = parent.get(n)!) back.push(n);
          return [start, ...back.reverse(), start];
        }
        if (!members.has(to) || parent.has(to)) continue;
        parent.set(to, at);
        queue.push(to);
      }
    }
    return [start, start]; // unreachable for a member of a cyclic component
  }
}

/**
 * A cycle for a message: `a → b → c → a`, with the middle left out when it is long
 * (`a → b → c → d → … 62 more … → x → y → z → a`), so a message stays short whatever the ring.
 */
export function describeCycle(path: readonly string[]): string {
  const names = path.slice(0, -1);
  if (names.length <= SHOWN_AT_MOST) return path.join(" → ");
  const head = names.slice(0, SHOWN_AT_MOST / 2);
  const tail = names.slice(names.length - SHOWN_AT_MOST / 2);
  const hidden = names.length - head.length - tail.length;
  return [...head, `… ${hidden} more …`, ...tail, path[0]].join(" → ");
}

/** FNV-1a over the names, with the count: equal components give equal keys. */
function componentKey(members: readonly string[]): string {
  let hash = 0x811c9dc5;
  for (const name of members) {
    for (let i = 0; i < name.length; i++) hash = Math.imul(hash ^ name.charCodeAt(i), 0x01000193);
    hash = Math.imul(hash ^ 0xffff, 0x01000193); // a separator, so ["ab","c"] and ["a","bc"] differ
  }
  return `${members.length}:${(hash >>> 0).toString(16)}`;
}

/**
 * Keeps in `node` what it needs of `reads`: when it reads only an object node, that node's name
 * alone (no object around it), and when `objectName` ends it, only its start, shared, and
 * `objectName` (no string of its own either): every shard keeps a node for every Referable, and
 * most read a ConfigMap or Secret by name (56 bytes for the object, 88 for the string).
 */
function keep(node: Node, reads: ReadsReferables | undefined): void {
  node.objectName = undefined;
  node.reads = reads;
  if (reads?.object === undefined) return;
  for (const key in reads)
    if (key !== "object" && key !== "objectName" && reads[key as keyof ReadsReferables] !== undefined) return;
  const { object, objectName } = reads;
  if (objectName === undefined || objectName === "" || !object.endsWith(objectName)) {
    node.reads = object;
    return;
  }
  node.reads = objectStart(object.slice(0, object.length - objectName.length));
  node.objectName = objectName;
}

/** The starts of object nodes (`ConfigMap ns/`) shared, at most this many: a kind and namespace each. */
const STARTS_MAX = 4096;
const starts = new Map<string, string>();

/** The shared copy of `start`, a flat string (not a slice of the object node it was cut from). */
function objectStart(start: string): string {
  const hit = starts.get(start);
  if (hit !== undefined) return hit;
  // A slice keeps the whole string it was cut from: parsing its JSON makes a flat copy.
  const flat = JSON.parse(JSON.stringify(start)) as string;
  if (starts.size >= STARTS_MAX) starts.clear();
  starts.set(flat, flat);
  return flat;
}

/** What `node` reads, as {@link ReferenceGraph.set} was told. */
function readsOfNode(node: Node): ReadsReferables | undefined {
  if (typeof node.reads !== "string") return node.reads;
  return node.objectName === undefined
    ? { object: node.reads }
    : { object: node.reads + node.objectName, objectName: node.objectName };
}

function sameReads(a: ReadsReferables | undefined, b: ReadsReferables | undefined): boolean {
  return (
    a?.name === b?.name &&
    a?.selector?.key === b?.selector?.key &&
    a?.object === b?.object &&
    a?.scope === b?.scope &&
    (a?.writes ?? []).length === (b?.writes ?? []).length &&
    (a?.writes ?? []).every((w, i) => w.object === b!.writes![i]!.object)
  );
}

function sameLabels(
  a: Readonly<Record<string, string>> | undefined,
  b: Readonly<Record<string, string>> | undefined,
): boolean {
  const ka = Object.keys(a ?? {});
  if (ka.length !== Object.keys(b ?? {}).length) return false;
  return ka.every((k) => Object.hasOwn(b ?? {}, k) && a![k] === b![k]);
}
