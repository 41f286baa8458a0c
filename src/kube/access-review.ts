/**
 * One SubjectAccessReview (authorization.k8s.io/v1): whether a user may do one thing, asked of
 * the API server, so the authorizer chain that would judge the user's own request (RBAC,
 * webhooks, Node) decides and nothing here re-implements RBAC. The one place the review is made:
 * the webhook asks it for a requester, the resolver's access reviews for a ServiceAccount.
 */
import type { KubeClient } from "./client.ts";

/** Who is asked about, as the API server authenticates them (an admission request's userInfo). */
export interface ReviewSubject {
  username?: string | undefined;
  uid?: string | undefined;
  groups?: string[] | undefined;
  extra?: Record<string, string[]> | undefined;
}

/** What is asked: a verb on a resource, in a namespace ("" cluster-wide), on one object or all. */
export interface ReviewAttributes {
  verb: string;
  /** API group, "" for the core group. */
  group: string;
  version?: string | undefined;
  /** The plural resource as discovery serves it, or "*" for every resource of the group. */
  resource: string;
  /** "" (or absent) for cluster-wide. */
  namespace?: string | undefined;
  /** One object, when set. */
  name?: string | undefined;
}

/** What the API server answered. */
export interface AccessDecision {
  allowed: boolean;
  /** The authorizer's explanation, when it gave one (for logs, not for users). */
  reason?: string;
}

const SAR_PATH = "/apis/authorization.k8s.io/v1/subjectaccessreviews";

/**
 * Posts a SubjectAccessReview for `subject` and `attributes`. Throws the client's error when the
 * review cannot be made (the caller must then refuse: a check that cannot run is not a yes).
 */
export async function subjectAccessReview(
  client: Pick<KubeClient, "request">,
  subject: ReviewSubject,
  attributes: ReviewAttributes,
  signal?: AbortSignal,
): Promise<AccessDecision> {
  const resourceAttributes: Record<string, string> = {
    verb: attributes.verb,
    group: attributes.group,
    resource: attributes.resource,
  };
  if (attributes.version !== undefined) resourceAttributes.version = attributes.version;
  if (attributes.namespace) resourceAttributes.namespace = attributes.namespace;
  if (attributes.name !== undefined) resourceAttributes.name = attributes.name;
  const spec: Record<string, unknown> = { resourceAttributes };
  if (subject.username) spec.user = subject.username;
  if (subject.uid) spec.uid = subject.uid;
  if (subject.groups?.length) spec.groups = subject.groups;
  if (subject.extra && Object.keys(subject.extra).length) spec.extra = subject.extra;
  const review = await client.request<{
    status?: { allowed?: boolean; denied?: boolean; reason?: string; evaluationError?: string };
  }>("POST", SAR_PATH, {
    body: { apiVersion: "authorization.k8s.io/v1", kind: "SubjectAccessReview", spec },
    signal,
  });
  const status = review?.status ?? {};
  const decision: AccessDecision = { allowed: status.allowed === true };
  const reason = status.reason || status.evaluationError;
  if (reason) decision.reason = reason;
  return decision;
}
