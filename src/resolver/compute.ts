/**
 * Resolution as a pure function of a compiled request and the current cache: level-based, so
 * the same state always gives the same result, however it was reached. The Required/Optional
 * policy and `default` are applied in exactly one place: {@link missing}.
 *
 * The cache holds projections (identity, the labels its kind's selectors name, and the reads
 * someone wanted when the object was decoded), so a read or a label this request needs may not
 * have been kept of an object decoded before the request came: then the result is
 * {@link NOT_KEPT}, never a guess, and the caller has the object read again.
 */
import { Limits } from "../api/limits.ts";
import { stableStringify } from "../api/stable-json.ts";
import { ResolutionError, isResolutionError, type FailureReason } from "../api/errors.ts";
import type { Projection, Read } from "../informers/projection.ts";
import type { SourceView } from "../informers/source-cache.ts";
import type { CompiledRequest } from "./request.ts";
import type { ResolutionResult, SourceRef } from "./types.ts";

export type { SourceView } from "../informers/source-cache.ts";

/** The result when a read the request needs was not kept of some object it reads. */
export const NOT_KEPT = Object.freeze({ notKept: true as const });

/** What {@link computeResult} gives: a result, or {@link NOT_KEPT}. */
export type Computed = ResolutionResult | typeof NOT_KEPT;

class NotKeptSignal {}
const notKeptSignal = new NotKeptSignal();

function readOf(obj: Projection, key: string): Read {
  const read = obj.reads?.get(key);
  if (!read) throw notKeptSignal;
  return read;
}

/** Limits applied to every result. */
export interface ComputeLimits {
  /** The largest value, as JSON bytes; a larger one gives `ValueTooLarge`. */
  maxValueBytes: number;
  /**
   * The most values of a `Multiple` selector; more gives `ValueTooLarge`. Small values can fit
   * the byte limit by the thousand while their list (and the list of their sources) outgrows
   * what a status may hold: a Referable's status takes at most 4096 of each, and the API server
   * would refuse a longer one, leaving a stale status behind.
   * @default 4096
   */
  maxValues?: number;
}

/** The default of {@link ComputeLimits.maxValues}: the CRD's maxItems of status.values and status.sources. */
export const MAX_VALUES = Limits.values;

/**
 * A failed result. Its error carries no stack: a result is data (its reason and message become
 * a condition), and capturing the stack of every Referable's first (Pending) result was a
 * noticeable part of a cold start's CPU.
 */
const fail = (reason: FailureReason, message: string): ResolutionResult => {
  const limit = Error.stackTraceLimit;
  Error.stackTraceLimit = 0;
  try {
    return { ok: false, error: new ResolutionError(reason, message) };
  } finally {
    Error.stackTraceLimit = limit;
  }
};

/** Resolves `req` against `view`; never throws. */
export function computeResult(req: CompiledRequest, view: SourceView, limits: ComputeLimits): Computed {
  try {
    return compute(req, view, limits);
  } catch (err) {
    if (err === notKeptSignal) return NOT_KEPT;
    // A path's evaluation throws a ResolutionError (e.g. ValueTooLarge for a JSONPath that
    // selects too much): that is a result, not a crash of the caller's listener.
    if (isResolutionError(err)) return { ok: false, error: err };
    throw err;
  }
}

function compute(req: CompiledRequest, view: SourceView, limits: ComputeLimits): ResolutionResult {
  if (req.target === "external")
    return sized(req, { ok: true, reason: "Available", value: req.external }, limits);
  const state = view.state;
  if (state.phase === "Pending")
    return fail("Pending", `waiting for the first list of ${req.kind} objects to complete`);
  if (state.phase === "Failed") return fail(state.reason, state.message);
  if (req.target === "name") return sized(req, resolveOne(req, view.get(req.namespace, req.name!)), limits);
  const matched = selected(req, view);
  if (req.mode === "Single") {
    if (matched.length > 1) {
      const names = sortObjects(matched, undefined).slice(0, 5).map(nameOf);
      return fail(
        "AmbiguousSelector",
        `${matched.length} objects match ${req.describe} (${names.join(", ")}${matched.length > 5 ? ", ..." : ""}) but mode Single needs exactly one: narrow the selector or use mode: Multiple`,
      );
    }
    return sized(req, resolveOne(req, matched[0]), limits);
  }
  return sized(req, resolveMany(req, matched, limits.maxValues ?? MAX_VALUES), limits);
}

/**
 * The objects `req`'s selector selects. Every object of the scope must have kept the labels the
 * selector reads, the ones it does not select too: a `NotIn` or `DoesNotExist` selects an object
 * without the key, and one whose label was not kept must not pass for one without it.
 */
function selected(req: CompiledRequest, view: SourceView): Projection[] {
  const selector = req.selector!;
  const out: Projection[] = [];
  let covering: unknown;
  for (const obj of view.list(req.namespace)) {
    const kept = obj.metadata.labelKeys;
    if (kept !== covering) {
      if (!kept.includesAll(selector.keys)) throw notKeptSignal;
      covering = kept;
    }
    if (selector.matches(obj.metadata.labels)) out.push(obj);
  }
  return out;
}

function resolveOne(req: CompiledRequest, obj: Projection | undefined): ResolutionResult {
  if (!obj) {
    return missing(
      req,
      "SourceNotFound",
      req.target === "name" ? `${req.describe} does not exist` : `no object matches: no ${req.describe}`,
    );
  }
  const unmet = unmetCondition(req, obj);
  if (unmet) return fail("SourceNotReady", `${req.kind} ${nameOf(obj)} does not report ${unmet} yet`);
  const read = readOf(obj, req.fieldKey!);
  if (read.kind === "Failed") throw read.error;
  if (read.kind === "TooLarge") return tooLarge(req, read.bytes, obj, read.limit);
  if (read.kind === "Missing")
    return missing(
      req,
      "FieldNotFound",
      `${req.kind} ${nameOf(obj)} has nothing at ${req.fieldPathText}: ${read.missing}`,
    );
  const result: ResolutionResult = {
    ok: true,
    reason: "Available",
    value: read.value,
    source: sourceRef(req, obj),
  };
  return result;
}

/**
 * Mode Multiple. Matches that are not ready yet, or lack the field, are left out rather than
 * blocking the rest: a projected list must not be withdrawn each time a new member is being
 * created. When too few values remain, the shortfall is named by its cause: matches still
 * getting ready (`SourceNotReady`, which waiting fixes), else a missing selection, which
 * {@link missing} decides like a missing source or field in mode Single, so `default` and
 * `Optional` apply. See "Mode Multiple: matches without the field" in docs/api.md.
 */
function resolveMany(req: CompiledRequest, matched: Projection[], maxValues: number): ResolutionResult {
  if (matched.length === 0) {
    if (req.minMatch === 0) return { ok: true, reason: "Available", values: [], sources: [] };
    return missing(req, "SourceNotFound", `no object matches: no ${req.describe}`);
  }
  const values: unknown[] = [];
  const sources: SourceRef[] = [];
  const notReady: { name: string; unmet: string }[] = [];
  let withoutField = 0;
  for (const obj of sortObjects(matched, req)) {
    const unmet = unmetCondition(req, obj);
    if (unmet) {
      notReady.push({ name: nameOf(obj), unmet });
      continue;
    }
    const read = readOf(obj, req.fieldKey!);
    if (read.kind === "Failed") throw read.error;
    if (read.kind === "TooLarge") return tooLarge(req, read.bytes, obj, read.limit);
    if (read.kind === "Missing") {
      withoutField++;
      continue;
    }
    values.push(read.value);
    sources.push(sourceRef(req, obj));
    if (req.maxMatch !== undefined && values.length >= req.maxMatch) break;
    if (values.length > maxValues) {
      return fail(
        "ValueTooLarge",
        `${matched.length} objects match ${req.describe}, giving more than ${maxValues} values, the most a status holds: narrow the selector or set maxMatch`,
      );
    }
  }
  if (values.length >= req.minMatch) return { ok: true, reason: "Available", values, sources };

  const counts = [
    notReady.length ? `${notReady.length} not ready` : "",
    withoutField ? `${withoutField} without ${req.fieldPathText}` : "",
  ].filter(Boolean);
  const found = `${matched.length} ${matched.length === 1 ? "object matches" : "objects match"} ${req.describe}${counts.length ? ` (${counts.join(", ")})` : ""}, giving ${values.length} value(s); minMatch is ${req.minMatch}`;
  if (values.length + notReady.length >= req.minMatch) {
    const first = notReady[0]!;
    const more = notReady.length > 1 ? `, nor do ${notReady.length - 1} more` : "";
    return fail(
      "SourceNotReady",
      `${found}: ${req.kind} ${first.name} does not report ${first.unmet} yet${more}`,
    );
  }
  return missing(req, matched.length >= req.minMatch ? "FieldNotFound" : "TooFewMatches", found);
}

/**
 * The one place where Required, Optional and `default` decide what a missing source or field
 * means; in mode Multiple, a selection that gives fewer than minMatch values for want of
 * sources or fields (`TooFewMatches`) is missing too.
 */
function missing(
  req: CompiledRequest,
  reason: "SourceNotFound" | "FieldNotFound" | "TooFewMatches",
  message: string,
): ResolutionResult {
  const many = req.target === "selector" && req.mode === "Multiple";
  if (req.hasDefault) {
    if (many) {
      const values = Array.isArray(req.defaultValue) ? req.defaultValue : [req.defaultValue];
      return { ok: true, reason: "Defaulted", values, sources: [] };
    }
    return { ok: true, reason: "Defaulted", value: req.defaultValue };
  }
  if (req.resolution === "Optional")
    return many
      ? { ok: true, reason: "Optional", values: [], sources: [] }
      : { ok: true, reason: "Optional" };
  return fail(reason, message);
}

function sized(req: CompiledRequest, result: ResolutionResult, limits: ComputeLimits): ResolutionResult {
  if (!result.ok) return result;
  const payload = "values" in result ? result.values : result.value;
  if (payload === undefined) return result;
  const bytes = Buffer.byteLength(JSON.stringify(payload) ?? "", "utf8");
  if (bytes <= limits.maxValueBytes) return result;
  if (result.reason === "Defaulted")
    return fail(
      "ValueTooLarge",
      `the default of ${req.describe} is ${bytes} bytes, over the limit of ${limits.maxValueBytes}: set a smaller default`,
    );
  return tooLarge(req, bytes, undefined, limits.maxValueBytes);
}

function tooLarge(
  req: CompiledRequest,
  bytes: number,
  obj: Projection | undefined,
  limit: number,
): ResolutionResult {
  const from = obj ? `${req.kind} ${nameOf(obj)}` : req.describe;
  return fail(
    "ValueTooLarge",
    `the value read from ${from} at ${req.fieldPathText || "external"} is ${bytes} bytes, over the limit of ${limit}: point fieldPath at a smaller field`,
  );
}

function unmetCondition(req: CompiledRequest, obj: Projection): string | undefined {
  if (req.requireConditions.length === 0) return undefined;
  const read = readOf(obj, req.conditionsKey!);
  return read.kind === "Value" && typeof read.value === "string" ? read.value : undefined;
}

function nameOf(obj: Projection): string {
  const ns = obj.metadata.namespace;
  return ns ? `${ns}/${obj.metadata.name}` : obj.metadata.name;
}

function sourceRef(req: CompiledRequest, obj: Projection): SourceRef {
  const { apiVersion, kind } = req;
  const { name, namespace } = obj.metadata;
  const uid = obj.metadata.uid ?? "";
  const resourceVersion = obj.metadata.resourceVersion ?? "";
  // One literal each, the fields in the same order: a namespace added afterwards went to a
  // property store of its own (some 30 bytes more for each source a status lists).
  return namespace
    ? { apiVersion, kind, name, uid, resourceVersion, namespace }
    : { apiVersion, kind, name, uid, resourceVersion };
}

/** Orders by the sort field when given (numbers numerically, else as JSON text), then namespace, then name. */
function sortObjects(objects: Projection[], req: CompiledRequest | undefined): Projection[] {
  const keyed = objects.map((obj) => {
    const read = req?.sortKey ? readOf(obj, req.sortKey) : undefined;
    if (read?.kind === "Failed") throw read.error;
    return { obj, sort: read?.kind === "Value" ? read.value : undefined };
  });
  keyed.sort(
    (a, b) =>
      compareJson(a.sort, b.sort) ||
      compareText(a.obj.metadata.name, b.obj.metadata.name) ||
      compareText(a.obj.metadata.namespace, b.obj.metadata.namespace),
  );
  return keyed.map((k) => k.obj);
}

function compareJson(a: unknown, b: unknown): number {
  if (a === b) return 0;
  if (a === undefined) return 1; // objects without the sort field go last
  if (b === undefined) return -1;
  if (typeof a === "number" && typeof b === "number") return a - b;
  return compareText(
    typeof a === "string" ? a : stableStringify(a),
    typeof b === "string" ? b : stableStringify(b),
  );
}

function compareText(a: string | undefined, b: string | undefined): number {
  const x = a ?? "";
  const y = b ?? "";
  return x < y ? -1 : x > y ? 1 : 0;
}
