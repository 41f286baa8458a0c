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
 * This is the whole public API: what is not exported here (the raw-JSON Kubernetes client, the
 * informers, field-path compilation, the controller) is internal and may change in any release.
 * Read and write your own objects with `@kubernetes/client-node`. `etc/referable.api.md` lists
 * every export with its type, and `npm test` fails when the build differs from it, so a change
 * here is a reviewed diff. This module never imports the controller.
 * @packageDocumentation
 */
// First, so an unsupported Node.js gets one clear error before any dependency is evaluated.
import "./api/node-version.ts";

// The resolver.
export { createResolver } from "./resolver/resolver.ts";
export type {
  Resolver,
  ResolverOptions,
  Subscription,
  WatchCallback,
  WatchOptions,
} from "./resolver/resolver.ts";
export type { ResourceInfo } from "./kube/discovery.ts";
export type { Logger } from "./api/log.ts";
export type { TransformPoolOptions } from "./transform/pool.ts";
export { RESTART_REASONS } from "./informers/restart-reason.ts";
export type { InformerSignal, RestartReason } from "./informers/restart-reason.ts";

// Filling `fooRef` into `foo` on your own objects.
export { resolveReferences } from "./resolver/managed.ts";
export type {
  ReferenceField,
  ReferenceListField,
  ReferenceReader,
  ResolveReferencesResult,
} from "./resolver/managed.ts";

// The host-controller loop: your objects, their references' subscriptions, a queue and backoff.
export { createReferenceController } from "./host/reference-controller.ts";
export type {
  HostControllerOptions,
  ReconcileResult,
  ReferenceController,
  ReferenceControllerOptions,
  ReferenceWatcher,
} from "./host/reference-controller.ts";

// References, selectors and results, as plain values.
export type {
  ExternalReference,
  GenericReference,
  GenericSelector,
  NamedReference,
  Policy,
  ReferenceCommon,
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
export type { LabelSelector, LabelSelectorOperator, LabelSelectorRequirement } from "./api/label-selector.ts";
export type { ServiceAccountRef } from "./api/referable.ts";

// Errors.
export { ResolutionError, Reasons, isResolutionError } from "./api/errors.ts";
export type { FailureReason, Reason } from "./api/errors.ts";

// OpenAPI schemas to embed in your own CRDs.
export {
  genericReferenceListSchema,
  genericReferenceSchema,
  genericSelectorSchema,
} from "./resolver/schemas.ts";
export type { JSONSchemaProps, ValidationRule } from "./resolver/schemas.ts";
export type { ResolveOptions } from "./resolver/resolver.ts";
export { loadKubeConfig } from "./kube/kubeconfig.ts";
export type { LoadKubeConfigOptions } from "./kube/kubeconfig.ts";
export {
  exportValue,
  removeExport,
  ExportError,
  isExportError,
  fieldManagerFor,
  type ExportTarget,
  type FieldTarget,
  type FieldPolicy,
  type ExportKind,
  type ExportOptions,
  type ExportResult,
  type ExportFailureReason,
} from "./outputs/keys/index.ts";
