/**
 * Proof that the test control plane is real: the pinned kube-apiserver, CRDs from crds/ that
 * serve objects, watches that deliver changes, and RBAC that refuses a ServiceAccount token
 * until a Role grants it.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { repoRoot } from "../harness/control-plane.ts";
import { isApiError, type KubeClient, type KubeObject, type WatchEvent } from "../../src/kube/client.ts";
import {
  closeTestClients,
  openScope,
  serviceAccountToken,
  tokenClient,
  uniqueName,
  waitFor,
} from "../harness/kube.ts";
import { bindRole, createRole, serviceAccount } from "../harness/rbac.ts";

let admin: KubeClient;
let ns: string;

beforeAll(async () => {
  ({ admin, ns } = await openScope("control-plane"));
});
afterAll(closeTestClients);

function pinnedVersion(): string {
  const script = readFileSync(join(repoRoot, "scripts", "control-plane-binaries.sh"), "utf8");
  const pinned = /K8S_VERSION="\$\{REFERABLE_K8S_VERSION:-(v[0-9.]+)\}"/.exec(script)?.[1];
  if (!pinned) throw new Error("no pinned version found in scripts/control-plane-binaries.sh");
  return process.env.REFERABLE_K8S_VERSION ?? pinned;
}

describe("the test control plane", () => {
  it("/version reports the pinned kube-apiserver release", async () => {
    const version = await admin.request<{ gitVersion: string; major: string; minor: string }>(
      "GET",
      "/version",
    );
    if (process.env.USE_EXISTING_CLUSTER === "true") {
      expect(version.gitVersion).toMatch(/^v1\.\d+\.\d+/);
    } else {
      expect(version.gitVersion).toBe(pinnedVersion());
      expect(Number(version.minor)).toBeGreaterThanOrEqual(35);
    }
  });

  it("serves objects of a CRD installed from crds/", async () => {
    const name = uniqueName("rf");
    const body = {
      apiVersion: "referable.dev/v1alpha1",
      kind: "Referable",
      metadata: { name },
      spec: {
        source: { apiVersion: "v1", kind: "ConfigMap", namespace: ns, name: "x", fieldPath: "data.k" },
      },
    };
    await admin.request("POST", "/apis/referable.dev/v1alpha1/referables", { body });
    const got = await admin.request<KubeObject>("GET", `/apis/referable.dev/v1alpha1/referables/${name}`);
    expect(got.spec).toEqual(body.spec);
    await admin.request("DELETE", `/apis/referable.dev/v1alpha1/referables/${name}`);
  });

  it("delivers a change to a watch", async () => {
    const list = await admin.request<{ metadata: { resourceVersion: string } }>(
      "GET",
      `/api/v1/namespaces/${ns}/configmaps`,
    );
    const events: WatchEvent[] = [];
    const stream = admin.watch(
      `/api/v1/namespaces/${ns}/configmaps`,
      { resourceVersion: list.metadata.resourceVersion },
      (e) => events.push(e),
    );
    try {
      const name = uniqueName("cm");
      await admin.request("POST", `/api/v1/namespaces/${ns}/configmaps`, {
        body: { apiVersion: "v1", kind: "ConfigMap", metadata: { name }, data: { k: "one" } },
      });
      await admin.request("PATCH", `/api/v1/namespaces/${ns}/configmaps/${name}`, {
        body: { data: { k: "two" } },
        contentType: "application/merge-patch+json",
      });
      const modified = await waitFor("the MODIFIED event", () =>
        events.find((e) => e.type === "MODIFIED" && e.object.metadata?.name === name),
      );
      expect((modified.object.data as Record<string, string>).k).toBe("two");
      expect(events.map((e) => e.type)).toEqual(["ADDED", "MODIFIED"]);
    } finally {
      stream.close();
    }
  });

  it("refuses a ServiceAccount token (403) until a Role grants it, then allows it (200)", async () => {
    const sa = uniqueName("reader");
    const token = await serviceAccountToken(admin, ns, sa);
    const asSa = tokenClient(token);
    const path = `/api/v1/namespaces/${ns}/configmaps`;

    const refused = await asSa.request("GET", path).then(
      () => undefined,
      (err: unknown) => err,
    );
    expect(isApiError(refused, 403)).toBe(true);

    await createRole(admin, sa, [{ apiGroups: [""], resources: ["configmaps"], verbs: ["list"] }], ns);
    await bindRole(admin, sa, sa, [serviceAccount(sa, ns)], ns, "Role");
    // The authorizer learns of new bindings through its own informer: wait for it, bounded.
    const list = await waitFor("the RoleBinding to take effect", () =>
      asSa.request<{ kind: string }>("GET", path),
    );
    expect(list.kind).toBe("ConfigMapList");
    // The grant is exactly what the Role says: other resources stay forbidden.
    const secrets = await asSa.request("GET", `/api/v1/namespaces/${ns}/secrets`).then(
      () => undefined,
      (err: unknown) => err,
    );
    expect(isApiError(secrets, 403)).toBe(true);
  });
});
