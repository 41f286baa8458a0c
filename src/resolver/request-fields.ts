/**
 * The fields of a reference or selector, each checked and compiled on its own (see request.ts,
 * which puts them together): strings with their bounds, the policy, the selection of a selector
 * and the conditions required. A field that is wrong throws `ResolutionError("InvalidSpec")`
 * naming it; an unknown key is refused, never ignored.
 */
import { Limits } from "../api/limits.ts";
import { ResolutionError } from "../api/errors.ts";
import { compileFieldPath, type CompiledPath } from "../fieldpath/index.ts";
import { compileLabelSelector, type CompiledSelector } from "../informers/label-selector.ts";
import {
  checkKeys,
  CONDITION_KEYS,
  EXPRESSION_KEYS,
  POLICY_KEYS,
  REFERENCE_HINTS,
  REFERENCE_KEYS,
  SELECTOR_HINTS,
  SELECTOR_KEYS,
} from "./strict.ts";
import type { RequiredCondition, ResolutionPolicy, SelectionMode } from "./types.ts";

/** Throws the InvalidSpec error `message` names. */
export function invalid(message: string): never {
  throw new ResolutionError("InvalidSpec", message);
}

/** `value` as a non-empty string of at most `max` characters, else InvalidSpec naming `field`. */
export function requireString(value: unknown, field: string, max: number): string {
  if (typeof value !== "string" || value.length === 0)
    invalid(`${field} is required and must be a non-empty string`);
  if (value.length > max) invalid(`${field} is longer than ${max} characters`);
  return value;
}

/** Like {@link requireString}, but absent (undefined, null or "") is undefined. */
export function optionalString(value: unknown, field: string, max: number): string | undefined {
  if (value === undefined || value === null || value === "") return undefined;
  return requireString(value, field, max);
}

/** `value` as a whole number of 0 or more, when given. */
function nonNegativeInt(value: unknown, field: string): number | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value !== "number" || !Number.isInteger(value) || value < 0)
    invalid(`${field} must be a whole number of 0 or more`);
  return value;
}

/** What a reference (not a selector) selects: one object. */
export const SINGLE: Selection = {
  selector: undefined,
  mode: "Single",
  minMatch: 1,
  maxMatch: undefined,
  sortBy: undefined,
};

/** The selection part of a compiled request. */
export interface Selection {
  selector: CompiledSelector | undefined;
  mode: SelectionMode;
  minMatch: number;
  maxMatch: number | undefined;
  sortBy: CompiledPath | undefined;
}

/**
 * Refuses unknown keys, never ignores them: an ignored `selector: {matchLabels}` or `matchLabel`
 * would leave a selector that matches everything. Returns how messages name the request.
 */
export function checkRequestKeys(
  raw: Record<string, unknown>,
  target: "name" | "selector" | "external",
  prefix: string,
): string {
  const where = prefix || (target === "selector" ? "the selector" : "the reference");
  if (target === "selector") checkKeys(raw, SELECTOR_KEYS, where, SELECTOR_HINTS);
  else checkKeys(raw, REFERENCE_KEYS, where, REFERENCE_HINTS);
  return where;
}

/** `policy.resolution` (checking `policy.resolve` too): the one place the policy is read. */
export function compileResolution(
  value: unknown,
  prefix: string,
  f: (name: string) => string,
): ResolutionPolicy {
  const policy = (value ?? {}) as Record<string, unknown>;
  if (typeof policy !== "object" || Array.isArray(policy)) invalid(`${f("policy")} must be an object`);
  checkKeys(policy, POLICY_KEYS, prefix ? f("policy") : "the policy");
  const resolution = (policy.resolution ?? "Required") as ResolutionPolicy;
  if (resolution !== "Required" && resolution !== "Optional") {
    invalid(
      `${f("policy.resolution")} must be "Required" or "Optional", not ${JSON.stringify(String(resolution).slice(0, 40))}`,
    );
  }
  if (policy.resolve !== undefined && policy.resolve !== "Always" && policy.resolve !== "IfNotPresent") {
    invalid(`${f("policy.resolve")} must be "Always" or "IfNotPresent"`);
  }
  return resolution;
}

/** The selector, mode and match bounds of a selector request. */
export function compileSelection(
  raw: Record<string, unknown>,
  at: { prefix: string; where: string; kind: string },
  f: (name: string) => string,
): Selection {
  const { prefix, where, kind } = at;
  if (
    (raw.matchLabels === undefined || raw.matchLabels === null) &&
    (raw.matchExpressions === undefined || raw.matchExpressions === null)
  ) {
    invalid(
      `${where} has neither ${f("matchLabels")} nor ${f("matchExpressions")}: give a name, or labels to match; to match every ${kind} write ${f("matchLabels")}: {}`,
    );
  }
  if (Array.isArray(raw.matchExpressions))
    raw.matchExpressions.forEach((e: unknown, i) => {
      if (typeof e === "object" && e !== null && !Array.isArray(e))
        checkKeys(e, EXPRESSION_KEYS, `${f("matchExpressions")}[${i}]`);
    });
  const selector = compileLabelSelector(
    {
      matchLabels: raw.matchLabels as Record<string, string>,
      matchExpressions: raw.matchExpressions as never,
    },
    { path: prefix ? `${prefix}.selector` : "selector" },
  );
  const rawMode = raw.mode ?? "Single";
  if (rawMode !== "Single" && rawMode !== "Multiple") invalid(`${f("mode")} must be "Single" or "Multiple"`);
  const mode: SelectionMode = rawMode;
  const min = nonNegativeInt(raw.minMatch, f("minMatch"));
  const maxMatch = nonNegativeInt(raw.maxMatch, f("maxMatch"));
  if (
    mode === "Single" &&
    (min !== undefined || maxMatch !== undefined || raw.sortByFieldPath !== undefined)
  ) {
    invalid(`${f("minMatch")}, ${f("maxMatch")} and ${f("sortByFieldPath")} apply only with mode: Multiple`);
  }
  const minMatch = min ?? 1;
  if (maxMatch !== undefined && maxMatch < 1) invalid(`${f("maxMatch")} must be 1 or more`);
  if (maxMatch !== undefined && minMatch > maxMatch)
    invalid(`${f("minMatch")} (${minMatch}) is more than ${f("maxMatch")} (${maxMatch})`);
  const sortText = optionalString(raw.sortByFieldPath, f("sortByFieldPath"), Limits.fieldPath);
  const sortBy = sortText === undefined ? undefined : compileFieldPath(sortText);
  return { selector, mode, minMatch, maxMatch, sortBy };
}

/** The conditions of a request that requires none: one frozen empty list shared by them all. */
export const NO_CONDITIONS: readonly RequiredCondition[] = Object.freeze([]);

/** `requireConditions`: at most 16 `{type, status}` (status "True" by default). */
export function compileConditions(value: unknown, field: string): readonly RequiredCondition[] {
  if (value === undefined || value === null) return NO_CONDITIONS;
  if (!Array.isArray(value)) invalid(`${field} must be a list of {type, status}`);
  if (value.length > 16) invalid(`${field} has more than 16 entries`);
  return value.map((c: unknown, i) => {
    const entry = (c ?? {}) as Record<string, unknown>;
    if (typeof entry !== "object" || Array.isArray(entry))
      invalid(`${field}[${i}] must be an object {type, status}`);
    checkKeys(entry, CONDITION_KEYS, `${field}[${i}]`);
    return {
      type: requireString(entry.type, `${field}[${i}].type`, 316),
      status: requireString(entry.status ?? "True", `${field}[${i}].status`, 16),
    };
  });
}
