/**
 * Refusing what the library does not understand: an unknown key in a reference, a selector or an
 * option is `InvalidSpec` naming the key and the keys expected there, with a "did you mean" when
 * one is close. An ignored key is worse than an error: a nested `selector: {matchLabels}` or a
 * typo such as `matchLabel` once turned a selector into "match everything".
 */
import { ResolutionError } from "../api/errors.ts";
import type {
  ExternalReference,
  GenericSelector,
  NamedReference,
  Policy,
  RequiredCondition,
} from "./types.ts";

/** Longest key quoted back in a message: a key is author input, its echo is bounded. */
const MAX_QUOTED_KEY = 64;

/** How far (in edits) a key may be from an expected one to be suggested. */
const MAX_SUGGESTION_DISTANCE = 2;

/** Hints for keys that are not typos but another shape (`selector` nested, Kubernetes-style). */
export type KeyHints = Readonly<Record<string, string>>;

/**
 * Throws `InvalidSpec` for the first own key of `value` that is not in `expected`. `where` names
 * the object in the message (`"the selector"`, `"spec.source.policy"`); `hints` explain keys that
 * belong elsewhere. Costs one pass over the keys; the edit distance runs only on the bad key,
 * with both strings bounded.
 */
export function checkKeys(
  value: object,
  expected: readonly string[],
  where: string,
  hints: KeyHints = {},
): void {
  for (const key of Object.keys(value)) {
    if (expected.includes(key)) continue;
    const quoted = JSON.stringify(key.length > MAX_QUOTED_KEY ? `${key.slice(0, MAX_QUOTED_KEY)}...` : key);
    const hint = Object.hasOwn(hints, key) ? hints[key] : undefined;
    const suggestion = hint ?? didYouMean(key, expected);
    throw new ResolutionError(
      "InvalidSpec",
      `unknown key ${quoted} in ${where}${suggestion ? `: ${suggestion}` : ""} (expected: ${expected.join(", ")})`,
    );
  }
}

/** "did you mean \"x\"?" for the closest expected key, or undefined when none is close. */
export function didYouMean(key: string, expected: readonly string[]): string | undefined {
  if (key.length > MAX_QUOTED_KEY) return undefined;
  let best: string | undefined;
  let bestDistance = Infinity;
  for (const candidate of expected) {
    const d = key.toLowerCase() === candidate.toLowerCase() ? 0 : distance(key, candidate);
    if (d < bestDistance) [best, bestDistance] = [candidate, d];
  }
  return best !== undefined && bestDistance <= MAX_SUGGESTION_DISTANCE
    ? `did you mean "${best}"?`
    : undefined;
}

/** Levenshtein distance, two rows. */
function distance(a: string, b: string): number {
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const row = [i];
    for (let j = 1; j <= b.length; j++)
      row[j] = Math.min(prev[j]! + 1, row[j - 1]! + 1, prev[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
    prev = row;
  }
  return prev[b.length]!;
}

/**
 * `everyKey<T>()([...])` is the list given, checked by the compiler to hold every key of `T` and
 * nothing else, so a field added to an interface cannot be refused as unknown.
 */
export function everyKey<T>() {
  return <const K extends ReadonlyArray<keyof T>>(
    keys: K & ([keyof T] extends [K[number]] ? unknown : never),
  ): K => keys;
}

/** The keys of every reference (`name` or `external`). */
export const REFERENCE_KEYS = everyKey<NamedReference | ExternalReference>()([
  "apiVersion",
  "kind",
  "namespace",
  "name",
  "external",
  "fieldPath",
  "requireConditions",
  "default",
  "policy",
  "transform",
]);

/** The keys of a selector (no `name`, no `external`). */
export const SELECTOR_KEYS = everyKey<GenericSelector>()([
  "apiVersion",
  "kind",
  "namespace",
  "matchLabels",
  "matchExpressions",
  "fieldPath",
  "mode",
  "minMatch",
  "maxMatch",
  "sortByFieldPath",
  "requireConditions",
  "default",
  "policy",
  "transform",
]);

/** Keys that are not typos but a selector's fields written on a reference, or another shape. */
export const REFERENCE_HINTS: KeyHints = {
  matchLabels: "matchLabels goes with a selector, not with name or external",
  matchExpressions: "matchExpressions goes with a selector, not with name or external",
  mode: "mode applies only to a selector (no name, no external)",
  minMatch: "minMatch applies only to a selector in mode Multiple",
  maxMatch: "maxMatch applies only to a selector in mode Multiple",
  sortByFieldPath: "sortByFieldPath applies only to a selector in mode Multiple",
  selector:
    "a reference names one object; for a selector leave out name and write matchLabels at the top level",
};

export const SELECTOR_HINTS: KeyHints = {
  selector:
    "matchLabels and matchExpressions sit at the top level of a GenericSelector, not under selector (write matchLabels: {} to match every object)",
  labelSelector: "matchLabels and matchExpressions sit at the top level of a GenericSelector",
};

export const POLICY_KEYS = everyKey<Policy>()(["resolve", "resolution"]);
export const CONDITION_KEYS = everyKey<RequiredCondition>()(["type", "status"]);
export const EXPRESSION_KEYS = ["key", "operator", "values"] as const;
