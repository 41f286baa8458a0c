/**
 * An oracle for Referables: from the state of the cluster alone (the served kinds, every source
 * object, every Referable), what each Referable's status must say, and where the stored status
 * differs.
 *
 * Deliberately independent of src/resolver and src/fieldpath: its own discovery, its own field
 * paths and its own selector matching, written as plainly as the contract (section 2 of the API
 * document) reads. It covers what the soak uses: field paths of dotted names and `[key]`, label
 * selectors with matchLabels only, Single and Multiple (minMatch, maxMatch; order by name then
 * namespace), Required/Optional and `default`. A spec outside that subset is reported as such,
 * never guessed.
 */
import type { KubeObject } from "../../src/kube/client.ts";

/** What the oracle needs of a client: GET of JSON. */
export interface OracleReader {
  request<T>(method: string, path: string, options?: { query?: Record<string, string | number> }): Promise<T>;
}

/** A kind the API server serves. */
export interface ServedKind {
  apiVersion: string;
  kind: string;
  /** The resource (plural) name. */
  resource: string;
  namespaced: boolean;
}

/** The cluster as the oracle sees it: kinds and every object of the kinds asked about. */
export interface World {
  /** By `apiVersion/kind`; a kind not here is not served. */
  kinds: Map<string, ServedKind>;
  /** By `apiVersion/kind`. */
  objects: Map<string, KubeObject[]>;
}

/** What a Referable's status must be. */
export interface Expectation {
  ready: "True" | "False" | "Unknown";
  reason: string;
  /** Mode Single: the value, or undefined for none. */
  value?: unknown;
  /** Mode Multiple: the values. */
  values?: unknown[];
  /** Objects the value came from, in order ("namespace/name" or "name"). */
  sources: string[];
}

/** A Referable whose stored status differs from the expectation. */
export interface Mismatch {
  name: string;
  /** What differs, in words. */
  why: string[];
  want: Expectation | string;
  got: { ready?: string; reason?: string; value?: unknown; values?: unknown; sources?: string[] };
}

const kindKey = (apiVersion: string, kind: string) => `${apiVersion}/${kind}`;

/**
 * Reads the world: whether each of `kinds` is served (from the API server's discovery
 * documents) and every object of those that are, in every namespace.
 */
export async function observeWorld(
  client: OracleReader,
  kinds: ReadonlyArray<{ apiVersion: string; kind: string }>,
): Promise<World> {
  const world: World = { kinds: new Map(), objects: new Map() };
  const groupVersions = [...new Set(kinds.map((k) => k.apiVersion))];
  for (const apiVersion of groupVersions) {
    const path = apiVersion.includes("/") ? `/apis/${apiVersion}` : `/api/${apiVersion}`;
    let resources: Array<{ name: string; kind: string; namespaced: boolean }> = [];
    try {
      resources = (await client.request<{ resources: typeof resources }>("GET", path)).resources;
    } catch (err) {
      if ((err as { statusCode?: number }).statusCode !== 404) throw err;
    }
    for (const r of resources) {
      if (r.name.includes("/")) continue; // a subresource
      world.kinds.set(kindKey(apiVersion, r.kind), {
        apiVersion,
        kind: r.kind,
        resource: r.name,
        namespaced: r.namespaced,
      });
    }
  }
  for (const { apiVersion, kind } of kinds) {
    const served = world.kinds.get(kindKey(apiVersion, kind));
    if (!served) continue;
    const base = apiVersion.includes("/") ? `/apis/${apiVersion}` : `/api/${apiVersion}`;
    world.objects.set(kindKey(apiVersion, kind), await listAll(client, `${base}/${served.resource}`));
  }
  return world;
}

async function listAll(client: OracleReader, path: string): Promise<KubeObject[]> {
  const items: KubeObject[] = [];
  let continueToken: string | undefined;
  do {
    const query: Record<string, string | number> = { limit: 500 };
    if (continueToken) query.continue = continueToken;
    const page = await client.request<{ items: KubeObject[]; metadata?: { continue?: string } }>(
      "GET",
      path,
      { query },
    );
    items.push(...page.items);
    continueToken = page.metadata?.continue || undefined;
  } while (continueToken);
  return items;
}

interface Spec {
  source?: {
    apiVersion?: string;
    kind?: string;
    namespace?: string;
    name?: string;
    selector?: { matchLabels?: Record<string, string>; matchExpressions?: unknown[] };
    fieldPath?: string;
    requireConditions?: unknown[];
  };
  selection?: { mode?: string; minMatch?: number; maxMatch?: number; sortByFieldPath?: string };
  policy?: { resolution?: string };
  default?: unknown;
}

/** Outside what the oracle knows how to judge. */
class Unsupported extends Error {}

/** What `referable`'s status must be in `world`; a string when its spec is outside the oracle's subset. */
export function expectationFor(referable: KubeObject, world: World): Expectation | string {
  try {
    return derive(referable.spec as Spec | undefined, world);
  } catch (err) {
    if (err instanceof Unsupported) return `unsupported by the oracle: ${err.message}`;
    throw err;
  }
}

function derive(spec: Spec | undefined, world: World): Expectation {
  const source = spec?.source;
  if (!source?.apiVersion || !source.kind || !source.fieldPath) throw new Unsupported("an incomplete source");
  if (source.selector?.matchExpressions?.length) throw new Unsupported("matchExpressions");
  if (source.requireConditions?.length) throw new Unsupported("requireConditions");
  if (spec?.selection?.sortByFieldPath) throw new Unsupported("sortByFieldPath");
  const path = parsePath(source.fieldPath);

  const fail = (reason: string): Expectation => ({ ready: "False", reason, sources: [] });
  const served = world.kinds.get(kindKey(source.apiVersion, source.kind));
  if (!served) return fail("KindNotFound");
  if (served.namespaced && !source.namespace) return fail("InvalidSpec");
  if (!served.namespaced && source.namespace) return fail("InvalidSpec");

  const all = world.objects.get(kindKey(source.apiVersion, source.kind)) ?? [];
  const inScope = served.namespaced ? all.filter((o) => o.metadata?.namespace === source.namespace) : all;
  const multiple = spec?.selection?.mode === "Multiple";

  // The one place where a missing source or field meets Required, Optional and default.
  const missing = (reason: "SourceNotFound" | "FieldNotFound" | "TooFewMatches"): Expectation => {
    if (spec?.default !== undefined && spec.default !== null) {
      return multiple
        ? {
            ready: "True",
            reason: "Defaulted",
            values: Array.isArray(spec.default) ? spec.default : [spec.default],
            sources: [],
          }
        : { ready: "True", reason: "Defaulted", value: spec.default, sources: [] };
    }
    if (spec?.policy?.resolution === "Optional")
      return multiple
        ? { ready: "True", reason: "Optional", values: [], sources: [] }
        : { ready: "True", reason: "Optional", sources: [] };
    return fail(reason);
  };
  const one = (obj: KubeObject | undefined): Expectation => {
    if (!obj) return missing("SourceNotFound");
    const read = evaluate(obj, path);
    if (!read.found) return missing("FieldNotFound");
    return { ready: "True", reason: "Available", value: read.value, sources: [idOf(obj)] };
  };

  if (source.name) return one(inScope.find((o) => o.metadata?.name === source.name));
  if (!source.selector) throw new Unsupported("neither name nor selector");
  const want = Object.entries(source.selector.matchLabels ?? {});
  const matched = inScope.filter((o) => want.every(([k, v]) => o.metadata?.labels?.[k] === v));
  if (!multiple) {
    if (matched.length > 1) return fail("AmbiguousSelector");
    return one(matched[0]);
  }
  const minMatch = spec?.selection?.minMatch ?? 1;
  const maxMatch = spec?.selection?.maxMatch;
  if (matched.length === 0) {
    if (minMatch === 0) return { ready: "True", reason: "Available", values: [], sources: [] };
    return missing("SourceNotFound");
  }
  matched.sort(
    (a, b) =>
      compare(a.metadata?.name, b.metadata?.name) || compare(a.metadata?.namespace, b.metadata?.namespace),
  );
  const values: unknown[] = [];
  const sources: string[] = [];
  for (const obj of matched) {
    const read = evaluate(obj, path);
    if (!read.found) continue;
    values.push(read.value);
    sources.push(idOf(obj));
    if (maxMatch !== undefined && values.length >= maxMatch) break;
  }
  // Too few values is a missing selection: FieldNotFound when enough objects match, else TooFewMatches.
  if (values.length < minMatch)
    return missing(matched.length >= minMatch ? "FieldNotFound" : "TooFewMatches");
  return { ready: "True", reason: "Available", values, sources };
}

function compare(a: string | undefined, b: string | undefined): number {
  const x = a ?? "";
  const y = b ?? "";
  return x < y ? -1 : x > y ? 1 : 0;
}

function idOf(obj: { metadata?: { namespace?: string; name?: string } }): string {
  return obj.metadata?.namespace
    ? `${obj.metadata.namespace}/${obj.metadata.name}`
    : String(obj.metadata?.name);
}

/** `a.b[key].c` → ["a", "b", "key", "c"]. Only names and unquoted bracketed keys. */
export function parsePath(text: string): string[] {
  const keys: string[] = [];
  const pattern = /([A-Za-z0-9_-]+)|\[([^\][]+)\]|(\.)/gy;
  let last: "name" | "bracket" | "dot" | undefined;
  let consumed = 0;
  for (let m = pattern.exec(text); m; m = pattern.exec(text)) {
    consumed = pattern.lastIndex;
    if (m[1] !== undefined) {
      if (last === "name" || last === "bracket") throw new Unsupported(`field path ${text}`);
      keys.push(m[1]);
      last = "name";
    } else if (m[2] !== undefined) {
      if (last === undefined || last === "dot") throw new Unsupported(`field path ${text}`);
      keys.push(m[2]);
      last = "bracket";
    } else {
      if (last !== "name" && last !== "bracket") throw new Unsupported(`field path ${text}`);
      last = "dot";
    }
  }
  if (consumed !== text.length || last === "dot" || keys.length === 0)
    throw new Unsupported(`field path ${text}`);
  return keys;
}

/** Walks `keys` into `obj`: found only when every key names a member of an object. */
export function evaluate(obj: unknown, keys: readonly string[]): { found: boolean; value?: unknown } {
  let at: unknown = obj;
  for (const key of keys) {
    if (typeof at !== "object" || at === null || Array.isArray(at) || !Object.hasOwn(at, key))
      return { found: false };
    at = (at as Record<string, unknown>)[key];
  }
  return { found: true, value: at };
}

/** JSON with sorted keys, for equality. */
function canonical(value: unknown): string {
  return JSON.stringify(value, (_k, v: unknown) =>
    v && typeof v === "object" && !Array.isArray(v)
      ? Object.fromEntries(Object.entries(v as Record<string, unknown>).sort(([a], [b]) => compare(a, b)))
      : v,
  );
}

/** Compares the stored status of `referable` with what `world` says it must be. */
export function check(referable: KubeObject, world: World): Mismatch | undefined {
  const name = referable.metadata?.name ?? "";
  const status = (referable.status ?? {}) as {
    value?: unknown;
    values?: unknown;
    sources?: Array<{ namespace?: string; name?: string }>;
    observedGeneration?: number;
    conditions?: Array<{ type?: string; status?: string; reason?: string; observedGeneration?: number }>;
  };
  const ready = status.conditions?.find((c) => c.type === "Ready");
  const got: Mismatch["got"] = { ready: ready?.status, reason: ready?.reason };
  if (status.value !== undefined) got.value = status.value;
  if (status.values !== undefined) got.values = status.values;
  if (status.sources !== undefined)
    got.sources = status.sources.map((s) => (s.namespace ? `${s.namespace}/${s.name}` : String(s.name)));
  const want = expectationFor(referable, world);
  if (typeof want === "string") return { name, why: [want], want, got };

  const why: string[] = [];
  const generation = referable.metadata?.generation;
  if (status.observedGeneration !== generation || ready?.observedGeneration !== generation)
    why.push(
      `observedGeneration ${status.observedGeneration}/${ready?.observedGeneration} is not generation ${generation}`,
    );
  if (got.ready !== want.ready || got.reason !== want.reason)
    why.push(`Ready is ${got.ready} ${got.reason}, want ${want.ready} ${want.reason}`);
  if (canonical(status.value) !== canonical(want.value))
    why.push(`value is ${canonical(status.value)}, want ${canonical(want.value)}`);
  if (canonical(status.values) !== canonical(want.values))
    why.push(`values are ${canonical(status.values)}, want ${canonical(want.values)}`);
  if (canonical(got.sources ?? []) !== canonical(want.sources))
    why.push(`sources are ${canonical(got.sources ?? [])}, want ${canonical(want.sources)}`);
  return why.length ? { name, why, want, got } : undefined;
}

/** Every Referable in `referables` whose status differs from what `world` says it must be. */
export function checkAll(referables: readonly KubeObject[], world: World): Mismatch[] {
  return referables.map((r) => check(r, world)).filter((m): m is Mismatch => m !== undefined);
}

/** A short, readable line for a mismatch. */
export function describeMismatch(m: Mismatch): string {
  return `${m.name}: ${m.why.join("; ")}`;
}

// ---------------------------------------------------------------------------------------------
// Export: which key holds what (issue 22)

/** A key of a ConfigMap that Referables export into. */
interface ExportKey {
  kind: string;
  namespace: string;
  name: string;
  key: string;
}

const exportKeyId = (t: ExportKey) => `${t.kind}/${t.namespace}/${t.name}/${t.key}`;

/** The targets of `spec.export` the oracle judges (ConfigMaps), once each. */
function exportKeysOf(referable: KubeObject): ExportKey[] {
  const raw = (referable.spec as { export?: unknown } | undefined)?.export;
  const keys = new Map<string, ExportKey>();
  for (const t of Array.isArray(raw) ? (raw as Array<Partial<ExportKey>>) : []) {
    if (t.kind !== "ConfigMap" || !t.namespace || !t.name || !t.key) continue;
    const key = { kind: t.kind, namespace: t.namespace, name: t.name, key: t.key };
    keys.set(exportKeyId(key), key);
  }
  return [...keys.values()];
}

/** The text a value is exported as: a string as it is, any other JSON value as its JSON text. */
function exportedText(want: Expectation): string | undefined {
  if (want.values !== undefined) return JSON.stringify(want.values);
  if (want.value === undefined || want.value === null) return undefined;
  return typeof want.value === "string" ? want.value : JSON.stringify(want.value);
}

/**
 * Where the exported keys of `referables` differ from the contract, in `world` (which must hold
 * every ConfigMap): every key holds its owner's value, or its Referable says why not.
 *
 * - The owner of a key is the Referable created first (creationTimestamp, then name) among those
 *   naming it in `spec.export`; every other one must be `Exported=False`, `ExportConflict`,
 *   naming the owner (issue 22's rule: one key, one owner, never a deadlock).
 * - The owner with a value: the key holds the value's text, or it is `Exported=False` with
 *   `ExportConflict` (someone else took the key) or `ExportForbidden`.
 * - The owner without a value: its own key is removed (the key is absent, or holds text its
 *   field manager `referable.dev/<name>` does not own: someone else's, which is theirs).
 *
 * Referables whose own status the oracle cannot judge (outside its subset) are skipped.
 */
export function checkExports(referables: readonly KubeObject[], world: World): Mismatch[] {
  const owners = new Map<string, KubeObject>();
  const byAge = [...referables].sort(
    (a, b) =>
      compare(
        a.metadata?.creationTimestamp as string | undefined,
        b.metadata?.creationTimestamp as string | undefined,
      ) || compare(a.metadata?.name, b.metadata?.name),
  );
  for (const r of byAge)
    for (const t of exportKeysOf(r)) if (!owners.has(exportKeyId(t))) owners.set(exportKeyId(t), r);
  const configMaps = new Map<string, KubeObject>();
  for (const o of world.objects.get(kindKey("v1", "ConfigMap")) ?? [])
    configMaps.set(`${o.metadata?.namespace}/${o.metadata?.name}`, o);

  const mismatches: Mismatch[] = [];
  for (const r of referables) {
    const targets = exportKeysOf(r);
    const want = expectationFor(r, world);
    if (targets.length === 0 || typeof want === "string") continue;
    const status = (r.status ?? {}) as {
      conditions?: Array<{ type?: string; reason?: string; message?: string }>;
    };
    const exported = status.conditions?.find((c) => c.type === "Exported");
    const says = (...reasons: string[]) => exported !== undefined && reasons.includes(exported.reason ?? "");
    const text = exportedText(want);
    const why: string[] = [];
    for (const t of targets) {
      const owner = owners.get(exportKeyId(t))!;
      const where = `${t.namespace}/${t.name}[${t.key}]`;
      if (owner !== r) {
        const ownerName = owner.metadata?.name ?? "";
        if (!says("ExportConflict") || !(exported?.message ?? "").includes(ownerName))
          why.push(
            `${where} belongs to ${ownerName}: want ExportConflict naming it, got ${exported?.reason}`,
          );
        continue;
      }
      const data = (configMaps.get(`${t.namespace}/${t.name}`)?.data ?? {}) as Record<string, string>;
      const held = Object.hasOwn(data, t.key) ? data[t.key] : undefined;
      if (text === undefined) {
        // No value, no key: its own key is removed; text someone else put there is theirs.
        if (
          held !== undefined &&
          managesKey(configMaps.get(`${t.namespace}/${t.name}`), `referable.dev/${r.metadata?.name}`, t.key)
        )
          why.push(`${where}: no value, yet its own key is still there (Exported is ${exported?.reason})`);
        else if (exported === undefined) why.push(`${where}: no Exported condition`);
        continue;
      }
      if (held === text) continue;
      if (!says("ExportConflict", "ExportForbidden"))
        why.push(
          `${where} holds ${held === undefined ? "nothing" : JSON.stringify(held.slice(0, 40))}, not the value, yet Exported is ${exported?.reason}`,
        );
    }
    if (why.length)
      mismatches.push({
        name: r.metadata?.name ?? "",
        why,
        want: "every key holds its owner's value, or its Referable says why not",
        got: { reason: exported?.reason },
      });
  }
  return mismatches;
}

/** Whether `manager` owns `data[key]` of `object` (its managedFields). */
function managesKey(object: KubeObject | undefined, manager: string, key: string): boolean {
  const entries = (object?.metadata?.managedFields ?? []) as Array<{
    manager?: string;
    fieldsV1?: Record<string, unknown>;
  }>;
  return entries.some((e) => {
    const data = e.fieldsV1?.["f:data"];
    return (
      e.manager === manager && typeof data === "object" && data !== null && Object.hasOwn(data, `f:${key}`)
    );
  });
}
