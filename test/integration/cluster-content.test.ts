/**
 * The controller's memory follows what is referenced, not what the cluster holds.
 *
 * A tenant with rights only in its own namespace fills it with ConfigMaps of about 1 MiB, more
 * in all than the heap cap the Deployment ships, while Referables read ConfigMaps of another
 * namespace. The controller runs as its own process with that heap cap and the RBAC of
 * deploy/base (its rules, bound to a ServiceAccount of this test). A cache of whole objects
 * crash-looped here; this one must stay up, keep its values right, and still push a change,
 * both while the big objects arrive on its watch and after a restart that lists them all.
 *
 * It runs on a control plane of its own: 300 MB of ConfigMaps would otherwise pass through the
 * cluster-wide ConfigMap watch of every other test file running beside it.
 */
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { KubeClient, KubeObject } from "../../src/kube/client.ts";
import { KubeConfig } from "@kubernetes/client-node";
import { startControlPlane, type PrivateControlPlane } from "../harness/control-plane.ts";
import { clientFor } from "../harness/faults.ts";
import {
  closeTestClients,
  createNamespace,
  deployBaseNodeOptions,
  deployBaseRules,
  kubeConfigWithToken,
  serviceAccountToken,
  tokenClient,
  uniqueName,
  waitFor,
} from "../harness/kube.ts";
import { killAllProcesses, startControllerProcess, type ControllerProcess } from "../harness/process.ts";

const RF = "/apis/referable.dev/v1alpha1/referables";
const SHARD_LABEL = "test.referable.dev/shard";
/** The NODE_OPTIONS deploy/base/deployment.yaml ships: its heap cap. */
const HEAP_CAP = deployBaseNodeOptions();
/** ConfigMaps of about 1 MiB: together about 300 MiB, more than the heap cap. */
const BIG_COUNT = 300;
const BIG_BYTES = 1_000_000;
const WAIT_MS = 60_000;

let plane: PrivateControlPlane;
let admin: KubeClient;
let tenant: KubeClient;
let sourceNs: string;
let tenantNs: string;
let controllerNs: string;
let shard: string;
let kubeconfigDir: string;
let kubeconfigPath: string;

async function createClusterObject(path: string, body: KubeObject): Promise<void> {
  await admin.request("POST", path, { body });
}

async function setValue(name: string, value: string): Promise<void> {
  await admin.request("PATCH", `/api/v1/namespaces/${sourceNs}/configmaps/${name}`, {
    body: { data: { v: value } },
    contentType: "application/merge-patch+json",
  });
}

async function statusOf(name: string): Promise<{ reason?: string; value?: unknown; values?: unknown }> {
  const rf = await admin.request<KubeObject>("GET", `${RF}/${name}`);
  const status = (rf.status ?? {}) as {
    value?: unknown;
    values?: unknown;
    conditions?: Array<{ type: string; reason: string }>;
  };
  const out: { reason?: string; value?: unknown; values?: unknown } = {
    value: status.value,
    values: status.values,
  };
  const reason = status.conditions?.find((c) => c.type === "Ready")?.reason;
  if (reason !== undefined) out.reason = reason;
  return out;
}

async function expectStatus(
  name: string,
  want: { reason: string; value?: unknown; values?: unknown },
): Promise<void> {
  let last: unknown;
  await waitFor(
    `Referable ${name} to be ${JSON.stringify(want)}`,
    async () => {
      const got = await statusOf(name);
      last = got;
      return (
        got.reason === want.reason &&
        ("value" in want ? JSON.stringify(got.value) === JSON.stringify(want.value) : true) &&
        ("values" in want ? JSON.stringify(got.values) === JSON.stringify(want.values) : true)
      );
    },
    { timeoutMs: WAIT_MS, intervalMs: 100 },
  ).catch((err: Error) => {
    throw new Error(`${err.message}; last seen ${JSON.stringify(last)}`);
  });
}

/** True while `p` has not exited. */
async function alive(p: ControllerProcess): Promise<boolean> {
  const state = await Promise.race([
    p.exited.then(() => "exited"),
    new Promise((r) => setImmediate(() => r("running"))),
  ]);
  return state === "running";
}

function startController(): Promise<ControllerProcess> {
  return startControllerProcess(
    [
      "--kubeconfig",
      kubeconfigPath,
      "--leader-elect=false",
      "--referable-selector",
      `${SHARD_LABEL}=${shard}`,
    ],
    { kubeconfig: false, env: { NODE_OPTIONS: HEAP_CAP } },
  );
}

beforeAll(async () => {
  plane = await startControlPlane({
    private: true,
    log: (line) => process.stderr.write(`[cluster-content control-plane] ${line}\n`),
  });
  admin = clientFor(plane.kubeconfigPath);
  const planeConfig = new KubeConfig();
  planeConfig.loadFromFile(plane.kubeconfigPath);
  sourceNs = await createNamespace(admin, "content-src");
  tenantNs = await createNamespace(admin, "content-tenant");
  controllerNs = await createNamespace(admin, "content-ctrl");
  shard = uniqueName("content");

  // The controller: deploy/base's rules, bound to a ServiceAccount of this test.
  const role = uniqueName("content-controller");
  await createClusterObject("/apis/rbac.authorization.k8s.io/v1/clusterroles", {
    apiVersion: "rbac.authorization.k8s.io/v1",
    kind: "ClusterRole",
    metadata: { name: role },
    rules: deployBaseRules("rbac-controller.yaml", "rbac-source-reader-defaults.yaml"),
  });
  await createClusterObject("/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", {
    apiVersion: "rbac.authorization.k8s.io/v1",
    kind: "ClusterRoleBinding",
    metadata: { name: role },
    roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name: role },
    subjects: [{ kind: "ServiceAccount", name: "controller", namespace: controllerNs }],
  });
  const controllerToken = await serviceAccountToken(admin, controllerNs, "controller");
  kubeconfigDir = mkdtempSync(join(tmpdir(), "referable-content-"));
  kubeconfigPath = join(kubeconfigDir, "kubeconfig");
  writeFileSync(kubeconfigPath, kubeConfigWithToken(controllerToken, planeConfig).exportConfig(), {
    mode: 0o600,
  });

  // The tenant: ConfigMaps in its own namespace, nothing else.
  await admin.request("POST", `/apis/rbac.authorization.k8s.io/v1/namespaces/${tenantNs}/roles`, {
    body: {
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "Role",
      metadata: { name: "configmaps" },
      rules: [{ apiGroups: [""], resources: ["configmaps"], verbs: ["create", "get", "list", "delete"] }],
    },
  });
  await admin.request("POST", `/apis/rbac.authorization.k8s.io/v1/namespaces/${tenantNs}/rolebindings`, {
    body: {
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "RoleBinding",
      metadata: { name: "tenant" },
      roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "Role", name: "configmaps" },
      subjects: [{ kind: "ServiceAccount", name: "tenant", namespace: tenantNs }],
    },
  });
  tenant = tokenClient(await serviceAccountToken(admin, tenantNs, "tenant"), planeConfig);

  // What the Referables read: one ConfigMap by name, two by a selector.
  const cm = (name: string, v: string, labels?: Record<string, string>) =>
    admin.request("POST", `/api/v1/namespaces/${sourceNs}/configmaps`, {
      body: { apiVersion: "v1", kind: "ConfigMap", metadata: { name, labels }, data: { v } },
    });
  await cm("db", "db-1");
  await cm("web-a", "a-1", { app: "web" });
  await cm("web-b", "b-1", { app: "web" });
  const rf = (name: string, source: Record<string, unknown>, extra: Record<string, unknown> = {}) =>
    admin.request("POST", RF, {
      body: {
        apiVersion: "referable.dev/v1alpha1",
        kind: "Referable",
        metadata: { name, labels: { [SHARD_LABEL]: shard } },
        spec: {
          source: {
            apiVersion: "v1",
            kind: "ConfigMap",
            namespace: sourceNs,
            fieldPath: "data.v",
            ...source,
          },
          ...extra,
        },
      },
    });
  await rf(`${shard}-db`, { name: "db" });
  await rf(
    `${shard}-web`,
    { selector: { matchLabels: { app: "web" } } },
    { selection: { mode: "Multiple" } },
  );
}, 180_000);

afterAll(async () => {
  await killAllProcesses();
  // The whole control plane goes, and its 300 MB with it.
  await admin?.close();
  await plane?.stop();
  if (kubeconfigDir) rmSync(kubeconfigDir, { recursive: true, force: true });
  await closeTestClients();
});

describe("a tenant's large ConfigMaps", () => {
  it("neither crash the controller under the shipped heap cap nor disturb its values, on the watch and after a restart", async () => {
    let controller = await startController();
    await expectStatus(`${shard}-db`, { reason: "Available", value: "db-1" });
    await expectStatus(`${shard}-web`, { reason: "Available", values: ["a-1", "b-1"] });

    // The tenant fills its namespace while the controller watches ConfigMaps cluster-wide.
    const payload = (i: number) => String.fromCharCode(97 + (i % 26)).repeat(BIG_BYTES);
    let next = 0;
    const create = async () => {
      while (next < BIG_COUNT) {
        const i = next++;
        await tenant.request("POST", `/api/v1/namespaces/${tenantNs}/configmaps`, {
          body: {
            apiVersion: "v1",
            kind: "ConfigMap",
            metadata: { name: `big-${i}` },
            data: { blob: payload(i) },
          },
          timeoutMs: 60_000,
        });
      }
    };
    await Promise.all([create(), create(), create()]);

    // Still up, values unchanged, and a change still arrives.
    await setValue("db", "db-2");
    await expectStatus(`${shard}-db`, { reason: "Available", value: "db-2" });
    await setValue("web-b", "b-2");
    await expectStatus(`${shard}-web`, { reason: "Available", values: ["a-1", "b-2"] });
    expect(await alive(controller)).toBe(true);

    // A restart lists every ConfigMap of the cluster, the tenant's included.
    await controller.stop("SIGTERM");
    controller = await startController();
    await setValue("db", "db-3");
    await expectStatus(`${shard}-db`, { reason: "Available", value: "db-3" });
    await expectStatus(`${shard}-web`, { reason: "Available", values: ["a-1", "b-2"] });
    // An object that starts matching a selector gets read (its data was not kept before).
    await admin.request("POST", `/api/v1/namespaces/${sourceNs}/configmaps`, {
      body: { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "web-c" }, data: { v: "c-1" } },
    });
    await admin.request("PATCH", `/api/v1/namespaces/${sourceNs}/configmaps/web-c`, {
      body: { metadata: { labels: { app: "web" } } },
      contentType: "application/merge-patch+json",
    });
    await expectStatus(`${shard}-web`, { reason: "Available", values: ["a-1", "b-2", "c-1"] });
    expect(await alive(controller)).toBe(true);
    expect(controller.stderr()).not.toContain("heap limit");
  }, 600_000);
});
