/**
 * The slot label: how a shard lists only the Referables of its buckets (issue 39).
 *
 * Each Referable carries `referable.dev/slot: "<s>"`, `s = fnv1a32(name) mod 1024`. The name never
 * changes, so neither does the slot. Bucket `b` of `N` (N dividing 1024) is the slots `b, b+N,
 * b+2N, …`: `s mod N` equals `fnv1a32(name) mod N`, the bucket {@link bucketOf} computes, so a
 * bucket is one label selector (`referable.dev/slot in (…)`) and changing the number of buckets
 * among the divisors of 1024 rewrites nothing. The label names the slot, never a replica: a
 * hand-over writes no Referable.
 *
 * A Referable without the label (made before it existed, or while no replica ran), or with one
 * that is no slot, matches {@link STRAY_SELECTOR}: every replica watches that too, and the one
 * that serves it by name serves it from there and writes its label.
 */
import { fnv1a32 } from "./buckets.ts";

/** The number of slots: the most buckets there can be. */
export const SLOTS = 1024;

/** The label that holds a Referable's slot. */
export const SLOT_LABEL = "referable.dev/slot";

/**
 * The label on the Referables a cycle or a one-owner rule can involve (they export, read a
 * Referable, or are read by one that does): every replica watches these whole, whatever their
 * bucket (see referable/graph-members.ts).
 */
export const GRAPH_LABEL = "referable.dev/graph";

/** The slot of a Referable's name, as its label writes it. */
export function slotOf(name: string): string {
  return String(fnv1a32(name) % SLOTS);
}

/** Whether a shard of `buckets` buckets can list by slot: `buckets` divides {@link SLOTS}. */
export function listsBySlot(buckets: number): boolean {
  return Number.isInteger(buckets) && buckets >= 1 && SLOTS % buckets === 0;
}

/** The label selector of bucket `bucket` of `buckets` (which must divide {@link SLOTS}). */
export function bucketSelector(bucket: number, buckets: number): string {
  if (!listsBySlot(buckets)) throw new RangeError(`${buckets} buckets do not divide ${SLOTS} slots`);
  const slots: number[] = [];
  for (let s = bucket; s < SLOTS; s += buckets) slots.push(s);
  return `${SLOT_LABEL} in (${slots.join(",")})`;
}

/** Referables without a slot label, or with one that is no slot (see the module comment). */
export const STRAY_SELECTOR = `${SLOT_LABEL} notin (${Array.from({ length: SLOTS }, (_, s) => s).join(",")})`;

/** The Referables of the graph view. */
export const GRAPH_SELECTOR = `${GRAPH_LABEL}=true`;

/** `selector` ANDed with the user's `--selector`, if any. */
export function andSelector(selector: string, user: string | undefined): string {
  return user ? `${selector},${user}` : selector;
}
