/**
 * A ServiceAccount as the identity a Referable (or a library caller) acts as: its name checked
 * where it enters, the user and groups the API server gives it, and how messages name it.
 */
import type { ServiceAccountRef } from "./referable.ts";

export type { ServiceAccountRef } from "./referable.ts";

/** A namespace's name (a DNS label) and a ServiceAccount's (a DNS subdomain), as the API server checks them. */
const DNS_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

/**
 * What is wrong with `ref` as a ServiceAccount reference (`where` names it in the message), or
 * undefined when it is a namespace (a DNS label, at most 63 characters) and a name (a DNS
 * subdomain, at most 253).
 */
export function serviceAccountProblem(ref: unknown, where: string): string | undefined {
  if (typeof ref !== "object" || ref === null || Array.isArray(ref))
    return `${where} must be an object with a namespace and a name`;
  const { namespace, name } = ref as Record<string, unknown>;
  for (const key of Object.keys(ref))
    if (key !== "namespace" && key !== "name")
      return `${where} has an unknown field ${JSON.stringify(key.slice(0, 64))}: it takes namespace and name`;
  if (typeof namespace !== "string" || namespace.length > 63 || !DNS_LABEL.test(namespace))
    return `${where}.namespace must be a namespace's name (a DNS label of at most 63 characters)`;
  if (typeof name !== "string" || name.length > 253 || !DNS_SUBDOMAIN.test(name))
    return `${where}.name must be a ServiceAccount's name (a DNS subdomain of at most 253 characters)`;
  return undefined;
}

/** Parses `NAMESPACE/NAME` (the --default-service-account flag); throws with what is wrong. */
export function parseServiceAccount(text: string): ServiceAccountRef {
  const parts = text.split("/");
  if (parts.length !== 2) throw new Error(`${JSON.stringify(text)} is not NAMESPACE/NAME`);
  const ref = { namespace: parts[0]!, name: parts[1]! };
  const problem = serviceAccountProblem(ref, "the ServiceAccount");
  if (problem) throw new Error(`${JSON.stringify(text)}: ${problem}`);
  return ref;
}

/** The user the API server authenticates a ServiceAccount as: `system:serviceaccount:NS:NAME`. */
export function serviceAccountUser(ref: ServiceAccountRef): string {
  return `system:serviceaccount:${ref.namespace}:${ref.name}`;
}

/** The groups every ServiceAccount of `ref`'s namespace is in, as the API server gives them. */
export function serviceAccountGroups(ref: ServiceAccountRef): string[] {
  return ["system:serviceaccounts", `system:serviceaccounts:${ref.namespace}`, "system:authenticated"];
}

/** How messages name the account: `serviceaccount team-a/reader`. */
export function describeServiceAccount(ref: ServiceAccountRef): string {
  return `serviceaccount ${ref.namespace}/${ref.name}`;
}

/**
 * The account a Referable acts as: its `spec.serviceAccountRef`, else `fallback` (the
 * controller's --default-service-account), else none (the controller's own rights). A string:
 * what is wrong with the reference (InvalidSpec).
 */
export function actingAccount(
  spec: { serviceAccountRef?: unknown } | undefined,
  fallback: ServiceAccountRef | undefined,
): ServiceAccountRef | string | undefined {
  const ref = spec?.serviceAccountRef;
  if (ref === undefined) return fallback;
  return serviceAccountProblem(ref, "spec.serviceAccountRef") ?? (ref as ServiceAccountRef);
}
