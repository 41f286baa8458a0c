/**
 * A KUBECONFIG of several files, against the real API server: merged as kubectl merges it (the
 * first file's current-context wins) and a chosen context, for the library (loadKubeConfig and
 * createResolver's `context`) and for the controller's loader (loadClusterAccess, `--context`).
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { delimiter, join } from "node:path";
import { loadClusterAccess } from "../../src/kube/access.ts";
import { KubeClient } from "../../src/kube/client.ts";
import { createResolver, loadKubeConfig } from "../../src/index.ts";
import {
  adminClient,
  closeTestClients,
  createNamespace,
  uniqueName,
  writeUnreachableKubeconfig,
} from "../harness/kube.ts";

let dir: string;
let kubeconfig: string;
let ns: string;
const name = uniqueName("cm");

beforeAll(async () => {
  const testKubeconfig = process.env.REFERABLE_TEST_KUBECONFIG;
  if (!testKubeconfig) throw new Error("REFERABLE_TEST_KUBECONFIG is not set: run through jest");
  dir = await mkdtemp(join(tmpdir(), "kubeconfig-it-"));
  // The first file sets its own current-context, to a server where nothing listens; the second
  // is the test control plane's admin kubeconfig (context "referable-test").
  const first = join(dir, "first");
  await writeUnreachableKubeconfig(first);
  kubeconfig = [first, join(dir, "not-there"), testKubeconfig].join(delimiter);
  const admin = adminClient();
  ns = await createNamespace(admin, "kubeconfig");
  await admin.request("POST", `/api/v1/namespaces/${ns}/configmaps`, {
    body: { apiVersion: "v1", kind: "ConfigMap", metadata: { name }, data: { host: "db.internal" } },
  });
});
afterAll(async () => {
  await closeTestClients();
  await rm(dir, { recursive: true, force: true });
});

const ref = () => ({ apiVersion: "v1", kind: "ConfigMap", namespace: ns, name, fieldPath: "data.host" });

describe("a KUBECONFIG of several files", () => {
  it("loadKubeConfig keeps the first file's current-context, and a chosen context reaches the control plane", async () => {
    const merged = await loadKubeConfig({ kubeconfig });
    expect(merged.getCurrentContext()).toBe("nowhere");
    expect(merged.getContexts().map((c) => c.name)).toEqual(["nowhere", "referable-test"]);

    const chosen = await loadKubeConfig({ kubeconfig, context: "referable-test" });
    const resolver = createResolver({ kubeConfig: chosen, informerLingerMs: 0 });
    try {
      await resolver.start();
      expect(await resolver.resolve(ref())).toMatchObject({ value: "db.internal", reason: "Available" });
    } finally {
      await resolver.stop();
    }
  }, 30_000);

  it("createResolver's context picks a context of the merged KubeConfig; without it, the current one is used", async () => {
    const merged = await loadKubeConfig({ kubeconfig });
    const resolver = createResolver({ kubeConfig: merged, context: "referable-test", informerLingerMs: 0 });
    try {
      await resolver.start();
      expect(await resolver.resolve(ref())).toMatchObject({ value: "db.internal" });
    } finally {
      await resolver.stop();
    }
    expect(merged.getCurrentContext()).toBe("nowhere"); // the caller's KubeConfig is untouched

    const unreachable = createResolver({ kubeConfig: merged });
    try {
      await expect(unreachable.start()).rejects.toThrow();
    } finally {
      await unreachable.stop();
    }
  }, 30_000);

  it("the controller's loader (--kubeconfig list, --context) reaches the control plane", async () => {
    const access = await loadClusterAccess({ kubeconfig, context: "referable-test", env: {} });
    const client = new KubeClient({ access });
    try {
      const cm = await client.request<{ data?: Record<string, string> }>(
        "GET",
        `/api/v1/namespaces/${ns}/configmaps/${name}`,
      );
      expect(cm.data).toEqual({ host: "db.internal" });
    } finally {
      await client.close();
    }
  }, 30_000);
});
