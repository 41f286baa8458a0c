/**
 * The kinds spec.export writes into, and everything that differs between them, in one table:
 * adding a kind (or a new output's target) is one entry here, not a switch in every file.
 */

/** The kinds a value can be exported into. */
export type ExportKind = "ConfigMap" | "Secret";

/** What the controller needs to know of one export kind. */
export interface ExportKindInfo {
  /** The plural resource (core group, v1). */
  resource: "configmaps" | "secrets";
  /** Whether `data` holds base64 (a Secret) rather than the text itself. */
  base64: boolean;
  /** Whether the controller writes it only when started with --allow-secret-export. */
  needsSecretExport: boolean;
  /** What an administrator applies to let the controller write there. */
  optIn: string;
}

/** Every export kind; see {@link ExportKindInfo}. */
export const EXPORT_KINDS: Readonly<Record<ExportKind, ExportKindInfo>> = {
  ConfigMap: {
    resource: "configmaps",
    base64: false,
    needsSecretExport: false,
    optIn:
      "opt the namespace in with a RoleBinding of the ClusterRole referable-export-configmaps to the controller's ServiceAccount (deploy/examples/export-namespace)",
  },
  Secret: {
    resource: "secrets",
    base64: true,
    needsSecretExport: true,
    optIn:
      "opt the namespace in with a RoleBinding of the ClusterRole referable-export-secrets to the controller's ServiceAccount (deploy/examples/allow-secret-export)",
  },
};

/** Whether `kind` is one spec.export writes into. */
export function isExportKind(kind: unknown): kind is ExportKind {
  return typeof kind === "string" && Object.hasOwn(EXPORT_KINDS, kind);
}
