/**
 * The admission check that keeps a Referable from becoming a way around RBAC. Authorization
 * follows the value: whoever creates a Referable, or changes anything in its spec (source,
 * selection, fieldPath, transform, default, policy, export targets: all of it decides what the
 * controller publishes and writes), must themselves be allowed to read that source (`get` on the
 * named object, `list` for a selector, in the source's namespace, cluster-wide for a
 * cluster-scoped kind) and to create and patch every export target it names (and patch every
 * target the change drops, admission-export.ts). The controller reads and writes with its own,
 * broader permissions; without this check anyone allowed to update a Referable could read through
 * it whatever the controller can, or rewrite what another author's Referable writes. An update
 * that leaves spec alone (a finalizer, a label) decides nothing and is allowed at once, so
 * cleanup never waits on anything this check needs.
 *
 * Besides: setting `spec.serviceAccountRef` needs `impersonate` on that ServiceAccount (the
 * Referable then reads and writes as it); a field target that would steer a controller is refused
 * whoever asks; a spec change made with the controller's own credentials is refused; and deleting
 * a Referable needs `patch` on the objects its fields sit in, since deleting releases them.
 *
 * The kind is mapped to its resource through discovery (never a guessed plural) and the question
 * is put to the API server as a SubjectAccessReview for the requesting user, so the cluster's own
 * authorizers decide. Every path that cannot reach an answer refuses: a security check that
 * fails open is no check. SECURITY.md explains each decision.
 */
import { stableStringify } from "../api/stable-json.ts";
import { REFERABLE_GROUP, REFERABLE_RESOURCE } from "../api/referable.ts";
import type { KubeClient } from "../kube/client.ts";
import type { KindResolver } from "../kube/discovery.ts";
import { silentLogger, type Logger } from "../api/log.ts";
import { subjectAccessReview } from "../kube/access-review.ts";
import { describePermission, type Permission } from "./access-review.ts";
import { EXPORT_REFUSAL_SUFFIX, exportPermissions } from "./admission-export.ts";
import { deletePermissions, fieldExportPermissions } from "./admission-field-export.ts";
import {
  impersonateGrantHint,
  impersonatePermission,
  SERVICE_ACCOUNT_REFUSAL_SUFFIX,
} from "./admission-service-account.ts";
import { fieldTargetProblem } from "./admission-field-target.ts";
import {
  allow,
  referableName,
  refuse,
  specOf,
  untilAborted,
  type Decision,
  type Judge,
} from "./admission-judge.ts";
import { checkSource } from "./admission-source.ts";
import { transformProblem } from "./admission-transform.ts";
import {
  parseAdmissionReview,
  reviewResponse,
  type AdmissionRequest,
  type AdmissionReview,
} from "./admission-review.ts";

/** Options for {@link createAdmissionHandler}. */
export interface AdmissionHandlerOptions {
  /**
   * Sends the SubjectAccessReviews and discovery requests with the webhook's own credentials,
   * which need `create` on `subjectaccessreviews.authorization.k8s.io`.
   */
  client: Pick<KubeClient, "request">;
  /** Maps a source's apiVersion/kind to its resource; share the resolver's. */
  discovery: KindResolver;
  /** Structured logger; decisions are logged with user and permission, never a value. @default silent */
  logger?: Logger;
  /**
   * Time one review may take in all (discovery and access reviews); past it the request is
   * refused. Keep it below the webhook configuration's `timeoutSeconds`, so the user reads this
   * webhook's message rather than the API server's timeout.
   * @default 8000
   */
  timeoutMs?: number;
  /**
   * The bound on a value's size, in bytes of JSON (the controller's `--max-value-bytes`): a
   * transform's worst-case cost is estimated with inputs of this size. @default 32768
   */
  maxValueBytes?: number;
  /** The cost budget of one evaluation. @default 1000000 */
  costBudget?: number;
  /**
   * The username the controller's own requests carry (`system:serviceaccount:NS:NAME`), asked
   * when first needed and then remembered by the caller (controller-identity.ts). A change of a
   * Referable's spec made with it is refused: the controller never writes a spec, so one made
   * with its credentials is a Referable steering it. A rejection refuses the change (retry).
   * @default no such check
   */
  controllerUsername?: (signal?: AbortSignal) => Promise<string>;
}

/**
 * Judges one AdmissionReview v1 request and returns the AdmissionReview response. Throws
 * {@link InvalidAdmissionReview} only for a body that is not an AdmissionReview request; every
 * other outcome, including a failed check, is a response.
 */
export type AdmissionHandler = (review: unknown) => Promise<AdmissionReview>;

/** Makes the handler; see {@link AdmissionHandler}. */
export function createAdmissionHandler(options: AdmissionHandlerOptions): AdmissionHandler {
  const judge: Judge = {
    client: options.client,
    discovery: options.discovery,
    logger: options.logger ?? silentLogger,
    timeoutMs: options.timeoutMs ?? 8000,
    limits: {
      maxValueBytes: options.maxValueBytes ?? 32 * 1024,
      costBudget: options.costBudget,
    },
    controllerUsername: options.controllerUsername,
  };
  return async (body) => {
    const request = parseAdmissionReview(body);
    const decision = await decide(judge, request);
    return reviewResponse({ uid: request.uid, ...decision });
  };
}

async function decide(judge: Judge, request: AdmissionRequest): Promise<Decision> {
  // The webhook configuration sends only these; anything else is not ours to judge, and a
  // validating webhook that allows adds no access. Status writes go to the status
  // subresource, which cannot change spec.
  const { resource } = request;
  if (resource.group !== REFERABLE_GROUP || resource.resource !== REFERABLE_RESOURCE.resource) return allow();
  if (request.subResource) return allow();
  if (request.operation === "DELETE") return checkDelete(judge, request);
  if (request.operation !== "CREATE" && request.operation !== "UPDATE") return allow();

  // An update that leaves spec alone (the controller's finalizer, a label, an annotation)
  // changes nothing that is read or written: allowed before any check, so removing a finalizer
  // never depends on a transform that compiled when it was written, or on an access review.
  if (request.operation === "UPDATE" && sameJson(specOf(request.object), specOf(request.oldObject)))
    return allow();

  const ownRefusal = await checkNotController(judge, request);
  if (ownRefusal !== undefined) return ownRefusal;

  // A transform that cannot compile, or whose estimated worst-case cost is over the budget,
  // never runs: refused before any access check.
  const transformError = transformProblem(request.object, judge.limits);
  if (transformError !== undefined) return refuse(422, "Invalid", transformError);
  // Every field target the controller would call InvalidSpec, among them one that would steer a
  // controller (another Referable, RBAC, ...): refused whoever asks, where an older CRD lets it by.
  const fieldError = fieldTargetProblem(request.object);
  if (fieldError !== undefined) return refuse(422, "Invalid", fieldError);

  const accountRefusal = await checkServiceAccount(judge, request);
  if (accountRefusal !== undefined) return accountRefusal;

  const exportRefusal = await checkExports(judge, request);
  if (exportRefusal !== undefined) return exportRefusal;

  // Checked on every change of spec, not only of spec.source: a new transform, default or
  // selection decides what is published from the same source, and its author must be allowed
  // to read what they decide about.
  return checkSource(judge, request);
}

/**
 * A refusal when the change of spec is made with the controller's own credentials. The
 * controller writes only status and its finalizers, never a spec: a spec change in its name is
 * something steering it (a Referable exporting into another's spec, were the CRD and the
 * controller's parsing both to let one by), and would be judged against the controller's rights.
 */
async function checkNotController(judge: Judge, request: AdmissionRequest): Promise<Decision | undefined> {
  if (!judge.controllerUsername) return undefined;
  let controller: string;
  try {
    controller = await judge.controllerUsername(AbortSignal.timeout(judge.timeoutMs));
  } catch (err) {
    judge.logger.warn({ err: (err as Error).message }, "could not learn the controller's own username");
    return refuse(
      500,
      "InternalError",
      `could not learn which user the controller is, to refuse spec changes made as it: ${(err as Error).message}; retry`,
    );
  }
  if (request.userInfo.username !== controller) return undefined;
  judge.logger.warn(
    { referable: referableName(request), user: controller },
    "refused a change of a Referable's spec made with the controller's own credentials",
  );
  return refuse(
    403,
    "Forbidden",
    `user ${JSON.stringify(controller)} is the controller itself, which never changes a Referable's spec (only its status and finalizers): a spec change made with its credentials is refused, so nothing a Referable does can steer the controller`,
  );
}

/**
 * A refusal when the change sets spec.serviceAccountRef to an account the requester may not
 * impersonate; see admission-service-account.ts.
 */
async function checkServiceAccount(judge: Judge, request: AdmissionRequest): Promise<Decision | undefined> {
  const needed = impersonatePermission(request);
  if (needed === undefined) return undefined;
  if (typeof needed === "string") return refuse(422, "Invalid", needed);
  const user = request.userInfo;
  const who = JSON.stringify(user.username ?? "");
  let allowed: boolean;
  try {
    allowed = (await subjectAccessReview(judge.client, user, needed, AbortSignal.timeout(judge.timeoutMs)))
      .allowed;
  } catch (err) {
    return reviewFailed(judge, request, `user ${who} may ${describePermission(needed)}`, err);
  }
  if (allowed) return undefined;
  judge.logger.info(
    { referable: referableName(request), user: user.username, missing: [describePermission(needed)] },
    "refused a Referable: its author may not impersonate its ServiceAccount",
  );
  return refuse(
    403,
    "Forbidden",
    `user ${who} may not ${describePermission(needed)}: ${SERVICE_ACCOUNT_REFUSAL_SUFFIX}; ${impersonateGrantHint(needed)}`,
  );
}

/**
 * A refusal when deleting the Referable would release fields in objects the requester may not
 * patch: dropping such a target from spec is refused (checkExports), and deleting the Referable
 * drops them all. The API server has already checked that the requester may delete Referables;
 * an administrator passes because they may patch the targets (cluster-admin may patch anything),
 * and a member of system:masters without a question (the API server's own superuser group,
 * which no authorizer can refuse). The finalizer's removal afterwards is an update that leaves
 * spec alone, allowed at once: cleanup never waits on this check.
 */
async function checkDelete(judge: Judge, request: AdmissionRequest): Promise<Decision> {
  const user = request.userInfo;
  if (user.groups?.includes("system:masters")) return allow();
  const who = JSON.stringify(user.username ?? "");
  const name = referableName(request, request.oldObject);
  const signal = AbortSignal.timeout(judge.timeoutMs);
  let missing: Permission[];
  try {
    const needs = await untilAborted(deletePermissions(request, judge.discovery), signal);
    if (needs.length === 0) return allow();
    const answers = await Promise.all(needs.map((p) => subjectAccessReview(judge.client, user, p, signal)));
    missing = needs.filter((_, i) => !answers[i]!.allowed);
  } catch (err) {
    judge.logger.warn({ referable: name, err: (err as Error).message }, "a SubjectAccessReview failed");
    return refuse(
      500,
      "InternalError",
      `could not ask the API server whether user ${who} may patch the objects the fields of spec.export sit in: ${(err as Error).message}; retry`,
    );
  }
  if (missing.length === 0) return allow();
  judge.logger.info(
    { referable: name, user: user.username, missing: missing.map(describePermission) },
    "refused deleting a Referable: the deleter may not patch its field targets",
  );
  return refuse(
    403,
    "Forbidden",
    `user ${who} may not delete Referable ${JSON.stringify(name ?? "")}: deleting it releases its fields of spec.export, and the user may not ${missing.map(describePermission).join(" and may not ")}; ${DELETE_REFUSAL_SUFFIX}`,
  );
}

/** Who may delete a Referable with field targets: the end of every delete refusal. */
export const DELETE_REFUSAL_SUFFIX =
  "a Referable may only be deleted by someone who may patch the objects it exports fields into (an administrator who may patch them can always delete it)";

/** A refusal when the author may not create and patch every target of spec.export; see admission-export.ts. */
async function checkExports(judge: Judge, request: AdmissionRequest): Promise<Decision | undefined> {
  const user = request.userInfo;
  const who = JSON.stringify(user.username ?? "");
  const signal = AbortSignal.timeout(judge.timeoutMs);
  let missing: Permission[];
  try {
    const needs = [
      ...exportPermissions(request),
      ...(await untilAborted(fieldExportPermissions(request, judge.discovery), signal)),
    ];
    if (needs.length === 0) return undefined;
    const answers = await Promise.all(needs.map((p) => subjectAccessReview(judge.client, user, p, signal)));
    missing = needs.filter((_, i) => !answers[i]!.allowed);
  } catch (err) {
    return reviewFailed(judge, request, `user ${who} may write the targets of spec.export`, err);
  }
  if (missing.length === 0) return undefined;
  judge.logger.info(
    { referable: referableName(request), user: user.username, missing: missing.map(describePermission) },
    "refused a Referable: its author may not write its export targets",
  );
  return refuse(
    403,
    "Forbidden",
    `user ${who} may not ${missing.map(describePermission).join(" and may not ")}: ${EXPORT_REFUSAL_SUFFIX}`,
  );
}

function sameJson(a: unknown, b: unknown): boolean {
  return stableStringify(a ?? null) === stableStringify(b ?? null);
}

/** A SubjectAccessReview that could not be made: logged, and refused with what to retry. */
function reviewFailed(judge: Judge, request: AdmissionRequest, question: string, err: unknown): Decision {
  const message = (err as Error).message;
  judge.logger.warn({ referable: referableName(request), err: message }, "a SubjectAccessReview failed");
  return refuse(500, "InternalError", `could not ask the API server whether ${question}: ${message}; retry`);
}
