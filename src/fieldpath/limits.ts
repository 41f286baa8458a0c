/**
 * The bounds that keep parsing and evaluation of a fieldPath fast and finite, whatever a user
 * writes into a spec. They are part of the contract users see (the InvalidSpec messages name them).
 */
import { Limits } from "../api/limits.ts";

export const FieldPathLimits = {
  /** The longest accepted path, in UTF-16 code units. Real paths are a few dozen characters. */
  maxLength: Limits.fieldPath,
  /** The most segments (names, indexes, filters, and the names inside a filter) in one path. */
  maxSegments: 128,
  /** The largest list index: beyond it a number no longer names one exact item. */
  maxIndex: Number.MAX_SAFE_INTEGER,
  /**
   * The most `..` (recursive descent) steps in one JSONPath. Each walks a whole subtree, so
   * several in a row multiply; nobody needs more than two in practice.
   */
  maxRecursiveDescents: 2,
  /** The most values a JSONPath may select, after any step; more fails with ValueTooLarge. */
  maxJsonPathMatches: 10_000,
  /** The most compiled paths kept in memory, least recently used evicted first. */
  compiledCacheSize: 10_000,
  /** The most distinct path strings jsonpath-plus may hold in its own parse cache before it is cleared. */
  jsonPathPlusCacheSize: 1_000,
} as const;
