/**
 * A private control plane where a tenant, with rights only to ConfigMaps in its own namespace,
 * writes what it likes, while the controller runs as its own process with deploy/base's RBAC
 * (bound to a ServiceAccount of the test) and Referables of one shard read another namespace.
 * For the memory tests whose tenant objects must not pass through other test files' watches.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { KubeConfig } from "@kubernetes/client-node";
import type { KubeClient, KubeObject } from "../../src/kube/client.ts";
import { startControlPlane, type PrivateControlPlane } from "./control-plane.ts";
import { clientFor } from "./faults.ts";
import {
  createNamespace,
  deployBaseRules,
  kubeConfigWithToken,
  serviceAccountToken,
  tokenClient,
  uniqueName,
  waitFor,
} from "./kube.ts";
import { createReferable as createReferableAs, SHARD_LABEL } from "./controller.ts";
import { startControllerProcess, type ControllerProcess } from "./process.ts";
import { bindRole, createRole, serviceAccount } from "./rbac.ts";

const RF = "/apis/referable.dev/v1alpha1/referables";

/** What {@link TenantPlane.statusOf} reads of a Referable. */
export interface ReadyStatus {
  reason?: string;
  value?: unknown;
  values?: unknown;
}

/** The plane, its two clients and namespaces, and the moves the tests make on them. */
export interface TenantPlane {
  readonly plane: PrivateControlPlane;
  readonly admin: KubeClient;
  /** The tenant's client: ConfigMaps in `tenantNs` only. */
  readonly tenant: KubeClient;
  /** Where the ConfigMaps the Referables read live. */
  readonly sourceNs: string;
  readonly tenantNs: string;
  /** The label value of this test's Referables, which its controller alone reconciles. */
  readonly shard: string;
  /** Starts the controller process as the ServiceAccount, with `NODE_OPTIONS`. */
  startController(nodeOptions: string): Promise<ControllerProcess>;
  /** Creates a ConfigMap in the source namespace with `data.v`. */
  createSource(name: string, v: string, labels?: Record<string, string>): Promise<void>;
  /** Sets `data.v` of a source ConfigMap. */
  setValue(name: string, value: string): Promise<void>;
  /** Creates a Referable of the shard reading `data.v` of source ConfigMaps. */
  createReferable(
    name: string,
    source: Record<string, unknown>,
    extra?: Record<string, unknown>,
  ): Promise<void>;
  statusOf(name: string): Promise<ReadyStatus>;
  /**
   * The tenant creates `count` ConfigMaps in its namespace, three requests at a time: object `i`
   * is `configMap(i)` (its name, labels and data); `afterEach(i)` runs once it is created.
   */
  fillTenantNamespace(
    count: number,
    configMap: (i: number) => Pick<KubeObject, "metadata"> & { data: Record<string, string> },
    afterEach?: (i: number) => Promise<void>,
  ): Promise<void>;
  /** Waits until the Referable's Ready reason (and value or values, when given) are `want`. */
  expectStatus(name: string, want: ReadyStatus & { reason: string }): Promise<void>;
  /** Closes the admin client, stops the plane and removes the kubeconfig. */
  stop(): Promise<void>;
}

/** Starts the plane and sets up both identities; `prefix` names its namespaces and log lines. */
export async function startTenantPlane(prefix: string, waitMs: number): Promise<TenantPlane> {
  const plane = await startControlPlane({
    private: true,
    log: (line) => process.stderr.write(`[${prefix} control-plane] ${line}\n`),
  });
  try {
    return await setUp(plane, prefix, waitMs);
  } catch (err) {
    await plane.stop();
    throw err;
  }
}

async function setUp(plane: PrivateControlPlane, prefix: string, waitMs: number): Promise<TenantPlane> {
  const admin = clientFor(plane.kubeconfigPath, true);
  const planeConfig = new KubeConfig();
  planeConfig.loadFromFile(plane.kubeconfigPath);
  const sourceNs = await createNamespace(admin, `${prefix}-src`);
  const tenantNs = await createNamespace(admin, `${prefix}-tenant`);
  const controllerNs = await createNamespace(admin, `${prefix}-ctrl`);
  const shard = uniqueName(prefix);

  // The controller: deploy/base's rules, bound to a ServiceAccount of this test.
  const role = uniqueName(`${prefix}-controller`);
  await createRole(admin, role, deployBaseRules("rbac-controller.yaml", "rbac-source-reader-defaults.yaml"));
  await bindRole(admin, role, role, [serviceAccount("controller", controllerNs)]);
  const controllerToken = await serviceAccountToken(admin, controllerNs, "controller");
  const kubeconfigDir = mkdtempSync(join(tmpdir(), `referable-${prefix}-`));
  const kubeconfigPath = join(kubeconfigDir, "kubeconfig");
  writeFileSync(kubeconfigPath, kubeConfigWithToken(controllerToken, planeConfig).exportConfig(), {
    mode: 0o600,
  });

  // The tenant: ConfigMaps in its own namespace, nothing else.
  const configMaps = [
    { apiGroups: [""], resources: ["configmaps"], verbs: ["create", "get", "list", "delete"] },
  ];
  await createRole(admin, "configmaps", configMaps, tenantNs);
  await bindRole(admin, "tenant", "configmaps", [serviceAccount("tenant", tenantNs)], tenantNs, "Role");
  const tenant = tokenClient(await serviceAccountToken(admin, tenantNs, "tenant"), planeConfig);

  const statusOf = async (name: string): Promise<ReadyStatus> => {
    const rf = await admin.request<KubeObject>("GET", `${RF}/${name}`);
    const status = (rf.status ?? {}) as {
      value?: unknown;
      values?: unknown;
      conditions?: Array<{ type: string; reason: string }>;
    };
    const out: ReadyStatus = { value: status.value, values: status.values };
    const reason = status.conditions?.find((c) => c.type === "Ready")?.reason;
    if (reason !== undefined) out.reason = reason;
    return out;
  };

  return {
    plane,
    admin,
    tenant,
    sourceNs,
    tenantNs,
    shard,
    startController: (nodeOptions) =>
      startControllerProcess(
        [
          "--kubeconfig",
          kubeconfigPath,
          "--leader-elect=false",
          "--referable-selector",
          `${SHARD_LABEL}=${shard}`,
        ],
        { kubeconfig: false, env: { NODE_OPTIONS: nodeOptions } },
      ),
    createSource: async (name, v, labels) => {
      await admin.request("POST", `/api/v1/namespaces/${sourceNs}/configmaps`, {
        body: { apiVersion: "v1", kind: "ConfigMap", metadata: { name, labels }, data: { v } },
      });
    },
    setValue: async (name, value) => {
      await admin.request("PATCH", `/api/v1/namespaces/${sourceNs}/configmaps/${name}`, {
        body: { data: { v: value } },
        contentType: "application/merge-patch+json",
      });
    },
    createReferable: async (name, source, extra = {}) => {
      const defaults = { apiVersion: "v1", kind: "ConfigMap", namespace: sourceNs, fieldPath: "data.v" };
      await createReferableAs(admin, { source: { ...defaults, ...source }, ...extra }, { shard, name });
    },
    statusOf,
    fillTenantNamespace: async (count, configMap, afterEach) => {
      let next = 0;
      const worker = async () => {
        while (next < count) {
          const i = next++;
          await tenant.request("POST", `/api/v1/namespaces/${tenantNs}/configmaps`, {
            body: { apiVersion: "v1", kind: "ConfigMap", ...configMap(i) },
            timeoutMs: 60_000,
          });
          await afterEach?.(i);
        }
      };
      await Promise.all([worker(), worker(), worker()]);
    },
    expectStatus: async (name, want) => {
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
        { timeoutMs: waitMs, intervalMs: 100 },
      ).catch((err: Error) => {
        throw new Error(`${err.message}; last seen ${JSON.stringify(last)}`);
      });
    },
    stop: async () => {
      await admin.close();
      await plane.stop();
      rmSync(kubeconfigDir, { recursive: true, force: true });
    },
  };
}

/** True while `p` has not exited. */
export async function alive(p: ControllerProcess): Promise<boolean> {
  const state = await Promise.race([
    p.exited.then(() => "exited"),
    new Promise((r) => setImmediate(() => r("running"))),
  ]);
  return state === "running";
}
