/**
 * The facts about a source's kind and the controller's access to it, followed as they change:
 * - RBAC withdrawn mid-watch is noticed when the watch's bounded lifetime ends (a watch is not
 *   re-authorised while it lasts): the Referable turns Forbidden;
 * - a CRD deleted and recreated with another scope is noticed within seconds (discovery follows
 *   CRDs), not at the next restart;
 * - a CRD deleted for good is KindNotFound, which one 404 alone never decides.
 */
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import type { KubeClient, KubeObject } from "../../src/kube/client.ts";
import {
  startTestController,
  tearDownControllers,
  waitForReason,
  type TestController,
  createReferable as createReferableAs,
  REFERABLES,
} from "../harness/controller.ts";
import {
  adminClient,
  createNamespace,
  deployBaseRules,
  installTestCrd,
  uniqueName,
  waitFor,
  testCrdSource,
  configMapField,
} from "../harness/kube.ts";
import { RBAC } from "../harness/rbac.ts";
import { controllerAccount } from "../harness/controller-account.ts";

const CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";

let admin: KubeClient;
const controllers: TestController[] = [];
const cleanup: string[] = [];

beforeAll(() => {
  admin = adminClient();
});

afterAll(() => tearDownControllers(admin, controllers, cleanup));

async function createReferable(name: string, shard: string, source: Record<string, unknown>): Promise<void> {
  await createReferableAs(admin, { source }, { shard, name });
  cleanup.push(`${REFERABLES}/${name}`);
}

async function deleteCrdAndWait(name: string): Promise<void> {
  await admin.request("DELETE", `${CRDS}/${name}`);
  await waitFor(
    `CRD ${name} to be gone`,
    async () => {
      try {
        await admin.request("GET", `${CRDS}/${name}`);
        return false;
      } catch {
        return true;
      }
    },
    { timeoutMs: 60_000, intervalMs: 100 },
  );
}

describe("access withdrawn", () => {
  it("RBAC revoked mid-watch turns the Referable Forbidden once the watch's bounded lifetime ends", async () => {
    // The controller's rules from deploy/base, less the source kinds; ConfigMaps from a role of their own.
    const account = await controllerAccount(
      admin,
      "revoke",
      cleanup,
      deployBaseRules("rbac-controller.yaml"),
    );
    const ns = account.ns;
    const reader = await account.grant([
      { apiGroups: [""], resources: ["configmaps"], verbs: ["list", "watch"] },
    ]);
    const client = account.client;
    const tc = await startTestController({ client, watchTimeoutSeconds: [2, 3] });
    controllers.push(tc);

    await admin.request("POST", `/api/v1/namespaces/${ns}/configmaps`, {
      body: { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "db" }, data: { v: "secret-ish" } },
    });
    const name = `${tc.shard}-revoked`;
    await createReferable(name, tc.shard, configMapField(ns, "db"));
    await waitForReason(admin, name, "Available", (v) => v.status.value === "secret-ish");

    // The role loses ConfigMaps; the open watch would keep delivering until its lifetime ends.
    await admin.request("DELETE", `${RBAC}/clusterrolebindings/${reader}`);
    const view = await waitForReason(admin, name, "Forbidden", () => true, 30_000);
    expect(view.message).toContain("configmaps");
  }, 90_000);
});

describe("discovery follows CRDs", () => {
  it("a namespaced CRD recreated cluster-scoped makes its Referables InvalidSpec within seconds", async () => {
    const tc = await startTestController();
    controllers.push(tc);
    const ns = await createNamespace(admin, "scope", cleanup);
    const group = `${uniqueName("scope")}.test.referable.dev`;
    await installTestCrd(admin, group, "Gadget", "Namespaced");
    const crd = `gadgets.${group}`;
    cleanup.push(`${CRDS}/${crd}`);
    await admin.request("POST", `/apis/${group}/v1/namespaces/${ns}/gadgets`, {
      body: { apiVersion: `${group}/v1`, kind: "Gadget", metadata: { name: "g" }, spec: { size: 3 } },
    });
    const gadgetSize = testCrdSource(group, "Gadget", ns, "g", "spec.size");
    const name = `${tc.shard}-scoped`;
    await createReferable(name, tc.shard, gadgetSize);
    await waitForReason(admin, name, "Available", (v) => v.status.value === 3);

    await deleteCrdAndWait(crd);
    await installTestCrd(admin, group, "Gadget", "Cluster");
    const view = await waitForReason(admin, name, "InvalidSpec", () => true, 20_000);
    expect(view.message).toContain("cluster-scoped");
    // A new Referable of the same kind is told the same at once.
    const fresh = `${tc.shard}-scoped-new`;
    await createReferable(fresh, tc.shard, gadgetSize);
    await waitForReason(admin, fresh, "InvalidSpec", () => true, 20_000);
  }, 90_000);

  it("a CRD deleted for good is KindNotFound once discovery confirms it, and its value is cleared", async () => {
    const tc = await startTestController();
    controllers.push(tc);
    const group = `${uniqueName("gone")}.test.referable.dev`;
    await installTestCrd(admin, group, "Gizmo", "Cluster");
    const crd = `gizmos.${group}`;
    cleanup.push(`${CRDS}/${crd}`);
    await admin.request("POST", `/apis/${group}/v1/gizmos`, {
      body: { apiVersion: `${group}/v1`, kind: "Gizmo", metadata: { name: "z" }, spec: { size: 7 } },
    });
    const name = `${tc.shard}-gone`;
    await createReferable(name, tc.shard, {
      apiVersion: `${group}/v1`,
      kind: "Gizmo",
      name: "z",
      fieldPath: "spec.size",
    });
    await waitForReason(admin, name, "Available", (v) => v.status.value === 7);
    await deleteCrdAndWait(crd);
    const view = await waitForReason(admin, name, "KindNotFound", () => true, 30_000);
    expect(view.status.value).toBeUndefined();
    const stored = await admin.request<KubeObject>("GET", `${REFERABLES}/${name}`);
    expect((stored.status as { value?: unknown }).value).toBeUndefined();
  }, 90_000);
});
