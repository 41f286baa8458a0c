/**
 * The one builder of API paths: a resource (as discovery says it is served, or a built-in one
 * named below), and where in it: a namespace, an object, a subresource. Every segment is
 * encoded, so a name can never step into another path; a plural is never guessed here (take it
 * from discovery, or from a resource Kubernetes fixes).
 */

/** A resource as the API server serves it: discovery's `ResourceInfo` is one. */
export interface GroupVersionResource {
  /** API group, "" for the core group. */
  group: string;
  /** API version within the group (`v1`). */
  version: string;
  /** The plural resource name, as served. */
  resource: string;
}

/** Where in a resource a path leads: its collection (in a namespace or not), an object, a subresource. */
export interface ResourcePlace {
  /** The namespace; undefined or "" for a cluster-scoped resource, or across all namespaces. */
  namespace?: string | undefined;
  /** The object's name; undefined for the collection. */
  name?: string | undefined;
  /** A subresource of the object (`status`). */
  subresource?: string | undefined;
}

/** Leases (`coordination.k8s.io/v1`): leader election and the shards' buckets. */
export const LEASES: GroupVersionResource = {
  group: "coordination.k8s.io",
  version: "v1",
  resource: "leases",
};
/** Secrets (core `v1`). */
export const SECRETS: GroupVersionResource = { group: "", version: "v1", resource: "secrets" };
/** Events (core `v1`). */
export const EVENTS: GroupVersionResource = { group: "", version: "v1", resource: "events" };
/** ValidatingWebhookConfigurations (`admissionregistration.k8s.io/v1`, cluster-scoped). */
export const VALIDATING_WEBHOOK_CONFIGURATIONS: GroupVersionResource = {
  group: "admissionregistration.k8s.io",
  version: "v1",
  resource: "validatingwebhookconfigurations",
};

/** The path of a group version's discovery document: `/api/v1` for the core group, else `/apis/<group>/<version>`. */
export function groupVersionPath(group: string, version: string): string {
  return group ? `/apis/${segment(group)}/${segment(version)}` : `/api/${segment(version)}`;
}

/**
 * The API path of `resource` at `place`, e.g. `/apis/apps/v1/namespaces/team-a/deployments/web`.
 * Throws a RangeError for a segment that cannot be one (empty, `.` or `..`: the URL parser would
 * resolve those into another path), which the API server never gives a name.
 */
export function resourcePath(resource: GroupVersionResource, place: ResourcePlace = {}): string {
  let path = groupVersionPath(resource.group, resource.version);
  if (place.namespace) path += `/namespaces/${segment(place.namespace)}`;
  path += `/${segment(resource.resource)}`;
  if (place.name !== undefined) path += `/${segment(place.name)}`;
  if (place.subresource !== undefined) path += `/${segment(place.subresource)}`;
  return path;
}

function segment(text: string): string {
  if (text === "" || text === "." || text === "..")
    throw new RangeError(`${JSON.stringify(text)} cannot be a segment of an API path`);
  return encodeURIComponent(text);
}
