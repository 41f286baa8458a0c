/**
 * Writes values into keys of ConfigMaps and Secrets with server-side apply, each writer under a
 * field manager of its own, so it sets only its keys: another writer's keys (and other fields)
 * are never touched, a key another manager owns is a conflict that is reported and never forced,
 * and applying without a key removes it unless someone else owns it too.
 *
 * A target is read (GET) before it is written, for two reasons: a key that already holds the
 * value is not written again (a restart writes nothing), and removing a key must not create the
 * object. What is read is reduced at once to a {@link TargetState} (the asked keys, who owns
 * what), never kept whole: another writer's keys, a Secret's other values, are not held.
 */
import { describeServiceAccount, type ServiceAccountRef } from "../../api/service-account.ts";
import { isApiError, type KubeClient } from "../../kube/client.ts";
import { ABSENT, readObject, signalOf, type ObjectIdentity } from "../object-read.ts";
import { toRequestFailure } from "../request-failure.ts";
import { ExportError, isExportError } from "./errors.ts";
import {
  CREATED_BY_ANNOTATION,
  describeObject,
  EXPORTED_LABEL,
  exportText,
  objectPath,
  resourceOf,
  storedText,
  type ExportTarget,
  type TargetObject,
} from "./target.ts";

export type Client = Pick<KubeClient, "request">;

/** What a writer needs to know of a target object; a projection, never the object. */
export interface TargetState extends ObjectIdentity {
  /** The stored text (base64 in a Secret) of each asked key and each key the manager owns, when present. */
  values: Map<string, string>;
  /** Keys of `data` the manager owns (through server-side apply). */
  owned: Set<string>;
  /** Of each asked key, every manager that owns it (this one included). */
  managersOf: Map<string, Set<string>>;
  /** Whether the manager owns any field of the object. */
  managed: boolean;
  /** Whether the object holds anything but the manager's fields: another manager's, or a key nobody applied. */
  holdsOther: boolean;
  /** The writer that created the object, from its annotation. */
  createdBy: string | undefined;
}

/** Options of every write. */
export interface ExportOptions {
  /** The field manager the keys are applied under: one per writer, at most 128 characters. */
  fieldManager: string;
  /** Cancels the requests. */
  signal?: AbortSignal;
  /** Appended to an ExportForbidden message: what to apply to allow the write. @default none */
  forbiddenHint?: string;
  /**
   * Act as this ServiceAccount: every request (reads of the target included) impersonates it
   * (user `system:serviceaccount:NS:NAME` and its groups), so the API server's RBAC and admission
   * judge each one as the account's; the caller's credentials need `impersonate` on that
   * ServiceAccount (and on the groups `system:serviceaccounts`, `system:serviceaccounts:NS` and
   * `system:authenticated`). A refusal is `ExportForbidden` naming the account and the verb.
   * @default undefined: the caller's own credentials
   */
  serviceAccount?: ServiceAccountRef;
}

/** Reads `object` and keeps only what a writer under `fieldManager` needs; see {@link TargetState}. */
export async function readTarget(
  client: Client,
  object: TargetObject,
  keys: Iterable<string>,
  options: ExportOptions,
): Promise<TargetState> {
  const read = await readObject(client, objectPath(object), options, (err) =>
    toExportError(err, object, "get", options),
  );
  if (!read)
    return {
      ...ABSENT,
      values: new Map(),
      owned: new Set(),
      managersOf: new Map(),
      managed: false,
      holdsOther: false,
      createdBy: undefined,
    };
  const { object: obj, metadata: meta } = read;
  const data = isRecord(obj.data) ? obj.data : {};
  const owned = new Set<string>();
  const asked = new Set(keys);
  const managersOf = new Map<string, Set<string>>();
  let managed = false;
  let others = false;
  for (const entry of read.managedFields) {
    const entryData = entry.fieldsV1?.["f:data"];
    if (isRecord(entryData) && typeof entry.manager === "string")
      for (const f of Object.keys(entryData)) {
        const k = f.slice(2);
        if (!f.startsWith("f:") || !asked.has(k)) continue;
        let managers = managersOf.get(k);
        if (!managers) managersOf.set(k, (managers = new Set()));
        managers.add(entry.manager);
      }
    if (entry.manager !== options.fieldManager || entry.operation !== "Apply") {
      others = true;
      continue;
    }
    managed = true;
    const ownedData = entry.fieldsV1?.["f:data"];
    if (isRecord(ownedData))
      for (const f of Object.keys(ownedData)) if (f.startsWith("f:")) owned.add(f.slice(2));
  }
  const values = new Map<string, string>();
  for (const key of [...asked, ...owned]) {
    const v = data[key];
    if (typeof v === "string") values.set(key, v);
  }
  const binary = isRecord(obj.binaryData) ? Object.keys(obj.binaryData).length : 0;
  const annotations = isRecord(meta.annotations) ? meta.annotations : {};
  const createdBy = annotations[CREATED_BY_ANNOTATION];
  return {
    ...read.identity,
    values,
    owned,
    managersOf,
    managed,
    holdsOther: others || binary > 0 || Object.keys(data).some((k) => !owned.has(k)),
    createdBy: typeof createdBy === "string" ? createdBy : undefined,
  };
}

/** What to apply to one object: its keys (stored texts) and, if this writer created it, the annotation saying so. */
export interface ApplyConfig {
  keys: Record<string, string>;
  /** Set when the writer created (or is creating) the object. */
  createdBy?: string;
  /** Apply the {@link EXPORTED_LABEL} (and the annotation). False releases every field. @default true */
  mark?: boolean;
}

/** The object after an apply. */
export interface Applied {
  uid: string | undefined;
  resourceVersion: string | undefined;
}

/**
 * Applies `config` to `object` under the field manager, without force; `uid` makes it apply to
 * that object only (never re-creating one deleted meanwhile).
 */
export async function applyTarget(
  client: Client,
  object: TargetObject,
  config: ApplyConfig,
  uid: string | undefined,
  options: ExportOptions,
  force = false,
): Promise<Applied> {
  const metadata: Record<string, unknown> = { name: object.name, namespace: object.namespace };
  if (uid) metadata.uid = uid;
  if (config.mark ?? true) {
    metadata.labels = { [EXPORTED_LABEL]: "true" };
    if (config.createdBy !== undefined) metadata.annotations = { [CREATED_BY_ANNOTATION]: config.createdBy };
  }
  const body: Record<string, unknown> = { apiVersion: "v1", kind: object.kind, metadata };
  if (Object.keys(config.keys).length > 0) body.data = config.keys;
  try {
    const applied = await client.request<{ metadata?: { resourceVersion?: string; uid?: string } }>(
      "PATCH",
      objectPath(object),
      {
        ...signalOf(options),
        // JSON is YAML: the apply patch's content type takes it as it is.
        body,
        contentType: "application/apply-patch+yaml",
        query: { fieldManager: options.fieldManager, force },
      },
    );
    return { uid: applied?.metadata?.uid, resourceVersion: applied?.metadata?.resourceVersion };
  } catch (err) {
    throw toExportError(err, object, "patch", options, Object.values(config.keys));
  }
}

/** The outcome of {@link syncObject}. */
export interface SyncResult {
  /** Whether anything was written. */
  written: boolean;
  /** Whether the object exists after the call. */
  exists: boolean;
  /** The object's resourceVersion after the call (the one read when nothing was written). */
  resourceVersion: string | undefined;
  /** The object's uid, when it exists. */
  uid: string | undefined;
  /** Whether the object is annotated as created by the creator given. */
  created: boolean;
}

/** What a writer knows of an object it applied to before: a read can be skipped. */
export interface KnownObject {
  uid: string;
  /** Whether the writer created it. */
  created: boolean;
}

/**
 * Makes the keys the field manager owns in `object` exactly `keys` (stored texts: base64 for a
 * Secret): sets what differs, removes what it owns and no longer wants, and writes nothing when
 * the object already holds exactly that. A missing object is created (annotated as created by
 * `creator`) only when there is a key to write.
 *
 * With `known` (the caller applied to this very object before, and knows its keys changed since)
 * the read is skipped: the apply goes straight to the object with that uid, and only if that
 * object is gone does the call read and start over.
 */
export async function syncObject(
  client: Client,
  object: TargetObject,
  keys: Record<string, string>,
  creator: string | undefined,
  options: ExportOptions,
  known?: KnownObject,
): Promise<SyncResult> {
  if (known) {
    const config: ApplyConfig = { keys };
    if (creator !== undefined && known.created) config.createdBy = creator;
    try {
      const applied = await applyTarget(client, object, config, known.uid, options);
      return { written: true, exists: true, ...applied, created: known.created };
    } catch (err) {
      // Deleted or re-created meanwhile (409 or 422 on the uid): read what is there now.
      if (!(isExportError(err) && err.reason === "ExportFailed")) throw err;
    }
  }
  const wanted = Object.keys(keys);
  const state = await readTarget(client, object, wanted, options);
  if (!state.exists) {
    if (wanted.length === 0)
      return { written: false, exists: false, resourceVersion: undefined, uid: undefined, created: false };
    const config: ApplyConfig = { keys };
    if (creator !== undefined) config.createdBy = creator;
    // No uid: this apply creates. If someone created the object meanwhile, the apply merges into
    // theirs, and the annotation claims an object that holds their data too; such an object
    // holds something else, so it is never deleted for this writer.
    const applied = await applyTarget(client, object, config, undefined, options);
    return { written: true, exists: true, ...applied, created: creator !== undefined };
  }
  const created = creator !== undefined && state.createdBy === creator;
  const differs =
    wanted.some((k) => state.values.get(k) !== keys[k] || !state.owned.has(k)) ||
    [...state.owned].some((k) => !(k in keys));
  if (!differs)
    return { written: false, exists: true, resourceVersion: state.resourceVersion, uid: state.uid, created };
  const config: ApplyConfig = { keys };
  if (created) config.createdBy = creator;
  const applied = await applyTarget(client, object, config, state.uid, options);
  return { written: true, exists: true, ...applied, created };
}

/** The outcome of {@link releaseObject}. */
export type ReleaseResult = "absent" | "released" | "deleted";

/**
 * Lets go of every field the manager owns in `object`, which removes its keys that nobody else
 * owns. When `creator` created the object and it holds nothing else, the object is deleted
 * instead, with its uid and resourceVersion as preconditions: a write made meanwhile by anyone
 * fails the deletion (retryable), so no one else's data is lost.
 */
export async function releaseObject(
  client: Client,
  object: TargetObject,
  creator: string | undefined,
  options: ExportOptions,
): Promise<ReleaseResult> {
  const state = await readTarget(client, object, [], options);
  if (!state.exists || !state.managed) return "absent";
  if (creator !== undefined && state.createdBy === creator && !state.holdsOther) {
    try {
      await client.request("DELETE", objectPath(object), {
        ...signalOf(options),
        body: {
          apiVersion: "v1",
          kind: "DeleteOptions",
          preconditions: { uid: state.uid, resourceVersion: state.resourceVersion },
        },
      });
      return "deleted";
    } catch (err) {
      if (isApiError(err, 404)) return "absent";
      throw toExportError(err, object, "delete", options);
    }
  }
  await applyTarget(client, object, { keys: {}, mark: false }, state.uid, options);
  return "released";
}

/** The outcome of {@link exportValue}. */
export interface ExportResult {
  /** Whether the key was written (false: it already held the value). */
  written: boolean;
  /** The object's resourceVersion after the call. */
  resourceVersion: string | undefined;
}

/**
 * `exportValue` (src/outputs/keys/index.ts, the library's face) over a client the caller
 * holds: the one implementation of writing one key.
 */
export async function writeKey(
  client: Client,
  target: ExportTarget,
  value: unknown,
  options: ExportOptions,
): Promise<ExportResult> {
  if (value === undefined)
    throw new ExportError("ExportFailed", "there is no value to export: use removeExport to remove the key", {
      retryable: false,
    });
  const text = storedText(target.kind, exportText(value));
  const state = await readTarget(client, target, [target.key], options);
  if (state.exists && state.owned.has(target.key) && state.values.get(target.key) === text)
    return { written: false, resourceVersion: state.resourceVersion };
  // The manager's other keys in the object are applied again as they are: an apply without them
  // would remove them.
  // No prototype: "__proto__" is a valid ConfigMap key and an assignment must not drop it.
  const keys: Record<string, string> = Object.create(null);
  for (const k of state.owned) {
    const v = state.values.get(k);
    if (v !== undefined) keys[k] = v;
  }
  keys[target.key] = text;
  const config: ApplyConfig = { keys };
  // Created now, or earlier by the same manager: the annotation lets removeExport delete it.
  if (!state.exists || state.createdBy === options.fieldManager) config.createdBy = options.fieldManager;
  const { resourceVersion } = await applyTarget(client, target, config, state.uid, options);
  return { written: true, resourceVersion };
}

/** `removeExport` over a client the caller holds: the one implementation of removing one key. */
export async function removeKey(
  client: Client,
  target: ExportTarget,
  options: ExportOptions,
): Promise<boolean> {
  const state = await readTarget(client, target, [], options);
  if (!state.exists || !state.owned.has(target.key)) return false;
  // No prototype: "__proto__" is a valid ConfigMap key and an assignment must not drop it.
  const keys: Record<string, string> = Object.create(null);
  for (const k of state.owned) {
    const v = state.values.get(k);
    if (k !== target.key && v !== undefined) keys[k] = v;
  }
  if (Object.keys(keys).length === 0) {
    await releaseObject(client, target, options.fieldManager, options);
    return true;
  }
  const config: ApplyConfig = { keys };
  if (state.createdBy === options.fieldManager) config.createdBy = options.fieldManager;
  await applyTarget(client, target, config, state.uid, options);
  return true;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** The condition reason and a message for a failed request (see request-failure.ts). */
function toExportError(
  err: unknown,
  object: TargetObject,
  verb: string,
  options: ExportOptions,
  values: string[] = [],
): unknown {
  const what = describeObject(object);
  return toRequestFailure(
    err,
    verb,
    {
      what,
      forbidden: `${options.serviceAccount ? `${describeServiceAccount(options.serviceAccount)} ` : ""}may not ${verb} ${resourceOf(object.kind)} in namespace ${object.namespace}`,
      forbiddenHint: options.serviceAccount
        ? `grant ${describeServiceAccount(options.serviceAccount)} get, create and patch on ${resourceOf(object.kind)} there (a Role and a RoleBinding)`
        : options.forbiddenHint,
      unit: "key",
      never: "overwritten",
      special: (apiError, apiMessage) =>
        apiError.statusCode === 404
          ? new ExportError("ExportFailed", `cannot write ${what}: ${apiMessage}`, { cause: apiError })
          : undefined,
    },
    values,
  );
}
