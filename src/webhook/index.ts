/**
 * The admission webhook that keeps Referables from reading around RBAC: a Referable may only be
 * created, or its spec changed, by a user who may read its source, write its export targets and
 * impersonate the ServiceAccount it names; it is deleted only by one who may patch its field
 * targets; and nothing it names may steer the controller. The handler is
 * plain (an AdmissionReview in, one out) so it is tested without HTTP; the server adds TLS with
 * certificate reloading. See SECURITY.md for the threat model and the failure policy.
 */
export { createAdmissionHandler, DELETE_REFUSAL_SUFFIX } from "./admission.ts";
export { REFUSAL_SUFFIX } from "./admission-source.ts";
export { EXPORT_REFUSAL_SUFFIX } from "./admission-export.ts";
export { SERVICE_ACCOUNT_REFUSAL_SUFFIX } from "./admission-service-account.ts";
export { rememberedSelfUsername, selfUsername } from "./controller-identity.ts";
export type { AdmissionHandler, AdmissionHandlerOptions } from "./admission.ts";
export { InvalidAdmissionReview, isInvalidAdmissionReview } from "./admission-review.ts";
export type { AdmissionRequest, AdmissionResponse, AdmissionReview, UserInfo } from "./admission-review.ts";
export { describePermission } from "./access-review.ts";
export type { Permission } from "./access-review.ts";
export { startWebhookServer, WEBHOOK_PATH } from "./server.ts";
export type { CertificateSource, OpenCertificate, WebhookServerOptions } from "./server.ts";
export { CertRotator } from "./cert-rotator.ts";
export type { CertRotatorOptions } from "./cert-rotator.ts";
