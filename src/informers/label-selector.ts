/**
 * Kubernetes label selectors (`metav1.LabelSelector`), compiled once and matched many times.
 *
 * The semantics are apimachinery's `metav1.LabelSelectorAsSelector` followed by
 * `labels.Selector.Matches`: requirements are ANDed, `NotIn` and `DoesNotExist` match objects
 * that lack the key, and the empty selector `{}` matches every object. Keys and values are
 * validated as the API server validates labels, so a selector that Kubernetes would refuse is
 * refused here too, with a message that says which entry to fix.
 */

import type { LabelSelector, LabelSelectorOperator } from "../api/label-selector.ts";
import { ResolutionError } from "../api/errors.ts";

export type {
  LabelSelector,
  LabelSelectorOperator,
  LabelSelectorRequirement,
} from "../api/label-selector.ts";

/** A validated selector, ready to match label sets. */
export interface CompiledSelector {
  /**
   * A canonical form: selectors that require the same thing however they are written (order of
   * keys and values, duplicates, `matchLabels` versus a one-value `In`) share one key. Use it to
   * share work between equal selectors; two different keys may still select the same objects.
   */
  readonly key: string;
  /**
   * The label keys it reads, sorted and distinct: whether it selects an object depends on these
   * labels only (their presence and values), so a cache need keep no other.
   */
  readonly keys: readonly string[];
  /** Whether the selector selects an object with these labels (absent labels are no labels). */
  matches(labels: Readonly<Record<string, string>> | undefined): boolean;
  /**
   * The kubectl form (`app=web,tier in (a,b),!legacy`) for messages; the empty string for the
   * empty selector, which matches everything.
   */
  describe(): string;
}

/** Options of {@link compileLabelSelector}. */
export interface CompileLabelSelectorOptions {
  /**
   * Where the selector sits in the user's object, prefixed to every error message
   * (`spec.source.selector`); an empty string for a selector inlined at the top level.
   * @default "selector"
   */
  path?: string;
}

// apimachinery pkg/util/validation: IsQualifiedName, IsDNS1123Subdomain, IsValidLabelValue.
const QUALIFIED_NAME_MAX_LENGTH = 63;
const DNS1123_SUBDOMAIN_MAX_LENGTH = 253;
const LABEL_VALUE_MAX_LENGTH = 63;
const QUALIFIED_NAME = /^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$/;
const DNS1123_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const LABEL_VALUE = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/;

const OPERATORS: readonly LabelSelectorOperator[] = ["In", "NotIn", "Exists", "DoesNotExist"];

/** A requirement after validation; `values` is sorted and free of duplicates. */
interface Requirement {
  readonly key: string;
  readonly operator: LabelSelectorOperator;
  readonly values: readonly string[];
  readonly valueSet: ReadonlySet<string>;
  /** The kubectl form, also the requirement's identity within the canonical key. */
  readonly text: string;
}

/**
 * Validates a label selector and compiles it for matching.
 *
 * @throws ResolutionError `InvalidSpec` when a key, value or operator is one the API server would
 * refuse, with the path of the offending entry and what to change.
 */
export function compileLabelSelector(
  selector: LabelSelector,
  options: CompileLabelSelectorOptions = {},
): CompiledSelector {
  const path = options.path ?? "selector";
  const at = (suffix: string): string => (path === "" ? suffix.replace(/^\./, "") : path + suffix);

  if (!isPlainObject(selector)) {
    throw invalid(`${path || "selector"}: must be an object with matchLabels and/or matchExpressions`);
  }
  const requirements: Requirement[] = [];

  const matchLabels: unknown = selector.matchLabels;
  if (matchLabels !== undefined && matchLabels !== null) {
    if (!isPlainObject(matchLabels)) {
      throw invalid(`${at(".matchLabels")}: must be a map of label keys to values`);
    }
    for (const [key, value] of Object.entries(matchLabels)) {
      const where = at(`.matchLabels[${JSON.stringify(key)}]`);
      checkKey(key, where);
      if (typeof value !== "string") {
        throw invalid(`${where}: the value must be a string, not ${typeName(value)}`);
      }
      checkValue(value, where);
      requirements.push(requirement(key, "In", [value]));
    }
  }

  const matchExpressions: unknown = selector.matchExpressions;
  if (matchExpressions !== undefined && matchExpressions !== null) {
    if (!Array.isArray(matchExpressions)) {
      throw invalid(`${at(".matchExpressions")}: must be a list of {key, operator, values} entries`);
    }
    matchExpressions.forEach((expression: unknown, index) => {
      requirements.push(compileExpression(expression, at(`.matchExpressions[${index}]`)));
    });
  }

  return compiled(canonicalize(requirements));
}

function compileExpression(expression: unknown, where: string): Requirement {
  if (!isPlainObject(expression)) {
    throw invalid(`${where}: must be an object with key, operator and values`);
  }
  const { key, operator, values } = expression;
  if (typeof key !== "string") {
    throw invalid(`${where}: key must be a string, not ${typeName(key)}`);
  }
  checkKey(key, where);
  if (typeof operator !== "string" || !(OPERATORS as readonly string[]).includes(operator)) {
    throw invalid(
      `${where}: operator ${JSON.stringify(operator)} is not a label selector operator; use one of ${OPERATORS.join(", ")}`,
    );
  }
  const op = operator as LabelSelectorOperator;
  if (values !== undefined && values !== null && !Array.isArray(values)) {
    throw invalid(`${where}: values must be a list of strings, not ${typeName(values)}`);
  }
  const list: unknown[] = values ?? [];
  if ((op === "In" || op === "NotIn") && list.length === 0) {
    throw invalid(`${where}: operator "${op}" needs at least one value`);
  }
  if ((op === "Exists" || op === "DoesNotExist") && list.length > 0) {
    throw invalid(`${where}: operator "${op}" takes no values; remove values`);
  }
  list.forEach((value, index) => {
    if (typeof value !== "string") {
      throw invalid(`${where}.values[${index}]: must be a string, not ${typeName(value)}`);
    }
    checkValue(value, `${where}.values[${index}]`);
  });
  return requirement(key, op, list as string[]);
}

function requirement(
  key: string,
  operator: LabelSelectorOperator,
  rawValues: readonly string[],
): Requirement {
  const values = [...new Set(rawValues)].sort(compareStrings);
  return { key, operator, values, valueSet: new Set(values), text: requirementText(key, operator, values) };
}

/** apimachinery's `Requirement.String()`, with a one-value `In`/`NotIn` written as `=`/`!=`. */
function requirementText(key: string, operator: LabelSelectorOperator, values: readonly string[]): string {
  switch (operator) {
    case "In":
      return values.length === 1 ? `${key}=${values[0]}` : `${key} in (${values.join(",")})`;
    case "NotIn":
      return values.length === 1 ? `${key}!=${values[0]}` : `${key} notin (${values.join(",")})`;
    case "Exists":
      return key;
    case "DoesNotExist":
      return `!${key}`;
  }
}

/**
 * Sorts requirements by key (as apimachinery does) and then by their text, and drops exact
 * duplicates, so the order in which a user wrote them never changes the canonical key. Keys and
 * values cannot hold `,`, ` `, `(`, `)`, `=` or `!`, so the joined text is unambiguous.
 */
function canonicalize(requirements: readonly Requirement[]): Requirement[] {
  const byText = new Map<string, Requirement>();
  for (const r of requirements) byText.set(r.text, r);
  return [...byText.values()].sort((a, b) => compareStrings(a.key, b.key) || compareStrings(a.text, b.text));
}

function compiled(requirements: readonly Requirement[]): CompiledSelector {
  const key = requirements.map((r) => r.text).join(",");
  const keys = Object.freeze([...new Set(requirements.map((r) => r.key))].sort(compareStrings));
  return Object.freeze({
    key,
    keys,
    matches(labels: Readonly<Record<string, string>> | undefined): boolean {
      return requirements.every((r) => matchesRequirement(r, labels));
    },
    describe(): string {
      return key;
    },
  });
}

function matchesRequirement(r: Requirement, labels: Readonly<Record<string, string>> | undefined): boolean {
  // Object.hasOwn, not `in` or indexing: `constructor` and `toString` are valid label keys.
  const has = labels !== undefined && labels !== null && Object.hasOwn(labels, r.key);
  switch (r.operator) {
    case "In":
      return has && r.valueSet.has(labels[r.key] as string);
    case "NotIn":
      return !has || !r.valueSet.has(labels[r.key] as string);
    case "Exists":
      return has;
    case "DoesNotExist":
      return !has;
  }
}

function checkKey(key: string, where: string): void {
  const problem = qualifiedNameProblem(key);
  if (problem !== undefined) {
    throw invalid(`${where}: label key ${JSON.stringify(key)} is not valid: ${problem}`);
  }
}

function checkValue(value: string, where: string): void {
  if (value.length > LABEL_VALUE_MAX_LENGTH) {
    throw invalid(
      `${where}: label value ${JSON.stringify(value)} is not valid: it must be at most ${LABEL_VALUE_MAX_LENGTH} characters`,
    );
  }
  if (!LABEL_VALUE.test(value)) {
    throw invalid(
      `${where}: label value ${JSON.stringify(value)} is not valid: it must be empty or consist of alphanumeric characters, '-', '_' or '.', and start and end with an alphanumeric character`,
    );
  }
}

/** apimachinery's `IsQualifiedName`: an optional DNS-subdomain prefix and `/`, then a name. */
function qualifiedNameProblem(key: string): string | undefined {
  const parts = key.split("/");
  if (parts.length > 2) {
    return "it may contain at most one '/', between an optional DNS subdomain prefix and the name (e.g. 'example.com/my-name')";
  }
  const name = parts.length === 2 ? (parts[1] as string) : key;
  if (parts.length === 2) {
    const prefix = parts[0] as string;
    if (prefix === "") return "the prefix before '/' must not be empty";
    if (prefix.length > DNS1123_SUBDOMAIN_MAX_LENGTH) {
      return `the prefix must be at most ${DNS1123_SUBDOMAIN_MAX_LENGTH} characters`;
    }
    if (!DNS1123_SUBDOMAIN.test(prefix)) {
      return "the prefix must be a DNS subdomain: lowercase alphanumeric characters, '-' or '.', starting and ending with an alphanumeric character (e.g. 'example.com')";
    }
  }
  if (name === "") return "the name part must not be empty";
  if (name.length > QUALIFIED_NAME_MAX_LENGTH) {
    return `the name part must be at most ${QUALIFIED_NAME_MAX_LENGTH} characters`;
  }
  if (!QUALIFIED_NAME.test(name)) {
    return "the name part must consist of alphanumeric characters, '-', '_' or '.', and start and end with an alphanumeric character (e.g. 'MyName', 'my.name', '123-abc')";
  }
  return undefined;
}

function invalid(message: string): ResolutionError {
  return new ResolutionError("InvalidSpec", message);
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function typeName(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "a list";
  return `a ${typeof value}`;
}

/** Code-unit order, as Go's `sort.Strings`; `localeCompare` would vary with the process locale. */
function compareStrings(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
