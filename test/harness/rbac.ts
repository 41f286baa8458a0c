/**
 * RBAC for integration tests: a (Cluster)Role and its binding, as the admin. Each returns the
 * path it created, for the test's cleanup.
 */
import type { KubeClient } from "../../src/kube/client.ts";

/** The RBAC API's path. */
export const RBAC = "/apis/rbac.authorization.k8s.io/v1";

/** A PolicyRule. */
export type Rule = { apiGroups: string[]; resources: string[]; verbs: string[]; resourceNames?: string[] };

/** Who a binding names: a ServiceAccount or a User. */
export type Subject =
  | { kind: "ServiceAccount"; name: string; namespace: string }
  | { kind: "User"; name: string; apiGroup: "rbac.authorization.k8s.io" };

/** A ServiceAccount as a binding's subject. */
export function serviceAccount(name: string, namespace: string): Subject {
  return { kind: "ServiceAccount", name, namespace };
}

/** A (possibly impersonated) user as a binding's subject. */
export function user(name: string): Subject {
  return { kind: "User", name, apiGroup: "rbac.authorization.k8s.io" };
}

const base = (namespace: string | undefined) => (namespace ? `${RBAC}/namespaces/${namespace}` : RBAC);

/** Creates a Role in `namespace`, or a ClusterRole when it is undefined, holding `rules`. */
export async function createRole(
  admin: KubeClient,
  name: string,
  rules: unknown[],
  namespace?: string,
): Promise<string> {
  const kind = namespace ? "Role" : "ClusterRole";
  const path = `${base(namespace)}/${kind.toLowerCase()}s`;
  await admin.request("POST", path, {
    body: { apiVersion: "rbac.authorization.k8s.io/v1", kind, metadata: { name }, rules },
  });
  return `${path}/${name}`;
}

/**
 * Binds `role` (a ClusterRole unless `roleKind` says Role) to `subjects`: with a RoleBinding in
 * `namespace`, or a ClusterRoleBinding when it is undefined.
 */
export async function bindRole(
  admin: KubeClient,
  name: string,
  role: string,
  subjects: Subject[],
  namespace?: string,
  roleKind: "ClusterRole" | "Role" = "ClusterRole",
): Promise<string> {
  const kind = namespace ? "RoleBinding" : "ClusterRoleBinding";
  const path = `${base(namespace)}/${kind.toLowerCase()}s`;
  await admin.request("POST", path, {
    body: {
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind,
      metadata: { name },
      roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: roleKind, name: role },
      subjects,
    },
  });
  return `${path}/${name}`;
}
