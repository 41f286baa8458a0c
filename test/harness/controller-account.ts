/**
 * The controller's identity as deploy/ ships it, for tests that run the controller with RBAC on:
 * the ServiceAccount "controller" of a namespace of its own, and what it is granted.
 */
import type { KubeClient } from "../../src/kube/client.ts";
import { createNamespace, deployBaseRules, serviceAccountToken, tokenClient, uniqueName } from "./kube.ts";
import { bindRole, createRole, serviceAccount } from "./rbac.ts";

export interface ControllerAccount {
  /** The ServiceAccount's namespace. */
  ns: string;
  token: string;
  /** A client with the ServiceAccount's token, for the controller (it never quotes the server's messages). */
  client: KubeClient;
  /**
   * Grants `rules`: a new ClusterRole, bound to the ServiceAccount with a RoleBinding in
   * `namespace`, or cluster-wide when it is undefined. Resolves with the ClusterRole's name.
   */
  grant(rules: unknown[], namespace?: string): Promise<string>;
  /** Binds the ClusterRole `role` to the ServiceAccount in `namespace`; resolves with the RoleBinding's path. */
  bind(role: string, namespace: string, name?: string): Promise<string>;
}

/**
 * Creates the ServiceAccount "controller" in a new namespace named after `prefix`, granted
 * `baseRules` cluster-wide (by default what deploy/base gives the controller: rbac-controller.yaml
 * and the source-reader defaults). Pushes on `cleanup` what a namespace's deletion does not take.
 */
export async function controllerAccount(
  admin: KubeClient,
  prefix: string,
  cleanup: string[],
  baseRules: unknown[] = deployBaseRules("rbac-controller.yaml", "rbac-source-reader-defaults.yaml"),
): Promise<ControllerAccount> {
  const ns = await createNamespace(admin, prefix, cleanup);
  const subjects = [serviceAccount("controller", ns)];
  const bind = (role: string, namespace: string, name = role) =>
    bindRole(admin, name, role, subjects, namespace);
  const grant = async (rules: unknown[], namespace?: string) => {
    const name = uniqueName(`${prefix}-role`);
    cleanup.push(await createRole(admin, name, rules));
    const binding = await bindRole(admin, name, name, subjects, namespace);
    if (!namespace) cleanup.push(binding);
    return name;
  };
  await grant(baseRules);
  const token = await serviceAccountToken(admin, ns, "controller");
  return { ns, token, client: tokenClient(token, undefined, { serverMessages: false }), grant, bind };
}
