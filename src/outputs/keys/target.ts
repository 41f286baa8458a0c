/**
 * Where a value is exported: one key of a ConfigMap or a Secret, and how a value becomes the
 * text of that key. Plain values with their own validation, shared by the controller (a
 * Referable's `spec.export`) and the library (`exportValue`).
 */
import { digest } from "../../api/digest.ts";
import { EXPORT_KINDS, isExportKind, type ExportKind } from "../../api/export-kinds.ts";
import { Limits } from "../../api/limits.ts";
import { resourcePath } from "../../kube/resource-path.ts";

export type { ExportKind } from "../../api/export-kinds.ts";

/** One key of one ConfigMap or Secret that receives a value. */
export interface ExportTarget {
  /** `ConfigMap` or `Secret` (core `v1`). */
  kind: ExportKind;
  /** The object's namespace. */
  namespace: string;
  /** The object's name; it is created when missing. */
  name: string;
  /** The key of `data` that holds the value: `[-._a-zA-Z0-9]+`, at most 253 characters. */
  key: string;
}

/** The object a target's key sits in. */
export type TargetObject = Omit<ExportTarget, "key">;

/** Bounds of `spec.export`, the same in the CRD. */
export const ExportLimits = {
  /** Targets of one Referable. */
  targets: Limits.exportTargets,
  /** Characters of a key, as the API server allows in a ConfigMap or Secret. */
  key: Limits.exportKey,
} as const;

export { CREATED_BY_ANNOTATION, EXPORTED_LABEL } from "../../api/referable.ts";

/** A ConfigMap or Secret key, as the API server validates it. */
export const KEY_PATTERN = /^[-._a-zA-Z0-9]+$/;
const DNS1123_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const DNS1123_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

/** The API server's limit on a field manager's name. */
const MAX_FIELD_MANAGER = Limits.fieldManager;
const MANAGER_PREFIX = "referable.dev/";

/**
 * The field manager of the Referable `name`: `referable.dev/<name>` when that fits the API
 * server's 128 characters (no migration for the common case), else `referable.dev/h-` and the
 * SHA-256 of the whole name in hex (80 characters). Unique per name: two Referables never share a
 * manager (and never take each other's keys), and the same name gives the same manager after a
 * restart. A short name of the form `h-<64 hex>` meets a long name's manager only through a
 * SHA-256 preimage.
 */
export function fieldManagerFor(name: string): string {
  const plain = MANAGER_PREFIX + name;
  if (plain.length <= MAX_FIELD_MANAGER) return plain;
  return `${MANAGER_PREFIX}h-${digest(name, 64, "hex")}`;
}

/**
 * The field manager earlier releases gave a name too long for `referable.dev/<name>`: its first
 * 97 characters and 16 hex digits of its SHA-256, which a crafted name of 114 characters could
 * equal. Undefined for a name that fits (its manager never changed). Keys found under it are
 * taken over by {@link fieldManagerFor}'s manager and the old one let go of.
 */
export function legacyFieldManagerFor(name: string): string | undefined {
  if (MANAGER_PREFIX.length + name.length <= MAX_FIELD_MANAGER) return undefined;
  const hash = digest(name, 16, "hex");
  return `${MANAGER_PREFIX}${name.slice(0, MAX_FIELD_MANAGER - MANAGER_PREFIX.length - hash.length - 1)}-${hash}`;
}

/** The text a value is exported as: a string as it is, any other JSON value as its JSON text. */
export function exportText(value: unknown): string {
  return typeof value === "string" ? value : JSON.stringify(value);
}

/** `text` as the object stores it: as it is in a ConfigMap, base64 in a Secret's `data`. */
export function storedText(kind: ExportKind, text: string): string {
  return EXPORT_KINDS[kind].base64 ? Buffer.from(text, "utf8").toString("base64") : text;
}

/** The plural resource of a kind. */
export function resourceOf(kind: ExportKind): "configmaps" | "secrets" {
  return EXPORT_KINDS[kind].resource;
}

/** The API path of the object a target sits in. */
export function objectPath(object: TargetObject): string {
  const resource = { group: "", version: "v1", resource: resourceOf(object.kind) };
  return resourcePath(resource, { namespace: object.namespace, name: object.name });
}

/** `ConfigMap team-b/app-settings`: the object in words, for messages. */
export function describeObject(object: TargetObject): string {
  return `${object.kind} ${object.namespace}/${object.name}`;
}

/** One string per object, to group targets by the object they sit in. */
export function objectKey(object: TargetObject): string {
  return `${object.kind}/${object.namespace}/${object.name}`;
}

/**
 * `raw` as an {@link ExportTarget}, or a message naming the field to fix (`field` is its place,
 * e.g. `spec.export[0]`). The CRD refuses the same; this catches what an older CRD lets by.
 */
export function parseTarget(raw: unknown, field: string): ExportTarget | string {
  if (typeof raw !== "object" || raw === null || Array.isArray(raw)) return `${field} must be an object`;
  const t = raw as Record<string, unknown>;
  if (!isExportKind(t.kind)) return `${field}.kind must be ConfigMap or Secret`;
  if (typeof t.namespace !== "string" || t.namespace.length > 63 || !DNS1123_LABEL.test(t.namespace))
    return `${field}.namespace must be a namespace name (a DNS label of at most 63 characters)`;
  if (typeof t.name !== "string" || t.name.length > 253 || !DNS1123_SUBDOMAIN.test(t.name))
    return `${field}.name must be an object name (a DNS subdomain of at most 253 characters)`;
  if (typeof t.key !== "string" || t.key.length > ExportLimits.key || !KEY_PATTERN.test(t.key))
    return `${field}.key must be 1 to ${ExportLimits.key} characters of letters, digits, '-', '_' or '.'`;
  if (t.key === "." || t.key === "..") return `${field}.key must not be '.' or '..'`;
  return { kind: t.kind, namespace: t.namespace, name: t.name, key: t.key };
}
