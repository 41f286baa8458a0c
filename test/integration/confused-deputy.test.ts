/**
 * The confused deputy of issue 37, on the real control plane with RBAC on: nothing a Referable
 * does may steer the controller, and the webhook judges who may act as whom.
 * - Both pivots (a field of another Referable: `spec.source.namespace` to read, `spec.export` to
 *   write) and the other targets that steer a controller are refused by the CRD, with no webhook
 *   (the controller's own refusal, for a CRD without the rule, is in src/outputs/field/target.test.ts
 *   and src/webhook/admission.test.ts).
 * - An author who may not impersonate the ServiceAccount a Referable names is refused at
 *   admission, and admitted once granted `impersonate` on it.
 * - A change of spec made as the controller's own ServiceAccount is refused by the webhook; its
 *   status and finalizer writes still pass.
 * - The library's exportValue refuses the same targets (ExportFailed), writing nothing.
 * - Deleting a Referable with a field target the deleter may not patch is refused; an
 *   administrator's delete passes and the controller's cleanup (the field released, the
 *   finalizer removed) completes.
 */
import { afterAll, beforeAll, describe, expect, it, jest } from "@jest/globals";
import { exportValue, isExportError } from "../../src/index.ts";
import { isApiError, type KubeClient, type KubeObject } from "../../src/kube/client.ts";
import {
  DELETE_REFUSAL_SUFFIX,
  rememberedSelfUsername,
  SERVICE_ACCOUNT_REFUSAL_SUFFIX,
} from "../../src/webhook/index.ts";
import { controllerAccount, type ControllerAccount } from "../harness/controller-account.ts";
import {
  REFERABLES,
  SHARD_LABEL,
  startTestController,
  tearDownControllers,
  type TestController,
} from "../harness/controller.ts";
import { waitForExported } from "../harness/export.ts";
import {
  adminClient,
  configMapField,
  createConfigMap,
  createNamespace,
  impersonatingClient,
  mergePatch,
  refusal,
  selfAccess,
  testKubeConfig,
  tokenClient,
  uniqueName,
  waitFor,
  waitForGone,
} from "../harness/kube.ts";
import { bindRole, createRole, user, type Rule } from "../harness/rbac.ts";
import { startTestWebhook, type TestWebhook } from "../harness/webhook.ts";

jest.setTimeout(60_000);

let admin: KubeClient;
let team: string;
let account: ControllerAccount;
/** The controller as deploy/base ships it, and the admission webhook in front of its Referables. */
let ctl: TestController, webhook: TestWebhook;
let authorRole: string;
const cleanup: string[] = [];

beforeAll(async () => {
  admin = adminClient();
  team = await createNamespace(admin, "deputy-team", cleanup);
  // The controller as deploy/base ships it, with ConfigMaps of the team opted in for fields.
  account = await controllerAccount(admin, "deputy-ctl", cleanup);
  await account.grant([{ apiGroups: [""], resources: ["configmaps"], verbs: ["get", "patch"] }], team);
  ctl = await startTestController({ client: account.client });
  webhook = await startTestWebhook(admin, { controllerUsername: rememberedSelfUsername(account.client) });
  authorRole = uniqueName("deputy-author");
  cleanup.push(
    await createRole(admin, authorRole, [
      {
        apiGroups: ["referable.dev"],
        resources: ["referables"],
        verbs: ["create", "update", "patch", "get", "delete"],
      },
    ]),
  );
  await createConfigMap(admin, team, "db", { v: "db.team.svc" });
  await createConfigMap(admin, team, "app", { other: "kept" });
}, 90_000);

afterAll(async () => {
  await webhook?.stop();
  await tearDownControllers(admin, [ctl], cleanup);
}, 60_000);

const referableBody = (name: string, spec: Record<string, unknown>, labels: Record<string, string> = {}) => ({
  apiVersion: "referable.dev/v1alpha1",
  kind: "Referable",
  metadata: { name, labels },
  spec,
});

/** Creates a Referable as `client`, judged by this file's webhook and reconciled by its controller. */
async function create(
  client: KubeClient,
  spec: Record<string, unknown>,
  name = uniqueName("rf"),
): Promise<string> {
  await client.request("POST", REFERABLES, {
    body: referableBody(name, spec, { ...webhook.labels, [SHARD_LABEL]: ctl.shard }),
  });
  return name;
}

/** A user (by impersonation) who may create, change and delete Referables, and `rules` in the team. */
async function newAuthor(
  prefix: string,
  rules: Rule[] = [],
): Promise<{ username: string; client: KubeClient }> {
  const username = uniqueName(prefix);
  cleanup.push(await bindRole(admin, uniqueName(`${prefix}-rf`), authorRole, [user(username)]));
  if (rules.length > 0) await grant(username, rules);
  const client = impersonatingClient(username);
  await waitForAccess(client, { verb: "create", group: "referable.dev", resource: "referables" });
  return { username, client };
}

/** Grants `rules` in the team namespace to `username`, with a Role and a RoleBinding there. */
async function grant(username: string, rules: Rule[]): Promise<void> {
  const name = uniqueName("grant");
  await createRole(admin, name, rules, team);
  await bindRole(admin, name, name, [user(username)], team, "Role");
}

async function waitForAccess(client: KubeClient, attributes: Record<string, string>): Promise<void> {
  await waitFor(
    `access ${JSON.stringify(attributes)} to be granted`,
    async () => (await selfAccess(client, attributes)).allowed,
    { timeoutMs: 30_000 },
  );
}

describe("nothing a Referable does may steer the controller: the CRD refuses, without the webhook", () => {
  const field = (apiVersion: string, kind: string, fieldPath: string, namespace?: string) => ({
    apiVersion,
    kind,
    name: "victim",
    fieldPath,
    ...(namespace !== undefined && { namespace }),
  });
  const refused: Array<{ reason: string; target: Record<string, unknown>; says: string }> = [
    {
      reason: "the read pivot: spec.source.namespace of another Referable",
      target: field("referable.dev/v1alpha1", "Referable", "spec.source.namespace"),
      says: "a field is never exported into an object of referable.dev",
    },
    {
      reason: "the write pivot: spec.export of another Referable",
      target: field("referable.dev/v1alpha1", "Referable", "spec.export"),
      says: "a field is never exported into an object of referable.dev",
    },
    {
      reason: "a RoleBinding",
      target: field("rbac.authorization.k8s.io/v1", "RoleBinding", "roleRef.name", "default"),
      says: "nothing a Referable does may steer the controller",
    },
    {
      reason: "a ValidatingWebhookConfiguration",
      target: field("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration", "metadata.labels.x"),
      says: "nothing a Referable does may steer the controller",
    },
    {
      reason: "a CustomResourceDefinition",
      target: field("apiextensions.k8s.io/v1", "CustomResourceDefinition", "spec.scope"),
      says: "nothing a Referable does may steer the controller",
    },
    {
      reason: "a Lease",
      target: field("coordination.k8s.io/v1", "Lease", "spec.holderIdentity", "default"),
      says: "nothing a Referable does may steer the controller",
    },
    {
      reason: "a Namespace",
      target: field("v1", "Namespace", "metadata.labels.x"),
      says: "a field is never exported into a Namespace",
    },
  ];
  it.each(refused)("refuses $reason", async ({ target, says }) => {
    // No webhook label: only the CRD judges, as on an install without the webhook.
    const name = uniqueName("pivot");
    const message = await refusal(
      admin.request("POST", REFERABLES, {
        body: referableBody(name, { source: configMapField(team, "db"), export: [target] }),
      }),
    );
    expect(message).toContain(says);
    expect(
      await admin.request("GET", `${REFERABLES}/${name}`).catch((e: unknown) => isApiError(e, 404)),
    ).toBe(true);
  });
});

describe("the library refuses the same targets", () => {
  it("exportValue into another Referable's spec fails with ExportFailed, and writes nothing", async () => {
    const victim = uniqueName("victim");
    await admin.request("POST", REFERABLES, {
      body: referableBody(victim, { source: configMapField(team, "db") }),
    });
    const err = await exportValue(
      testKubeConfig(),
      {
        apiVersion: "referable.dev/v1alpha1",
        kind: "Referable",
        name: victim,
        fieldPath: "spec.source.namespace",
      },
      "kube-system",
      { fieldManager: "my-operator/pivot" },
    ).catch((e: unknown) => e);
    expect(isExportError(err)).toBe(true);
    expect(err).toMatchObject({ reason: "ExportFailed" });
    expect((err as Error).message).toContain("target must not name a Referable of referable.dev/v1alpha1");
    const stored = await admin.request<KubeObject>("GET", `${REFERABLES}/${victim}`);
    expect((stored.spec as { source: { namespace: string } }).source.namespace).toBe(team);
    await admin.request("DELETE", `${REFERABLES}/${victim}`);
  });
});

describe("the webhook: who may act as whom", () => {
  it("refuses an author who may not impersonate the ServiceAccount a Referable names, and admits them once granted", async () => {
    await admin.request("POST", `/api/v1/namespaces/${team}/serviceaccounts`, {
      body: { apiVersion: "v1", kind: "ServiceAccount", metadata: { name: "reader" } },
    });
    const author = await newAuthor("deputy-sa-author", [
      { apiGroups: [""], resources: ["configmaps"], verbs: ["get"] },
    ]);
    const spec = {
      source: configMapField(team, "db"),
      serviceAccountRef: { namespace: team, name: "reader" },
    };
    const message = await refusal(create(author.client, spec));
    expect(message).toContain(
      `user "${author.username}" may not impersonate serviceaccounts "reader" in namespace "${team}": ${SERVICE_ACCOUNT_REFUSAL_SUFFIX}`,
    );
    expect(message).toContain(`resourceNames ["reader"], verbs [impersonate]`);

    await grant(author.username, [
      { apiGroups: [""], resources: ["serviceaccounts"], verbs: ["impersonate"], resourceNames: ["reader"] },
    ]);
    await waitForAccess(author.client, {
      verb: "impersonate",
      resource: "serviceaccounts",
      namespace: team,
      name: "reader",
    });
    const name = await create(author.client, spec);
    const stored = await admin.request<KubeObject>("GET", `${REFERABLES}/${name}`);
    expect((stored.spec as { serviceAccountRef?: unknown }).serviceAccountRef).toEqual({
      namespace: team,
      name: "reader",
    });
    // Another account, still not granted, is refused on update.
    expect(
      await refusal(
        mergePatch(author.client, `${REFERABLES}/${name}`, {
          spec: { serviceAccountRef: { namespace: team, name: "writer" } },
        }),
      ),
    ).toContain(`may not impersonate serviceaccounts "writer" in namespace "${team}"`);
  });

  it("refuses a change of spec made as the controller's own ServiceAccount, and lets its status and finalizer writes pass", async () => {
    const name = await create(admin, { source: configMapField(team, "db") });
    const path = `${REFERABLES}/${name}`;
    await waitFor("the controller to publish the value", async () => {
      const rf = await admin.request<KubeObject>("GET", path);
      return (rf.status as { value?: unknown } | undefined)?.value === "db.team.svc";
    });
    const controllerUser = `system:serviceaccount:${account.ns}:controller`;
    // A source the controller may read (deploy/base's source-reader defaults): only its identity refuses it.
    // The controller's own client never keeps the server's words (KubeClientOptions.serverMessages);
    // the same identity with them kept shows the webhook's refusal.
    const asController = tokenClient(account.token, undefined, { serverMessages: true });
    const message = await refusal(
      mergePatch(asController, path, { spec: { source: configMapField(team, "app", "data.other") } }),
    );
    expect(message).toContain(
      `user "${controllerUser}" is the controller itself, which never changes a Referable's spec`,
    );
    expect(
      ((await admin.request<KubeObject>("GET", path)).spec as { source: { name: string } }).source.name,
    ).toBe("db");
    await account.client.request("PATCH", `${path}/status`, {
      body: { status: { text: "written by the controller's account" } },
      contentType: "application/merge-patch+json",
    });
    await mergePatch(account.client, path, { metadata: { finalizers: ["test.referable.dev/held"] } });
    await mergePatch(account.client, path, { metadata: { finalizers: null } });
  });
});

describe("deleting a Referable releases its fields, so the deleter must be allowed to patch them", () => {
  it("refuses a deleter who may not patch a field target; an administrator's delete passes and cleanup completes", async () => {
    const name = await create(admin, {
      source: configMapField(team, "db"),
      export: [
        { apiVersion: "v1", kind: "ConfigMap", namespace: team, name: "app", fieldPath: "data.DB_HOST" },
      ],
    });
    const path = `${REFERABLES}/${name}`;
    const appPath = `/api/v1/namespaces/${team}/configmaps/app`;
    await waitForExported(admin, name, "Exported", () => true, 30_000);
    expect(((await admin.request<KubeObject>("GET", appPath)).data as Record<string, string>).DB_HOST).toBe(
      "db.team.svc",
    );

    // May delete Referables (the API server's own check passes) and read the source, not patch the target.
    const deleter = await newAuthor("deputy-deleter", [
      { apiGroups: [""], resources: ["configmaps"], verbs: ["get"] },
    ]);
    await waitForAccess(deleter.client, { verb: "delete", group: "referable.dev", resource: "referables" });
    const message = await refusal(deleter.client.request("DELETE", path));
    expect(message).toContain(
      `user "${deleter.username}" may not delete Referable "${name}": deleting it releases its fields of spec.export, and the user may not patch configmaps "app" in namespace "${team}"; ${DELETE_REFUSAL_SUFFIX}`,
    );
    const kept = await admin.request<KubeObject>("GET", path);
    expect(kept.metadata?.deletionTimestamp).toBeUndefined();

    // The administrator (system:masters) deletes; the controller releases the field, then its finalizer.
    await admin.request("DELETE", path);
    await waitForGone(admin, path, 30_000);
    const app = await admin.request<KubeObject>("GET", appPath);
    expect(app.data).toEqual({ other: "kept" });
  });
});
