/**
 * Every bound an author or a tenant meets, written once. The CRD, the webhook, the resolver,
 * the fieldpath parser and the transform engine read their numbers from here; docs/api.md states
 * the same numbers to users, and a message that names a bound takes it from here.
 */
export const Limits = {
  /** The longest fieldPath (and sortByFieldPath), in UTF-16 code units. */
  fieldPath: 1024,
  /** The longest CEL transform, in characters. */
  transform: 4096,
  /** The most values a `Multiple` selector gives (and a status holds). */
  values: 4096,
  /** The most spec.export targets of one Referable. */
  exportTargets: 16,
  /** The longest key of a ConfigMap or a Secret, as the API server allows. */
  exportKey: 253,
  /** The longest field manager name the API server accepts. */
  fieldManager: 128,
  /** The longest condition message the controller writes. */
  conditionMessage: 4000,
} as const;
