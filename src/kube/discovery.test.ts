import { isResolutionError, type ResolutionError } from "../errors.ts";
import { ApiError, type KubeClient } from "./client.ts";
import { Discovery, parseApiVersion, type DiscoveryOptions } from "./discovery.ts";

interface APIResource {
  name: string;
  kind: string;
  namespaced: boolean;
  verbs?: string[];
}

/** What the fake API server answers for one discovery path: a resource list or an error. */
type Answer = APIResource[] | Error;

/** A fake of the one method discovery uses, counting requests per path. */
class FakeDiscoveryClient implements Pick<KubeClient, "request"> {
  readonly answers = new Map<string, Answer>();
  readonly calls: string[] = [];
  /** When set, requests wait on this promise before answering (to hold them in flight). */
  gate: Promise<void> | undefined;

  async request<T>(method: string, path: string): Promise<T> {
    this.calls.push(`${method} ${path}`);
    if (this.gate) await this.gate;
    const answer =
      this.answers.get(path) ?? new ApiError(method, path, 404, "NotFound", "the server could not find");
    if (answer instanceof Error) throw answer;
    return { kind: "APIResourceList", resources: answer } as T;
  }

  count(path: string): number {
    return this.calls.filter((c) => c === `GET ${path}`).length;
  }
}

const coreV1: APIResource[] = [
  { name: "configmaps", kind: "ConfigMap", namespaced: true, verbs: ["get", "list", "watch"] },
  { name: "nodes", kind: "Node", namespaced: false, verbs: ["get", "list"] },
  { name: "pods/status", kind: "Pod", namespaced: true, verbs: ["get", "patch"] },
];

const appsV1: APIResource[] = [
  { name: "deployments", kind: "Deployment", namespaced: true, verbs: ["list", "watch"] },
  { name: "deployments/status", kind: "Deployment", namespaced: true, verbs: ["get", "patch"] },
  { name: "deployments/scale", kind: "Scale", namespaced: true, verbs: ["get"] },
];

function setup(options: Partial<DiscoveryOptions> = {}) {
  const client = new FakeDiscoveryClient();
  client.answers.set("/api/v1", coreV1);
  client.answers.set("/apis/apps/v1", appsV1);
  let clock = 1_000_000;
  const discovery = new Discovery({
    client,
    minRefreshMs: 100,
    maxRefreshMs: 400,
    now: () => clock,
    ...options,
  });
  return {
    client,
    discovery,
    setClock: (t: number) => {
      clock = 1_000_000 + t;
    },
  };
}

async function lookupError(promise: Promise<unknown>): Promise<ResolutionError> {
  try {
    await promise;
  } catch (err) {
    if (isResolutionError(err)) return err;
    throw new Error(`want a ResolutionError, got ${String(err)}`, { cause: err });
  }
  throw new Error("want a ResolutionError, got a result");
}

describe("parseApiVersion", () => {
  const cases: {
    reason: string;
    apiVersion: string;
    want: { group: string; version: string } | "InvalidSpec";
  }[] = [
    { reason: "the core group is a bare version", apiVersion: "v1", want: { group: "", version: "v1" } },
    { reason: "a named group", apiVersion: "apps/v1", want: { group: "apps", version: "v1" } },
    {
      reason: "a dotted CRD group with a pre-release version",
      apiVersion: "datasync.aws.upbound.io/v1beta1",
      want: { group: "datasync.aws.upbound.io", version: "v1beta1" },
    },
    { reason: "three parts cannot be an apiVersion", apiVersion: "a/b/c", want: "InvalidSpec" },
    { reason: "the empty string", apiVersion: "", want: "InvalidSpec" },
    { reason: "versions are lower case", apiVersion: "V1", want: "InvalidSpec" },
    { reason: "groups are lower case", apiVersion: "Apps/v1", want: "InvalidSpec" },
    { reason: "a leading space", apiVersion: " v1", want: "InvalidSpec" },
    { reason: "a space inside", apiVersion: "apps/ v1", want: "InvalidSpec" },
    {
      reason:
        "an empty group before the slash is the core group, as apimachinery's ParseGroupVersion reads it",
      apiVersion: "/v1",
      want: { group: "", version: "v1" },
    },
    { reason: "an empty version after the slash", apiVersion: "apps/", want: "InvalidSpec" },
    { reason: "a version over 63 characters", apiVersion: `v${"1".repeat(63)}`, want: "InvalidSpec" },
  ];

  it.each(cases)("$reason", ({ apiVersion, want }) => {
    if (want !== "InvalidSpec") {
      expect(parseApiVersion(apiVersion)).toEqual(want);
      return;
    }
    let thrown: unknown;
    try {
      parseApiVersion(apiVersion);
    } catch (err) {
      thrown = err;
    }
    expect(isResolutionError(thrown) && thrown.reason).toBe("InvalidSpec");
    expect(isResolutionError(thrown) && thrown.retryable).toBe(false);
  });
});

describe("Discovery.lookup", () => {
  const found: {
    reason: string;
    apiVersion: string;
    kind: string;
    want: { resource: string; namespaced: boolean; verbs: string[]; group: string };
  }[] = [
    {
      reason: "a namespaced core kind",
      apiVersion: "v1",
      kind: "ConfigMap",
      want: { resource: "configmaps", namespaced: true, verbs: ["get", "list", "watch"], group: "" },
    },
    {
      reason: "a cluster-scoped core kind",
      apiVersion: "v1",
      kind: "Node",
      want: { resource: "nodes", namespaced: false, verbs: ["get", "list"], group: "" },
    },
    {
      reason: "a subresource listed after its resource does not replace it",
      apiVersion: "apps/v1",
      kind: "Deployment",
      want: { resource: "deployments", namespaced: true, verbs: ["list", "watch"], group: "apps" },
    },
  ];

  it.each(found)("returns the served resource: $reason", async ({ apiVersion, kind, want }) => {
    const { discovery } = setup();
    const info = await discovery.lookup(apiVersion, kind);
    expect(info).toEqual({ ...want, kind, version: "v1" });
  });

  const missing: { reason: string; apiVersion: string; kind: string; want: string; answer?: Answer }[] = [
    {
      reason: "a kind served only as a subresource is not a kind of the group version",
      apiVersion: "v1",
      kind: "Pod",
      want: "the API server serves v1 but no kind Pod in it",
    },
    {
      reason: "a subresource's kind (Scale) is not served as a resource",
      apiVersion: "apps/v1",
      kind: "Scale",
      want: "no kind Scale in apps/v1",
    },
    {
      reason: "an unknown kind names the group version it looked in",
      apiVersion: "apps/v1",
      kind: "Widget",
      want: "the API server serves apps/v1 but no kind Widget in it",
    },
    {
      reason: "a group version the server does not serve (404)",
      apiVersion: "example.com/v1",
      kind: "Widget",
      want: "the API server does not serve example.com/v1",
    },
    {
      reason: "an aggregated API whose backend is down (503)",
      apiVersion: "metrics.k8s.io/v1beta1",
      kind: "PodMetrics",
      answer: new ApiError("GET", "/apis/metrics.k8s.io/v1beta1", 503, "ServiceUnavailable", "down"),
      want: "discovery of metrics.k8s.io/v1beta1 failed (503 ServiceUnavailable)",
    },
    {
      reason: "a network error is a failed discovery too",
      apiVersion: "metrics.k8s.io/v1beta1",
      kind: "PodMetrics",
      answer: new Error("socket hang up"),
      want: "discovery of metrics.k8s.io/v1beta1 failed (socket hang up)",
    },
  ];

  const nearMisses: Array<{ reason: string; apiVersion: string; kind: string; want: string | undefined }> = [
    {
      reason: "a kind differing only in case",
      apiVersion: "v1",
      kind: "configmap",
      want: 'did you mean "ConfigMap"?',
    },
    {
      reason: "a plural is one edit away",
      apiVersion: "apps/v1",
      kind: "Deployments",
      want: 'did you mean "Deployment"?',
    },
    {
      reason: "a typo, in lower case",
      apiVersion: "v1",
      kind: "configmqp",
      want: 'did you mean "ConfigMap"?',
    },
    { reason: "a missing letter", apiVersion: "v1", kind: "Nde", want: 'did you mean "Node"?' },
    { reason: "two edits away is not a near miss", apiVersion: "v1", kind: "Nodexx", want: undefined },
    {
      reason: "an unrelated kind gets no suggestion",
      apiVersion: "apps/v1",
      kind: "Widget",
      want: undefined,
    },
    {
      reason: "a subresource's kind (Pod of pods/status) is never suggested",
      apiVersion: "v1",
      kind: "Pods",
      want: undefined,
    },
  ];
  it.each(nearMisses)("KindNotFound says did you mean: $reason", async ({ apiVersion, kind, want }) => {
    const { discovery } = setup();
    const err = await lookupError(discovery.lookup(apiVersion, kind));
    expect(err.reason).toBe("KindNotFound");
    if (want === undefined) expect(err.message).not.toContain("did you mean");
    else expect(err.message).toContain(want);
  });

  it.each(missing)("KindNotFound: $reason", async ({ apiVersion, kind, answer, want }) => {
    const { client, discovery } = setup();
    if (answer) client.answers.set(`/apis/${apiVersion}`, answer);
    const err = await lookupError(discovery.lookup(apiVersion, kind));
    expect(err.reason).toBe("KindNotFound");
    expect(err.retryable).toBe(true);
    expect(err.message).toContain(want);
    expect(err.message).toContain(`no kind ${kind} in ${apiVersion}`);
  });

  it.each([
    { reason: "RBAC refuses discovery (403)", code: 403 },
    { reason: "the credentials are refused (401)", code: 401 },
  ])("Forbidden: $reason", async ({ code }) => {
    const { client, discovery } = setup();
    client.answers.set("/apis/apps/v1", new ApiError("GET", "/apis/apps/v1", code, "Forbidden", "no"));
    const err = await lookupError(discovery.lookup("apps/v1", "Deployment"));
    expect(err.reason).toBe("Forbidden");
    expect(err.message).toContain("apps/v1");
  });

  it.each([
    { reason: "an invalid apiVersion", apiVersion: "a/b/c", kind: "ConfigMap" },
    { reason: "a kind that is not a name", apiVersion: "v1", kind: "config map" },
    { reason: "an empty kind", apiVersion: "v1", kind: "" },
  ])("InvalidSpec without a request: $reason", async ({ apiVersion, kind }) => {
    const { client, discovery } = setup();
    const err = await lookupError(discovery.lookup(apiVersion, kind));
    expect(err.reason).toBe("InvalidSpec");
    expect(client.calls).toEqual([]);
  });

  it("serves every kind of a group version from one request", async () => {
    const { client, discovery } = setup();
    await discovery.lookup("v1", "ConfigMap");
    await discovery.lookup("v1", "Node");
    await discovery.lookup("v1", "ConfigMap");
    expect(client.count("/api/v1")).toBe(1);
  });

  it("a missing kind is asked again only after the backoff, which doubles up to maxRefreshMs", async () => {
    const { client, discovery, setClock } = setup({ minRefreshMs: 100, maxRefreshMs: 400 });
    // Each step: the clock (ms after the first request), then how many requests have been made.
    // Refreshes at 0 (wait 100), 100 (wait 200), 300 (wait 400), 700 (wait 400, the cap), 1100.
    const steps: { reason: string; at: number; wantRequests: number }[] = [
      { reason: "the first lookup asks", at: 0, wantRequests: 1 },
      { reason: "inside the first window (100ms)", at: 99, wantRequests: 1 },
      { reason: "the first window has passed", at: 100, wantRequests: 2 },
      { reason: "inside the doubled window (200ms)", at: 299, wantRequests: 2 },
      { reason: "the doubled window has passed", at: 300, wantRequests: 3 },
      { reason: "inside the 400ms window", at: 699, wantRequests: 3 },
      { reason: "the 400ms window has passed", at: 700, wantRequests: 4 },
      { reason: "the window stays at the 400ms cap, not 800", at: 1099, wantRequests: 4 },
      { reason: "the capped window has passed", at: 1100, wantRequests: 5 },
    ];
    for (const step of steps) {
      setClock(step.at);
      const err = await lookupError(discovery.lookup("apps/v1", "Widget"));
      expect(err.reason).toBe("KindNotFound");
      expect({ reason: step.reason, requests: client.count("/apis/apps/v1") }).toEqual({
        reason: step.reason,
        requests: step.wantRequests,
      });
    }
  });

  it("a CRD installed later is found at the next refresh, without a restart", async () => {
    const { client, discovery, setClock } = setup();
    client.answers.set("/apis/example.com/v1", []);
    await lookupError(discovery.lookup("example.com/v1", "Widget"));
    client.answers.set("/apis/example.com/v1", [{ name: "widgets", kind: "Widget", namespaced: true }]);
    setClock(50);
    expect((await lookupError(discovery.lookup("example.com/v1", "Widget"))).reason).toBe("KindNotFound");
    setClock(100);
    const info = await discovery.lookup("example.com/v1", "Widget");
    expect(info).toMatchObject({ group: "example.com", resource: "widgets", verbs: [] });
    expect(client.count("/apis/example.com/v1")).toBe(2);
  });

  it("a failed refresh keeps the kinds it knew", async () => {
    const { client, discovery, setClock } = setup();
    await discovery.lookup("apps/v1", "Deployment");
    client.answers.set(
      "/apis/apps/v1",
      new ApiError("GET", "/apis/apps/v1", 503, "ServiceUnavailable", "down"),
    );
    setClock(1_000);
    const err = await lookupError(discovery.lookup("apps/v1", "Widget"));
    expect(err.message).toContain("discovery of apps/v1 failed (503 ServiceUnavailable)");
    expect((await discovery.lookup("apps/v1", "Deployment")).resource).toBe("deployments");
  });

  it("concurrent lookups of one group version share one request", async () => {
    const { client, discovery } = setup();
    let open!: () => void;
    client.gate = new Promise((resolve) => (open = resolve));
    const lookups = [
      discovery.lookup("apps/v1", "Deployment"),
      discovery.lookup("apps/v1", "Deployment"),
      discovery.lookup("apps/v1", "Widget").catch((err: unknown) => err),
    ];
    open();
    const [a, b, c] = await Promise.all(lookups);
    expect(a).toEqual(b);
    expect(isResolutionError(c) && c.reason).toBe("KindNotFound");
    expect(client.count("/apis/apps/v1")).toBe(1);
  });

  it.each([
    {
      reason: "invalidate(apiVersion) forgets that group version",
      invalidate: "apps/v1" as string | undefined,
    },
    { reason: "invalidate() forgets every group version", invalidate: undefined },
  ])("$reason: the next lookup asks again, even inside the backoff", async ({ invalidate }) => {
    const { client, discovery } = setup();
    await lookupError(discovery.lookup("apps/v1", "Widget"));
    await discovery.lookup("v1", "ConfigMap");
    discovery.invalidate(invalidate);
    client.answers.set("/apis/apps/v1", [...appsV1, { name: "widgets", kind: "Widget", namespaced: false }]);
    expect((await discovery.lookup("apps/v1", "Widget")).namespaced).toBe(false);
    expect(client.count("/apis/apps/v1")).toBe(2);
    await discovery.lookup("v1", "ConfigMap");
    expect(client.count("/api/v1")).toBe(invalidate === undefined ? 2 : 1);
  });
});
