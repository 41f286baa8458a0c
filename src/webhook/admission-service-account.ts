/**
 * `spec.serviceAccountRef`: the ServiceAccount a Referable reads and writes as. Naming one lets the
 * controller act with that account's rights, so only a requester who may act as it may name it:
 * Kubernetes' own meaning of "may act as" is the verb `impersonate` on that ServiceAccount. The
 * field is read from the admitted object's JSON here (not from the controller's typed spec), so
 * this check is exactly what the API server stored, whatever version of the CRD served it.
 */
import type { ServiceAccountRef } from "../api/referable.ts";
import type { Permission } from "./access-review.ts";
import type { AdmissionRequest } from "./admission-review.ts";

/** Why naming a ServiceAccount needs `impersonate` on it: the end of every such refusal. */
export const SERVICE_ACCOUNT_REFUSAL_SUFFIX =
  "a Referable with spec.serviceAccountRef reads and writes as that ServiceAccount, so only who may impersonate it may name it";

/**
 * The ServiceAccount `object` names, undefined when it names none, or a message saying what to
 * fix when spec.serviceAccountRef is there but does not name one (the webhook refuses it: an
 * account it cannot check is not one it lets by).
 */
export function serviceAccountRefOf(object: unknown): ServiceAccountRef | undefined | string {
  const spec = (object as { spec?: unknown } | null | undefined)?.spec;
  if (typeof spec !== "object" || spec === null) return undefined;
  const ref = (spec as { serviceAccountRef?: unknown }).serviceAccountRef;
  if (ref === undefined || ref === null) return undefined;
  const r = ref as { namespace?: unknown; name?: unknown };
  if (
    typeof ref !== "object" ||
    Array.isArray(ref) ||
    typeof r.namespace !== "string" ||
    r.namespace === "" ||
    typeof r.name !== "string" ||
    r.name === ""
  )
    return "spec.serviceAccountRef must name a ServiceAccount by namespace and name";
  return { namespace: r.namespace, name: r.name };
}

/**
 * The `impersonate` permission a create or update needs: when it sets spec.serviceAccountRef, or
 * changes it to another account. None when the account is unchanged or removed (a Referable that
 * names none acts as the default account, or the controller, which its author may not choose).
 * A string when the reference does not name an account.
 */
export function impersonatePermission(request: AdmissionRequest): Permission | undefined | string {
  const after = serviceAccountRefOf(request.object);
  if (after === undefined || typeof after === "string") return after;
  if (request.operation === "UPDATE") {
    const before = serviceAccountRefOf(request.oldObject);
    if (typeof before === "object" && before.namespace === after.namespace && before.name === after.name)
      return undefined;
  }
  return {
    verb: "impersonate",
    group: "",
    version: "v1",
    resource: "serviceaccounts",
    namespace: after.namespace,
    name: after.name,
  };
}

/** What to grant so that `p` (from {@link impersonatePermission}) is allowed, for the refusal message. */
export function impersonateGrantHint(p: Permission): string {
  return `grant it with a Role in namespace ${JSON.stringify(p.namespace)} with apiGroups [""], resources [serviceaccounts], resourceNames [${JSON.stringify(p.name)}], verbs [impersonate], and a RoleBinding of that Role to the user`;
}
