/**
 * What the fields of a Referable's `spec.export` make the controller write, as permissions the
 * author of a change must hold: `patch` of every object a field is exported into after the change,
 * and of every object whose field the change drops (the controller releases it there). The same
 * rule as keys (admission-export.ts: authorization follows the value, so every target is checked
 * on every change of spec), without `create`: an object is never created for a field.
 *
 * The kind is mapped to its resource through discovery, never a guessed plural. A kind not served
 * yet is asked about as every resource of its API group there, the one question whose answer
 * covers whatever the resource turns out to be.
 */
import { stableStringify } from "../api/stable-json.ts";
import { isResolutionError } from "../api/errors.ts";
import { parseApiVersion, type KindResolver } from "../kube/discovery.ts";
import type { Permission } from "./access-review.ts";
import { exportEntries } from "./admission-export.ts";
import type { AdmissionRequest } from "./admission-review.ts";

interface FieldTargetRef {
  apiVersion: string;
  kind: string;
  namespace: string;
  name: string;
}

/**
 * The permissions the field targets of `request` need. Throws what discovery throws for a reason
 * other than a kind not served (the caller refuses: a check that cannot run is not a yes).
 * Deliberately wider than the controller's parsing: any entry with a fieldPath and string
 * apiVersion, kind and name is checked.
 */
export async function fieldExportPermissions(
  request: AdmissionRequest,
  discovery: KindResolver,
): Promise<Permission[]> {
  const objects = request.operation === "UPDATE" ? [request.object, request.oldObject] : [request.object];
  return patchPermissions(objects, discovery, "group");
}

/**
 * The permissions deleting the Referable of a DELETE request (its `oldObject`) needs: `patch` of
 * every object one of its fields sits in, since deleting it releases them there. A kind not served
 * is skipped: the controller releases nothing in it (there is nothing it can write to).
 */
export async function deletePermissions(
  request: AdmissionRequest,
  discovery: KindResolver,
): Promise<Permission[]> {
  return patchPermissions([request.oldObject], discovery, "skip");
}

async function patchPermissions(
  objects: unknown[],
  discovery: KindResolver,
  notServed: "group" | "skip",
): Promise<Permission[]> {
  const targets = new Map<string, FieldTargetRef>();
  for (const o of objects) for (const t of fieldTargetsOf(o)) targets.set(stableStringify(t), t);
  const needed = new Map<string, Permission>();
  for (const t of targets.values()) {
    const p = await patchPermission(t, discovery, notServed);
    if (p) needed.set(stableStringify(p), p);
  }
  return [...needed.values()];
}

async function patchPermission(
  t: FieldTargetRef,
  discovery: KindResolver,
  notServed: "group" | "skip",
): Promise<Permission | undefined> {
  try {
    const info = await discovery.lookup(t.apiVersion, t.kind);
    return {
      verb: "patch",
      group: info.group,
      version: info.version,
      resource: info.resource,
      namespace: info.namespaced ? t.namespace : "",
      name: t.name,
    };
  } catch (err) {
    // An apiVersion that cannot be one: the controller writes nothing there (InvalidSpec).
    if (isResolutionError(err) && err.reason === "InvalidSpec") return undefined;
    if (!(isResolutionError(err) && err.reason === "KindNotFound")) throw err;
    if (notServed === "skip") return undefined;
    const { group, version } = parseApiVersion(t.apiVersion);
    return { verb: "patch", group, version, resource: "*", namespace: t.namespace };
  }
}

function fieldTargetsOf(object: unknown): FieldTargetRef[] {
  const out: FieldTargetRef[] = [];
  for (const e of exportEntries(object)) {
    if (!("fieldPath" in e)) continue;
    if (typeof e.apiVersion !== "string" || typeof e.kind !== "string" || typeof e.name !== "string")
      continue;
    out.push({
      apiVersion: e.apiVersion,
      kind: e.kind,
      namespace: typeof e.namespace === "string" ? e.namespace : "",
      name: e.name,
    });
  }
  return out;
}
