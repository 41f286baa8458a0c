/**
 * A reference or selector, validated once and compiled into what resolution needs: parsed
 * paths, a compiled label selector, and every default applied. All spec errors surface here
 * as `InvalidSpec`, with the field to fix in the message.
 */
import { Limits } from "../api/limits.ts";
import { compileFieldPath, type CompiledPath } from "../fieldpath/index.ts";
import type { CompiledSelector } from "../informers/label-selector.ts";
import { conditionsExtractor, pathExtractor, type Extractor } from "../informers/projection.ts";
import { compileTransform, type CompiledTransform } from "../transform/index.ts";
import {
  checkRequestKeys,
  compileConditions,
  compileResolution,
  compileSelection,
  invalid,
  NO_CONDITIONS,
  optionalString,
  requireString,
  SINGLE,
} from "./request-fields.ts";
import type {
  GenericReference,
  GenericSelector,
  RequiredCondition,
  ResolutionPolicy,
  SelectionMode,
} from "./types.ts";

/** A request after validation; see {@link compileRequest}. */
export interface CompiledRequest {
  /** How the source is named. */
  target: "name" | "selector" | "external";
  apiVersion: string;
  kind: string;
  namespace: string | undefined;
  name: string | undefined;
  selector: CompiledSelector | undefined;
  external: unknown;
  fieldPath: CompiledPath | undefined;
  fieldPathText: string;
  mode: SelectionMode;
  minMatch: number;
  maxMatch: number | undefined;
  sortBy: CompiledPath | undefined;
  requireConditions: readonly RequiredCondition[];
  hasDefault: boolean;
  defaultValue: unknown;
  resolution: ResolutionPolicy;
  /** The compiled `transform`, when the request has one. */
  transform?: CompiledTransform;
  /** Text naming the source for messages: `ConfigMap team-a/db`, `ConfigMaps matching app=web in team-a`. */
  describe: string;
  /** What the source cache must keep of the objects this request reads. */
  extractors: readonly Extractor[];
  /** The extractor keys of fieldPath, sortByFieldPath and requireConditions, when set. */
  fieldKey: string | undefined;
  sortKey: string | undefined;
  conditionsKey: string | undefined;
}

/** Either request the resolver accepts. */
export type AnyReference = GenericReference | GenericSelector;

/**
 * Validates and compiles a reference or selector. Throws `ResolutionError("InvalidSpec")`
 * naming the field to fix; `prefix` is prepended to field names in messages (e.g. "spec.source").
 */
export function compileRequest(ref: AnyReference, prefix = ""): CompiledRequest {
  if (typeof ref !== "object" || ref === null) invalid("the reference must be an object");
  const f = (name: string) => (prefix ? `${prefix}.${name}` : name);
  const raw = ref as unknown as Record<string, unknown>;
  const apiVersion = requireString(raw.apiVersion, f("apiVersion"), 316);
  const kind = requireString(raw.kind, f("kind"), 63);
  const namespace = optionalString(raw.namespace, f("namespace"), 63);
  const name = optionalString(raw.name, f("name"), 253);
  const hasExternal = raw.external !== undefined;
  const hasSelectorFields = raw.matchLabels !== undefined || raw.matchExpressions !== undefined;
  const resolution = compileResolution(raw.policy, prefix, f);
  if (name !== undefined && hasExternal)
    invalid(`set exactly one of ${f("name")} and ${f("external")}, not both`);
  if ((name !== undefined || hasExternal) && hasSelectorFields) {
    invalid(
      `${f("matchLabels")}/${f("matchExpressions")} go with a selector, not with ${name !== undefined ? f("name") : f("external")}`,
    );
  }

  const target: CompiledRequest["target"] = hasExternal
    ? "external"
    : name !== undefined
      ? "name"
      : "selector";
  const where = checkRequestKeys(raw, target, prefix);
  const requireConditions = compileConditions(raw.requireConditions, f("requireConditions"));
  const fieldPathText =
    target === "external"
      ? String(raw.fieldPath ?? "")
      : requireString(raw.fieldPath, f("fieldPath"), Limits.fieldPath);
  const fieldPath = target === "external" ? undefined : compileFieldPath(fieldPathText);

  const { selector, mode, minMatch, maxMatch, sortBy } =
    target === "selector" ? compileSelection(raw, { prefix, where, kind }, f) : SINGLE;

  const extractors = extractorsOf(fieldPath, sortBy, requireConditions);
  const hasDefault = raw.default !== undefined;
  // Compiled here, with the rest of the spec, so a transform that does not parse or type-check is
  // InvalidSpec before anything is read.
  const transformText = optionalString(raw.transform, f("transform"), Limits.transform);
  const transform =
    transformText === undefined
      ? undefined
      : compileTransform(transformText, { mode, hasDefault }, f("transform"));
  return finish({
    target,
    apiVersion,
    kind,
    namespace,
    name,
    selector,
    external: raw.external,
    fieldPath,
    fieldPathText,
    mode,
    minMatch,
    maxMatch,
    sortBy,
    requireConditions,
    hasDefault,
    defaultValue: raw.default,
    resolution,
    transform,
    extractors,
    fieldKey: fieldPath && pathExtractor(fieldPath).key,
    sortKey: sortBy && pathExtractor(sortBy).key,
    conditionsKey: requireConditions.length > 0 ? extractors[extractors.length - 1]!.key : undefined,
  });
}

/** The request of `r`'s fields: a {@link NamedRequest} when it is a plain one by name, else all of them. */
function finish(r: Omit<CompiledRequest, "describe">): CompiledRequest {
  const { target, fieldPath, fieldPathText, resolution } = r;
  const plain =
    target === "name" && fieldPath && !r.hasDefault && !r.transform && r.requireConditions.length === 0;
  const shared =
    plain &&
    sharedPart(fieldPathText, resolution, () => ({
      fieldPath,
      fieldPathText,
      resolution,
      extractors: r.extractors,
      fieldKey: r.fieldKey,
      sortKey: r.sortKey,
      conditionsKey: r.conditionsKey,
    }));
  if (shared) return new NamedRequest(r.apiVersion, r.kind, r.namespace, r.name!, shared);
  return { ...r, describe: describeRequest(target, r.kind, r.namespace, r.name, r.selector) };
}

/** Text naming the source of a request; see {@link CompiledRequest.describe}. */
function describeRequest(
  target: CompiledRequest["target"],
  kind: string,
  namespace: string | undefined,
  name: string | undefined,
  selector: CompiledSelector | undefined,
): string {
  // Joined, not a template: a template makes a rope of pieces ("ConfigMap ", "team-a/", the
  // name) kept apart for as long as the string is.
  if (target === "external") return "an external value";
  if (target === "name") return [kind, " ", namespace ? namespace : "", namespace ? "/" : "", name].join("");
  return `${kind} objects matching "${selector!.describe() || "everything"}"${namespace ? ` in namespace ${namespace}` : ""}`;
}

/**
 * What every plain reference to an object by name (no default, transform or requireConditions)
 * reading the same path under the same policy has in common, and shares: one frozen object per
 * path and policy, where each of 100,000 requests kept the same 17 fields of its own.
 */
interface SharedPart {
  readonly fieldPath: CompiledPath;
  readonly fieldPathText: string;
  readonly resolution: ResolutionPolicy;
  readonly extractors: readonly Extractor[];
  readonly fieldKey: string | undefined;
  readonly sortKey: string | undefined;
  readonly conditionsKey: string | undefined;
}

/** The parts shared, by policy and path; bounded: past this many, a request keeps its own. */
const sharedParts = new Map<string, SharedPart>();
const MAX_SHARED_PARTS = 1024;

function sharedPart(
  fieldPathText: string,
  resolution: ResolutionPolicy,
  make: () => SharedPart,
): SharedPart | undefined {
  const key = `${resolution} ${fieldPathText}`;
  let part = sharedParts.get(key);
  if (part) return part;
  if (sharedParts.size >= MAX_SHARED_PARTS) return undefined;
  sharedParts.set(key, (part = Object.freeze(make())));
  return part;
}

/**
 * A plain reference to an object by name, compiled: its own identity (five fields) and the part
 * it shares with every request reading the same path (see {@link SharedPart}); `describe` is
 * made when asked (messages only), not kept. A resolver keeps one per subscription, so one per
 * Referable: 64 bytes where the object of every field was 208, and its describe text 56 more.
 */
class NamedRequest implements CompiledRequest {
  readonly apiVersion: string;
  readonly kind: string;
  readonly namespace: string | undefined;
  readonly name: string;
  private readonly shared: SharedPart;

  constructor(
    apiVersion: string,
    kind: string,
    namespace: string | undefined,
    name: string,
    shared: SharedPart,
  ) {
    this.apiVersion = apiVersion;
    this.kind = kind;
    this.namespace = namespace;
    this.name = name;
    this.shared = shared;
  }

  get target(): "name" {
    return "name";
  }
  get describe(): string {
    return describeRequest("name", this.kind, this.namespace, this.name, undefined);
  }
  get fieldPath(): CompiledPath {
    return this.shared.fieldPath;
  }
  get fieldPathText(): string {
    return this.shared.fieldPathText;
  }
  get resolution(): ResolutionPolicy {
    return this.shared.resolution;
  }
  get extractors(): readonly Extractor[] {
    return this.shared.extractors;
  }
  get fieldKey(): string | undefined {
    return this.shared.fieldKey;
  }
  get sortKey(): string | undefined {
    return this.shared.sortKey;
  }
  get conditionsKey(): string | undefined {
    return this.shared.conditionsKey;
  }
  // What no plain reference by name has, or has other than SINGLE's.
  get selector(): undefined {
    return undefined;
  }
  get external(): undefined {
    return undefined;
  }
  get mode(): SelectionMode {
    return SINGLE.mode;
  }
  get minMatch(): number {
    return SINGLE.minMatch;
  }
  get maxMatch(): undefined {
    return undefined;
  }
  get sortBy(): undefined {
    return undefined;
  }
  get requireConditions(): readonly RequiredCondition[] {
    return NO_CONDITIONS;
  }
  get hasDefault(): false {
    return false;
  }
  get defaultValue(): undefined {
    return undefined;
  }
  get transform(): undefined {
    return undefined;
  }
}

/**
 * The one-extractor lists of the common request (a fieldPath, nothing else), one per extractor:
 * shared by every request that reads the same path, rather than a list each. Extractors are
 * themselves cached and bounded (see pathExtractor), so this is too.
 */
const singleExtractors = new WeakMap<Extractor, readonly Extractor[]>();

function extractorsOf(
  fieldPath: CompiledPath | undefined,
  sortBy: CompiledPath | undefined,
  requireConditions: readonly RequiredCondition[],
): readonly Extractor[] {
  if (fieldPath && !sortBy && requireConditions.length === 0) {
    const x = pathExtractor(fieldPath);
    let list = singleExtractors.get(x);
    if (!list) singleExtractors.set(x, (list = Object.freeze([x])));
    return list;
  }
  const extractors: Extractor[] = [];
  for (const path of [fieldPath, sortBy]) if (path) extractors.push(pathExtractor(path));
  if (requireConditions.length > 0) extractors.push(conditionsExtractor(requireConditions));
  return extractors;
}
