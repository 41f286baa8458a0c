/**
 * The requests and results of the GenericReference resolver (section 4 of the API contract).
 *
 * These are plain values, shaped as they are written in a CRD's spec, so a consumer can pass the
 * `fooRef` of its own object straight through. Their OpenAPI schemas are in `./schemas.ts`.
 * The types say what a well-formed request looks like; the resolver still validates every request
 * at run time, because most of them arrive as JSON from the API server.
 */

import type { LabelSelectorRequirement } from "../api/label-selector.ts";
import type { RequiredCondition, SourceRef } from "../api/references.ts";
import type { Reason, ResolutionError } from "../api/errors.ts";

export type { RequiredCondition, SourceRef } from "../api/references.ts";

/** Whether a missing source or field is an error (`Required`) or resolves to no value (`Optional`). */
export type ResolutionPolicy = "Required" | "Optional";

/** Whether to resolve on every call (`Always`) or only while the target field is empty (`IfNotPresent`). */
export type ResolvePolicy = "Always" | "IfNotPresent";

/** How and when a reference is resolved, with the meaning these fields have in Crossplane. */
export interface Policy {
  /**
   * `IfNotPresent` fills the target field once and never overwrites a value already there;
   * `Always` re-resolves on every call.
   * @default "IfNotPresent"
   */
  resolve?: ResolvePolicy;
  /**
   * `Optional` makes a missing source or field resolve with reason `Optional` and no value
   * (a `Multiple` selector: empty lists), where `Required` fails with `SourceNotFound`,
   * `FieldNotFound` or, for a `Multiple` selector, `TooFewMatches`.
   * @default "Required"
   */
  resolution?: ResolutionPolicy;
}

/** The fields every reference and selector shares. */
export interface ReferenceCommon {
  /** The source's API version (`group/version`, or `v1` for the core group). */
  apiVersion: string;
  /** The source's kind (`LocationS3`, `ConfigMap`). */
  kind: string;
  /** The source's namespace: required for a namespaced kind, absent for a cluster-scoped one. */
  namespace?: string;
  /**
   * Conditions the source must report before its value is taken; until then resolution fails
   * with `SourceNotReady`.
   * @default [] (no condition is required)
   */
  requireConditions?: RequiredCondition[];
  /**
   * Any JSON value to use when the source or the field is missing (for a `Multiple` selector:
   * when it gives fewer than `minMatch` values for want of matches or fields, and then the
   * default, as a list, stands for the whole list); it wins over `policy.resolution: Optional`
   * and resolves with reason `Defaulted`.
   * @default undefined (no default)
   */
  default?: unknown;
  /**
   * How and when to resolve.
   * @default { resolve: "IfNotPresent", resolution: "Required" }
   */
  policy?: Policy;
  /**
   * A CEL expression that shapes the value before it is returned (`"'postgres://' + value"`,
   * `"string(base64.decode(value))"`): see "Transforms" in the API document for its variables,
   * functions and limits. Results with reason `Defaulted` or `Optional` are not transformed.
   * A Multiple selector's transform that returns something other than a list resolves to a
   * single value (a {@link ResolvedValue} with `sources`).
   * @default undefined (the value as read)
   */
  transform?: string;
}

/** A reference to one named object, read at `fieldPath`. */
export interface NamedReference extends ReferenceCommon {
  /** The source object's name. */
  name: string;
  /** Never set together with `name`. */
  external?: undefined;
  /**
   * Where the value sits in the source: a field path (`status.atProvider.arn`,
   * `metadata.annotations[crossplane.io/external-name]`) or a JSONPath starting with `$` or `{`.
   */
  fieldPath: string;
}

/**
 * A reference that carries its value as a literal, for a source no controller in this cluster
 * manages (as Config Connector's `<kind>Ref.external`); it resolves to that literal.
 */
export interface ExternalReference extends ReferenceCommon {
  /** The value itself, any JSON; it is used as it is, with reason `Available` and no source. */
  external: unknown;
  /** Never set together with `external`. */
  name?: undefined;
  /** Not needed: the literal is the value. A fieldPath written beside `external` is not read. */
  fieldPath?: string;
}

/**
 * A reference to one value: an object by name and a fieldPath, or a literal `external` value.
 * Exactly one of `name` and `external` is set; test `ref.name !== undefined` to tell them apart.
 */
export type GenericReference = NamedReference | ExternalReference;

/** How many of the objects a selector matches it resolves to. */
export type SelectionMode = "Single" | "Multiple";

/**
 * A reference to the objects that match a label selector, read at `fieldPath`.
 *
 * It needs `matchLabels` or `matchExpressions`: `matchLabels: {}` matches every object of the kind
 * in the namespace, and a selector with neither is `InvalidSpec`, so a typo (`matchLabel`) or a
 * nested `selector: {matchLabels}` never matches everything. Every key not documented here is
 * refused with `InvalidSpec`, naming the key and the keys expected.
 */
export interface GenericSelector extends ReferenceCommon {
  /**
   * Labels a source must carry with exactly these values.
   * @default {} (no label is required)
   */
  matchLabels?: Record<string, string>;
  /**
   * Further label requirements (`In`, `NotIn`, `Exists`, `DoesNotExist`), all of which must hold.
   * @default [] (no requirement)
   */
  matchExpressions?: LabelSelectorRequirement[];
  /** Where the value sits in each source, in the syntax of {@link NamedReference.fieldPath}. */
  fieldPath: string;
  /**
   * `Single`: exactly one object must match (more is `AmbiguousSelector`), resolving to one value.
   * `Multiple`: every match, in order, resolving to a list of values.
   * @default "Single"
   */
  mode?: SelectionMode;
  /**
   * `Multiple` only: the fewest values the selection must give. Matches not ready yet, or without
   * the field, give no value and are left out. Fewer values while not-ready matches would make up
   * the difference is `SourceNotReady`; otherwise the selection is missing, so `default` or
   * `policy.resolution: Optional` apply, else it fails with `SourceNotFound` (nothing matches),
   * `FieldNotFound` (enough objects match, too few have the field) or `TooFewMatches` (too few
   * objects match). 0 lets no match resolve to an empty list.
   * @default 1
   */
  minMatch?: number;
  /**
   * `Multiple` only: keep the first `maxMatch` objects after sorting.
   * @default undefined (keep every match)
   */
  maxMatch?: number;
  /**
   * `Multiple` only: the field path, in each source, whose value orders the matches.
   * @default "metadata.name", then `metadata.namespace`
   */
  sortByFieldPath?: string;
}

/** The reasons a resolution succeeds with: the three `Ready=True` reasons of the contract. */
export type ResolvedReason = Extract<Reason, "Available" | "Defaulted" | "Optional">;

/**
 * The outcome of resolving a {@link GenericReference} (or a `Single` {@link GenericSelector}),
 * told apart by `reason`:
 * - `Available`: `value` was read from `source` (no source for an `external` literal);
 * - `Defaulted`: the source or field is missing and `value` is the reference's `default`;
 * - `Optional`: the source or field is missing, the policy is `Optional`, and there is no value.
 *
 * A `Multiple` selector whose transform returns something other than a list resolves to a value
 * too, with the objects it was computed from in `sources` (test `"sources" in result`).
 */
export type ResolvedValue =
  | {
      /** Read from the source. */
      reason: "Available";
      /** The value read (or the `external` literal), with its JSON type. */
      value: unknown;
      /** The object it was read from; absent for an `external` literal. */
      source?: SourceRef;
    }
  | {
      /** Computed by a `Multiple` selector's transform that returned one value. */
      reason: "Available";
      /** The transform's result. */
      value: unknown;
      /** The objects it was computed from, in order. */
      sources: SourceRef[];
      /** Never set: see `sources`. */
      source?: undefined;
    }
  | {
      /** The source or field is missing and the reference has a `default`. */
      reason: "Defaulted";
      /** The reference's `default`, as written. */
      value: unknown;
      /** Never set: nothing was read. */
      source?: undefined;
    }
  | {
      /** The source or field is missing, the policy is `Optional`, and there is no default. */
      reason: "Optional";
      /** Never set: there is no value. */
      value?: undefined;
      /** Never set: nothing was read. */
      source?: undefined;
    };

/**
 * The outcome of resolving a `Multiple` {@link GenericSelector}: `values[i]` was read from
 * `sources[i]`, in the selector's sort order. With `Defaulted`, `values` comes from the
 * selector's `default` and `sources` is empty; with `Optional`, both are empty.
 */
export interface ResolvedValues {
  /** The values, in order. */
  values: unknown[];
  /** The objects the values came from, in the order of `values`; empty unless `Available`. */
  sources: SourceRef[];
  /** Why the selector resolved as it did. */
  reason: ResolvedReason;
}

/**
 * What a watch reports on every change: the resolved value(s) with `ok: true`, or with
 * `ok: false` the error that resolution fails with now (its `reason` is the condition reason,
 * `retryable` says whether waiting can help). `T` is {@link ResolvedValue} for a reference and
 * {@link ResolvedValues} for a `Multiple` selector.
 *
 * @example
 * resolver.watch(ref, (result) => {
 *   if (!result.ok) return log(result.error.reason);
 *   if (result.reason === "Available") use(result.value);
 * });
 */
export type ResolutionResult<T extends ResolvedValue | ResolvedValues = ResolvedValue | ResolvedValues> =
  | ({
      /** Resolved: the rest is a {@link ResolvedValue} or {@link ResolvedValues}. */
      ok: true;
    } & T)
  | {
      /** Not resolved now. */
      ok: false;
      /** Why: its `reason` is the condition reason, `retryable` whether waiting can help. */
      error: ResolutionError;
    };
