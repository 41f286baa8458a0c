/**
 * The Reconciler for Referables: reads a Referable and the current result of its resolver
 * subscription, runs the outputs (the keys of spec.export first, then the status, which records
 * them), and says when to look again. Level-based: it never acts on an event's payload.
 *
 * Every replica computes; only the leader writes. Progress is a result: a step that needs
 * another pass (the finalizer let go of once the status no longer lists a key, a write waiting
 * for the write policy, a failed export on its backoff) returns `requeueAfterMs`, and never
 * waits for the event its own write will cause.
 */
import { FIELD_EXPORT_FINALIZER, type Referable, type ReferableStatus } from "../api/referable.ts";
import {
  isFieldRecord,
  newFieldsMemory,
  type FieldOutput,
  type FieldsStep,
} from "../outputs/field/output.ts";
import { isFieldEntry } from "../outputs/field/target.ts";
import { ResolutionError } from "../api/errors.ts";
import { silentLogger, type Logger } from "../api/log.ts";
import { newKeysMemory, type KeysMemory, type KeysOutput, type KeysStep } from "../outputs/keys/output.ts";
import type { StatusOutput } from "../outputs/status.ts";
import type { ResolutionResult } from "../resolver/types.ts";
import { DONE, sooner, type Reconciler, type Result } from "../runtime/reconciler.ts";
import { backoffDelay } from "../timing/backoff.ts";
import { sameAsStored } from "./compact.ts";
import type { EventRecorder } from "./events.ts";
import { describeCycle, isObjectNode } from "./reference-graph.ts";
import type { ReferableLabels } from "./labels.ts";
import { keysOnly, ReferableRelease } from "./release.ts";
import { recordWrite, viewOf, type ReferableState, type ReferableStates } from "./state.ts";
import { combineExports, type ExportStep } from "./export-steps.ts";
import { desiredStatus, readyCondition, statusEquals } from "./status.ts";

/** Reads Referables from the cache. */
export interface ReferableReader {
  get(name: string): Referable | undefined;
}

/** The cycles among Referables this controller sees (see ReferenceGraph). */
export interface Cycles {
  /** The cycle `name` is in, as a path that starts and ends with it, if any. */
  cycleOf(name: string): readonly string[] | undefined;
  /** Brings the cycles up to date, queueing every Referable but `reconciling` whose cycle changed. */
  flush(reconciling: string): void;
}

/** Whether this replica leads, read once per reconcile. */
export interface Leadership {
  readonly leading: boolean;
}

/** Options for {@link ReferableReconciler}. */
export interface ReferableReconcilerOptions {
  reader: ReferableReader;
  states: ReferableStates;
  /** Makes a Referable's state (and subscription) for its spec. */
  track(obj: Referable): ReferableState;
  cycles: Cycles;
  leadership: Leadership;
  status: Pick<StatusOutput, "write" | "memory">;
  keys: Pick<KeysOutput, "write" | "release" | "finalizing">;
  /** Sharded, listing by slot: the slot and graph labels of the Referables served (labels.ts). */
  labels?: Pick<ReferableLabels, "reconcile">;
  /** The fields of spec.export (entries with a fieldPath). @default none: such entries are ignored */
  fields?: Pick<FieldOutput, "write" | "release" | "finalizing">;
  events?: Pick<EventRecorder, "transition" | "forget">;
  logger?: Logger;
  /** Clock for condition timestamps. @default () => new Date() */
  now?: () => Date;
  /**
   * Longest time between two writes that put back a status someone else changed. Each repair
   * of one Referable within a minute of the last waits twice as long as the one before (from
   * 100 ms), up to this: a writer that forges a status in a loop cannot drive the controller
   * into one.
   * @default 30000
   */
  maxRepairIntervalMs?: number;
  /**
   * How long a Referable whose status says nothing yet of its generation waits for its source
   * kind's first list before `Pending` is written: a cold start then writes each status once,
   * with what was read, rather than `Pending` first. A list that takes longer (a slow or failing
   * API server) still shows `Pending`. Two minutes: at 10,000 Referables on four shards of a
   * loaded machine, 30 s still let 12% of them write `Pending` first (BENCHMARKS.md).
   * @default 120000
   */
  pendingGraceMs?: number;
  /** Told how long a pushed result took to reach the status, in seconds. */
  onPropagation?: (seconds: number) => void;
  /** Told of every repair. */
  onRepair?: () => void;
}

const PENDING: ResolutionResult = {
  ok: false,
  error: new ResolutionError("Pending", "resolving the source"),
};

/** A repair this long after the last one starts a new streak, at the shortest interval. */
const REPAIR_STREAK_MS = 60_000;
/** The shortest interval between a write and a repair after it: the first step of the backoff. */
const REPAIR_BASE_MS = 100;

/** What one reconcile works from. */
interface Pass {
  name: string;
  /** The Referable in the cache. */
  cached: Referable;
  /** The Referable as it is after this replica's writes the cache has not shown yet. */
  view: Referable;
  state: ReferableState;
  leading: boolean;
}

/**
 * The key output's memory of a Referable, kept in its state only when it exports, did, or holds
 * the finalizer: for any other a fresh one, which is what the output makes of a memory it finds
 * with nothing to export (it empties it), so the 100,000 that export nothing keep no two Maps each.
 */
function keysMemory(state: ReferableState, obj: Referable): KeysMemory {
  if (state.keys) return state.keys;
  const exports =
    (obj.spec?.export?.length ?? 0) > 0 ||
    (obj.status?.exports?.length ?? 0) > 0 ||
    (obj.metadata.finalizers?.length ?? 0) > 0;
  return exports ? (state.keys = newKeysMemory()) : newKeysMemory();
}

/**
 * A status write the write policy held back (a place in the controller's budget reserved, or the
 * Referable's own rate), and what its status was computed from. The look after the wait writes
 * that status as it is when nothing of it changed: at 100,000 Referables under the budget (500 a
 * second) nearly every write waits, and computing each again from the same inputs doubled the
 * reconciles' work (BENCHMARKS.md, perf/budget-cpu).
 */
interface Held {
  /** The Referable's version (and uid) the status was computed from. */
  uid: string | undefined;
  version: string | undefined;
  /** The result it shows (the subscription's, or the fixed one: a new push is a new object). */
  result: ResolutionResult;
  /** What this replica knew of its own writes then. */
  overlay: ReferableState["overlay"];
  own: ReferableStatus | undefined;
  desired: ReferableStatus;
}

/** The Reconciler for Referables; see the module comment. */
export class ReferableReconciler implements Reconciler {
  private readonly options: ReferableReconcilerOptions;
  private readonly logger: Logger;
  /** Status writes held back, by the state of their Referable: gone with it, no field in every state. */
  private readonly held = new WeakMap<ReferableState, Held>();

  /** The release of a Referable being deleted (release.ts). */
  private readonly releasing: ReferableRelease;

  constructor(options: ReferableReconcilerOptions) {
    this.options = options;
    this.logger = options.logger ?? silentLogger;
    this.releasing = new ReferableRelease(options);
  }

  async reconcile(name: string): Promise<Result> {
    const cached = this.options.reader.get(name);
    if (!cached) {
      this.forget(name);
      return DONE;
    }
    const leading = this.options.leadership.leading;
    // Read through this replica's own writes (a finalizer let go of) the cache has not shown yet.
    const known = this.options.states.get(name);
    const current = known ? viewOf(cached, known) : cached;
    if (this.options.fields?.finalizing(current)) return leading ? this.releasing.fields(current) : DONE;
    if (this.options.keys.finalizing(current)) return leading ? this.releasing.keys(current) : DONE;
    const state = this.options.track(cached);
    this.options.cycles.flush(name);
    const pushed = state.subscription?.current;
    const result = state.fixed ?? this.unlessCycle(name, pushed ?? PENDING);
    // Nothing to say yet: the subscription pushes its first result (after a discovery lookup, or
    // a targeted read of a source cached before anyone read it), which queues this Referable
    // again. A "Pending" written now would only be overwritten a few milliseconds later.
    if (state.subscription && pushed === undefined && result === PENDING) return DONE;
    // Pending from a source kind not listed yet (a cold start): the push when the list arrives
    // queues this Referable again, so a Pending written now would be overwritten in a moment.
    const wait = leading ? this.pendingWait(cached, state, result) : 0;
    if (wait > 0) return { requeueAfterMs: wait };
    const pass: Pass = { name, cached, view: viewOf(cached, state), state, leading };
    const labels = await this.options.labels?.reconcile(pass.view, leading);
    if (labels?.result) return labels.result;
    if (labels?.resourceVersion) adoptMetadata(pass, { resourceVersion: labels.resourceVersion });
    // A write that waited for its place, computed from what is still the case: written as it was.
    const held = leading ? this.takeHeld(state, cached, result) : undefined;
    if (held) return this.writeStatus(pass, result, undefined, held);
    const keys = await this.writeKeys(pass, result);
    if (keys?.requeue) return { requeue: true };
    const fields = await this.writeFields(pass, result);
    if (fields?.requeue) return { requeue: true };
    const exports = combineExports(keys, fields, pass.view.status);
    const after: Result =
      exports?.retryAfterMs === undefined ? DONE : { requeueAfterMs: exports.retryAfterMs };
    return sooner(after, await this.writeStatus(pass, result, exports));
  }

  /** spec.export's fields: written by the leader before the status says so, as the keys are. */
  private async writeFields(pass: Pass, result: ResolutionResult): Promise<FieldsStep | undefined> {
    const fields = this.options.fields;
    if (!fields || !pass.leading || (!result.ok && result.error.reason === "Pending")) return undefined;
    if (pass.view.metadata.deletionTimestamp !== undefined) return undefined;
    const { state, view } = pass;
    const owner = state.own ? { ...view, status: state.own } : view;
    // Most Referables export into no field: no call, and no memory made for them.
    if (!exportsFields(owner)) return undefined;
    const step = await fields.write(owner, result, (state.fields ??= newFieldsMemory()));
    adoptMetadata(pass, step.metadata);
    return step;
  }

  /**
   * spec.export: the leader writes the value into the targets before the status says so.
   * Nothing happens before the value is observed (Pending), nor on a Referable being deleted
   * without the finalizer (none may be added then).
   */
  private async writeKeys(pass: Pass, result: ResolutionResult): Promise<KeysStep | undefined> {
    if (!pass.leading || (!result.ok && result.error.reason === "Pending")) return undefined;
    if (pass.view.metadata.deletionTimestamp !== undefined) return undefined;
    const { state, view } = pass;
    // The keys it wrote are those of the status it wrote, when it knows it: a forged
    // status.exports must not send it to release (or read) targets it never wrote.
    const owner = keysOnly(state.own ? { ...view, status: state.own } : view);
    const step = await this.options.keys.write(owner, result, keysMemory(state, owner));
    adoptMetadata(pass, step.metadata);
    return step;
  }

  /**
   * The status write held back for this Referable, taken out, if it was computed from what is
   * still the case: the same version of the Referable, the same result, the same own writes.
   */
  private takeHeld(state: ReferableState, cached: Referable, result: ResolutionResult): Held | undefined {
    const held = this.held.get(state);
    if (!held) return undefined;
    this.held.delete(state);
    const same =
      held.result === result &&
      held.uid === cached.metadata.uid &&
      held.version === cached.metadata.resourceVersion &&
      held.overlay === state.overlay &&
      held.own === state.own;
    return same ? held : undefined;
  }

  /**
   * Writes the status `result` and the keys step call for, if it differs and this replica leads;
   * `held`: the status a write held back computed, from the same inputs (see takeHeld).
   */
  private async writeStatus(
    pass: Pass,
    result: ResolutionResult,
    keys: ExportStep | undefined,
    held?: Held,
  ): Promise<Result> {
    const { state, view, leading } = pass;
    const own = leading ? state.own : undefined;
    const desired =
      held?.desired ?? desiredStatus(view, result, this.options.now?.() ?? new Date(), own, keys?.state);
    // A status kept as a summary (a bucket just taken over) is compared by digest: unchanged, no write.
    // (A held status differed from the same stored one when it was held, and is never undefined.)
    if (!desired || (!held && sameAsStored(view.status, desired, statusEquals))) {
      state.pushedAt = undefined;
      return DONE;
    }
    if (!leading) return DONE;
    // The stored status is not what this replica wrote: someone else wrote it. (Never held.)
    const repair = !held && own !== undefined && !statusEquals(view.status, own);
    const streak =
      repair && state.lastRepairAt !== undefined && performance.now() - state.lastRepairAt < REPAIR_STREAK_MS
        ? state.repairs
        : 0;
    const wait = repair ? this.repairWait(state, streak) : 0;
    if (wait > 0) return { requeueAfterMs: wait };
    const outcome = await this.options.status.write(
      view,
      { status: desired, baseVersion: view.metadata.resourceVersion },
      state,
    );
    if (outcome.result === "deferred") {
      // Held: the look after the wait writes this very status unless its inputs moved on. Not a
      // repair (its wait is its own) nor a step of the exports (they run again on every look).
      if (!repair && (keys === undefined || quietExports(keys)))
        this.held.set(state, {
          uid: pass.cached.metadata.uid,
          version: pass.cached.metadata.resourceVersion,
          result,
          overlay: state.overlay,
          own: state.own,
          desired,
        });
      return { requeueAfterMs: outcome.retryAfterMs };
    }
    if (outcome.result === "conflict") return { requeue: true };
    if (outcome.result === "dropped") return DONE;
    recordWrite(state, view, pass.cached, { resourceVersion: outcome.resourceVersion, status: desired });
    this.written(pass, desired, repair, streak);
    // The status records the keys step now: its next step (letting go of the finalizer once no
    // key is listed) runs on the next look, asked for here rather than left to the echo.
    return keys?.thenRequeue ? { requeueAfterMs: 0 } : DONE;
  }

  /**
   * How long a Pending `result` is still held back (0: write it): while the stored status says
   * nothing of this generation (a Pending write would be the first) and the first push came less
   * than the grace ago. The first push's time is the propagation histogram's start too.
   */
  private pendingWait(cached: Referable, state: ReferableState, result: ResolutionResult): number {
    if (result.ok || result.error.reason !== "Pending") return 0;
    const status = state.own ?? cached.status;
    if (readyCondition(status) && status?.observedGeneration === (cached.metadata.generation ?? 0)) return 0;
    const now = performance.now();
    const since = (state.pushedAt ??= now);
    // The grace less the time elapsed (never above the grace: since + grace - now rounds over it).
    return Math.max(0, (this.options.pendingGraceMs ?? 120_000) - (now - since));
  }

  /** How long a repair must still wait after the last write (0: none). */
  private repairWait(state: ReferableState, streak: number): number {
    if (state.lastWriteAt === undefined) return 0;
    const interval = backoffDelay(streak, {
      baseMs: REPAIR_BASE_MS,
      maxMs: Math.max(REPAIR_BASE_MS, this.options.maxRepairIntervalMs ?? 30_000),
    });
    return state.lastWriteAt + interval - performance.now();
  }

  /** After a status write: the state, the metrics, the log line and the Event. */
  private written(pass: Pass, desired: ReferableStatus, repair: boolean, streak: number): void {
    const { state, name, view, cached } = pass;
    state.own = desired;
    // Only a write that succeeded starts the repair interval: a failed one is retried on the
    // work queue's growing backoff, which a requeueAfter here would reset.
    // Whole ms (a small integer, kept in the state's own field; a fraction takes 16 bytes more).
    state.lastWriteAt = Math.floor(performance.now());
    if (state.pushedAt !== undefined)
      this.options.onPropagation?.((performance.now() - state.pushedAt) / 1000);
    state.pushedAt = undefined;
    const before = readyCondition(view.status);
    const after = readyCondition(desired)!;
    this.logger.info(
      { referable: name, ready: after.status, reason: after.reason, generation: desired.observedGeneration },
      "status written",
    );
    // Pending is where every new Referable starts: not worth an Event.
    if (before?.reason !== after.reason && after.reason !== "Pending")
      this.options.events?.transition(cached, after.reason, after.message);
    if (!repair) return;
    state.repairs = streak + 1;
    state.lastRepairAt = performance.now();
    this.options.onRepair?.();
    this.logger.warn(
      { referable: name, repairs: state.repairs },
      "put back a status someone else changed: only the controller writes a Referable's status",
    );
  }

  /**
   * `result`, unless the Referable reads itself, directly (a selector that matches it) or
   * through other Referables or the keys they export (a cycle of any length): then InvalidSpec. Such a loop never
   * settles when the field read changes with every write (metadata.resourceVersion, the status
   * itself), so the controller refuses it rather than write forever.
   */
  private unlessCycle(name: string, result: ResolutionResult): ResolutionResult {
    const path = this.options.cycles.cycleOf(name);
    if (!path) return result;
    const referables = path.slice(0, -1).filter((n) => !isObjectNode(n)).length;
    const message =
      path.length === 2
        ? "a Referable cannot read itself: spec.source selects this Referable; point spec.source at another object"
        : path.some(isObjectNode)
          ? `spec.source reads what Referables export, in a cycle of ${referables} (${describeCycle(path)}): a Referable cannot read its own exported value, directly or through others; point spec.source or spec.export at another object`
          : `spec.source reads Referables in a cycle of ${referables} (${describeCycle(path)}): a Referable cannot read itself, directly or through others; point spec.source at another object`;
    return { ok: false, error: new ResolutionError("InvalidSpec", message) };
  }

  private forget(name: string): void {
    const state = this.options.states.delete(name);
    if (state?.uid) this.options.events?.forget(state.uid);
  }
}

/**
 * After an output's step wrote the Referable's metadata (its finalizer), the pass goes on from
 * what was written, as from a status write.
 */
function adoptMetadata(
  pass: Pass,
  metadata: { resourceVersion: string | undefined; finalizers?: string[] } | undefined,
) {
  if (!metadata) return;
  recordWrite(pass.state, pass.view, pass.cached, {
    resourceVersion: metadata.resourceVersion,
    finalizers: metadata.finalizers,
  });
  pass.view = viewOf(pass.cached, pass.state);
}

/** An export step that exports nothing, waits for nothing and asks for no next step. */
function quietExports(step: ExportStep): boolean {
  return step.state === null && step.retryAfterMs === undefined && !step.thenRequeue;
}

/** Whether the field output has anything to do for `obj`: a field named, recorded, or its finalizer held. */
function exportsFields(obj: Referable): boolean {
  return (
    (obj.spec?.export?.some(isFieldEntry) ?? false) ||
    (obj.status?.exports?.some(isFieldRecord) ?? false) ||
    (obj.metadata.finalizers?.includes(FIELD_EXPORT_FINALIZER) ?? false)
  );
}
