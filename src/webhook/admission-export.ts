/**
 * What a Referable's `spec.export` makes the controller write, as permissions its author must
 * hold: `create` of the kind in the target's namespace and `patch` of the named object, for each
 * target new in this request. The controller writes with its own credentials (only where an
 * administrator opted it in); without this check anyone allowed to create Referables could write
 * through it into any ConfigMap or Secret of an opted-in namespace.
 */
import { EXPORT_KINDS, isExportKind, type ExportKind } from "../api/export-kinds.ts";
import { stableStringify } from "../api/stable-json.ts";
import type { Permission } from "./access-review.ts";
import type { AdmissionRequest } from "./admission-review.ts";

/** Why a Referable may export only where its author may write: the end of every export refusal. */
export const EXPORT_REFUSAL_SUFFIX = "a Referable may only export where its author may create and patch";

/**
 * The permissions the export targets of `request` need, for the targets an UPDATE adds (one
 * that leaves a target alone writes nothing new there). Deliberately wider than the controller's
 * own parsing: any entry with a kind it writes and string namespace and name is checked.
 */
export function exportPermissions(request: AdmissionRequest): Permission[] {
  const before = new Set(
    request.operation === "UPDATE" ? targetsOf(request.oldObject).map((t) => stableStringify(t)) : [],
  );
  const needed: Permission[] = [];
  for (const t of targetsOf(request.object)) {
    if (before.has(stableStringify(t))) continue;
    const resource = EXPORT_KINDS[t.kind].resource;
    const common = { group: "", version: "v1", resource, namespace: t.namespace };
    needed.push({ verb: "create", ...common }, { verb: "patch", ...common, name: t.name });
  }
  return needed;
}

interface Target {
  kind: ExportKind;
  namespace: string;
  name: string;
}

function targetsOf(object: unknown): Target[] {
  const spec = (object as { spec?: unknown } | null | undefined)?.spec;
  const raw = typeof spec === "object" && spec !== null ? (spec as { export?: unknown }).export : undefined;
  if (!Array.isArray(raw)) return [];
  const targets: Target[] = [];
  for (const entry of raw) {
    if (typeof entry !== "object" || entry === null) continue;
    const e = entry as Record<string, unknown>;
    if (!isExportKind(e.kind) || typeof e.namespace !== "string") continue;
    if (typeof e.name !== "string") continue;
    targets.push({ kind: e.kind, namespace: e.namespace, name: e.name });
  }
  return targets;
}
