/**
 * One GET of an object an output writes into (a ConfigMap, a Secret, an object of any kind),
 * for the writers: the object's identity and its managedFields, or its absence. The object is
 * the caller's to reduce at once to what it needs, never to keep.
 */
import type { KubeClient } from "../kube/client.ts";
import { isApiError } from "../kube/client.ts";

/** Whether an object exists, and the uid and resourceVersion read. */
export interface ObjectIdentity {
  exists: boolean;
  uid: string | undefined;
  resourceVersion: string | undefined;
}

/** The identity of an object that is not there. */
export const ABSENT: ObjectIdentity = Object.freeze({
  exists: false,
  uid: undefined,
  resourceVersion: undefined,
});

/** One entry of `metadata.managedFields`: who owns which fields, and how. */
export interface ManagedFieldsEntry {
  manager?: string;
  operation?: string;
  subresource?: string;
  fieldsV1?: Record<string, unknown>;
}

/** What a GET found. */
export interface ObjectRead {
  /** The object as the server answered it. */
  object: Record<string, unknown>;
  metadata: Record<string, unknown>;
  identity: ObjectIdentity;
  managedFields: ManagedFieldsEntry[];
}

/** The request options that carry a caller's abort signal, if it has one. */
export function signalOf(options: { signal?: AbortSignal }): { signal?: AbortSignal } {
  return options.signal ? { signal: options.signal } : {};
}

/**
 * GETs the object at `path`: undefined when it does not exist (404); any other failure is
 * thrown as `toError` words it.
 */
export async function readObject(
  client: Pick<KubeClient, "request">,
  path: string,
  options: { signal?: AbortSignal },
  toError: (err: unknown) => unknown,
): Promise<ObjectRead | undefined> {
  let object: Record<string, unknown> & { metadata?: Record<string, unknown> };
  try {
    object = await client.request("GET", path, signalOf(options));
  } catch (err) {
    if (isApiError(err, 404)) return undefined;
    throw toError(err);
  }
  const metadata = object.metadata ?? {};
  return {
    object,
    metadata,
    identity: {
      exists: true,
      uid: typeof metadata.uid === "string" ? metadata.uid : undefined,
      resourceVersion: typeof metadata.resourceVersion === "string" ? metadata.resourceVersion : undefined,
    },
    managedFields: (Array.isArray(metadata.managedFields)
      ? metadata.managedFields
      : []) as ManagedFieldsEntry[],
  };
}
