/**
 * `exportValue` and `removeExport` for a field target (src/outputs/keys/index.ts dispatches
 * here): one field of one existing object, written under the caller's field manager. The
 * manager's other fields of the object are applied again as they are, since an apply without them
 * would release them.
 */
import { stableStringify } from "../../api/stable-json.ts";
import type { KubeClient } from "../../kube/client.ts";
import { Discovery, type ResourceInfo } from "../../kube/discovery.ts";
import { ExportError } from "../keys/errors.ts";
import { readObject } from "../object-read.ts";
import type { ExportOptions, ExportResult } from "../keys/writer.ts";
import {
  describeFieldObject,
  mergeInto,
  nest,
  parseFieldTarget,
  valueAt,
  type FieldTarget,
  type ParsedFieldTarget,
} from "./target.ts";
import { applyFields, fieldObjectPath, fillField, readFieldObject, toFieldError } from "./writer.ts";

type Client = Pick<KubeClient, "request">;

interface Read {
  resource: ResourceInfo;
  target: ParsedFieldTarget;
  obj: Record<string, unknown> & { metadata?: Record<string, unknown> };
  /** The leaf paths the manager owns through apply. */
  owned: string[][];
}

/** Writes `value` into the field of `target`; see `exportValue`. */
export async function writeField(
  client: Client,
  target: FieldTarget,
  value: unknown,
  options: ExportOptions,
): Promise<ExportResult> {
  if (value === undefined || value === null)
    throw new ExportError(
      "ExportFailed",
      "there is no value to export: use removeExport to release the field",
      {
        retryable: false,
      },
    );
  const read = await readOwned(client, target, options);
  const { resource, target: t, obj } = read;
  const state = await readFieldObject(
    client,
    resource,
    t,
    [{ fieldPath: t.fieldPath, path: t.path, value }],
    options,
  );
  const f = state.fields.get(t.fieldPath)!;
  const resourceVersion = state.resourceVersion;
  if (t.policy === "IfNotPresent") {
    if (f.present) return { written: false, resourceVersion };
    return {
      written: true,
      resourceVersion: await fillField(client, resource, t, t.path, value, resourceVersion!, options),
    };
  }
  if (f.mine && f.equal) return { written: false, resourceVersion };
  if (f.others.length > 0 && !f.equal)
    throw new ExportError(
      "ExportConflict",
      `${describeFieldObject(t)}: ${t.fieldPath} is owned by the field manager ${f.others.map((m) => JSON.stringify(m)).join(", ")}: it is never taken`,
    );
  const body = keepOwned(read, t.path);
  mergeInto(body, nest(t.path, value));
  const rv = await applyFields(client, resource, t, body, String(obj.metadata?.uid ?? ""), options, [value]);
  return { written: true, resourceVersion: rv };
}

/** Releases the field of `target` as written by `options.fieldManager`; false when it did not own it. */
export async function removeField(
  client: Client,
  target: FieldTarget,
  options: ExportOptions,
): Promise<boolean> {
  let read: Read;
  try {
    read = await readOwned(client, target, options);
  } catch (err) {
    if (err instanceof ExportError && err.reason === "TargetNotFound") return false;
    throw err;
  }
  const key = stableStringify(read.target.path);
  if (!read.owned.some((p) => stableStringify(p) === key)) return false;
  const body = keepOwned(read, read.target.path);
  await applyFields(client, read.resource, read.target, body, String(read.obj.metadata?.uid ?? ""), options);
  return true;
}

async function readOwned(client: Client, target: FieldTarget, options: ExportOptions): Promise<Read> {
  const t = parseFieldTarget(target, "target");
  if (typeof t === "string") throw new ExportError("ExportFailed", t, { retryable: false });
  const resource = await new Discovery({ client }).lookup(t.apiVersion, t.kind);
  const read = await readObject(client, fieldObjectPath(resource, t), options, (err) =>
    toFieldError(err, { object: t, resource }, "get", options),
  );
  if (!read)
    throw new ExportError(
      "TargetNotFound",
      `${describeFieldObject(t)} does not exist: objects are never created for a field`,
      { retryable: true },
    );
  const owned: string[][] = [];
  for (const e of read.managedFields)
    if (e.manager === options.fieldManager && e.operation === "Apply" && !e.subresource)
      leaves(e.fieldsV1, [], owned);
  return { resource, target: t, obj: read.object, owned };
}

/** The manager's other applied fields, with their current values, so an apply keeps them. */
function keepOwned(read: Read, except: readonly string[]): Record<string, unknown> {
  const body: Record<string, unknown> = {};
  const skip = stableStringify(except);
  for (const path of read.owned) {
    if (
      stableStringify(path) === skip ||
      (path[0] === "metadata" && (path[1] === "name" || path[1] === "namespace"))
    )
      continue;
    const at = valueAt(read.obj, path);
    if (at.found) mergeInto(body, nest(path, at.value));
  }
  return body;
}

/** The leaf paths of a fieldsV1 set (fields only: list items are never written here). */
function leaves(node: unknown, at: string[], out: string[][]): void {
  if (typeof node !== "object" || node === null) return;
  const keys = Object.keys(node).filter((k) => k.startsWith("f:"));
  if (keys.length === 0) {
    if (at.length > 0) out.push(at);
    return;
  }
  for (const k of keys) leaves((node as Record<string, unknown>)[k], [...at, k.slice(2)], out);
}
