/**
 * The permissions the webhook asks the API server about for a requester (with one
 * SubjectAccessReview each, src/kube/access-review.ts), and how a refusal names them.
 */

/**
 * One permission a source (get, list), an export target (create, patch) or a ServiceAccount a
 * Referable acts as (impersonate) needs its author to hold.
 */
export interface Permission {
  verb: "get" | "list" | "create" | "patch" | "impersonate";
  /** API group, "" for the core group. */
  group: string;
  version: string;
  /** The plural resource as discovery serves it, or "*" for every resource of the group. */
  resource: string;
  /** "" for cluster-wide (a cluster-scoped kind, or a namespaced kind without a namespace). */
  namespace: string;
  /** Set for `get` on one object. */
  name?: string;
}

/**
 * `get configmaps "db" in namespace "team-a"`, `list namespaces cluster-wide`: the permission in
 * words, as the refusal message names it.
 */
export function describePermission(p: Permission): string {
  const what =
    p.resource === "*"
      ? `every resource of API group ${JSON.stringify(p.group)}`
      : p.group
        ? `${p.resource}.${p.group}`
        : p.resource;
  const name = p.name !== undefined ? ` ${JSON.stringify(p.name)}` : "";
  const where = p.namespace ? ` in namespace ${JSON.stringify(p.namespace)}` : " cluster-wide";
  return `${p.verb} ${what}${name}${where}`;
}
