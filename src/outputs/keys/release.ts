/**
 * The key output's release of one object when its Referable goes: the keys it exported there
 * (and those of earlier releases' field manager) let go of, and an object it created deleted
 * once it holds nothing else (see sweep.ts).
 */
import { EXPORT_KINDS } from "../../api/export-kinds.ts";
import { Limits } from "../../api/limits.ts";
import { EXPORT_FINALIZER, type Referable } from "../../api/referable.ts";
import type { ServiceAccountRef } from "../../api/service-account.ts";
import { asError } from "../../api/errors.ts";
import type { KubeClient } from "../../kube/client.ts";
import type { Logger } from "../../api/log.ts";
import { isExportError } from "./errors.ts";
import { sweepObject, type Recorded } from "./sweep.ts";
import { describeObject, fieldManagerFor, objectKey, parseTarget, type TargetObject } from "./target.ts";
import { releaseLegacy } from "./takeover.ts";

/**
 * The objects a Referable being deleted may have written into, by key, and the keys of each:
 * those its spec names and those its status records.
 */
export function releaseTargets(obj: Referable): {
  objects: Map<string, TargetObject>;
  keysOf: Map<string, string[]>;
} {
  const objects = new Map<string, TargetObject>();
  const keysOf = new Map<string, string[]>();
  for (const t of [...(obj.spec?.export ?? []), ...(obj.status?.exports ?? [])]) {
    const parsed = parseTarget(t, "export");
    if (typeof parsed === "string") continue;
    const k = objectKey(parsed);
    objects.set(k, parsed);
    keysOf.set(k, [...(keysOf.get(k) ?? []), parsed.key]);
  }
  return { objects, keysOf };
}

/**
 * Why the finalizer stays, given the `problems` of a release (sorted in place by message): under
 * the first one's reason, every message joined; undefined when there are none.
 */
export function releaseProblem(
  problems: Array<{ reason: string; message: string }>,
): { reason: string; message: string } | undefined {
  if (problems.length === 0) return undefined;
  problems.sort((a, b) => a.message.localeCompare(b.message));
  return {
    reason: problems[0]!.reason,
    message:
      `the Referable keeps its finalizer ${EXPORT_FINALIZER} until its exported keys are removed: ${problems
        .map((p) => p.message)
        .join("; ")}`.slice(0, Limits.conditionMessage),
  };
}

/** Lets go of one object's keys; what went wrong when that failed and must be tried again. */
export async function releaseObject(
  client: Pick<KubeClient, "request">,
  logger: Logger,
  allowSecrets: boolean | undefined,
  name: string,
  object: TargetObject,
  keys: readonly string[],
  recorded: Recorded,
  serviceAccount?: ServiceAccountRef,
): Promise<{ reason: string; message: string } | undefined> {
  const kind = EXPORT_KINDS[object.kind];
  // Without --allow-secret-export a Secret no record names was never written by this Referable.
  if (kind.needsSecretExport && !allowSecrets && !recorded.any.has(objectKey(object))) return undefined;
  try {
    const options = {
      fieldManager: fieldManagerFor(name),
      forbiddenHint: kind.optIn,
      serviceAccount,
    };
    // Keys left under the manager of earlier releases (never taken over): those go too.
    await releaseLegacy(client, object, keys, name, options);
    // A target never written (its namespace never opted in, or an intent the write of which
    // was refused) holds nothing of this Referable: a refusal there must not keep it forever.
    const outcome = await sweepObject(client, object, name, recorded, options);
    if (outcome === "released" || outcome === "deleted")
      logger.info({ referable: name, target: describeObject(object), outcome }, "removed exported keys");
    return undefined;
  } catch (err) {
    const message = asError(err).message.slice(0, 300);
    logger.warn(
      { referable: name, target: describeObject(object), err: message },
      "could not remove exported keys; the Referable keeps its finalizer until they are",
    );
    return { reason: isExportError(err) ? err.reason : "ExportFailed", message };
  }
}
