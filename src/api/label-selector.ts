/** The `metav1.LabelSelector` type, shared by the public types, the Referable spec and the informers. */

/** A `metav1.LabelSelector`: every `matchLabels` pair and every `matchExpressions` entry must hold. */
export interface LabelSelector {
  /** Labels an object must carry with exactly these values. */
  matchLabels?: Record<string, string> | null;
  /** Further requirements on labels, all of which must hold. */
  matchExpressions?: LabelSelectorRequirement[] | null;
}

/** The operators of a {@link LabelSelectorRequirement}. */
export type LabelSelectorOperator = "In" | "NotIn" | "Exists" | "DoesNotExist";

/** One `metav1.LabelSelectorRequirement`: a key, an operator, and the values the operator needs. */
export interface LabelSelectorRequirement {
  /** The label key the requirement applies to. */
  key: string;
  /** How the label's value relates to `values`. */
  operator: LabelSelectorOperator;
  /** Non-empty for `In` and `NotIn`; empty or absent for `Exists` and `DoesNotExist`. */
  values?: string[] | null;
}
