/**
 * Where a value is delivered as a field: one field of one existing object of any kind, named by
 * apiVersion, kind, namespace, name and a write path. Plain values with their own validation,
 * shared by the controller (a Referable's `spec.export`) and the library (`exportValue`).
 *
 * A write path is the field-path syntax of a reference reduced to what server-side apply can own
 * on its own: dotted names and `[map keys]` (`spec.forProvider.sourceLocationArn`,
 * `spec.template.metadata.annotations[example.com/db-host]`). No list index (a list item is
 * owned by its merge key, not its position), no filter, no JSONPath; nothing under `status`
 * (written through its subresource, by the object's own controller) and nothing of `metadata`
 * but one label or annotation.
 *
 * Nothing a field target names may steer a controller ({@link steeringTarget}): no object of the
 * `referable.dev` group (a Referable exporting into `spec.source` or `spec.export` of another
 * would make the controller read or write, with its own rights, what its author named), no RBAC
 * object, admission configuration, CustomResourceDefinition, Namespace or Lease.
 */
import type { Referable } from "../../api/referable.ts";
import { Limits } from "../../api/limits.ts";
import { isResolutionError } from "../../api/errors.ts";
import { readBracketMember, readFieldName } from "../../fieldpath/member.ts";
import { Scanner } from "../../fieldpath/scanner.ts";

/** How a field follows the value. */
export type FieldPolicy = "Always" | "IfNotPresent";

/** One field of one existing object that receives a value. */
export interface FieldTarget {
  /** The object's apiVersion (`datasync.aws.upbound.io/v1beta1`, `apps/v1`). */
  apiVersion: string;
  /** The object's kind (`Task`, `Deployment`). */
  kind: string;
  /** The object's namespace; absent (or "") for a cluster-scoped kind. */
  namespace?: string;
  /** The object's name: it must exist, it is never created. */
  name: string;
  /** The field, as dotted names and `[map keys]`; see the module comment. */
  fieldPath: string;
  /**
   * `Always`: the field follows the value, and is released when there is none.
   * `IfNotPresent`: filled once when nobody has set it, never overridden, kept. @default "Always"
   */
  policy?: FieldPolicy;
}

/** A target with its path parsed and its policy defaulted. */
export interface ParsedFieldTarget extends FieldTarget {
  namespace: string;
  policy: FieldPolicy;
  /** The path's members, outermost first. */
  path: string[];
}

/** The object a field sits in. */
export type FieldObject = Pick<FieldTarget, "apiVersion" | "kind" | "name"> & { namespace: string };

const DNS1123_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const DNS1123_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const KIND = /^[A-Za-z][A-Za-z0-9]{0,62}$/;
const API_VERSION = /^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\/)?[a-z0-9]{1,63}$/;

/**
 * API groups no field is ever exported into, each with why: what is written there steers a
 * controller (this one, or the API server's own authorization and admission), not an application.
 * Leases are refused in every namespace, not only the controller's own: neither the CRD nor the
 * library knows which namespace that is, and every Lease elects the leader of some controller.
 */
const STEERING_GROUPS: ReadonlyArray<{ group: RegExp; what: string }> = [
  {
    // The group itself, not groups under it (demo.referable.dev of the examples is an
    // application's API group like any other).
    group: /^referable\.dev$/,
    what: "objects of the referable.dev group steer this controller (a Referable's spec decides what it reads and writes, with its own rights)",
  },
  {
    group: /^rbac\.authorization\.k8s\.io$/,
    what: "RBAC objects (rbac.authorization.k8s.io) decide who may do what",
  },
  {
    group: /^admissionregistration\.k8s\.io$/,
    what: "admission configurations (admissionregistration.k8s.io) decide what the API server accepts",
  },
  {
    group: /^apiextensions\.k8s\.io$/,
    what: "CustomResourceDefinitions (apiextensions.k8s.io) define the API and its validation",
  },
  {
    group: /^coordination\.k8s\.io$/,
    what: "Leases (coordination.k8s.io) elect the leaders of controllers, this one's among them",
  },
];

/**
 * Why no field of an object of `apiVersion`/`kind` may be exported into, or undefined when one
 * may. The CRD refuses the same (x-kubernetes-validations on spec.export); this catches what an
 * older CRD lets by, and the library's targets.
 */
export function steeringTarget(apiVersion: string, kind: string): string | undefined {
  const slash = apiVersion.indexOf("/");
  const group = slash < 0 ? "" : apiVersion.slice(0, slash);
  if (group === "" && kind.toLowerCase() === "namespace")
    return "Namespaces decide where everything else lives and who administers it";
  return STEERING_GROUPS.find((g) => g.group.test(group))?.what;
}

/**
 * The message refusing a target of `apiVersion`/`kind` at `field` (`spec.export[0]`), or
 * undefined when {@link steeringTarget} allows it: shared by the controller, the library and the
 * webhook, so each says the same.
 */
export function steeringProblem(apiVersion: string, kind: string, field: string): string | undefined {
  const why = steeringTarget(apiVersion, kind);
  if (why === undefined) return undefined;
  return `${field} must not name a ${kind} of ${apiVersion}: no value is exported into such an object, because ${why}; export into the application's own objects instead`;
}

/** Whether a spec.export entry names a field (rather than a ConfigMap or Secret key). */
export function isFieldEntry(raw: unknown): boolean {
  return typeof raw === "object" && raw !== null && "fieldPath" in raw;
}

/**
 * The members of a write path, or a message saying what to fix. `field` names the place
 * (`spec.export[0].fieldPath`).
 */
export function parseWritePath(fieldPath: string, field = "fieldPath"): string[] | string {
  if (fieldPath.length === 0 || fieldPath.length > Limits.fieldPath)
    return `${field} must be 1 to ${Limits.fieldPath} characters`;
  if (fieldPath.startsWith("$") || fieldPath.startsWith("{"))
    return `${field} must be dotted names and [map keys], not JSONPath`;
  const members: string[] = [];
  try {
    const s = new Scanner(fieldPath, 0, fieldPath.length);
    if (s.peek() === "[") s.fail("a field name");
    members.push(readFieldName(s));
    while (!s.atEnd()) {
      if (s.eat(".")) members.push(readFieldName(s));
      else if (s.eat("[")) {
        if (s.peek() === "?")
          return `${field} must not hold a filter ([?(...)]): a field to write is named by dotted names and [map keys]`;
        const member = readBracketMember(s);
        if (member.kind === "index")
          return `${field} must not hold a list index ([${member.key}]): a list item is not a field the Referable can own; name a field of a map or an object (quote a map key made of digits: ['${member.key}'])`;
        members.push(member.key);
      } else s.fail(`".", "[" or the end of the path`);
    }
  } catch (err) {
    if (isResolutionError(err)) return `${field}: ${err.message}`;
    throw err;
  }
  const top = members[0]!;
  if (top === "status")
    return `${field} must not be under status: status is written by the object's own controller`;
  if (top === "apiVersion" || top === "kind")
    return `${field} must name a field of the object, not its ${top}`;
  if (top === "metadata") {
    const ok = members.length === 3 && (members[1] === "labels" || members[1] === "annotations");
    if (!ok) return `${field} may name only one label or annotation of metadata (metadata.annotations[key])`;
  }
  if (members.length < 2) return `${field} must name a field inside ${top} (e.g. ${top}.name), not all of it`;
  return members;
}

/**
 * `raw` (an entry of spec.export with a fieldPath) as a {@link ParsedFieldTarget}, or a message
 * naming what to fix (`field` is its place, e.g. `spec.export[0]`). The CRD refuses the same;
 * this catches what an older CRD lets by.
 */
export function parseFieldTarget(raw: unknown, field: string): ParsedFieldTarget | string {
  if (typeof raw !== "object" || raw === null || Array.isArray(raw)) return `${field} must be an object`;
  const t = raw as Record<string, unknown>;
  if (typeof t.apiVersion !== "string" || t.apiVersion.length > 253 || !API_VERSION.test(t.apiVersion))
    return `${field}.apiVersion must be an apiVersion (group/version, or v1)`;
  if (typeof t.kind !== "string" || !KIND.test(t.kind)) return `${field}.kind must be a kind (e.g. Task)`;
  const steering = steeringProblem(t.apiVersion, t.kind, field);
  if (steering !== undefined) return steering;
  const namespace = t.namespace ?? "";
  if (
    typeof namespace !== "string" ||
    (namespace !== "" && (namespace.length > 63 || !DNS1123_LABEL.test(namespace)))
  )
    return `${field}.namespace must be a namespace name (a DNS label of at most 63 characters)`;
  if (typeof t.name !== "string" || t.name.length > 253 || !DNS1123_SUBDOMAIN.test(t.name))
    return `${field}.name must be an object name (a DNS subdomain of at most 253 characters)`;
  if (t.key !== undefined)
    return `${field}: set either key (a ConfigMap or Secret key) or fieldPath, not both`;
  if (typeof t.fieldPath !== "string") return `${field}.fieldPath must be a string`;
  const path = parseWritePath(t.fieldPath, `${field}.fieldPath`);
  if (typeof path === "string") return path;
  if (isSecret({ apiVersion: t.apiVersion, kind: t.kind }) && path[0] === "stringData")
    return `${field}.fieldPath must not be under stringData: the API server never stores stringData (it moves it into data), so the field would be written again and again; name data.<key> with a base64 transform (spec.transform: base64.encode(bytes(value))), or export to a key of the Secret (key instead of fieldPath)`;
  const policy = t.policy ?? "Always";
  if (policy !== "Always" && policy !== "IfNotPresent")
    return `${field}.policy must be Always or IfNotPresent`;
  return {
    apiVersion: t.apiVersion,
    kind: t.kind,
    namespace,
    name: t.name,
    fieldPath: t.fieldPath,
    policy,
    path,
  };
}

/** Whether the object a field target names is a Secret (core group, v1). */
export function isSecret(o: Pick<FieldTarget, "apiVersion" | "kind">): boolean {
  return o.apiVersion === "v1" && o.kind === "Secret";
}

/** One string per object, to group fields by the object they sit in. */
export function fieldObjectKey(o: FieldObject): string {
  return `${o.apiVersion}/${o.kind}/${o.namespace}/${o.name}`;
}

/** One string per field of an object. */
export function fieldKey(o: FieldObject, fieldPath: string): string {
  return `${fieldObjectKey(o)}#${fieldPath}`;
}

/** `Task team-b/datasync-task` (`ClusterRole admin` when cluster-scoped): the object in words. */
export function describeFieldObject(o: FieldObject): string {
  return `${o.kind} ${o.namespace ? `${o.namespace}/` : ""}${o.name}`;
}

/** The JSON an apply (or a merge patch) sets `value` at `path` with. */
export function nest(path: readonly string[], value: unknown): Record<string, unknown> {
  let out: unknown = value;
  for (let i = path.length - 1; i >= 0; i--) {
    // No prototype: "__proto__" is a valid annotation key and an assignment must not drop it.
    const level: Record<string, unknown> = Object.create(null);
    level[path[i]!] = out;
    out = level;
  }
  return out as Record<string, unknown>;
}

/**
 * Merges nested `b` into `a` (both from {@link nest}): the fields of one object in one body.
 * Paths of one object never overlap (see {@link overlapping}), so no value is merged into.
 */
export function mergeInto(a: Record<string, unknown>, b: Record<string, unknown>): void {
  for (const k of Object.keys(b)) {
    const existing = a[k];
    const v = b[k];
    if (isPlainObject(existing) && isPlainObject(v)) mergeInto(existing, v);
    else a[k] = v;
  }
}

/** Two paths of which one holds the other (`spec.a` and `spec.a.b`): never written together. */
export function overlapping(a: readonly string[], b: readonly string[]): boolean {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) if (a[i] !== b[i]) return false;
  return true;
}

/** What is at `path` in `obj`: `{ found: false }` when some member is missing. */
export function valueAt(obj: unknown, path: readonly string[]): { found: boolean; value?: unknown } {
  let v = obj;
  for (const m of path) {
    if (!isPlainObject(v) || !Object.hasOwn(v, m)) return { found: false };
    v = v[m];
  }
  return { found: true, value: v };
}

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** The field targets of a Referable's spec.export, or a message saying what to fix in them. */
export function fieldTargetsOf(obj: Pick<Referable, "spec">): ParsedFieldTarget[] | string {
  const targets: ParsedFieldTarget[] = [];
  for (const [i, e] of (obj.spec?.export ?? []).entries()) {
    if (!isFieldEntry(e)) continue;
    const parsed = parseFieldTarget(e, `spec.export[${i}]`);
    if (typeof parsed === "string") return parsed;
    const clash = targets.find(
      (t) => fieldObjectKey(t) === fieldObjectKey(parsed) && overlapping(t.path, parsed.path),
    );
    if (clash)
      return `spec.export[${i}].fieldPath ${JSON.stringify(parsed.fieldPath)} overlaps ${JSON.stringify(clash.fieldPath)} of the same object: name each field once, and none inside another`;
    targets.push(parsed);
  }
  return targets;
}
