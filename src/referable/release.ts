/**
 * The release of a Referable being deleted: the fields it exported go first, then its keys,
 * each output letting go of its finalizer once all it wrote is gone. A finalizer let go of is
 * recorded (state.ts's overlay) and the pass goes on from it: no step waits for the echo of its
 * own write. A release that cannot finish says why in the Exported condition.
 */
import type { Referable } from "../api/referable.ts";
import { isFieldRecord, type FieldOutput } from "../outputs/field/output.ts";
import { isFieldEntry } from "../outputs/field/target.ts";
import type { KeysOutput } from "../outputs/keys/output.ts";
import type { StatusOutput } from "../outputs/status.ts";
import { DONE, type Result } from "../runtime/reconciler.ts";
import { recordWrite, type ReferableStates } from "./state.ts";
import { releaseStatus, statusEquals } from "./status.ts";

/** What the release needs: the reconciler's options, in part. */
export interface ReleaseOptions {
  reader: { get(name: string): Referable | undefined };
  states: ReferableStates;
  status: Pick<StatusOutput, "write" | "memory">;
  keys: Pick<KeysOutput, "release" | "finalizing">;
  fields?: Pick<FieldOutput, "release"> | undefined;
  /** Clock for condition timestamps. @default () => new Date() */
  now?: (() => Date) | undefined;
}

/** Releases a Referable being deleted; see the module comment. */
export class ReferableRelease {
  private readonly options: ReleaseOptions;

  constructor(options: ReleaseOptions) {
    this.options = options;
  }

  /**
   * The Referable is being deleted and holds the field finalizer: its fields go first, then, in
   * the same pass and from the metadata the finalizer's removal made (recorded, so the next look
   * reads through it), its keys: never waiting for the echo of its own write.
   */
  async fields(obj: Referable): Promise<Result> {
    const name = obj.metadata.name;
    let removed: { resourceVersion: string | undefined; finalizers: string[] } | undefined;
    const wait = await this.options.fields!.release(
      obj,
      this.options.states.releasingFields(name),
      (metadata) => (removed = metadata),
    );
    if (wait !== undefined) return { requeueAfterMs: wait };
    if (!removed) return DONE;
    const state = this.options.states.get(name);
    const cached = this.options.reader.get(name);
    if (state && cached) recordWrite(state, obj, cached, removed);
    const after: Referable = {
      ...obj,
      metadata: { ...obj.metadata, resourceVersion: removed.resourceVersion, finalizers: removed.finalizers },
    };
    return this.options.keys.finalizing(after) ? this.keys(after) : DONE;
  }

  /** The Referable is being deleted and holds the export finalizer: its keys go first. */
  async keys(obj: Referable): Promise<Result> {
    const name = obj.metadata.name;
    const memory = this.options.states.releasing(name);
    const wait = await this.options.keys.release(keysOnly(obj), memory);
    if (wait !== undefined) {
      if (memory.releaseProblem) await this.reportRelease(obj, memory.releaseProblem);
      return { requeueAfterMs: wait };
    }
    this.options.states.released(name);
    return DONE;
  }

  /**
   * A Referable being deleted whose keys could not all be removed says why in its Exported
   * condition (the rest of its status as it is), so whoever waits on it knows what to restore.
   */
  private async reportRelease(obj: Referable, problem: { reason: string; message: string }): Promise<void> {
    const status = releaseStatus(obj, problem, this.options.now?.() ?? new Date());
    if (statusEquals(obj.status, status)) return;
    const state = this.options.states.get(obj.metadata.name);
    const outcome = await this.options.status.write(
      obj,
      { status, baseVersion: obj.metadata.resourceVersion },
      state ?? this.options.status.memory(),
    );
    // Recorded as every write is: the next look reads through it, and its echo brings nothing.
    const cached = this.options.reader.get(obj.metadata.name);
    if (outcome.result === "written" && state && cached)
      recordWrite(state, obj, cached, { resourceVersion: outcome.resourceVersion, status });
  }
}

/**
 * `obj` as the key output sees it: spec.export and status.exports without the fields (the
 * field output's), so each output lets go only of what it wrote.
 */
export function keysOnly(obj: Referable): Referable {
  const exports = obj.spec?.export;
  const records = obj.status?.exports;
  if (!exports?.some(isFieldEntry) && !records?.some(isFieldRecord)) return obj;
  const out: Referable = { ...obj };
  if (obj.spec) out.spec = { ...obj.spec, export: (exports ?? []).filter((e) => !isFieldEntry(e)) };
  if (obj.status && records)
    out.status = { ...obj.status, exports: records.filter((r) => !isFieldRecord(r)) };
  return out;
}
