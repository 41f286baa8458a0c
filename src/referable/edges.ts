/**
 * What the Referables' specs say about each other, kept in step with the cache: the reference
 * graph (which Referable reads which, for cycles) and who owns each exported key and field. A change of
 * either concerns other Referables than the one that changed: those are emitted, as keys, on
 * {@link ReferableEdges.handovers} (a key's or a field's owner changed: its claimants look again) and
 * {@link ReferableEdges.cycles} (their cycle changed), two of the controller's watches.
 */
import type { Referable } from "../api/referable.ts";
import type { InformerEvent } from "../informers/informer.ts";
import { FieldClaims } from "../outputs/field/ownership.ts";
import { isFieldEntry } from "../outputs/field/target.ts";
import { KeyOwnership } from "../outputs/keys/ownership.ts";
import { parseTarget, type ExportTarget } from "../outputs/keys/target.ts";
import { Channel } from "../runtime/source.ts";
import { sameSpecKept } from "./compact.ts";
import { ReferenceGraph } from "./reference-graph.ts";
import { readsOf } from "./spec.ts";

/** The reference graph and the key ownership; see the module comment. */
export class ReferableEdges {
  /** Who owns each exported key, from the cached specs. */
  readonly ownership = new KeyOwnership();
  /** Referables whose claim on a key or a field changed hands. */
  readonly handovers = new Channel<string>();
  /** Referables whose cycle changed. */
  readonly cycles = new Channel<string>();
  /**
   * Referables another starts or stops reading (by name or selector), when {@link trackReaders}:
   * whether one is read decides its graph label (graph-members.ts).
   */
  readonly readers = new Channel<string>();
  /**
   * Who owns each exported field, fed like the key ownership from every cached Referable, served
   * here or not: one owner per key or field cluster-wide, also with --shards (another replica's
   * Referable is a claimant like any other, not a foreign manager).
   */
  readonly fieldOwnership = new FieldClaims((name) => this.handovers.emit(name));
  private readonly graph = new ReferenceGraph();
  private flushScheduled = false;

  private readonly trackReaders: boolean;

  /** @param trackReaders emit {@link readers} (a shard that lists by slot). */
  constructor(trackReaders = false) {
    this.trackReaders = trackReaders;
  }

  /** Whether another Referable reads `name`, by name or by a selector that matches it. */
  readBy(name: string): boolean {
    return this.graph.readBy(name);
  }

  /** The cycle `name` is in, as a path that starts and ends with it, if any. */
  cycleOf(name: string): readonly string[] | undefined {
    return this.graph.cycleOf(name);
  }

  /** Follows one event of the Referable cache, and schedules a look for new cycles. */
  follow(event: InformerEvent): void {
    const obj = event.object as unknown as Referable;
    const name = obj.metadata?.name;
    if (!name || unchangedEdges(event)) return;
    const readBefore = this.trackReaders ? this.graph.readTargets(name) : undefined;
    if (event.type === "DELETED") this.graph.delete(name);
    else this.graph.set(name, obj.metadata.labels as Record<string, string> | undefined, readsOf(obj));
    if (readBefore) this.emitReaders(name, readBefore);
    // A key whose owner changed: its claimants look again (the new owner writes it).
    const handover =
      event.type === "DELETED"
        ? this.ownership.delete(name)
        : this.ownership.set(name, String(obj.metadata.creationTimestamp ?? ""), exportTargets(obj));
    for (const other of handover) this.handovers.emit(other);
    // A field whose owner changed emits its claimants on handovers itself.
    if (event.type === "DELETED") this.fieldOwnership.forget(name);
    else this.fieldOwnership.follow(obj);
    // Once per burst of events (a relist delivers thousands at once), not once per event.
    if (this.flushScheduled) return;
    this.flushScheduled = true;
    queueMicrotask(() => {
      this.flushScheduled = false;
      this.flush(undefined);
    });
  }

  /** Emits the Referables `name` read before or reads now, but itself. */
  private emitReaders(name: string, before: readonly string[]): void {
    const after = this.graph.readTargets(name);
    if (before.length === 0 && after.length === 0) return;
    for (const target of new Set([...before, ...after])) if (target !== name) this.readers.emit(target);
  }

  /** Recomputes the cycles if the graph changed, and emits every Referable but `reconciling` whose cycle changed. */
  flush(reconciling: string | undefined): void {
    for (const changed of this.graph.flush()) if (changed !== reconciling) this.cycles.emit(changed);
  }
}

/**
 * Whether a change leaves the graph's edges and the key ownership as they were: the same spec,
 * labels and creation time (a status echo: the decode keeps the very spec and labels objects
 * of the version it replaces when they are equal, see projectReferable; a compact record its
 * shared spec, see sameSpecKept).
 */
function unchangedEdges(event: InformerEvent): boolean {
  const old = event.old;
  if (event.type !== "MODIFIED" || old === undefined) return false;
  const m = event.object.metadata;
  const om = old.metadata;
  return (
    sameSpecKept(old, event.object) &&
    om?.labels === m?.labels &&
    om?.creationTimestamp === m?.creationTimestamp &&
    om?.uid === m?.uid
  );
}

/** The targets of a Referable's spec.export; none when one is invalid (then nothing is written: InvalidSpec). */
function exportTargets(obj: Referable): ExportTarget[] {
  const raw = obj.spec?.export;
  if (!Array.isArray(raw)) return [];
  const targets: ExportTarget[] = [];
  for (const t of raw) {
    // A field target is fieldOwnership's, not a key.
    if (isFieldEntry(t)) continue;
    const parsed = parseTarget(t, "export");
    if (typeof parsed === "string") return [];
    targets.push(parsed);
  }
  return targets;
}
