/**
 * Acting as a ServiceAccount (issue 37), on the real control plane with RBAC on and no webhook: a
 * controller running as its own ServiceAccount with the shipped rules (deploy/base), which may
 * read every ConfigMap and write ConfigMaps in both tenant namespaces, so that every refusal
 * below is the tenant account's, never the controller's:
 * - the read pivot: a Referable naming an account that may read ConfigMaps only in team-a, whose
 *   source is a ConfigMap of team-b, is Forbidden with no value;
 * - the write pivot: its export into a ConfigMap of team-b, a key or a field, is never written
 *   (ExportForbidden);
 * - a Referable naming the account reads and writes what the account may;
 * - deleting the account's RoleBinding withdraws the value (Forbidden, status.value gone);
 * - --default-service-account at an account with no rights leaves a Referable naming none
 *   without a value;
 * - `kubectl get rf -o wide` shows the account;
 * - the library with the same identity (createResolver's and exportValue's serviceAccount)
 *   refuses the same reads and writes.
 */
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it, jest } from "@jest/globals";
import { createResolver, exportValue, isExportError, isResolutionError } from "../../src/index.ts";
import type { KubeClient } from "../../src/kube/client.ts";
import { describeIf } from "../harness/availability.ts";
import { controllerAccount, type ControllerAccount } from "../harness/controller-account.ts";
import {
  createReferable as createReferableAs,
  startTestController,
  tearDownControllers,
  waitForReason,
  type TestController,
} from "../harness/controller.ts";
import { dataOf, exportedCondition, getKeyTarget, waitForData, waitForExported } from "../harness/export.ts";
import {
  adminClient,
  configMapField,
  createConfigMap,
  createNamespace,
  serviceAccountToken,
  testKubeConfig,
  uniqueName,
  waitFor,
} from "../harness/kube.ts";
import { KUBECTL } from "../harness/kubectl.ts";
import { bindRole, createRole, RBAC, serviceAccount } from "../harness/rbac.ts";

jest.setTimeout(60_000);

let admin: KubeClient;
let account: ControllerAccount;
let ctl: TestController;
/** The tenants' namespaces: team-a's accounts must not reach into team-b's. */
let teamA: string, teamB: string;
const cleanup: string[] = [];
const controllers: TestController[] = [];

/** What a tenant account may do with ConfigMaps of its own namespace. */
const CONFIGMAPS_RW = [
  {
    apiGroups: [""],
    resources: ["configmaps"],
    verbs: ["get", "list", "watch", "create", "patch", "delete"],
  },
];

/** Creates the ServiceAccount `name` in team-a, granted `rules` there (unless none) by the RoleBinding `name`. */
async function tenant(name: string, rules?: unknown[]): Promise<{ namespace: string; name: string }> {
  await serviceAccountToken(admin, teamA, name);
  if (rules) {
    await createRole(admin, name, rules, teamA);
    await bindRole(admin, name, name, [serviceAccount(name, teamA)], teamA, "Role");
  }
  return { namespace: teamA, name };
}

/** A Referable (of `shard`) reading a new ConfigMap of `ns` that holds `{ v }`, with `spec` added. */
async function referableOf(
  ns: string,
  v: string,
  spec: Record<string, unknown> = {},
  shard = ctl.shard,
): Promise<string> {
  const source = uniqueName("src");
  await createConfigMap(admin, ns, source, { v });
  return createReferableAs(admin, { source: configMapField(ns, source), ...spec }, { shard });
}

/**
 * A Referable run as `account` that exports a team-a ConfigMap's value through `target(victim)`,
 * `victim` a new team-b ConfigMap holding `{ keep: "yes" }`; resolves with the Referable once it
 * has its value and its export is refused (ExportForbidden), and the victim's name.
 */
async function exportIntoTeamB(
  account: { namespace: string; name: string },
  target: (victim: string) => Record<string, unknown>,
): Promise<{ view: Awaited<ReturnType<typeof waitForExported>>; victim: string }> {
  const victim = uniqueName("victim");
  await createConfigMap(admin, teamB, victim, { keep: "yes" });
  const rf = await referableOf(teamA, "from-team-a", {
    serviceAccountRef: account,
    export: [target(victim)],
  });
  // The value first: the source's create can reach the controller's cache after the Referable's,
  // and the refusal of the export does not wait for a value (SourceNotFound meanwhile).
  await waitForReason(admin, rf, "Available");
  return { view: await waitForExported(admin, rf, "ExportForbidden"), victim };
}

beforeAll(async () => {
  admin = adminClient();
  account = await controllerAccount(admin, "sa-ctl", cleanup);
  teamA = await createNamespace(admin, "team-a");
  teamB = await createNamespace(admin, "team-b");
  for (const ns of [teamA, teamB]) cleanup.push(`/api/v1/namespaces/${ns}`);
  // The controller itself may write ConfigMaps in both: only the tenant's rights can refuse.
  for (const ns of [teamA, teamB]) await account.grant(CONFIGMAPS_RW, ns);
  await waitFor("the controller's RBAC to apply", async () => {
    await account.client.request("GET", `/api/v1/namespaces/${teamB}/configmaps`);
    return true;
  });
  ctl = await startTestController({ client: account.client });
  controllers.push(ctl);
}, 60_000);

afterAll(() => tearDownControllers(admin, controllers, cleanup), 60_000);

describe("a Referable that names a ServiceAccount", () => {
  it("is Forbidden, without a value, when the account may not read its source (the read pivot)", async () => {
    const reader = await tenant("reader", CONFIGMAPS_RW);
    const rf = await referableOf(teamB, "team-b-private", { serviceAccountRef: reader });
    const view = await waitForReason(admin, rf, "Forbidden");
    expect(view.ready).toBe("False");
    expect(view.status.value).toBeUndefined();
    expect(view.message).toContain(`serviceaccount ${teamA}/reader may not get configmaps`);
    expect(view.message).toContain(`in namespace "${teamB}"`);
    expect(JSON.stringify(view.status)).not.toContain("team-b-private");
  });

  it("never writes an export into a ConfigMap the account may not write (the write pivot)", async () => {
    const writer = await tenant("writer", CONFIGMAPS_RW);
    const { view, victim } = await exportIntoTeamB(writer, (name) => ({
      kind: "ConfigMap",
      namespace: teamB,
      name,
      key: "INJECTED",
    }));
    expect(view.reason).toBe("Available");
    expect(exportedCondition(view)?.message).toContain(`serviceaccount ${teamA}/writer may not`);
    expect(exportedCondition(view)?.message).toContain(`configmaps in namespace ${teamB}`);
    expect(dataOf(await getKeyTarget(admin, "ConfigMap", teamB, victim))).toEqual({ keep: "yes" });
  });

  it("never writes a field of an object the account may not patch (the write pivot, through a field)", async () => {
    const fielder = await tenant("fielder", CONFIGMAPS_RW);
    const { view, victim } = await exportIntoTeamB(fielder, (name) => ({
      apiVersion: "v1",
      kind: "ConfigMap",
      namespace: teamB,
      name,
      fieldPath: "data.INJECTED",
    }));
    expect(exportedCondition(view)?.message).toContain(`serviceaccount ${teamA}/fielder may not`);
    expect(dataOf(await getKeyTarget(admin, "ConfigMap", teamB, victim))).toEqual({ keep: "yes" });
  });

  it("reads and writes what the account may", async () => {
    const owner = await tenant("owner", CONFIGMAPS_RW);
    const out = uniqueName("out");
    const rf = await referableOf(teamA, "db.team-a", {
      serviceAccountRef: owner,
      export: [{ kind: "ConfigMap", namespace: teamA, name: out, key: "DB_HOST" }],
    });
    const view = await waitForExported(admin, rf, "Exported");
    expect(view.status.value).toBe("db.team-a");
    await waitForData(admin, "ConfigMap", teamA, out, (d) => d.DB_HOST === "db.team-a");
  });

  it("loses its value within 60 s of the account's RoleBinding being deleted", async () => {
    const revocable = await tenant("revocable", CONFIGMAPS_RW);
    const rf = await referableOf(teamA, "while-allowed", { serviceAccountRef: revocable });
    await waitForReason(admin, rf, "Available", (v) => v.status.value === "while-allowed");
    await admin.request("DELETE", `${RBAC}/namespaces/${teamA}/rolebindings/revocable`);
    const view = await waitForReason(admin, rf, "Forbidden", (v) => v.status.value === undefined, 60_000);
    expect(view.message).toContain(`serviceaccount ${teamA}/revocable may not get configmaps`);
  });
});

describe("--default-service-account", () => {
  it("leaves a Referable that names no account without a value when the default account may read nothing", async () => {
    const nobody = await tenant("nobody");
    const locked = await startTestController({
      client: account.client,
      build: { defaultServiceAccount: `${nobody.namespace}/${nobody.name}` },
    });
    controllers.push(locked);
    const rf = await referableOf(teamA, "not-for-nobody", {}, locked.shard);
    const view = await waitForReason(admin, rf, "Forbidden");
    expect(view.status.value).toBeUndefined();
    expect(view.message).toContain(`serviceaccount ${teamA}/nobody may not get configmaps`);
  });
});

describe("the library with a ServiceAccount", () => {
  it("refuses the reads and writes the account may not make, and makes the others", async () => {
    const lib = await tenant("library", CONFIGMAPS_RW);
    const mine = uniqueName("mine");
    const theirs = uniqueName("theirs");
    await createConfigMap(admin, teamA, mine, { v: "mine" });
    await createConfigMap(admin, teamB, theirs, { v: "theirs" });
    // The admin's kubeconfig: only the identity can refuse.
    const resolver = createResolver({
      kubeConfig: testKubeConfig(),
      serviceAccount: lib,
      informerLingerMs: 0,
    });
    try {
      await expect(resolver.resolve(configMapField(teamA, mine))).resolves.toMatchObject({ value: "mine" });
      const refused = await resolver.resolve(configMapField(teamB, theirs)).catch((err: unknown) => err);
      expect(isResolutionError(refused) && refused.reason).toBe("Forbidden");
      expect((refused as Error).message).toContain(`serviceaccount ${teamA}/library may not get configmaps`);
      const fresh = await resolver
        .resolve(configMapField(teamB, theirs), { consistent: true })
        .catch((err: unknown) => err);
      expect(isResolutionError(fresh) && fresh.reason).toBe("Forbidden");
    } finally {
      await resolver.stop();
    }

    const options = { fieldManager: "library-test/db", serviceAccount: lib };
    const out = uniqueName("out");
    await expect(
      exportValue(
        testKubeConfig(),
        { kind: "ConfigMap", namespace: teamA, name: out, key: "K" },
        "v",
        options,
      ),
    ).resolves.toMatchObject({ written: true });
    const denied = await exportValue(
      testKubeConfig(),
      { kind: "ConfigMap", namespace: teamB, name: theirs, key: "INJECTED" },
      "v",
      options,
    ).catch((err: unknown) => err);
    expect(isExportError(denied) && denied.reason).toBe("ExportForbidden");
    expect((denied as Error).message).toContain(`serviceaccount ${teamA}/library may not`);
    expect(dataOf(await getKeyTarget(admin, "ConfigMap", teamB, theirs))).toEqual({ v: "theirs" });
  });
});

const withKubectl = describeIf(
  process.env.REFERABLE_TEST_BIN_DIR
    ? undefined
    : "no kubectl: REFERABLE_TEST_BIN_DIR is set only when the harness starts the control plane",
);

withKubectl("kubectl get rf -o wide", () => {
  it("shows the ServiceAccount and its namespace", async () => {
    const rf = await createReferableAs(
      admin,
      { source: configMapField(teamA, "any"), serviceAccountRef: { namespace: teamA, name: "shown" } },
      { shard: uniqueName("unserved") },
    );
    const { stdout } = await promisify(execFile)(KUBECTL, ["get", "rf", rf, "-o", "wide"], {
      env: { ...process.env, KUBECONFIG: process.env.REFERABLE_TEST_KUBECONFIG },
    });
    const [header, row] = stdout.trim().split("\n");
    const cell = (name: string) => row!.slice(header!.indexOf(name)).split(/\s+/)[0];
    expect(cell("SERVICEACCOUNT")).toBe("shown");
    expect(cell("SA-NAMESPACE")).toBe(teamA);
    await admin.request("DELETE", `/apis/referable.dev/v1alpha1/referables/${rf}`);
  });
});
