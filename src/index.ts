/**
 * referable: the GenericReference resolver.
 *
 * Resolve `fooRef` / `fooSelector` fields of your own objects against any field of any
 * Kubernetes object, and get pushed every change, through informers shared per source kind.
 *
 * ```ts
 * import { createResolver } from "referable";
 * const resolver = createResolver({ kubeConfig });
 * await resolver.start();
 * const { value } = await resolver.resolve({ apiVersion: "v1", kind: "ConfigMap", namespace: "a", name: "db", fieldPath: "data.host" });
 * const sub = resolver.watch(ref, (result) => enqueue(myObject));
 * sub.close();
 * await resolver.stop();
 * ```
 *
 * This module never imports the controller.
 * @module
 */
// First, so an unsupported Node.js gets one clear error before any dependency is evaluated.
import "./node-version.ts";
export { createResolver, Resolver } from "./resolver/resolver.ts";
export type { ResolverOptions, Subscription, WatchCallback, WatchOptions } from "./resolver/resolver.ts";
export { resolveReferences } from "./resolver/managed.ts";
export type {
  ReferenceField,
  ReferenceListField,
  ReferenceReader,
  ResolveReferencesResult,
} from "./resolver/managed.ts";
export type {
  ExternalReference,
  GenericReference,
  GenericSelector,
  NamedReference,
  Policy,
  RequiredCondition,
  ResolutionPolicy,
  ResolutionResult,
  ResolvePolicy,
  ResolvedReason,
  ResolvedValue,
  ResolvedValues,
  SelectionMode,
  SourceRef,
} from "./resolver/types.ts";
export {
  genericReferenceListSchema,
  genericReferenceSchema,
  genericSelectorSchema,
} from "./resolver/schemas.ts";
export type { JSONSchemaProps } from "./resolver/schemas.ts";
export { ReferenceError, Reasons, isReferenceError } from "./errors.ts";
export type { FailureReason, Reason } from "./errors.ts";
export type { LabelSelector, LabelSelectorRequirement } from "./informers/label-selector.ts";
export { compileFieldPath, evaluateFieldPath } from "./fieldpath/index.ts";
export type { CompiledPath, EvalResult } from "./fieldpath/index.ts";
export { KubeClient, ApiError, isApiError } from "./kube/client.ts";
export type {
  KubeObject,
  KubeClientOptions,
  RequestObservation,
  WatchEvent,
  WatchStream,
} from "./kube/client.ts";
export type { ResourceInfo } from "./kube/discovery.ts";
export type { Logger } from "./log.ts";
export {
  exportValue,
  removeExport,
  ExportError,
  isExportError,
  fieldManagerFor,
  type ExportTarget,
  type ExportKind,
  type ExportOptions,
  type ExportResult,
  type ExportFailureReason,
} from "./export/index.ts";
