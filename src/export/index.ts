/**
 * Export: a value delivered into a key of a ConfigMap or a Secret, where workloads read it, with
 * server-side apply under a field manager of the writer's own. The controller exports a
 * Referable's value through this; a consumer calls {@link exportValue} from its own code.
 * @module
 */
export { exportValue, removeExport } from "./writer.ts";
export type { ExportResult, ExportOptions } from "./writer.ts";
export { ExportError, isExportError } from "./errors.ts";
export type { ExportFailureReason } from "./errors.ts";
export { exportText, fieldManagerFor } from "./target.ts";
export type { ExportKind, ExportTarget } from "./target.ts";
