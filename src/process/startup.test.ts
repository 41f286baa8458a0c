import { ApiError, type KubeClient } from "../kube/client.ts";
import type { Logger } from "../api/log.ts";
import { checkStartup, StartupGate, type StartupCheckOptions } from "./startup.ts";

const DISCOVERY = "GET /apis/referable.dev/v1alpha1";
const SSAR = "POST /apis/authorization.k8s.io/v1/selfsubjectaccessreviews";
const LIST = "GET /apis/referable.dev/v1alpha1/referables";
const LEASE = "GET /apis/coordination.k8s.io/v1/namespaces/ops/leases/lease";
const CREATE_LEASE = "POST /apis/coordination.k8s.io/v1/namespaces/ops/leases";

type Answer = unknown | Error | ((body: unknown) => unknown);

/** A fake of the one method the checks use: answers by "METHOD path". */
class FakeClient implements Pick<KubeClient, "request"> {
  private readonly answers: Record<string, Answer>;

  constructor(answers: Record<string, Answer>) {
    this.answers = answers;
  }

  async request<T>(method: string, path: string, options: { body?: unknown } = {}): Promise<T> {
    const key = `${method} ${path}`;
    const answer = this.answers[key] ?? new ApiError(method, path, 404, "NotFound", "not found");
    if (answer instanceof Error) throw answer;
    return (typeof answer === "function" ? (answer as (b: unknown) => unknown)(options.body) : answer) as T;
  }
}

const served = { resources: [{ name: "referables" }, { name: "referables/status" }] };
const allowAll = () => ({ status: { allowed: true } });
/** An access review that denies `verb` and allows every other. */
const deny = (verb: string) => (body: unknown) => {
  const a = (body as { spec: { resourceAttributes: { verb: string } } }).spec.resourceAttributes;
  return { status: { allowed: a.verb !== verb } };
};
/** An access review that denies `verb` on leases only. */
const denyLeases = (verb: string) => (body: unknown) => {
  const a = (body as { spec: { resourceAttributes: { verb: string; resource: string } } }).spec
    .resourceAttributes;
  return { status: { allowed: !(a.resource === "leases" && a.verb === verb) } };
};
const err = (code: number, reason: string) => new ApiError("X", "/x", code, reason, reason);

function options(answers: Record<string, Answer>, leaderElect = false, shards = false): StartupCheckOptions {
  return { client: new FakeClient(answers), leaderElect, leaseNamespace: "ops", leaseName: "lease", shards };
}

describe("checkStartup", () => {
  const healthy = { [DISCOVERY]: served, [SSAR]: allowAll };
  const cases: Array<{
    reason: string;
    answers: Record<string, Answer>;
    leaderElect?: boolean;
    shards?: boolean;
    check?: string;
    says?: string;
  }> = [
    { reason: "everything in place, leader election off", answers: healthy },
    {
      reason: "no CRD: the group version is not served",
      answers: { [SSAR]: allowAll },
      check: "crd",
      says: "kubectl apply --server-side -f crds/",
    },
    {
      reason: "no CRD: the group version is served but not referables",
      answers: { ...healthy, [DISCOVERY]: { resources: [{ name: "others" }] } },
      check: "crd",
    },
    {
      reason: "RBAC refuses watch",
      answers: { ...healthy, [SSAR]: deny("watch") },
      check: "rbac",
      says: "RBAC does not let the controller watch referables.referable.dev: apply deploy/",
    },
    {
      reason: "RBAC refuses the status patch",
      answers: { ...healthy, [SSAR]: deny("patch") },
      check: "rbac",
      says: "patch referables.referable.dev/status",
    },
    {
      reason: "no access reviews allowed: the list itself is tried, and refused",
      answers: { ...healthy, [SSAR]: err(403, "Forbidden"), [LIST]: err(403, "Forbidden") },
      check: "rbac",
      says: "list referables.referable.dev",
    },
    {
      reason: "no access reviews allowed: the list itself is tried, and works",
      answers: { ...healthy, [SSAR]: err(403, "Forbidden"), [LIST]: { items: [] } },
    },
    {
      reason: "leader election on, the Lease exists",
      answers: { ...healthy, [LEASE]: { metadata: { name: "lease" } } },
      leaderElect: true,
    },
    {
      reason: "leader election on, no Lease yet, the dry-run create works",
      answers: { ...healthy, [CREATE_LEASE]: { metadata: { name: "lease" } } },
      leaderElect: true,
    },
    {
      reason: "leader election on and no namespace: the dry-run create is a 404",
      answers: healthy,
      leaderElect: true,
      check: "lease-namespace",
      says: "kubectl create namespace ops",
    },
    {
      reason: "leader election on, Leases forbidden",
      answers: { ...healthy, [LEASE]: err(403, "Forbidden") },
      leaderElect: true,
      check: "lease-rbac",
      says: "deploy/base/rbac-leader-election.yaml",
    },
    {
      reason: "sharded, and RBAC allows the shard Leases' verbs",
      answers: { ...healthy, [LEASE]: { metadata: { name: "lease" } } },
      leaderElect: true,
      shards: true,
    },
    {
      reason: "sharded, but RBAC refuses to list leases (the leader-election Role alone)",
      answers: { ...healthy, [LEASE]: { metadata: { name: "lease" } }, [SSAR]: denyLeases("list") },
      leaderElect: true,
      shards: true,
      check: "lease-rbac",
      says: "RBAC does not let the controller list leases in ops, which sharding (--shards) needs",
    },
    {
      reason: "leader election off: a missing namespace does not matter",
      answers: healthy,
      leaderElect: false,
    },
    {
      reason: "credentials refused",
      answers: { [DISCOVERY]: err(401, "Unauthorized") },
      check: "api-server",
      says: "does not accept the controller's credentials",
    },
    {
      reason: "API server unreachable",
      answers: { [DISCOVERY]: new Error("connect ECONNREFUSED 127.0.0.1:6443") },
      check: "api-server",
      says: "check that the API server in --kubeconfig is reachable",
    },
  ];
  it.each(cases)("$reason", async ({ answers, leaderElect, shards, check, says }) => {
    const problem = await checkStartup(options(answers, leaderElect, shards));
    expect(problem?.check).toBe(check);
    if (says) expect(problem?.message).toContain(says);
  });
});

describe("StartupGate", () => {
  function memoryLogger() {
    const lines: Array<{ level: string; message: string }> = [];
    const at =
      (level: string) =>
      (_fields: Record<string, unknown>, message: string): void => {
        lines.push({ level, message });
      };
    const logger: Logger = { debug: at("debug"), info: at("info"), warn: at("warn"), error: at("error") };
    return { logger, lines };
  }

  it("logs a lasting problem once, serves it until fixed, then passes", async () => {
    const answers: Record<string, Answer> = { [SSAR]: allowAll };
    let calls = 0;
    answers[DISCOVERY] = () => {
      calls++;
      if (calls < 4) throw err(404, "NotFound");
      return served;
    };
    const { logger, lines } = memoryLogger();
    const gate = new StartupGate({ ...options(answers), logger, minRetryMs: 1, maxRetryMs: 2 });
    expect(gate.problem).toBeDefined(); // not ready before the first run
    expect(await gate.waitUntilPassing(new AbortController().signal)).toBe(true);
    expect(gate.problem).toBeUndefined();
    expect(lines.filter((l) => l.level === "error")).toHaveLength(1);
    expect(lines.filter((l) => l.level === "debug")).toHaveLength(2);
    expect(lines.at(-1)).toEqual({ level: "info", message: "start-up checks pass now: starting" });
  });

  it("stops waiting during its backoff, with false, when aborted (a SIGTERM)", async () => {
    const abort = new AbortController();
    const { logger, lines } = memoryLogger();
    // Aborts once the problem is logged, i.e. while the gate waits a minute before the next run.
    const aborting: Logger = { ...logger, error: (f, m) => (logger.error(f, m), abort.abort()) };
    const gate = new StartupGate({ ...options({ [SSAR]: allowAll }), logger: aborting, minRetryMs: 60_000 });
    expect(await gate.waitUntilPassing(abort.signal)).toBe(false);
    expect(gate.problem?.check).toBe("crd");
    expect(lines.map((l) => l.level)).toEqual(["error"]);
  });
});
