/**
 * A Referable's status as a function of its object and the current resolution result.
 *
 * Idempotent by construction: an equal condition keeps its `lastTransitionTime`, sources keep
 * the resourceVersion the value was read at while the value stays the same, and the caller
 * writes only when {@link statusEquals} says the result differs from what is stored.
 */
import { EXPORTED, READY } from "../api/referable.ts";
import { jsonEqual } from "../api/stable-json.ts";
import type { ResolutionResult, SourceRef } from "../resolver/types.ts";

export { stableStringify } from "../api/stable-json.ts";
import type { Condition, Referable, ReferableStatus } from "../api/referable.ts";
import type { ExportState } from "../outputs/export-state.ts";
import { exportText } from "../outputs/keys/target.ts";
import { escapeUnsafeText } from "./safe-text.ts";

export { EXPORTED, READY } from "../api/referable.ts";
export { statusPatch } from "../outputs/status.ts";

/**
 * Reasons under which the controller has not looked yet, so a value already read is kept. Not
 * `Forbidden`: a value the controller may no longer read (its policy or RBAC) is withdrawn, as
 * when its source is gone; a consumer must never keep reading what the controller may not.
 */
const UNOBSERVED = new Set(["Pending"]);

/** Whether two statuses are the same, field order aside. */
export function statusEquals(a: ReferableStatus | undefined, b: ReferableStatus | undefined): boolean {
  return jsonEqual(a ?? {}, b ?? {});
}

/** The Ready condition of a status, if any. */
export function readyCondition(status: ReferableStatus | undefined): Condition | undefined {
  return status?.conditions?.find((c) => c.type === READY);
}

/**
 * The status `obj` should have given `result`; `undefined` when nothing should be written
 * (the result is Pending and the object already has a status for its generation: a restart
 * must not flap a Ready condition to Unknown).
 *
 * `own` is the status the controller itself last wrote, when it knows it: what carries over
 * (a kept value, `lastTransitionTime`, the resourceVersions a value was read at) is then taken
 * from it, never from what is stored, so a status written by anyone else is put back whole.
 * Without it (a fresh start, a new leader) the stored status is all there is to go on.
 *
 * `exported` is what the export step found (see export.ts): `null` when the Referable exports
 * nothing; when omitted (the step did not run: not leading, or nothing observed yet), the
 * Exported condition and status.exports carry over.
 */
export function desiredStatus(
  obj: Referable,
  result: ResolutionResult,
  now: Date,
  own?: ReferableStatus,
  exported?: ExportState | null,
): ReferableStatus | undefined {
  const previous = own ?? obj.status ?? {};
  const generation = obj.metadata.generation ?? 0;
  const prevReady = readyCondition(previous);
  const sameGeneration = previous.observedGeneration === generation;
  // Nothing new to say: keep what the controller wrote (and put it back if someone changed it).
  if (!result.ok && result.error.reason === "Pending" && prevReady && sameGeneration) return own;

  const [status, reason, message] = conditionOf(result);
  const condition: Condition = {
    type: READY,
    status,
    reason,
    message,
    observedGeneration: generation,
    lastTransitionTime:
      prevReady && prevReady.status === status ? prevReady.lastTransitionTime : rfc3339(now),
  };
  // The controller owns the whole status: a condition of any other type is someone else's
  // forgery (no other writer is expected) and is dropped.
  const next: ReferableStatus = { observedGeneration: generation, conditions: pooledConditions(condition) };

  if (result.ok) {
    if ("values" in result) {
      next.values = result.values;
      next.sources = keepReadVersions(previous, result.sources, result.values, true);
    } else {
      if (result.value !== undefined && result.value !== null) next.value = result.value;
      const sources = "sources" in result ? result.sources : result.source ? [result.source] : [];
      next.sources = keepReadVersions(previous, sources, result.value, false);
    }
  } else if (UNOBSERVED.has(result.error.reason) && sameGeneration) {
    // Not having looked yet is not a fact about the source: keep what was read, flagged not Ready.
    if (previous.value !== undefined) next.value = previous.value;
    if (previous.values !== undefined) next.values = previous.values;
    if (previous.sources !== undefined) next.sources = previous.sources;
  }
  if (next.sources?.length === 0) delete next.sources;
  // status.text is the value as a typed string, for readers that cannot take "any JSON" (kro and
  // Kubernetes CEL see only typed fields; provider-kubernetes patches into string fields): the
  // same text an export writes, so a key and status.text never disagree.
  const text = textOf(next);
  if (text !== undefined) next.text = text;
  // Carried over only for a Referable that exports (or did): on any other, an Exported condition
  // is someone else's forgery, dropped as any condition of another type is.
  const exports = (obj.spec?.export?.length ?? 0) > 0 || (previous.exports?.length ?? 0) > 0;
  const exportState = exported === undefined ? (exports ? exportStateOf(previous) : null) : exported;
  if (exportState) {
    const prevExported = previous.conditions?.find((c) => c.type === EXPORTED);
    next.conditions = pooledConditions(condition, {
      type: EXPORTED,
      status: exportState.status,
      reason: exportState.reason,
      message: escapeUnsafeText(exportState.message),
      observedGeneration: generation,
      lastTransitionTime:
        prevExported && prevExported.status === exportState.status
          ? prevExported.lastTransitionTime
          : rfc3339(now),
    });
    if (exportState.exports.length > 0) next.exports = exportState.exports;
  }
  return next;
}

/**
 * Conditions, shared: the statuses this controller computes hold them (one replica keeps one
 * status for each Referable it serves), and Referables that became Ready in the same second at
 * the same generation, for the same reason, have equal ones. Frozen, as is a list of them.
 * Bounded: the pool starts again when full, and a long message is not pooled.
 */
const conditionPool = new Map<string, { condition: Condition; alone: Condition[] }>();
const MAX_POOLED_CONDITIONS = 4096;
const MAX_POOLED_MESSAGE = 200;

/** The pooled copy of `c` (frozen), and the pooled list of it alone. */
function pooled(c: Condition): { condition: Condition; alone: Condition[] } {
  if (c.message.length > MAX_POOLED_MESSAGE) return { condition: c, alone: [c] };
  const key = [c.type, c.status, c.reason, c.observedGeneration, c.lastTransitionTime, c.message].join("\n");
  let hit = conditionPool.get(key);
  if (hit) return hit;
  if (conditionPool.size >= MAX_POOLED_CONDITIONS) conditionPool.clear();
  const condition = Object.freeze(c);
  hit = { condition, alone: Object.freeze([condition]) as Condition[] };
  conditionPool.set(key, hit);
  return hit;
}

/** `ready` (and `exported`) as a status's conditions, shared where equal (see {@link pooled}). */
function pooledConditions(ready: Condition, exported?: Condition): Condition[] {
  const first = pooled(ready);
  return exported ? [first.condition, pooled(exported).condition] : first.alone;
}

/**
 * The status of a Referable being deleted whose keys could not all be removed: as stored, with
 * the Exported condition saying why (False, the failure's reason and message).
 */
export function releaseStatus(
  obj: Referable,
  problem: { reason: string; message: string },
  now: Date,
): ReferableStatus {
  const previous = obj.status ?? {};
  const before = previous.conditions?.find((c) => c.type === EXPORTED);
  const condition: Condition = {
    type: EXPORTED,
    status: "False",
    reason: problem.reason,
    message: escapeUnsafeText(problem.message),
    observedGeneration: obj.metadata.generation ?? 0,
    lastTransitionTime: before?.status === "False" ? before.lastTransitionTime : rfc3339(now),
  };
  return {
    ...previous,
    conditions: [...(previous.conditions ?? []).filter((c) => c.type !== EXPORTED), condition],
  };
}

/** The text of a status's value (or values): absent when there is none. */
function textOf(status: ReferableStatus): string | undefined {
  if (status.values !== undefined) return exportText(status.values);
  return status.value === undefined || status.value === null ? undefined : exportText(status.value);
}

/** The export part of a status, to carry over. */
function exportStateOf(status: ReferableStatus): ExportState | null {
  const c = status.conditions?.find((x) => x.type === EXPORTED);
  if (!c) return null;
  return { exports: status.exports ?? [], status: c.status, reason: c.reason, message: c.message };
}

/**
 * Sources of the new result, but with the resourceVersions already stored when the value and
 * the set of sources are unchanged: the version records when the value was read, so an update
 * of the source that leaves the value alone moves nothing.
 */
function keepReadVersions(
  previous: ReferableStatus,
  sources: SourceRef[],
  value: unknown,
  many: boolean,
): SourceRef[] {
  const prevValue = many ? previous.values : previous.value;
  const prevSources = previous.sources ?? [];
  const sameValue = jsonEqual(prevValue ?? null, value ?? null);
  const sameSet =
    prevSources.length === sources.length &&
    prevSources.every((s, i) => s.uid === sources[i]!.uid && s.name === sources[i]!.name);
  return sameValue && sameSet ? prevSources : sources;
}

function conditionOf(result: ResolutionResult): [Condition["status"], string, string] {
  if (!result.ok) {
    return [
      result.error.reason === "Pending" ? "Unknown" : "False",
      result.error.reason,
      escapeUnsafeText(result.error.message),
    ];
  }
  switch (result.reason) {
    case "Available":
      return ["True", "Available", ""];
    case "Defaulted":
      return ["True", "Defaulted", "the source or its field is missing: the value is spec.default"];
    case "Optional":
      return [
        "True",
        "Optional",
        "the source or its field is missing and spec.policy.resolution is Optional: no value",
      ];
  }
}

/** metav1.Time: RFC 3339 in UTC, whole seconds. */
function rfc3339(date: Date): string {
  return date.toISOString().replace(/\.\d{3}Z$/, "Z");
}
