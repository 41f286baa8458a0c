/**
 * What the controller keeps per Referable, in one place with one owner: its subscription, what
 * this replica wrote that the cache has not shown yet, its share of the write policy, the
 * repair streak, and the key output's memory. {@link ReferableStates.changeLeadership} is the
 * one place a change of leader resets what a writer knows.
 */
import type { Referable, ReferableStatus } from "../api/referable.ts";
import { newFieldsMemory, type FieldsMemory } from "../outputs/field/output.ts";
import { newKeysMemory, type KeysMemory } from "../outputs/keys/output.ts";
import type { StatusMemory } from "../outputs/status.ts";
import type { Subscription } from "../resolver/resolver.ts";
import type { ResolutionResult } from "../resolver/types.ts";

/**
 * This replica's writes to a Referable (status, finalizers) that the cache has not shown yet.
 * While the cache holds one of the versions they were made from, the Referable is read as it
 * is after them.
 */
export interface Overlay {
  /** The versions the writes were made from: the cache showing one of these is behind. */
  from: Set<string>;
  /** The version the last write made. */
  resourceVersion: string | undefined;
  status?: ReferableStatus;
  finalizers?: string[];
}

/** What the controller keeps for one Referable. */
export interface ReferableState {
  uid: string | undefined;
  /** The spec the subscription was made for. */
  specKey: string;
  subscription: Subscription | undefined;
  /** The result when the spec cannot even be turned into a request. */
  fixed: ResolutionResult | undefined;
  /** When the first not-yet-written push arrived, for the propagation histogram. */
  pushedAt: number | undefined;
  overlay: Overlay | undefined;
  /**
   * The status this replica last wrote while leading: what it computed, which it puts back
   * whenever the stored status differs. Forgotten when leadership changes hands.
   */
  own: ReferableStatus | undefined;
  /** The status output's memory (its share of the write policy): the state is it, no object of its own. */
  gate: StatusMemory["gate"];
  admittedAt: StatusMemory["admittedAt"];
  /** When a status write last succeeded (performance.now(), whole ms), for the repair backoff. */
  lastWriteAt: number | undefined;
  /** Repairs (writes putting back a status someone else changed) in the current streak. */
  repairs: number;
  /** When the last repair was written (performance.now()). */
  lastRepairAt: number | undefined;
  /** The key output's memory; forgotten when leadership changes hands. */
  keys: KeysMemory | undefined;
  /** The field output's memory; forgotten when leadership changes hands. */
  fields?: FieldsMemory | undefined;
}

/** A fresh state for `obj`, keeping from `previous` (the same object, an older spec) what outlives a spec. */
export function newState(
  obj: Referable,
  specKey: string,
  previous: ReferableState | undefined,
): ReferableState {
  const same = previous !== undefined && previous.uid === obj.metadata.uid ? previous : undefined;
  return {
    uid: obj.metadata.uid,
    specKey,
    subscription: undefined,
    fixed: undefined,
    pushedAt: undefined,
    overlay: same?.overlay,
    own: same?.own,
    // Kept across spec edits too: a spec rewritten in a loop must not write in one.
    gate: same?.gate,
    admittedAt: same?.admittedAt,
    lastWriteAt: same?.lastWriteAt,
    repairs: same?.repairs ?? 0,
    lastRepairAt: same?.lastRepairAt,
    keys: same?.keys,
    fields: same?.fields,
  };
}

/** `obj` as it is after this replica's writes the cache has not shown yet. */
export function viewOf(obj: Referable, state: ReferableState): Referable {
  const overlay = state.overlay;
  if (!overlay) return obj;
  const version = obj.metadata.resourceVersion;
  if (version === undefined || !overlay.from.has(version)) {
    state.overlay = undefined; // the cache has caught up (or someone else wrote since)
    return obj;
  }
  const metadata = { ...obj.metadata, resourceVersion: overlay.resourceVersion };
  if (overlay.finalizers) metadata.finalizers = overlay.finalizers;
  return { ...obj, metadata, status: overlay.status ?? obj.status };
}

/** Records a write made from `view`: until the cache shows it, {@link viewOf} reads through it. */
export function recordWrite(
  state: ReferableState,
  view: Referable,
  cached: Referable,
  made: Omit<Overlay, "from">,
): void {
  const from = state.overlay?.from ?? new Set<string>();
  for (const v of [cached.metadata.resourceVersion, view.metadata.resourceVersion])
    if (v !== undefined) from.add(v);
  const status = made.status ?? state.overlay?.status;
  const finalizers = made.finalizers ?? state.overlay?.finalizers;
  state.overlay = { from, resourceVersion: made.resourceVersion };
  if (status) state.overlay.status = status;
  if (finalizers) state.overlay.finalizers = finalizers;
}

/** Every Referable's state; see the module comment. */
export class ReferableStates {
  private readonly states = new Map<string, ReferableState>();
  /** The key output's memory of Referables being deleted that have no state (seen first deleting). */
  private readonly deleting = new Map<string, KeysMemory>();
  /** The field output's memory of Referables being deleted that have no state. */
  private readonly deletingFields = new Map<string, FieldsMemory>();

  get(name: string): ReferableState | undefined {
    return this.states.get(name);
  }

  set(name: string, state: ReferableState): void {
    this.states.set(name, state);
  }

  values(): IterableIterator<ReferableState> {
    return this.states.values();
  }

  /** The key output's memory for a Referable whose keys are being released (its backoff). */
  releasing(name: string): KeysMemory {
    return this.releaseMemory(name, "keys", this.deleting, newKeysMemory);
  }

  /** The field output's memory for a Referable whose fields are being released (its backoff). */
  releasingFields(name: string): FieldsMemory {
    return this.releaseMemory(name, "fields", this.deletingFields, newFieldsMemory);
  }

  /** An output's memory in the Referable's state, or, for one without state, in `deleting`. */
  private releaseMemory<K extends "keys" | "fields">(
    name: string,
    output: K,
    deleting: Map<string, NonNullable<ReferableState[K]>>,
    empty: () => NonNullable<ReferableState[K]>,
  ): NonNullable<ReferableState[K]> {
    const state = this.states.get(name);
    if (state) return (state[output] ??= empty());
    let memory = deleting.get(name);
    if (!memory) deleting.set(name, (memory = empty()));
    return memory;
  }

  /** The keys of a Referable being deleted are released: nothing of them to remember. */
  released(name: string): void {
    const state = this.states.get(name);
    if (state) {
      state.keys = undefined;
      state.fields = undefined;
    }
    this.deleting.delete(name);
    this.deletingFields.delete(name);
  }

  /** Forgets a Referable that is gone, closing its subscription; returns what was kept. */
  delete(name: string): ReferableState | undefined {
    const state = this.states.get(name);
    state?.subscription?.close();
    this.states.delete(name);
    this.deleting.delete(name);
    this.deletingFields.delete(name);
    return state;
  }

  /** Forgets every Referable, closing every subscription. */
  clear(): void {
    for (const state of this.states.values()) state.subscription?.close();
    this.states.clear();
    this.deleting.clear();
    this.deletingFields.clear();
  }

  /**
   * A change of leader: what another leader wrote is not ours to put back, and the targets may
   * hold what it wrote. Every Referable starts again from what is stored.
   */
  changeLeadership(): void {
    for (const state of this.states.values()) {
      state.own = undefined;
      state.repairs = 0;
      state.lastRepairAt = undefined;
      state.keys = undefined;
      state.fields = undefined;
    }
    this.deleting.clear();
    this.deletingFields.clear();
  }
}
