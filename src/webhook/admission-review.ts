/**
 * The AdmissionReview v1 wire format (admission.k8s.io/v1), reduced to the fields this webhook
 * reads and writes, and the one parser that turns an untrusted request body into it.
 */

/** The `userInfo` of an admission request: who is making the change. */
export interface UserInfo {
  username?: string;
  uid?: string;
  groups?: string[];
  extra?: Record<string, string[]>;
}

/** A group/version/resource as admission requests carry it. */
export interface GroupVersionResource {
  group: string;
  version: string;
  resource: string;
}

/** The `request` of an AdmissionReview. */
export interface AdmissionRequest {
  /** Echoed in the response; the API server matches them. */
  uid: string;
  resource: GroupVersionResource;
  /** Set for a subresource request, e.g. "status". */
  subResource?: string;
  operation: "CREATE" | "UPDATE" | "DELETE" | "CONNECT";
  userInfo: UserInfo;
  /** The object after the change (CREATE, UPDATE). */
  object?: unknown;
  /** The object before the change (UPDATE, DELETE). */
  oldObject?: unknown;
  dryRun?: boolean;
}

/** The `response` of an AdmissionReview. */
export interface AdmissionResponse {
  uid: string;
  allowed: boolean;
  /** Why a request is refused; `message` is shown to the user. */
  status?: { code: number; reason: string; message: string };
  /** Shown to the user (kubectl prints them) whether or not the request is allowed. */
  warnings?: string[];
}

/** An AdmissionReview as sent to, and answered by, a webhook. */
export interface AdmissionReview {
  apiVersion: "admission.k8s.io/v1";
  kind: "AdmissionReview";
  request?: AdmissionRequest;
  response?: AdmissionResponse;
}

/** A body that is not an AdmissionReview v1 request: the server answers 400. */
export class InvalidAdmissionReview extends Error {
  constructor(message: string) {
    super(message);
    this.name = "InvalidAdmissionReview";
  }
}

/** True for an {@link InvalidAdmissionReview} from any copy of this module. */
export function isInvalidAdmissionReview(err: unknown): err is InvalidAdmissionReview {
  return typeof err === "object" && err !== null && (err as Error).name === "InvalidAdmissionReview";
}

const OPERATIONS = new Set(["CREATE", "UPDATE", "DELETE", "CONNECT"]);

/** Checks the shape of an AdmissionReview v1 request; throws {@link InvalidAdmissionReview}. */
export function parseAdmissionReview(body: unknown): AdmissionRequest {
  const review = body as { apiVersion?: unknown; kind?: unknown; request?: unknown } | null;
  if (typeof review !== "object" || review === null || Array.isArray(review))
    throw new InvalidAdmissionReview("the body is not a JSON object");
  if (review.apiVersion !== "admission.k8s.io/v1" || review.kind !== "AdmissionReview") {
    throw new InvalidAdmissionReview(
      "the body is not an admission.k8s.io/v1 AdmissionReview: set admissionReviewVersions to [v1]",
    );
  }
  const request = review.request as Partial<AdmissionRequest> | undefined;
  if (typeof request !== "object" || request === null)
    throw new InvalidAdmissionReview("the AdmissionReview has no request");
  if (typeof request.uid !== "string" || request.uid === "")
    throw new InvalidAdmissionReview("the AdmissionReview request has no uid");
  if (typeof request.operation !== "string" || !OPERATIONS.has(request.operation))
    throw new InvalidAdmissionReview("the AdmissionReview request has no known operation");
  const resource = request.resource as Partial<GroupVersionResource> | undefined;
  if (typeof resource !== "object" || resource === null || typeof resource.resource !== "string")
    throw new InvalidAdmissionReview("the AdmissionReview request has no resource");
  const user = request.userInfo;
  if (typeof user !== "object" || user === null)
    throw new InvalidAdmissionReview("the AdmissionReview request has no userInfo");
  return request as AdmissionRequest;
}

/** The AdmissionReview that answers `uid`. */
export function reviewResponse(response: AdmissionResponse): AdmissionReview {
  return { apiVersion: "admission.k8s.io/v1", kind: "AdmissionReview", response };
}
