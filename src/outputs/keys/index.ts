/**
 * Export: a value delivered into a key of a ConfigMap or a Secret, where workloads read it, with
 * server-side apply under a field manager of the writer's own. The controller exports a
 * Referable's value through this; a consumer calls {@link exportValue} from its own code.
 * @module
 */
import type { KubeConfig } from "@kubernetes/client-node";
import { serviceAccountProblem } from "../../api/service-account.ts";
import { KubeClient } from "../../kube/client.ts";
import { actingAs } from "../../kube/impersonation.ts";
import { ExportError } from "./errors.ts";
import { removeField, writeField } from "../field/library.ts";
import type { FieldTarget } from "../field/target.ts";
import type { ExportTarget } from "./target.ts";
import { removeKey, writeKey, type ExportOptions, type ExportResult } from "./writer.ts";

export type { ExportResult, ExportOptions } from "./writer.ts";
export type { FieldPolicy, FieldTarget } from "../field/target.ts";

/**
 * Runs `work` with a connection made from `kubeConfig`, closed after, every request of it as
 * `options.serviceAccount` when given.
 */
async function withClient<T>(
  kubeConfig: KubeConfig,
  options: ExportOptions,
  work: (client: Pick<KubeClient, "request">) => Promise<T>,
): Promise<T> {
  const account = options?.serviceAccount;
  const problem =
    account === undefined ? undefined : serviceAccountProblem(account, "options.serviceAccount");
  if (problem) throw new ExportError("ExportFailed", problem, { retryable: false });
  const client = new KubeClient({ kubeConfig });
  try {
    return await work(actingAs(client, account));
  } finally {
    await client.close();
  }
}

/**
 * Writes `value` into `target`'s key with server-side apply under `options.fieldManager`: a
 * string as it is, any other JSON value as its JSON text (base64-encoded in a Secret, as the API
 * requires). Creates the object when missing (labelled `referable.dev/exported`); keeps every
 * other key, the manager's own included; writes nothing when the key already holds the value.
 * Connects with `kubeConfig` (for example from {@link loadKubeConfig}) for this call.
 * Throws an {@link ExportError}: `ExportConflict` when another field manager owns the key (never
 * forced), `ExportForbidden` when RBAC refuses, `ExportFailed` otherwise (and, not retryable,
 * for an `undefined` value: remove the key with {@link removeExport} instead).
 *
 * A {@link FieldTarget} (with `fieldPath`) writes the value, with its JSON type, into that field
 * of an existing object instead (`TargetNotFound` when it does not exist, `ExportRejected` when
 * the API server refuses the value); with policy `IfNotPresent`, only when the field is empty.
 *
 * With `options.serviceAccount`, every request (the reads of the target too) impersonates that
 * ServiceAccount, so the API server's RBAC and admission judge the write as the account's own
 * (`ExportForbidden` names the account and the verb); `kubeConfig`'s user needs `impersonate` on it.
 *
 * @example
 * await exportValue(kubeConfig, { kind: "ConfigMap", namespace: "team-b", name: "app", key: "DB_HOST" },
 *   "db.internal", { fieldManager: "my-operator/db-host" });
 */
export function exportValue(
  kubeConfig: KubeConfig,
  target: ExportTarget | FieldTarget,
  value: unknown,
  options: ExportOptions,
): Promise<ExportResult> {
  return withClient(kubeConfig, options, (client) =>
    "fieldPath" in target
      ? writeField(client, target, value, options)
      : writeKey(client, target, value, options),
  );
}

/**
 * Removes `target`'s key as written by `options.fieldManager` (with {@link exportValue}): the
 * manager lets go of it, so it disappears unless another manager owns it too. The manager's other
 * keys stay; an object it created and that holds nothing else is deleted. Resolves `false` when
 * the manager did not own the key. Connects with `kubeConfig` for this call. A
 * {@link FieldTarget}: the manager lets go of the field (removed unless someone else owns it).
 */
export function removeExport(
  kubeConfig: KubeConfig,
  target: ExportTarget | FieldTarget,
  options: ExportOptions,
): Promise<boolean> {
  return withClient(kubeConfig, options, (client) =>
    "fieldPath" in target ? removeField(client, target, options) : removeKey(client, target, options),
  );
}
export { ExportError, isExportError } from "./errors.ts";
export type { ExportFailureReason } from "./errors.ts";
export { exportText, fieldManagerFor } from "./target.ts";
export type { ExportKind, ExportTarget } from "./target.ts";
