/**
 * The finalizer `referable.dev/export`, which keeps a Referable until its exported keys are
 * removed. Added before any key is written, removed once none is left. Each patch is tested
 * against the list read (and the uid), so no one else's edit is lost, and its answer is the
 * Referable's new metadata: the reconcile goes on from it in the same pass, never waiting for
 * the echo of its own write.
 */
import { EXPORT_FINALIZER, REFERABLE_RESOURCE, type Referable } from "../../api/referable.ts";
import { asError } from "../../api/errors.ts";
import { isApiError, type KubeClient } from "../../kube/client.ts";
import { resourcePath } from "../../kube/resource-path.ts";
import type { Logger } from "../../api/log.ts";

/** What a finalizer patch did. */
export type FinalizerPatch =
  /** Done: the Referable's metadata after it. */
  | { ok: true; resourceVersion: string | undefined; finalizers: string[] }
  /** The Referable changed since it was read (or is gone): compute again from the newer version. */
  | { ok: false; changed: true }
  /** The patch failed: what went wrong, for the Exported condition. */
  | { ok: false; changed: false; problem: string };

/** Whether the Referable holds the export finalizer. */
export function hasFinalizer(obj: Referable, finalizer = EXPORT_FINALIZER): boolean {
  return obj.metadata.finalizers?.includes(finalizer) ?? false;
}

/** Adds or removes one finalizer: the export finalizer unless `finalizer` names another output's. */
export type FinalizerChange = (
  client: Pick<KubeClient, "request">,
  obj: Referable,
  logger: Logger,
  finalizer?: string,
) => Promise<FinalizerPatch>;

/** Adds the finalizer (`finalizer`: another output's, e.g. the field output's). */
export const addFinalizer: FinalizerChange = (client, obj, logger, finalizer = EXPORT_FINALIZER) =>
  patchFinalizers(client, obj, addingOps(obj.metadata.finalizers, finalizer), logger);

/** Removes the finalizer (`finalizer`: another output's). */
export const removeFinalizer: FinalizerChange = (client, obj, logger, finalizer = EXPORT_FINALIZER) =>
  patchFinalizers(client, obj, removingOps(obj.metadata.finalizers ?? [], finalizer), logger);

/** The JSON patch that adds `finalizer` to the list read (tested, so no one else's edit is lost). */
function addingOps(finalizers: string[] | undefined, finalizer: string): unknown[] {
  if (finalizers === undefined) return [{ op: "add", path: "/metadata/finalizers", value: [finalizer] }];
  return [
    { op: "test", path: "/metadata/finalizers", value: finalizers },
    { op: "add", path: "/metadata/finalizers/-", value: finalizer },
  ];
}

/** The JSON patch that removes `finalizer` from the list read (tested likewise). */
function removingOps(finalizers: string[], finalizer: string): unknown[] {
  return [
    { op: "test", path: "/metadata/finalizers", value: finalizers },
    { op: "replace", path: "/metadata/finalizers", value: finalizers.filter((f) => f !== finalizer) },
  ];
}

/** The message of an Exported=False for a finalizer the controller could not add or remove. */
export function finalizerMessage(problem: string): string {
  return `could not update the finalizer ${EXPORT_FINALIZER}, which keeps a Referable until its exported keys are removed: ${problem}`;
}

async function patchFinalizers(
  client: Pick<KubeClient, "request">,
  obj: Referable,
  ops: unknown[],
  logger: Logger,
): Promise<FinalizerPatch> {
  try {
    const patched = await client.request<Partial<Referable> | undefined>(
      "PATCH",
      resourcePath(REFERABLE_RESOURCE, { name: obj.metadata.name }),
      {
        body: [{ op: "test", path: "/metadata/uid", value: obj.metadata.uid }, ...ops],
        contentType: "application/json-patch+json",
      },
    );
    return {
      ok: true,
      resourceVersion: patched?.metadata?.resourceVersion,
      finalizers: patched?.metadata?.finalizers ?? [],
    };
  } catch (err) {
    // 404: gone. 409, 422 (a failed test): changed since it was read; the next look computes
    // from the newer version. An admission webhook's refusal is also a 422, but nothing changed:
    // reported, logged and retried on the backoff (deploy/'s webhook never sees finalizer
    // changes; an older configuration may).
    if (isApiError(err, 404) || isApiError(err, 409)) return { ok: false, changed: true };
    if (isApiError(err, 422) && !err.serverSaid(/admission webhook/i)) return { ok: false, changed: true };
    const message = asError(err).message.slice(0, 300);
    logger.warn({ referable: obj.metadata.name, err: message }, "could not update the export finalizer");
    const problem = isApiError(err, 403)
      ? `${message}: the controller needs patch on referables.referable.dev (deploy/base/rbac-controller.yaml)`
      : message;
    return { ok: false, changed: false, problem };
  }
}
