/**
 * Asks the API server whether a user may do one thing, with a SubjectAccessReview: the same
 * authorizer chain (RBAC, webhooks, Node) that would judge the user's own request decides, so
 * the webhook never re-implements RBAC.
 */
import type { KubeClient } from "../kube/client.ts";
import type { UserInfo } from "./admission-review.ts";

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

/** What the API server answered. */
export interface AccessDecision {
  allowed: boolean;
  /** The authorizer's explanation, when it gave one (for logs, not for users). */
  reason?: string;
}

const SAR_PATH = "/apis/authorization.k8s.io/v1/subjectaccessreviews";

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

/**
 * Posts a SubjectAccessReview for `user` and `permission`. Throws the client's error when the
 * review cannot be made (the caller must then refuse: a check that cannot run is not a yes).
 */
export async function reviewAccess(
  client: Pick<KubeClient, "request">,
  user: UserInfo,
  permission: Permission,
  signal?: AbortSignal,
): Promise<AccessDecision> {
  const resourceAttributes: Record<string, string> = {
    verb: permission.verb,
    group: permission.group,
    version: permission.version,
    resource: permission.resource,
  };
  if (permission.namespace) resourceAttributes.namespace = permission.namespace;
  if (permission.name !== undefined) resourceAttributes.name = permission.name;
  const spec: Record<string, unknown> = { resourceAttributes };
  if (user.username) spec.user = user.username;
  if (user.uid) spec.uid = user.uid;
  if (user.groups?.length) spec.groups = user.groups;
  if (user.extra && Object.keys(user.extra).length) spec.extra = user.extra;
  const review = await client.request<{
    status?: { allowed?: boolean; denied?: boolean; reason?: string; evaluationError?: string };
  }>("POST", SAR_PATH, {
    body: { apiVersion: "authorization.k8s.io/v1", kind: "SubjectAccessReview", spec },
    ...(signal ? { signal } : {}),
  });
  const status = review?.status ?? {};
  const decision: AccessDecision = { allowed: status.allowed === true };
  const reason = status.reason || status.evaluationError;
  if (reason) decision.reason = reason;
  return decision;
}
