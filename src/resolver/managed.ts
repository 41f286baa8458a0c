/**
 * Resolves the `*Ref` / `*Refs` / `*Selector` fields of a managed object into their target
 * fields, as Crossplane's generated `ResolveReferences` does, in one call. It works on a copy
 * and never writes to the API server: the caller keeps the result in memory (as ACK does) or
 * persists it (as Crossplane does).
 */
import { ResolutionError, isResolutionError } from "../api/errors.ts";
import type { GenericReference, GenericSelector, ResolvedValue, ResolvedValues } from "./types.ts";
import { jsonEqual, stableStringify } from "../api/stable-json.ts";
import { checkKeys, everyKey } from "./strict.ts";

/** The two calls the helper needs from a resolver. */
export interface ReferenceReader {
  /** Resolves a reference once, or throws a `ResolutionError`; as {@link Resolver.resolve}. */
  resolve(ref: GenericReference): Promise<ResolvedValue>;
  /** Resolves a selector once, or throws a `ResolutionError`; as {@link Resolver.resolveSelector}. */
  resolveSelector(selector: GenericSelector): Promise<ResolvedValues>;
}

/** One target field fed by a single reference or a Single selector. */
export interface ReferenceField {
  /** Dotted path of the field to fill, e.g. `spec.forProvider.sourceLocationArn`. */
  target: string;
  /** Dotted path of the GenericReference. @default `${target}Ref` */
  ref?: string;
  /** Dotted path of the GenericSelector. @default `${target}Selector` */
  selector?: string;
}

/** A list field fed by a list of references, or a Multiple selector. */
export interface ReferenceListField {
  /** Dotted path of the list to fill, e.g. `spec.forProvider.subnetIds`. */
  target: string;
  /** Dotted path of the list of GenericReferences. */
  refs: string;
  /** Dotted path of the GenericSelector. @default `${target}Selector` */
  selector?: string;
  /** Refuse duplicate values (e.g. IDs that must be unique). @default false */
  unique?: boolean;
}

const FIELD_KEYS = everyKey<ReferenceField>()(["target", "ref", "selector"]);
const LIST_FIELD_KEYS = everyKey<ReferenceListField>()(["target", "refs", "selector", "unique"]);

/** What {@link resolveReferences} did. */
export interface ResolveReferencesResult<T> {
  /** A copy of the object with resolved targets filled in. */
  object: T;
  /** Whether any target differs from the input. */
  changed: boolean;
  /** The targets that were resolved (not skipped), with the reason of each. */
  resolved: Array<{
    /** The target field, as given in {@link ReferenceField.target}. */
    target: string;
    /** Why it resolved as it did: `Available`, `Defaulted` or `Optional`. */
    reason: ResolvedValue["reason"];
  }>;
  /** The targets left alone because `IfNotPresent` found a value already there. */
  skipped: string[];
}

/**
 * Resolves every listed reference field of `obj` into its target and returns a changed copy.
 * Respects `policy.resolve`: `IfNotPresent` (the default) fills an empty target once and never
 * overwrites a value already there; `Always` re-resolves on every call. Throws the first
 * ResolutionError met, its message prefixed with the field it came from.
 */
export async function resolveReferences<T extends object>(
  reader: ReferenceReader,
  obj: T,
  fields: ReadonlyArray<ReferenceField | ReferenceListField>,
): Promise<ResolveReferencesResult<T>> {
  const copy = structuredClone(obj) as T;
  const resolved: ResolveReferencesResult<T>["resolved"] = [];
  const skipped: string[] = [];
  let changed = false;
  for (const [i, field] of fields.entries()) {
    if ("refs" in field) checkKeys(field, LIST_FIELD_KEYS, `fields[${i}] of resolveReferences`);
    else checkKeys(field, FIELD_KEYS, `fields[${i}] of resolveReferences`);
    const outcome =
      "refs" in field ? await resolveList(reader, copy, field) : await resolveSingle(reader, copy, field);
    if (!outcome) continue;
    if (outcome === "present") {
      skipped.push(field.target);
      continue;
    }
    resolved.push({ target: field.target, reason: outcome.reason });
    if (outcome.value === undefined) continue;
    if (!jsonEqual(getPath(copy, field.target), outcome.value)) {
      setPath(copy, field.target, outcome.value);
      changed = true;
    }
  }
  return { object: copy, changed, resolved, skipped };
}

/** What one field came to: a value, "present" (skipped by IfNotPresent), or nothing to resolve. */
type Outcome = { reason: ResolvedValue["reason"]; value: unknown } | "present" | undefined;

async function resolveSingle(reader: ReferenceReader, obj: object, field: ReferenceField): Promise<Outcome> {
  const refPath = field.ref ?? `${field.target}Ref`;
  const selectorPath = field.selector ?? `${field.target}Selector`;
  const ref = getPath(obj, refPath) as GenericReference | undefined;
  const selector = getPath(obj, selectorPath) as GenericSelector | undefined;
  const policy = (ref ?? selector)?.policy;
  if (!ref && !selector) return undefined;
  if ((policy?.resolve ?? "IfNotPresent") === "IfNotPresent" && isPresent(getPath(obj, field.target)))
    return "present";
  return prefixed(ref ? refPath : selectorPath, async () => {
    if (ref) {
      const r = await reader.resolve(ref);
      return { reason: r.reason, value: r.value };
    }
    const r = await reader.resolveSelector({ ...selector!, mode: "Single" });
    return { reason: r.reason, value: r.values[0] };
  });
}

async function resolveList(
  reader: ReferenceReader,
  obj: object,
  field: ReferenceListField,
): Promise<Outcome> {
  const refs = getPath(obj, field.refs) as GenericReference[] | undefined;
  const selectorPath = field.selector ?? `${field.target}Selector`;
  const selector = getPath(obj, selectorPath) as GenericSelector | undefined;
  if ((!refs || refs.length === 0) && !selector) return undefined;
  const policy = refs?.[0]?.policy ?? selector?.policy;
  if ((policy?.resolve ?? "IfNotPresent") === "IfNotPresent" && isPresent(getPath(obj, field.target)))
    return "present";
  const outcome = await prefixed(refs?.length ? field.refs : selectorPath, async () => {
    if (refs?.length) {
      if (!Array.isArray(refs)) throw new ResolutionError("InvalidSpec", "must be a list of references");
      const named = refs.filter((r) => r?.name !== undefined).length;
      if (named !== 0 && named !== refs.length) {
        throw new ResolutionError(
          "InvalidSpec",
          "mixes references by name and external values: use one kind of entry in a list",
        );
      }
      const values: unknown[] = [];
      for (const ref of refs) {
        const r = await reader.resolve(ref);
        if (r.value !== undefined) values.push(r.value);
      }
      return { reason: "Available" as const, value: values };
    }
    const r = await reader.resolveSelector({ ...selector!, mode: "Multiple" });
    return { reason: r.reason, value: r.values };
  });
  if (field.unique && Array.isArray(outcome.value)) {
    const seen = new Set<string>();
    for (const v of outcome.value) {
      const key = stableStringify(v);
      if (seen.has(key))
        throw new ResolutionError(
          "InvalidSpec",
          `${field.target}: the references resolve to duplicate values, and the values must be unique`,
        );
      seen.add(key);
    }
  }
  return outcome;
}

async function prefixed<R>(path: string, run: () => Promise<R>): Promise<R> {
  try {
    return await run();
  } catch (err) {
    if (isResolutionError(err))
      throw new ResolutionError(err.reason, `${path}: ${err.message}`, {
        cause: err,
        retryable: err.retryable,
      });
    throw err;
  }
}

function isPresent(value: unknown): boolean {
  if (value === undefined || value === null || value === "") return false;
  return !(Array.isArray(value) && value.length === 0);
}

const FORBIDDEN_KEYS = new Set(["__proto__", "constructor", "prototype"]);

function segments(path: string): string[] {
  const parts = path.split(".");
  if (parts.some((p) => p === "" || FORBIDDEN_KEYS.has(p)))
    throw new Error(`invalid field path ${JSON.stringify(path)}`);
  return parts;
}

function getPath(obj: object, path: string): unknown {
  let cur: unknown = obj;
  for (const key of segments(path)) {
    if (typeof cur !== "object" || cur === null || !Object.hasOwn(cur, key)) return undefined;
    cur = (cur as Record<string, unknown>)[key];
  }
  return cur;
}

function setPath(obj: object, path: string, value: unknown): void {
  const keys = segments(path);
  let cur = obj as Record<string, unknown>;
  for (const key of keys.slice(0, -1)) {
    const next = Object.hasOwn(cur, key) ? cur[key] : undefined;
    if (typeof next !== "object" || next === null) cur[key] = {};
    cur = cur[key] as Record<string, unknown>;
  }
  cur[keys[keys.length - 1]!] = value;
}
