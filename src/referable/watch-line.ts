/**
 * Reads a watch event of a Referable from its line of JSON, parsing only what the cache keeps
 * of it (see projectReferable in spec.ts): identity, labels, finalizers, spec and status. What
 * it never keeps is skipped over without becoming strings or objects: `metadata.managedFields`
 * (on a Referable written by its author and by the controller, the largest part of the line),
 * annotations, owner references. The spec is not parsed at all when the cached version of the
 * same object (same uid) is at the same generation: projectReferable keeps the cached spec then.
 *
 * Why: every replica of a sharded controller watches every Referable, so three in four status
 * writes of four shards arrive at a shard as echoes of Referables it does not serve, each a
 * whole object to parse for a new resourceVersion and status summary.
 *
 * The object made is the one a full parse gives, less the members skipped; anything of a shape
 * the reader does not expect (not an object where one should be, an escaped key, an event type
 * other than ADDED, MODIFIED or DELETED, text JSON.parse refuses) gives undefined, and the
 * caller parses the line whole.
 */
import type { KubeObject, WatchEvent } from "../kube/client.ts";
import { onlySpaceFrom, skipValue, walkObject } from "../kube/json-peek.ts";

/** Of metadata: what projectReferable keeps, and what the informer keys an object by. */
export const METADATA: ReadonlySet<string> = new Set([
  "name",
  "namespace",
  "uid",
  "creationTimestamp",
  "resourceVersion",
  "generation",
  "labels",
  "deletionTimestamp",
  "finalizers",
]);
const TYPES = new Set(["ADDED", "MODIFIED", "DELETED"]);

/**
 * The event on `line` with its object reduced to what the Referable cache keeps (see the module
 * comment), or undefined to parse the line whole. `cached` gives the cached version of a
 * Referable by name.
 */
export function parseReferableEvent(
  line: string,
  cached: (name: string) => KubeObject | undefined,
): WatchEvent | undefined {
  try {
    return read(line, cached);
  } catch {
    return undefined; // a member JSON.parse refuses: the whole parse says what is wrong
  }
}

/** What the walk found: the event's type, and the spans of the object's members kept. */
interface Found {
  type?: unknown;
  object: boolean;
  /** Of the object: apiVersion, kind, spec, status, by name. */
  members: Map<string, Span>;
  /** Of the object's metadata: the members in {@link METADATA}, by name. */
  metadata: Map<string, Span> | undefined;
}

interface Span {
  start: number;
  end: number;
}

const OBJECT = new Set(["apiVersion", "kind", "spec", "status"]);

function read(line: string, cached: (name: string) => KubeObject | undefined): WatchEvent | undefined {
  const found: Found = { object: false, members: new Map(), metadata: undefined };
  // One pass over the line; a member met twice (JSON.parse keeps the last) is left to the full parse.
  const end = walkObject(line, 0, (key, at) => {
    if (key === "type") {
      if (found.type !== undefined) return -1;
      const typeEnd = skipValue(line, at);
      found.type = typeEnd < 0 ? undefined : JSON.parse(line.slice(at, typeEnd));
      return typeEnd;
    }
    if (key !== "object") return skipValue(line, at);
    if (found.object) return -1;
    found.object = true;
    return walkObject(line, at, (k, i) => objectMember(line, found, k, i));
  });
  const { type, metadata, members } = found;
  if (end < 0 || !onlySpaceFrom(line, end) || typeof type !== "string" || !TYPES.has(type)) return undefined;
  if (metadata === undefined) return undefined;
  // What is kept, put together as one text for one parse: a string kept is never a slice of the
  // line (which would keep the whole line alive), and the parse is native.
  const spec = members.get("spec");
  const cachedSpec = spec === undefined ? undefined : sameSpec(line, metadata, cached);
  if (cachedSpec !== undefined) members.delete("spec");
  const object = JSON.parse(
    `{${join(line, members)}${members.size > 0 ? "," : ""}"metadata":{${join(line, metadata)}}}`,
  ) as KubeObject;
  if (cachedSpec !== undefined) object.spec = cachedSpec;
  return { type: type as WatchEvent["type"], object };
}

/** `"key":value,…` of the spans. */
function join(line: string, spans: Map<string, Span>): string {
  let text = "";
  for (const [key, { start, end }] of spans) text += `${text ? "," : ""}"${key}":${line.slice(start, end)}`;
  return text;
}

/** One member of the event's object, kept in `found` (or skipped); returns where it ends. */
function objectMember(line: string, found: Found, key: string, at: number): number {
  if (key === "metadata") {
    if (found.metadata !== undefined) return -1;
    const metadata = (found.metadata = new Map<string, Span>());
    return walkObject(line, at, (k, i) =>
      METADATA.has(k) ? span(line, i, metadata, k) : skipValue(line, i),
    );
  }
  return OBJECT.has(key) ? span(line, at, found.members, key) : skipValue(line, at);
}

/** Keeps where the value at `at` lies, under `key` (met twice: -1); returns where it ends. */
function span(line: string, at: number, spans: Map<string, Span>, key: string): number {
  if (spans.has(key)) return -1;
  const end = skipValue(line, at);
  spans.set(key, { start: at, end });
  return end;
}

/**
 * The cached spec, when the cached version is of the same object (uid) at the same generation:
 * what projectReferable would keep of the spec on the line anyway.
 */
function sameSpec(
  line: string,
  metadata: Map<string, Span>,
  cached: (name: string) => KubeObject | undefined,
): unknown {
  const value = (key: string): unknown => {
    const at = metadata.get(key);
    return at === undefined ? undefined : JSON.parse(line.slice(at.start, at.end));
  };
  const name = value("name");
  if (typeof name !== "string") return undefined;
  const pm = cached(name)?.metadata;
  if (pm === undefined || pm.generation === undefined || pm.uid === undefined) return undefined;
  return pm.uid === value("uid") && pm.generation === value("generation") ? cached(name)!.spec : undefined;
}
