/**
 * Start-up checks: what the controller needs from the cluster before it can do anything (the
 * Referable CRD served, RBAC to watch Referables and patch their status, the Lease's namespace
 * when leader election is on). Each problem is one log line that says the fix and a failing
 * /readyz; the checks repeat on a backoff until they pass, so fixing the cluster is enough (no
 * restart), and the controller starts only then instead of retrying blind forever.
 */
import { asError } from "../api/errors.ts";
import { isApiError, type KubeClient } from "../kube/client.ts";
import { groupVersionPath, LEASES, resourcePath } from "../kube/resource-path.ts";
import type { Logger } from "../api/log.ts";
import { backoffDelay } from "../timing/backoff.ts";
import { sleep } from "../timing/sleep.ts";
import { REFERABLE_GROUP, REFERABLE_RESOURCE, REFERABLE_VERSION } from "../api/referable.ts";

/** What the checks need to know of the configuration. */
export interface StartupCheckOptions {
  client: Pick<KubeClient, "request">;
  /** Whether leader election is on: only then is the Lease's namespace checked. */
  leaderElect: boolean;
  /** Namespace and name of the leader-election Lease. */
  leaseNamespace: string;
  leaseName: string;
  /** Whether sharding is on (--shards): then list and delete on leases are checked too. @default false */
  shards?: boolean;
}

/** One start-up problem: `message` says what is wrong and how to fix it. */
export interface StartupProblem {
  /** Which check failed, for logs and tests. */
  check: "crd" | "rbac" | "lease-namespace" | "lease-rbac" | "api-server";
  message: string;
}

const RESOURCE = `${REFERABLE_RESOURCE.resource}.${REFERABLE_GROUP}`;
const RBAC_FIX =
  "apply deploy/ (or the Helm chart), or bind the ClusterRole referable-controller of deploy/base/rbac-controller.yaml to the controller's identity";

interface AccessReview {
  status?: { allowed?: boolean; reason?: string };
}

/** What the API server's authorizer says of the caller's request: a SelfSubjectAccessReview's status. */
export async function selfAccessReview(
  client: Pick<KubeClient, "request">,
  attributes: Record<string, string>,
): Promise<AccessReview["status"]> {
  const review = await client.request<AccessReview>(
    "POST",
    "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
    {
      body: {
        apiVersion: "authorization.k8s.io/v1",
        kind: "SelfSubjectAccessReview",
        spec: { resourceAttributes: attributes },
      },
    },
  );
  return review.status;
}

/** Whether the API server says the caller may `verb` the resource; undefined when it cannot tell. */
async function allowed(
  client: Pick<KubeClient, "request">,
  attributes: Record<string, string>,
): Promise<boolean | undefined> {
  try {
    return (await selfAccessReview(client, attributes))?.allowed === true;
  } catch (err) {
    // Every authenticated user may create SelfSubjectAccessReviews (system:basic-user); a
    // cluster that forbids it gets the direct probe below instead.
    if (isApiError(err, 403)) return undefined;
    throw err;
  }
}

async function checkCrd(client: Pick<KubeClient, "request">): Promise<StartupProblem | undefined> {
  const gv = `${REFERABLE_GROUP}/${REFERABLE_VERSION}`;
  const path = groupVersionPath(REFERABLE_GROUP, REFERABLE_VERSION);
  try {
    const list = await client.request<{ resources?: Array<{ name: string }> }>("GET", path);
    if (list.resources?.some((r) => r.name === REFERABLE_RESOURCE.resource)) return undefined;
  } catch (err) {
    if (!isApiError(err, 404)) throw err;
  }
  return {
    check: "crd",
    message: `the Referable CRD is not installed (the API server does not serve ${RESOURCE} in ${gv}): run \`kubectl apply --server-side -f crds/\` (or install deploy/ or the Helm chart)`,
  };
}

async function checkRbac(client: Pick<KubeClient, "request">): Promise<StartupProblem | undefined> {
  const missing: string[] = [];
  for (const [verb, subresource] of [
    ["list", ""],
    ["watch", ""],
    ["patch", "status"],
  ] as const) {
    const attributes: Record<string, string> = {
      group: REFERABLE_GROUP,
      resource: REFERABLE_RESOURCE.resource,
      verb,
    };
    if (subresource) attributes.subresource = subresource;
    let ok = await allowed(client, attributes);
    if (ok === undefined && verb === "list") {
      // No access reviews: try the list itself (one object at most).
      try {
        await client.request("GET", resourcePath(REFERABLE_RESOURCE), {
          query: { limit: "1" },
        });
        ok = true;
      } catch (err) {
        if (!isApiError(err, 403)) throw err;
        ok = false;
      }
    }
    if (ok === false)
      missing.push(subresource ? `${verb} ${RESOURCE}/${subresource}` : `${verb} ${RESOURCE}`);
  }
  if (missing.length === 0) return undefined;
  return {
    check: "rbac",
    message: `RBAC does not let the controller ${missing.join(", ")}: ${RBAC_FIX}`,
  };
}

async function checkLeaseNamespace(options: StartupCheckOptions): Promise<StartupProblem | undefined> {
  const { client, leaseNamespace: ns, leaseName: name } = options;
  const off = "or run without leader election (--leader-elect=false, the default of `npm start`)";
  try {
    await client.request("GET", resourcePath(LEASES, { namespace: ns, name }));
    return undefined;
  } catch (err) {
    if (isApiError(err, 403)) {
      return {
        check: "lease-rbac",
        message: `RBAC does not let the controller read the leader-election Lease ${ns}/${name}: grant get, create and update on leases in ${ns} (deploy/base/rbac-leader-election.yaml), pass --leader-election-namespace, ${off}`,
      };
    }
    if (!isApiError(err, 404)) throw err;
  }
  // No Lease yet: a dry-run create says whether the namespace exists without writing anything
  // (a GET of a Lease in a missing namespace is a plain 404 too).
  try {
    await client.request("POST", resourcePath(LEASES, { namespace: ns }), {
      query: { dryRun: "All" },
      body: { apiVersion: "coordination.k8s.io/v1", kind: "Lease", metadata: { name } },
    });
    return undefined;
  } catch (err) {
    if (isApiError(err, 409)) return undefined; // created meanwhile by another replica
    if (isApiError(err, 404)) {
      return {
        check: "lease-namespace",
        message: `leader election is on but its namespace ${JSON.stringify(ns)} does not exist: create it (\`kubectl create namespace ${ns}\`), pass --leader-election-namespace=<an existing namespace>, ${off}`,
      };
    }
    if (isApiError(err, 403)) {
      return {
        check: "lease-rbac",
        message: `RBAC does not let the controller create the leader-election Lease ${ns}/${name}: grant get, create and update on leases in ${ns} (deploy/base/rbac-leader-election.yaml), ${off}`,
      };
    }
    throw err;
  }
}

/**
 * Sharding lists the Leases of its set and deletes a member Lease left by a replica gone: verbs
 * the leader-election Role alone does not grant. Without access reviews the coordinator's own
 * warnings say it.
 */
async function checkShardRbac(options: StartupCheckOptions): Promise<StartupProblem | undefined> {
  const ns = options.leaseNamespace;
  const missing: string[] = [];
  for (const verb of ["list", "update", "delete"]) {
    const ok = await allowed(options.client, {
      group: "coordination.k8s.io",
      resource: "leases",
      namespace: ns,
      verb,
    });
    if (ok === false) missing.push(verb);
  }
  if (missing.length === 0) return undefined;
  return {
    check: "lease-rbac",
    message: `RBAC does not let the controller ${missing.join(", ")} leases in ${ns}, which sharding (--shards) needs for its bucket and member Leases: grant get, list, update and delete on leases in ${ns} (deploy/overlays/sharded, or the Helm chart's sharding.shards), or run without --shards`,
  };
}

/** Runs every check once; resolves with the first problem found, or undefined when all pass. */
export async function checkStartup(options: StartupCheckOptions): Promise<StartupProblem | undefined> {
  try {
    return (
      (await checkCrd(options.client)) ??
      (await checkRbac(options.client)) ??
      (options.leaderElect ? await checkLeaseNamespace(options) : undefined) ??
      (options.shards ? await checkShardRbac(options) : undefined)
    );
  } catch (err) {
    const detail = asError(err).message;
    if (isApiError(err, 401)) {
      return {
        check: "api-server",
        message: `the API server does not accept the controller's credentials (${detail}): check --kubeconfig or the pod's ServiceAccount token`,
      };
    }
    return {
      check: "api-server",
      message: `cannot check the cluster (${detail}): check that the API server in --kubeconfig is reachable`,
    };
  }
}

/** Options for {@link StartupGate}. */
export interface StartupGateOptions extends StartupCheckOptions {
  logger: Logger;
  /** First wait before the checks run again. @default 1000 */
  minRetryMs?: number;
  /** Longest wait between two runs of the checks. @default 10000 */
  maxRetryMs?: number;
}

/** Repeats {@link checkStartup} until it passes, logging each new problem once; see the module comment. */
export class StartupGate {
  private current: StartupProblem | undefined = {
    check: "api-server",
    message: "start-up checks have not run yet",
  };

  private readonly options: StartupGateOptions;

  constructor(options: StartupGateOptions) {
    this.options = options;
  }

  /** The problem that keeps the controller from starting (what /readyz says), or undefined once passed. */
  get problem(): StartupProblem | undefined {
    return this.current;
  }

  /** Resolves true once every check passes, false when `signal` aborts first. Never rejects. */
  async waitUntilPassing(signal: AbortSignal): Promise<boolean> {
    const { logger } = this.options;
    const retry = { baseMs: this.options.minRetryMs ?? 1_000, maxMs: this.options.maxRetryMs ?? 10_000 };
    let logged: string | undefined;
    for (let attempt = 0; !signal.aborted; attempt++) {
      const waitMs = backoffDelay(attempt, retry);
      const problem = await checkStartup(this.options);
      if (signal.aborted) break;
      if (!problem) {
        if (logged !== undefined) logger.info({}, "start-up checks pass now: starting");
        this.current = undefined;
        return true;
      }
      this.current = problem;
      // One line per distinct problem, however long it lasts: the log says the fix once, and
      // /readyz keeps saying it.
      if (problem.message !== logged) {
        logger.error({ check: problem.check, retryInSeconds: waitMs / 1000 }, problem.message);
        logged = problem.message;
      } else {
        logger.debug({ check: problem.check }, "start-up check still failing");
      }
      await sleep(waitMs, signal);
    }
    return false;
  }
}
