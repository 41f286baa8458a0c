/**
 * The sweep: removing what a Referable wrote and its spec no longer names, and what it must
 * no longer hold (a Secret once `--allow-secret-export` is off), from the records of
 * `status.exports` alone.
 *
 * Why the records are enough: the key output records its intent before it writes. A key is
 * added to `status.exports` (without a resourceVersion: "about to be written") in a status
 * write that comes before the first write into it, so `status.exports` always names every key
 * the Referable may have written, whatever the moment a crash came. The sweep then runs where
 * the controller reads a Referable: at every reconcile (so at start, for every Referable, as
 * it is listed) and on finalization, and removes keys the spec no longer names. A record with a
 * resourceVersion was written for sure; one without may or may not have been.
 */
import type { ExportRecord } from "../../api/referable.ts";
import type { KubeClient } from "../../kube/client.ts";
import { isExportError } from "./errors.ts";
import { objectKey, type TargetObject } from "./target.ts";
import { releaseObject, type ExportOptions, type ReleaseResult } from "./writer.ts";

/** What the sweep knows of the objects `status.exports` names. */
export interface Recorded {
  /** Objects holding a key of a record, written or intended. */
  any: Set<string>;
  /** Objects holding a key of a record with a resourceVersion: written for sure. */
  written: Set<string>;
}

/** The objects the records name, by {@link objectKey}. */
export function recordedObjects(records: readonly ExportRecord[]): Recorded {
  const any = new Set<string>();
  const written = new Set<string>();
  for (const r of records) {
    const key = objectKey(r as TargetObject);
    any.add(key);
    if (r.resourceVersion !== undefined) written.add(key);
  }
  return { any, written };
}

/** The outcome of sweeping one object. */
export type SweepResult = ReleaseResult | "never-written";

/**
 * Lets go of every key `creator` holds in `object`, deleting the object when `creator` created
 * it and it holds nothing else (uid and resourceVersion preconditions; see releaseObject).
 * A refusal (403) of an object no record says was written (an intent only, or no record) is
 * `never-written`: a namespace never opted in must not keep a Referable forever. Any other
 * failure throws (an ExportError), to be reported and retried.
 */
export async function sweepObject(
  client: Pick<KubeClient, "request">,
  object: TargetObject,
  creator: string,
  recorded: Recorded,
  options: ExportOptions,
): Promise<SweepResult> {
  try {
    return await releaseObject(client, object, creator, options);
  } catch (err) {
    if (isExportError(err) && err.reason === "ExportForbidden" && !recorded.written.has(objectKey(object)))
      return "never-written";
    throw err;
  }
}
