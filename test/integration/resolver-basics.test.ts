/**
 * The resolver against the real API server: names, JSON types, push updates, scope checks,
 * the Ready=True reasons (Available, Defaulted, Optional) and the failures a spec can cause.
 */
import { createResolver } from "../../src/resolver/resolver.ts";
import { testKubeConfig, uniqueName } from "../harness/kube.ts";
import { useResolverScope } from "../harness/resolver-scope.ts";
import { ResultRecorder, reasonOf } from "../harness/recorder.ts";

const scope = useResolverScope("resolver-basics");

async function patchConfigMap(name: string, patch: Record<string, unknown>) {
  await scope.admin.request("PATCH", `/api/v1/namespaces/${scope.ns}/configmaps/${name}`, {
    body: patch,
    contentType: "application/merge-patch+json",
  });
}

describe("resolving by name", () => {
  it("reads a ConfigMap value and pushes every change of it", async () => {
    const name = uniqueName("cm");
    await scope.createConfigMap(name, { "endpoint.url": "db-1" });
    const rec = new ResultRecorder();
    const sub = scope.resolver.watch(
      { apiVersion: "v1", kind: "ConfigMap", namespace: scope.ns, name, fieldPath: "data[endpoint.url]" },
      rec.push,
    );
    try {
      const first = await rec.reason("Available");
      expect(first).toMatchObject({
        ok: true,
        value: "db-1",
        source: { kind: "ConfigMap", namespace: scope.ns, name },
      });
      await patchConfigMap(name, { data: { "endpoint.url": "db-2" } });
      expect(await rec.next("db-2", (r) => r.ok && "value" in r && r.value === "db-2")).toBeTruthy();
      // An update that leaves the value alone pushes nothing.
      const before = rec.results.length;
      await patchConfigMap(name, { metadata: { annotations: { touched: "yes" } } });
      await patchConfigMap(name, { data: { "endpoint.url": "db-3" } });
      await rec.next("db-3", (r) => r.ok && "value" in r && r.value === "db-3");
      expect(rec.results.length).toBe(before + 1);
    } finally {
      sub.close();
    }
  });

  it("keeps JSON types: a Service port is a number, an object stays an object", async () => {
    const name = uniqueName("svc");
    await scope.admin.request("POST", `/api/v1/namespaces/${scope.ns}/services`, {
      body: {
        apiVersion: "v1",
        kind: "Service",
        metadata: { name },
        spec: { ports: [{ name: "http", port: 8080, protocol: "TCP" }], selector: { app: "x" } },
      },
    });
    const port = await scope.resolver.resolve({
      apiVersion: "v1",
      kind: "Service",
      namespace: scope.ns,
      name,
      fieldPath: "spec.ports[0].port",
    });
    expect(port.value).toBe(8080);
    const selector = await scope.resolver.resolve({
      apiVersion: "v1",
      kind: "Service",
      namespace: scope.ns,
      name,
      fieldPath: "spec.selector",
    });
    expect(selector.value).toEqual({ app: "x" });
    const filtered = await scope.resolver.resolve({
      apiVersion: "v1",
      kind: "Service",
      namespace: scope.ns,
      name,
      fieldPath: 'spec.ports[?(@.name=="http")].protocol',
    });
    expect(filtered.value).toBe("TCP");
  });

  it("reads a cluster-scoped kind (Namespace) and refuses a namespace on it", async () => {
    await scope.admin.request("PATCH", `/api/v1/namespaces/${scope.ns}`, {
      body: { metadata: { labels: { "team.example.com/owner": "storage" } } },
      contentType: "application/merge-patch+json",
    });
    const owner = await scope.resolver.resolve({
      apiVersion: "v1",
      kind: "Namespace",
      name: scope.ns,
      fieldPath: "metadata.labels[team.example.com/owner]",
    });
    expect(owner).toMatchObject({
      reason: "Available",
      value: "storage",
      source: { kind: "Namespace", name: scope.ns },
    });
    await expect(
      scope.resolver.resolve({
        apiVersion: "v1",
        kind: "Namespace",
        namespace: scope.ns,
        name: scope.ns,
        fieldPath: "metadata.name",
      }),
    ).rejects.toMatchObject({ reason: "InvalidSpec", message: expect.stringContaining("cluster-scoped") });
    await expect(
      scope.resolver.resolve({ apiVersion: "v1", kind: "ConfigMap", name: "x", fieldPath: "data.a" }),
    ).rejects.toMatchObject({ reason: "InvalidSpec", message: expect.stringContaining("namespaced") });
  });

  it("reports an object created after the reference, a field that appears later, and a delete and recreate", async () => {
    const name = uniqueName("late");
    const rec = new ResultRecorder();
    const sub = scope.resolver.watch(
      { apiVersion: "v1", kind: "ConfigMap", namespace: scope.ns, name, fieldPath: "data.key" },
      rec.push,
    );
    try {
      expect(reasonOf(await rec.next("not Pending", (r) => reasonOf(r) !== "Pending"))).toBe(
        "SourceNotFound",
      );
      await scope.createConfigMap(name, { other: "x" });
      const noField = await rec.reason("FieldNotFound");
      expect(!noField.ok && noField.error.message).toContain("data.key");
      await patchConfigMap(name, { data: { key: "v1" } });
      const available = await rec.reason("Available");
      const firstUid = available.ok && "source" in available ? available.source?.uid : undefined;
      expect(firstUid).toBeTruthy();

      await scope.admin.request("DELETE", `/api/v1/namespaces/${scope.ns}/configmaps/${name}`);
      const gone = await rec.reason("SourceNotFound");
      expect(gone.ok).toBe(false);
      await scope.createConfigMap(name, { key: "v2" });
      const back = await rec.reason("Available");
      expect(back).toMatchObject({ ok: true, value: "v2" });
      expect(back.ok && "source" in back && back.source?.uid).not.toBe(firstUid);
    } finally {
      sub.close();
    }
  });

  it("applies default (Defaulted), Optional and external", async () => {
    const missing = uniqueName("absent");
    const base = {
      apiVersion: "v1",
      kind: "ConfigMap",
      namespace: scope.ns,
      name: missing,
      fieldPath: "data.k",
    };
    expect(await scope.resolver.resolve({ ...base, default: { fallback: true } })).toEqual({
      reason: "Defaulted",
      value: { fallback: true },
    });
    expect(await scope.resolver.resolve({ ...base, policy: { resolution: "Optional" } })).toEqual({
      reason: "Optional",
    });
    // default wins over Optional
    expect(
      await scope.resolver.resolve({ ...base, default: 3, policy: { resolution: "Optional" } }),
    ).toMatchObject({
      reason: "Defaulted",
      value: 3,
    });
    expect(
      await scope.resolver.resolve({
        apiVersion: "v1",
        kind: "ConfigMap",
        namespace: scope.ns,
        external: "arn:aws:s3:::bucket",
      }),
    ).toEqual({ reason: "Available", value: "arn:aws:s3:::bucket" });
  });

  it("refuses a value over the size limit with ValueTooLarge, and never puts the value in the message", async () => {
    const name = uniqueName("big");
    const secretish = "s3cr3t-".repeat(6000); // 42 KB, over the 32 KiB default
    await scope.createConfigMap(name, { big: secretish });
    const err = await scope.resolver
      .resolve({ apiVersion: "v1", kind: "ConfigMap", namespace: scope.ns, name, fieldPath: "data.big" })
      .catch((e: unknown) => e);
    expect(err).toMatchObject({ reason: "ValueTooLarge", retryable: true });
    expect((err as Error).message).toContain("32768");
    expect((err as Error).message).not.toContain("s3cr3t");
  });

  it("gives InvalidSpec for a fieldPath that does not parse and KindNotFound for an unknown kind", async () => {
    await expect(
      scope.resolver.resolve({
        apiVersion: "v1",
        kind: "ConfigMap",
        namespace: scope.ns,
        name: "x",
        fieldPath: "data[unclosed",
      }),
    ).rejects.toMatchObject({ reason: "InvalidSpec", retryable: false });
    await expect(
      scope.resolver.resolve({
        apiVersion: "nothing.example.com/v1",
        kind: "Nothing",
        name: "x",
        fieldPath: "spec",
      }),
    ).rejects.toMatchObject({
      reason: "KindNotFound",
      message: expect.stringContaining("nothing.example.com/v1"),
    });
    await expect(
      scope.resolver.resolve({
        apiVersion: "not/a/version",
        kind: "ConfigMap",
        name: "x",
        fieldPath: "spec",
      }),
    ).rejects.toMatchObject({ reason: "InvalidSpec" });
  });

  it("pushes Pending first for a kind whose first list has not completed", async () => {
    const fresh = createResolver({ kubeConfig: testKubeConfig(), informerLingerMs: 0 });
    const rec = new ResultRecorder();
    const sub = fresh.watch(
      { apiVersion: "v1", kind: "ConfigMap", namespace: scope.ns, name: "whatever", fieldPath: "data.a" },
      rec.push,
    );
    try {
      await rec.reason("SourceNotFound");
      expect(rec.results.map(reasonOf)).toEqual(["Pending", "SourceNotFound"]);
      expect(rec.results[0]).toMatchObject({ ok: false, error: { reason: "Pending", retryable: true } });
    } finally {
      sub.close();
      await fresh.stop();
    }
  });
});

describe("names that a field selector must escape", () => {
  it("reads an object named with '=' and ',' by name, from a watched kind and consistently", async () => {
    // RBAC objects take path-segment names, so '=' and ',' are allowed there.
    const apiVersion = "rbac.authorization.k8s.io/v1";
    const base = `/apis/${apiVersion}/clusterroles`;
    const plain = uniqueName("plain-role");
    const odd = `${uniqueName("odd")}=b,c`;
    for (const [name, verb] of [
      [plain, "get"],
      [odd, "watch"],
    ] as const)
      await scope.admin.request("POST", base, {
        body: {
          apiVersion,
          kind: "ClusterRole",
          metadata: { name },
          rules: [{ apiGroups: [""], resources: ["configmaps"], verbs: [verb] }],
        },
      });
    const ref = (name: string) => ({ apiVersion, kind: "ClusterRole", name, fieldPath: "rules[0].verbs[0]" });
    try {
      // The kind is watched (and the odd object decoded) before anyone reads the odd object, so
      // its value is read again by name: a list with a metadata.name field selector.
      const first = new ResultRecorder();
      const second = new ResultRecorder();
      const a = scope.resolver.watch(ref(plain), first.push);
      try {
        expect(await first.reason("Available")).toMatchObject({ value: "get" });
        const b = scope.resolver.watch(ref(odd), second.push);
        try {
          expect(await second.reason("Available")).toMatchObject({ ok: true, value: "watch" });
        } finally {
          b.close();
        }
      } finally {
        a.close();
      }
      expect(await scope.resolver.resolve(ref(odd), { consistent: true })).toMatchObject({ value: "watch" });
    } finally {
      for (const name of [plain, odd])
        await scope.admin.request("DELETE", `${base}/${encodeURIComponent(name)}`).catch(() => undefined);
    }
  });
});
