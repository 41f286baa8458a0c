/**
 * What a Referable's `spec.export` makes the controller write, as permissions the author of a
 * change must hold: `create` of the kind in the target's namespace and `patch` of the named
 * object, for every target the Referable names after the change, and `patch` of every target it
 * named before and no longer does (the controller removes its key there). Authorization follows
 * the value, not the field: any change of spec decides what is written into every target, so
 * every target is checked on every such change, not only the ones it adds. The controller writes
 * with its own credentials (only where an administrator opted it in); without this check anyone
 * allowed to update Referables could write through it into any ConfigMap or Secret of an
 * opted-in namespace.
 */
import { EXPORT_KINDS, isExportKind, type ExportKind } from "../api/export-kinds.ts";
import { stableStringify } from "../api/stable-json.ts";
import type { Permission } from "./access-review.ts";
import type { AdmissionRequest } from "./admission-review.ts";

/** Why a Referable may export only where its author may write: the end of every export refusal. */
export const EXPORT_REFUSAL_SUFFIX = "a Referable may only export where its author may create and patch";

/**
 * The permissions the export targets of `request` need: create and patch for each target of the
 * new object, patch for each target of an UPDATE's old object that the new one drops. Called only
 * for a change of spec (an update that leaves spec alone writes nothing new anywhere).
 * Deliberately wider than the controller's own parsing: any entry with a kind it writes and
 * string namespace and name is checked, and a permission is asked once however often it is named.
 */
export function exportPermissions(request: AdmissionRequest): Permission[] {
  const needed = new Map<string, Permission>();
  const add = (p: Permission) => needed.set(stableStringify(p), p);
  const after = targetsOf(request.object);
  for (const t of after) {
    const common = { group: "", version: "v1", resource: resourceOf(t), namespace: t.namespace };
    add({ verb: "create", ...common });
    add({ verb: "patch", ...common, name: t.name });
  }
  if (request.operation === "UPDATE") {
    const kept = new Set(after.map((t) => stableStringify(t)));
    for (const t of targetsOf(request.oldObject)) {
      if (kept.has(stableStringify(t))) continue;
      add({
        verb: "patch",
        group: "",
        version: "v1",
        resource: resourceOf(t),
        namespace: t.namespace,
        name: t.name,
      });
    }
  }
  return [...needed.values()];
}

function resourceOf(t: Target): string {
  return EXPORT_KINDS[t.kind].resource;
}

interface Target {
  kind: ExportKind;
  namespace: string;
  name: string;
}

/** The entries of `object.spec.export` that are objects (the schema refuses anything else). */
export function exportEntries(object: unknown): Array<Record<string, unknown>> {
  const spec = (object as { spec?: unknown } | null | undefined)?.spec;
  const raw = typeof spec === "object" && spec !== null ? (spec as { export?: unknown }).export : undefined;
  if (!Array.isArray(raw)) return [];
  return raw.filter((e): e is Record<string, unknown> => typeof e === "object" && e !== null);
}

function targetsOf(object: unknown): Target[] {
  const targets: Target[] = [];
  for (const e of exportEntries(object)) {
    if ("fieldPath" in e) continue; // a field's target: admission-field-export.ts
    if (!isExportKind(e.kind) || typeof e.namespace !== "string") continue;
    if (typeof e.name !== "string") continue;
    targets.push({ kind: e.kind, namespace: e.namespace, name: e.name });
  }
  return targets;
}
