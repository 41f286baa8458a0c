/**
 * Writes values into fields of existing objects of any kind, each writer under a field manager
 * of its own: `Always` fields with server-side apply (the manager owns exactly its fields, other
 * fields and managers are untouched, and applying without a field releases it), `IfNotPresent`
 * fields with a merge patch guarded by the resourceVersion read (an `Update` that owns the field
 * but is never undone, so the value stays when the writer lets go).
 *
 * An object is read (GET) before it is written: objects are never created (an apply to a missing
 * object would create it, so every apply carries the uid read), a field that already holds the
 * value is not written, and who owns each field decides between writing and a conflict. What is
 * read is reduced at once to a {@link FieldObjectState}, never kept whole.
 */
import { stableStringify } from "../../api/stable-json.ts";
import { describeServiceAccount, type ServiceAccountRef } from "../../api/service-account.ts";
import type { KubeClient } from "../../kube/client.ts";
import type { ResourceInfo } from "../../kube/discovery.ts";
import { resourcePath } from "../../kube/resource-path.ts";
import { ExportError } from "../keys/errors.ts";
import { ABSENT, readObject, signalOf, type ObjectIdentity } from "../object-read.ts";
import { toRequestFailure } from "../request-failure.ts";
import { describeFieldObject, nest, valueAt, type FieldObject } from "./target.ts";

type Client = Pick<KubeClient, "request">;

/** What a writer needs to know of one field. */
export interface FieldState {
  /** Whether the object holds anything at the path. */
  present: boolean;
  /** Whether what it holds is the value asked about (stable JSON equality). */
  equal: boolean;
  /** Whether the writer's manager owns the field with server-side apply. */
  mine: boolean;
  /** Other managers that own the field (or something under it). */
  others: string[];
}

/** What a writer needs to know of an object; a projection, never the object. */
export interface FieldObjectState extends ObjectIdentity {
  /** Per asked fieldPath. */
  fields: Map<string, FieldState>;
  /** The fieldPaths (among those asked) the writer's manager owns through apply. */
  applied: Set<string>;
}

/** Options of every write. */
export interface FieldWriteOptions {
  /** The field manager the fields are written under: one per writer, at most 128 characters. */
  fieldManager: string;
  /** Cancels the requests. */
  signal?: AbortSignal;
  /** Appended to an ExportForbidden message: what to apply to allow the write. */
  forbiddenHint?: string;
  /** The ServiceAccount the requests act as (the caller's client impersonates it), named in an ExportForbidden message. */
  serviceAccount?: ServiceAccountRef;
}

/** One field asked about: its path, and the value it should hold (undefined: none). */
export interface AskedField {
  fieldPath: string;
  path: readonly string[];
  value: unknown;
}

/** The API path of an object of `resource`. */
export function fieldObjectPath(resource: ResourceInfo, object: FieldObject): string {
  const namespace = resource.namespaced ? object.namespace : undefined;
  return resourcePath(resource, { namespace, name: object.name });
}

/** Reads `object` and keeps only what a writer under `options.fieldManager` needs about `asked`. */
export async function readFieldObject(
  client: Client,
  resource: ResourceInfo,
  object: FieldObject,
  asked: readonly AskedField[],
  options: FieldWriteOptions,
): Promise<FieldObjectState> {
  const read = await readObject(client, fieldObjectPath(resource, object), options, (err) =>
    toFieldError(err, { object, resource }, "get", options),
  );
  if (!read) return { ...ABSENT, fields: new Map(), applied: new Set() };
  const entries = read.managedFields;
  const fields = new Map<string, FieldState>();
  const applied = new Set<string>();
  for (const a of asked) {
    const at = valueAt(read.object, a.path);
    const state: FieldState = {
      present: at.found && at.value !== null,
      equal: at.found && a.value !== undefined && stableStringify(at.value) === stableStringify(a.value),
      mine: false,
      others: [],
    };
    for (const e of entries) {
      if (e.subresource || !owns(e.fieldsV1, a.path)) continue;
      if (e.manager === options.fieldManager && e.operation === "Apply") {
        state.mine = true;
        applied.add(a.fieldPath);
      } else if (e.manager !== options.fieldManager) state.others.push(e.manager ?? "(unnamed)");
    }
    fields.set(a.fieldPath, state);
  }
  return { ...read.identity, fields, applied };
}

/** Whether a managedFields entry's fieldsV1 holds `path` (or something under it). */
function owns(fieldsV1: Record<string, unknown> | undefined, path: readonly string[]): boolean {
  let node: unknown = fieldsV1;
  for (const m of path) {
    if (typeof node !== "object" || node === null) return false;
    const next: unknown = (node as Record<string, unknown>)[`f:${m}`];
    if (next === undefined) return false;
    node = next;
  }
  return true;
}

/**
 * Applies `body` (the manager's whole set of fields in the object, from {@link nest}) to the
 * object with `uid`, under the field manager: never creating it, never forced unless `force`.
 * Returns the object's resourceVersion after it.
 */
export async function applyFields(
  client: Client,
  resource: ResourceInfo,
  object: FieldObject,
  body: Record<string, unknown>,
  uid: string,
  options: FieldWriteOptions & { force?: boolean },
  values: unknown[] = [],
): Promise<string | undefined> {
  const metadata: Record<string, unknown> = { name: object.name, uid };
  if (resource.namespaced) metadata.namespace = object.namespace;
  const own = body.metadata;
  if (typeof own === "object" && own !== null) Object.assign(metadata, own);
  const apiVersion = resource.group ? `${resource.group}/${resource.version}` : resource.version;
  try {
    const applied = await client.request<{ metadata?: { resourceVersion?: string } }>(
      "PATCH",
      fieldObjectPath(resource, object),
      {
        ...signalOf(options),
        body: { ...body, apiVersion, kind: resource.kind, metadata },
        contentType: "application/apply-patch+yaml",
        query: { fieldManager: options.fieldManager, force: options.force === true },
      },
    );
    return applied?.metadata?.resourceVersion;
  } catch (err) {
    throw toFieldError(err, { object, resource }, "patch", options, values);
  }
}

/**
 * Sets `value` at `path` with a merge patch, only in the version `resourceVersion` of the object
 * (409 when it changed since it was read: read again). The manager then owns the field as an
 * `Update`, which no later apply of its own undoes.
 */
export async function fillField(
  client: Client,
  resource: ResourceInfo,
  object: FieldObject,
  path: readonly string[],
  value: unknown,
  resourceVersion: string,
  options: FieldWriteOptions,
): Promise<string | undefined> {
  const body = nest(path, value);
  const meta = (body.metadata ?? {}) as Record<string, unknown>;
  body.metadata = { ...meta, resourceVersion };
  try {
    const patched = await client.request<{ metadata?: { resourceVersion?: string } }>(
      "PATCH",
      fieldObjectPath(resource, object),
      {
        ...signalOf(options),
        body,
        contentType: "application/merge-patch+json",
        query: { fieldManager: options.fieldManager },
      },
    );
    return patched?.metadata?.resourceVersion;
  } catch (err) {
    throw toFieldError(err, { object, resource }, "patch", options, [value]);
  }
}

/**
 * The condition reason and a message for a failed request (see request-failure.ts); a field's
 * own cases: a missing object (never created for a field), and a value the server refused.
 */
export function toFieldError(
  err: unknown,
  target: { object: FieldObject; resource: ResourceInfo },
  verb: string,
  options: FieldWriteOptions,
  values: unknown[] = [],
): unknown {
  const { object, resource } = target;
  const what = describeFieldObject(object);
  const where = resource.namespaced ? ` in namespace ${object.namespace}` : "";
  const plural = resource.group ? `${resource.resource}.${resource.group}` : resource.resource;
  return toRequestFailure(
    err,
    verb,
    {
      what,
      forbidden: `${options.serviceAccount ? describeServiceAccount(options.serviceAccount) : "the controller"} may not ${verb} ${plural}${where}`,
      forbiddenHint: options.serviceAccount
        ? `grant ${describeServiceAccount(options.serviceAccount)} get and patch on ${plural}${where} (a Role and a RoleBinding, or a ClusterRole)`
        : options.forbiddenHint,
      unit: "field",
      never: "taken",
      special: (apiError, apiMessage) => {
        if (apiError.statusCode === 404)
          return new ExportError(
            "TargetNotFound",
            `${what} does not exist: objects are never created for a field`,
            { cause: apiError },
          );
        // The server refused the value itself: its schema (a wrong type, a pattern), a webhook,
        // an immutable field. SSA reports a type mismatch as a 500 "failed to create typed patch object".
        // Its own words are not shown (they can quote the object): the status, the reason code
        // and the field paths are, and what a typed-patch 500 means.
        const typed = apiError.statusCode === 500 && apiError.serverSaid(/typed patch|typed value|expected/i);
        if (apiError.statusCode === 400 || apiError.statusCode === 422 || typed)
          return new ExportError(
            "ExportRejected",
            `the API server refused the value for ${what}: ${apiMessage}${typed ? ", the value's type does not fit the field's schema" : ""}; its own message is not shown, as it can quote the object (see docs/troubleshooting.md)`,
            { cause: apiError, retryable: false },
          );
        return undefined;
      },
    },
    values,
  );
}
