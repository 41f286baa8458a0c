/**
 * The source check of the admission webhook (admission.ts): whoever sets or changes a Referable's
 * spec must be allowed to read its source (`get` on the named object, `list` for a selector, in
 * the source's namespace, cluster-wide for a cluster-scoped kind), asked of the API server with a
 * SubjectAccessReview. A kind not served yet is asked about as every resource of its API group.
 */
import { isResolutionError } from "../api/errors.ts";
import { subjectAccessReview } from "../kube/access-review.ts";
import { parseApiVersion, type ResourceInfo } from "../kube/discovery.ts";
import { describePermission, type Permission } from "./access-review.ts";
import { allow, referableName, refuse, specOf, untilAborted } from "./admission-judge.ts";
import type { Decision, Judge } from "./admission-judge.ts";
import type { AdmissionRequest } from "./admission-review.ts";

/** Why a Referable may read only what its author can read: the end of every refusal message. */
export const REFUSAL_SUFFIX = "a Referable may only read what its author can read";

/** The parts of spec.source that decide what the controller reads. */
interface SourceReads {
  apiVersion: string;
  kind: string;
  /** undefined when absent or not a string: checked cluster-wide, the stricter question. */
  namespace: string | undefined;
  /** The named object, read with `get`. */
  name: string | undefined;
  /** Whether a selector is set, read with `list`. */
  selector: boolean;
}

/** The source's resource, or why the webhook allows or refuses without asking about it. */
type SourceKind = { info?: ResourceInfo; notServed?: string } | { decision: Decision };

/** Maps the source's kind through discovery; see {@link checkSource}. */
async function sourceKind(
  judge: Judge,
  request: AdmissionRequest,
  reads: SourceReads,
  signal: AbortSignal,
): Promise<SourceKind> {
  try {
    return { info: await untilAborted(judge.discovery.lookup(reads.apiVersion, reads.kind), signal) };
  } catch (err) {
    if (isResolutionError(err) && err.reason === "InvalidSpec") {
      // The controller cannot map such a source to anything, so it reads nothing and reports
      // InvalidSpec; any change of spec.source comes back here.
      return {
        decision: allow(`${err.message}: the controller reads nothing until spec.source is fixed`),
      };
    }
    if (isResolutionError(err) && err.reason === "KindNotFound") return { notServed: err.message };
    judge.logger.warn(
      { referable: referableName(request), err: (err as Error).message },
      "could not map the source kind",
    );
    const who = JSON.stringify(request.userInfo.username ?? "");
    return {
      decision: refuse(
        500,
        "InternalError",
        `could not check whether user ${who} may read spec.source: ${(err as Error).message}; retry`,
      ),
    };
  }
}

/** The permissions reading the source needs; see SECURITY.md's table. */
function readPermissions(reads: SourceReads, resourceInfo: ResourceInfo | undefined): Permission[] {
  // A kind that is not served yet has no resource name to ask about, and guessing its plural
  // would ask about the wrong thing. Once its CRD comes, the controller reads it without
  // another admission, so the only safe question now is one whose answer covers whatever the
  // resource turns out to be: may the user read every resource of that API group there?
  const { group, version } = resourceInfo ?? parseApiVersion(reads.apiVersion);
  const resourceName = resourceInfo?.resource ?? "*";
  const namespace = resourceInfo && !resourceInfo.namespaced ? "" : (reads.namespace ?? "");
  const needed: Permission[] = [];
  if (reads.name !== undefined) {
    const get: Permission = { verb: "get", group, version, resource: resourceName, namespace };
    if (resourceInfo) get.name = reads.name;
    needed.push(get);
  }
  if (reads.selector) needed.push({ verb: "list", group, version, resource: resourceName, namespace });
  return needed;
}

/** Allows the request when its author may read the source, refuses naming what is missing. */
export async function checkSource(judge: Judge, request: AdmissionRequest): Promise<Decision> {
  const reads = sourceReads(sourceOf(request.object));
  if (typeof reads === "string") return allow(reads);
  const user = request.userInfo;
  const who = JSON.stringify(user.username ?? "");
  const signal = AbortSignal.timeout(judge.timeoutMs);
  const referable = referableName(request);

  const kind = await sourceKind(judge, request, reads, signal);
  if ("decision" in kind) return kind.decision;
  const needed = readPermissions(reads, kind.info);

  let missing: Permission[];
  try {
    const answers = await Promise.all(needed.map((p) => subjectAccessReview(judge.client, user, p, signal)));
    missing = needed.filter((_, i) => !answers[i]!.allowed);
  } catch (err) {
    judge.logger.warn({ referable, err: (err as Error).message }, "a SubjectAccessReview failed");
    return refuse(
      500,
      "InternalError",
      `could not ask the API server whether user ${who} may ${needed.map(describePermission).join(" and ")}: ${(err as Error).message}; retry`,
    );
  }

  if (missing.length > 0) {
    const wanted = missing.map(describePermission).join(" and may not ");
    judge.logger.info(
      { referable, user: user.username, missing: missing.map(describePermission) },
      "refused a Referable: its author may not read its source",
    );
    if (kind.notServed !== undefined) {
      return refuse(
        403,
        "Forbidden",
        `${kind.notServed}; until the kind is served, which permission reading it needs cannot be checked, and user ${who} may not ${wanted}: create the Referable once the kind is served (${REFUSAL_SUFFIX})`,
      );
    }
    return refuse(403, "Forbidden", `user ${who} may not ${wanted}: ${REFUSAL_SUFFIX}`);
  }
  judge.logger.debug({ referable, user: user.username }, "allowed a Referable");
  if (kind.notServed !== undefined)
    return allow(
      `${reads.kind} is not served by ${reads.apiVersion} yet: Ready stays KindNotFound until it is`,
    );
  return allow();
}

function sourceOf(object: unknown): unknown {
  const spec = specOf(object);
  return typeof spec === "object" && spec !== null ? (spec as { source?: unknown }).source : undefined;
}

/**
 * What spec.source makes the controller read, or why it reads nothing. Deliberately wider than
 * the controller's own parsing (both name and selector, an odd namespace): asking more never
 * lets anything through that the controller would read.
 */
function sourceReads(source: unknown): SourceReads | string {
  if (typeof source !== "object" || source === null || Array.isArray(source))
    return "spec.source is missing: the controller reads nothing";
  const s = source as Record<string, unknown>;
  if (typeof s.apiVersion !== "string" || typeof s.kind !== "string")
    return "spec.source.apiVersion or spec.source.kind is missing: the controller reads nothing";
  const name = typeof s.name === "string" && s.name !== "" ? s.name : undefined;
  const selector = typeof s.selector === "object" && s.selector !== null;
  if (name === undefined && !selector)
    return "spec.source has neither a name nor a selector: the controller reads nothing";
  return {
    apiVersion: s.apiVersion,
    kind: s.kind,
    namespace: typeof s.namespace === "string" && s.namespace !== "" ? s.namespace : undefined,
    name,
    selector,
  };
}
