/**
 * RBAC for integration tests: a (Cluster)Role and its binding, as the admin. Each returns the
 * path it created, for the test's cleanup.
 */
import { compileLabelSelector, type LabelSelector } from "../../src/informers/label-selector.ts";
import type { KubeClient, KubeObject } from "../../src/kube/client.ts";

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

/** A PolicyRule as the API server returns it. */
export type PolicyRule = Record<string, unknown>;

/**
 * Does for one aggregated ClusterRole what kube-controller-manager's clusterrole-aggregation
 * controller does, because no controller-manager runs here and kube-apiserver never fills an
 * aggregated role by itself (checked on v1.36: after applying deploy/, even the built-in
 * `admin` role reads back with no rules). Same algorithm as that controller: every ClusterRole
 * that one of `aggregationRule.clusterRoleSelectors` selects, in name order, each rule once,
 * server-side applied with force under its field manager. What this proves is that the
 * manifests' labels and selectors aggregate into the permissions the controller needs, and that
 * the controller follows a change of them. Call it wherever the real controller would react:
 * after each change to a labeled ClusterRole.
 */
export async function aggregateClusterRole(client: KubeClient, name: string): Promise<PolicyRule[]> {
  const role = await client.request<
    KubeObject & { aggregationRule?: { clusterRoleSelectors?: LabelSelector[] } }
  >("GET", `/apis/rbac.authorization.k8s.io/v1/clusterroles/${name}`);
  const selectors = (role.aggregationRule?.clusterRoleSelectors ?? []).map((s) => compileLabelSelector(s));
  const all = await client.request<{ items: Array<KubeObject & { rules?: PolicyRule[] }> }>(
    "GET",
    "/apis/rbac.authorization.k8s.io/v1/clusterroles",
  );
  const selected = all.items
    .filter((r) => r.metadata?.name !== name)
    .filter((r) => selectors.some((s) => s.matches(r.metadata?.labels)))
    .sort((a, b) => a.metadata!.name!.localeCompare(b.metadata!.name!));
  const rules: PolicyRule[] = [];
  for (const rule of selected.flatMap((r) => r.rules ?? [])) {
    if (!rules.some((r) => JSON.stringify(r) === JSON.stringify(rule))) rules.push(rule);
  }
  await client.request("PATCH", `/apis/rbac.authorization.k8s.io/v1/clusterroles/${name}`, {
    query: { fieldManager: "clusterrole-aggregation-controller", force: true },
    contentType: "application/apply-patch+yaml",
    body: { apiVersion: "rbac.authorization.k8s.io/v1", kind: "ClusterRole", metadata: { name }, rules },
  });
  return rules;
}
