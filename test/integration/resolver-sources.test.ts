/**
 * The resolver's sources against the real API server: arbitrary CRDs (also installed after the
 * reference), requireConditions, label selectors in Single and Multiple mode, RBAC that
 * forbids a kind, and one shared informer per kind.
 */
import { createResolver, Resolver } from "../../src/resolver/resolver.ts";
import {
  adminClient,
  installTestCrd,
  kubeConfigWithToken,
  serviceAccountToken,
  testKubeConfig,
  uniqueName,
  mergePatch as mergePatchAs,
} from "../harness/kube.ts";
import { useResolverScope } from "../harness/resolver-scope.ts";
import { ResultRecorder, reasonOf } from "../harness/recorder.ts";

// Not started: its first read starts it.
const scope = useResolverScope("resolver-sources", async () =>
  createResolver({ kubeConfig: testKubeConfig(), informerLingerMs: 0, kindRetryMs: [200, 2000] }),
);

const mergePatch = (path: string, body: unknown) => mergePatchAs(scope.admin, path, body);

describe("custom resources", () => {
  it("waits for requireConditions on a CRD object (SourceNotReady), then takes the value", async () => {
    const group = `${uniqueName("ready")}.test.referable.dev`;
    const apiVersion = await installTestCrd(scope.admin, group, "Bucket");
    const name = uniqueName("bucket");
    const path = `/apis/${group}/v1/namespaces/${scope.ns}/buckets`;
    await scope.admin.request("POST", path, {
      body: { apiVersion, kind: "Bucket", metadata: { name }, spec: {} },
    });
    const rec = new ResultRecorder();
    const sub = scope.resolver.watch(
      {
        apiVersion,
        kind: "Bucket",
        namespace: scope.ns,
        name,
        fieldPath: "status.atProvider.arn",
        requireConditions: [{ type: "Ready", status: "True" }],
      },
      rec.push,
    );
    try {
      const notReady = await rec.reason("SourceNotReady");
      expect(!notReady.ok && notReady.error.message).toContain("Ready=True");
      await mergePatch(`${path}/${name}/status`, {
        status: { atProvider: { arn: "arn:1" }, conditions: [{ type: "Ready", status: "True" }] },
      });
      expect(await rec.reason("Available")).toMatchObject({ value: "arn:1" });
    } finally {
      sub.close();
    }
  });

  it("resolves a kind whose CRD is installed after the reference (KindNotFound first), without a restart", async () => {
    const group = `${uniqueName("later")}.test.referable.dev`;
    const rec = new ResultRecorder();
    const sub = scope.resolver.watch(
      { apiVersion: `${group}/v1`, kind: "Gadget", namespace: scope.ns, name: "g1", fieldPath: "spec.size" },
      rec.push,
    );
    try {
      const notFound = await rec.reason("KindNotFound");
      expect(!notFound.ok && notFound.error.retryable).toBe(true);
      await installTestCrd(scope.admin, group, "Gadget");
      await rec.reason("SourceNotFound");
      await scope.admin.request("POST", `/apis/${group}/v1/namespaces/${scope.ns}/gadgets`, {
        body: { apiVersion: `${group}/v1`, kind: "Gadget", metadata: { name: "g1" }, spec: { size: 3 } },
      });
      expect(await rec.reason("Available")).toMatchObject({ value: 3 });
    } finally {
      sub.close();
    }
  });
});

describe("label selectors", () => {
  it("Single: follows a label that starts and stops matching, and refuses two matches (AmbiguousSelector)", async () => {
    const app = uniqueName("app");
    const rec = new ResultRecorder();
    const sub = scope.resolver.watch(
      { apiVersion: "v1", kind: "ConfigMap", namespace: scope.ns, matchLabels: { app }, fieldPath: "data.v" },
      rec.push,
    );
    try {
      await rec.reason("SourceNotFound");
      const a = uniqueName("a");
      await scope.createConfigMap(a, { v: "from-a" });
      await mergePatch(`/api/v1/namespaces/${scope.ns}/configmaps/${a}`, { metadata: { labels: { app } } });
      expect(await rec.reason("Available")).toMatchObject({ value: "from-a", source: { name: a } });

      const b = uniqueName("b");
      await scope.createConfigMap(b, { v: "from-b" }, { app });
      const ambiguous = await rec.reason("AmbiguousSelector");
      expect(!ambiguous.ok && ambiguous.error.message).toContain("2 objects match");

      await mergePatch(`/api/v1/namespaces/${scope.ns}/configmaps/${a}`, {
        metadata: { labels: { app: null } },
      });
      expect(await rec.reason("Available")).toMatchObject({ value: "from-b", source: { name: b } });
      await mergePatch(`/api/v1/namespaces/${scope.ns}/configmaps/${b}`, {
        metadata: { labels: { app: "other" } },
      });
      await rec.reason("SourceNotFound");
    } finally {
      sub.close();
    }
  });

  it("Multiple: orders values, honours sortByFieldPath, minMatch (TooFewMatches) and maxMatch", async () => {
    const tier = uniqueName("tier");
    for (const [name, order] of [
      ["m-c", "1"],
      ["m-a", "3"],
      ["m-b", "2"],
    ] as const) {
      await scope.createConfigMap(`${tier}-${name}`, { v: name, order }, { tier });
    }
    const base = {
      apiVersion: "v1",
      kind: "ConfigMap",
      namespace: scope.ns,
      matchExpressions: [{ key: "tier", operator: "In" as const, values: [tier] }],
      fieldPath: "data.v",
      mode: "Multiple" as const,
    };
    const byName = await scope.resolver.resolveSelector(base);
    expect(byName.values).toEqual(["m-a", "m-b", "m-c"]);
    expect(byName.sources.map((s) => s.name)).toEqual([`${tier}-m-a`, `${tier}-m-b`, `${tier}-m-c`]);

    const byOrder = await scope.resolver.resolveSelector({ ...base, sortByFieldPath: "data.order" });
    expect(byOrder.values).toEqual(["m-c", "m-b", "m-a"]);

    const firstTwo = await scope.resolver.resolveSelector({ ...base, maxMatch: 2 });
    expect(firstTwo.values).toEqual(["m-a", "m-b"]);

    await expect(scope.resolver.resolveSelector({ ...base, minMatch: 4 })).rejects.toMatchObject({
      reason: "TooFewMatches",
      message: expect.stringContaining("minMatch is 4"),
    });
  });

  it("Multiple: matches without the field are left out; a selection left short is missing, so default applies", async () => {
    const tier = uniqueName("tier");
    await scope.createConfigMap(`${tier}-a`, { other: "x" }, { tier });
    await scope.createConfigMap(`${tier}-b`, { other: "y" }, { tier });
    const base = {
      apiVersion: "v1",
      kind: "ConfigMap",
      namespace: scope.ns,
      matchLabels: { tier },
      fieldPath: "data.v",
      mode: "Multiple" as const,
    };
    await expect(scope.resolver.resolveSelector(base)).rejects.toMatchObject({
      reason: "FieldNotFound",
      message: expect.stringContaining("2 objects match"),
    });
    const rec = new ResultRecorder();
    const sub = scope.resolver.watch({ ...base, default: ["fallback"] }, rec.push);
    try {
      expect(await rec.reason("Defaulted")).toMatchObject({ values: ["fallback"], sources: [] });
      await mergePatch(`/api/v1/namespaces/${scope.ns}/configmaps/${tier}-b`, { data: { v: "b" } });
      const available = await rec.reason("Available");
      expect(available).toMatchObject({ values: ["b"] });
      expect(available.ok && "sources" in available && available.sources.map((s) => s.name)).toEqual([
        `${tier}-b`,
      ]);
    } finally {
      sub.close();
    }
  });
});

describe("RBAC", () => {
  it("gives Forbidden for a kind the caller may not read, retrying on the backoff rather than in a storm", async () => {
    const sa = uniqueName("limited");
    const token = await serviceAccountToken(scope.admin, scope.ns, sa);
    const errorsAt: number[] = [];
    const limited = createResolver({
      kubeConfig: kubeConfigWithToken(token),
      informerLingerMs: 0,
      onInformerSignal: (signal) => {
        if (signal === "error") errorsAt.push(performance.now());
      },
    });
    const rec = new ResultRecorder();
    const sub = limited.watch(
      { apiVersion: "v1", kind: "ConfigMap", namespace: scope.ns, name: "x", fieldPath: "data.a" },
      rec.push,
    );
    try {
      const forbidden = await rec.reason("Forbidden");
      expect(!forbidden.ok && forbidden.error.message).toContain("list and watch");
      // Wait (bounded) for three refused lists; the gaps between them must follow the
      // exponential backoff (250 ms base, jitter never below half), not a hot loop.
      const deadline = Date.now() + 10_000;
      while (errorsAt.length < 3 && Date.now() < deadline)
        await rec.next("more pushes", () => false, 200).catch(() => undefined);
      expect(errorsAt.length).toBeGreaterThanOrEqual(3);
      const gaps = errorsAt.slice(1).map((t, i) => t - errorsAt[i]!);
      expect(gaps[0]).toBeGreaterThanOrEqual(120);
      expect(gaps[1]).toBeGreaterThanOrEqual(240);
      expect(rec.results.filter((r) => reasonOf(r) === "Forbidden")).toHaveLength(1);
    } finally {
      sub.close();
      await limited.stop();
    }
  });
});

describe("informer sharing", () => {
  it("serves 100 references to one kind with one informer and one watch, and closes it with the last", async () => {
    const client = adminClient();
    const shared = new Resolver({ client, informerLingerMs: 0 });
    const name = uniqueName("shared");
    await scope.createConfigMap(name, { k: "v" });
    const recs = Array.from({ length: 100 }, () => new ResultRecorder());
    const subs = recs.map((rec, i) =>
      shared.watch(
        {
          apiVersion: "v1",
          kind: "ConfigMap",
          namespace: scope.ns,
          name,
          fieldPath: i % 2 ? "data.k" : "metadata.name",
        },
        rec.push,
      ),
    );
    try {
      await Promise.all(recs.map((rec) => rec.reason("Available")));
      expect(shared.informerCount).toBe(1);
      expect(client.activeWatches).toBe(1);
      await mergePatch(`/api/v1/namespaces/${scope.ns}/configmaps/${name}`, { data: { k: "w" } });
      await Promise.all(
        recs
          .filter((_, i) => i % 2)
          .map((rec) => rec.next("w", (r) => r.ok && "value" in r && r.value === "w")),
      );
    } finally {
      subs.forEach((s) => s.close());
    }
    expect(shared.subscriptionCount).toBe(0);
    expect(shared.informerCount).toBe(0);
    await shared.stop();
    expect(client.activeWatches).toBe(0);
  });
});
