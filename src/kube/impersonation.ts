/**
 * A client that sends every request as a ServiceAccount (impersonation headers), sharing the
 * connection pool of the client it wraps: the API server's RBAC and every admission plugin then
 * judge each request as the account's own.
 */
import { serviceAccountUser, type ServiceAccountRef } from "../api/service-account.ts";
import type { Impersonation, KubeClient, RequestOptions } from "./client.ts";

/**
 * The impersonation headers of a ServiceAccount: its user alone. The API server gives an
 * impersonated ServiceAccount its groups itself (`system:serviceaccounts`,
 * `system:serviceaccounts:NS`, `system:authenticated`) when no group is sent, so impersonating
 * one needs `impersonate` on `serviceaccounts` only; naming the groups would need `impersonate`
 * on those groups as well, a wider right for the same identity.
 */
export function impersonationOf(ref: ServiceAccountRef): Impersonation {
  return { user: serviceAccountUser(ref), groups: [] };
}

/** `client`, sending every request as `ref`; `client` itself when there is no account. */
export function actingAs(
  client: Pick<KubeClient, "request">,
  ref: ServiceAccountRef | undefined,
): Pick<KubeClient, "request"> {
  if (!ref) return client;
  const impersonate = impersonationOf(ref);
  return {
    request: <T>(method: string, path: string, options: RequestOptions = {}) =>
      client.request<T>(method, path, { ...options, impersonate }),
  } as Pick<KubeClient, "request">;
}
