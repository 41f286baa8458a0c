/**
 * The admission webhook against the real API server: users (ServiceAccounts with tokens) who may
 * create Referables but not read a source are refused with the missing permission named, and
 * allowed once RBAC lets them read it; updates are re-checked only when spec.source changes; the
 * serving certificate rotates without a restart; and an outage refuses, as documented.
 */
import { isApiError, type KubeClient } from "../../src/kube/client.ts";
import { EXPORT_REFUSAL_SUFFIX, REFUSAL_SUFFIX } from "../../src/webhook/index.ts";
import {
  closeTestClients,
  configMapField,
  createConfigMap,
  createNamespace,
  createSecret,
  impersonatingClient,
  openScope,
  refusal,
  selfAccess,
  serviceAccountToken,
  testCrdSource,
  tokenClient,
  uniqueName,
  waitFor,
} from "../harness/kube.ts";
import { bindRole, createRole, serviceAccount, user, type Rule, type Subject } from "../harness/rbac.ts";
import { presentedFingerprint, startTestWebhook, type TestWebhook } from "../harness/webhook.ts";

const RF = "/apis/referable.dev/v1alpha1/referables";

let admin: KubeClient;
let ns: string;
let webhook: TestWebhook;
let authorRole: string;
/** Cluster-scoped objects to delete in afterAll (namespaced ones go with nothing: no GC runs). */
const cleanup: string[] = [];

interface User {
  name: string;
  username: string;
  client: KubeClient;
}

beforeAll(async () => {
  ({ admin, ns } = await openScope("admission"));
  webhook = await startTestWebhook(admin);
  authorRole = uniqueName("referable-author");
  const authorRules = [
    { apiGroups: ["referable.dev"], resources: ["referables"], verbs: ["create", "update", "patch", "get"] },
  ];
  cleanup.push(await createRole(admin, authorRole, authorRules));
  for (const [name, data] of [
    ["db", { v: "db-value" }],
    ["other", { v: "other-value" }],
  ] as const) {
    await createConfigMap(admin, ns, name, data, { app: "web" });
  }
  await createSecret(admin, ns, "creds", { password: "hunter2" });
}, 60_000);

afterAll(async () => {
  await admin
    .request("DELETE", RF, {
      query: {
        labelSelector: Object.entries(webhook.labels)
          .map(([k, v]) => `${k}=${v}`)
          .join(","),
      },
    })
    .catch(() => undefined);
  await webhook?.stop();
  for (const path of cleanup) await admin.request("DELETE", path).catch(() => undefined);
  await closeTestClients();
}, 60_000);

/** A ServiceAccount with a token, allowed to create and update Referables and nothing else. */
async function newUser(prefix: string): Promise<User> {
  const name = uniqueName(prefix);
  const token = await serviceAccountToken(admin, ns, name);
  cleanup.push(await bindRole(admin, `${authorRole}-${name}`, authorRole, [serviceAccount(name, ns)]));
  const client = tokenClient(token);
  await waitForAccess(client, { verb: "create", group: "referable.dev", resource: "referables" }, true);
  return { name, username: `system:serviceaccount:${ns}:${name}`, client };
}

/**
 * A new author who may get the ConfigMaps of the namespace (only those named `only`, when given),
 * once RBAC says so for the ConfigMap "db".
 */
async function newConfigMapReader(prefix: string, only?: string[]): Promise<User> {
  const reader = await newUser(prefix);
  const rule = {
    apiGroups: [""],
    resources: ["configmaps"],
    verbs: ["get"],
    ...(only && { resourceNames: only }),
  };
  await grant(reader, [rule], ns);
  await waitForConfigMapRead(reader.client, "db", true);
  return reader;
}

/** Binds the ClusterRole `role` to the (impersonated) user `username`. */
async function bindUser(username: string, role: string): Promise<void> {
  cleanup.push(await bindRole(admin, uniqueName(`${role}-user`), role, [user(username)]));
}

/** Grants `rules` to `user`: in `namespace` with a Role, or cluster-wide. Returns the revocation. */
async function grant(
  user: User,
  rules: Rule[],
  namespace?: string,
  subject: Subject = serviceAccount(user.name, ns),
): Promise<() => Promise<void>> {
  const name = uniqueName(`grant-${user.name}`);
  const paths = [
    await createRole(admin, name, rules, namespace),
    await bindRole(admin, name, name, [subject], namespace, namespace ? "Role" : "ClusterRole"),
  ];
  if (!namespace) cleanup.push(...paths);
  return async () => {
    for (const path of paths) await admin.request("DELETE", path);
  };
}

/** Waits until RBAC (as the API server's authorizer sees it) gives `allowed` for the user's request. */
async function waitForAccess(
  client: KubeClient,
  attributes: Record<string, string>,
  allowed: boolean,
): Promise<void> {
  await waitFor(
    `access ${JSON.stringify(attributes)} to be ${allowed ? "granted" : "revoked"}`,
    async () => (await selfAccess(client, attributes)).allowed === allowed,
    { timeoutMs: 30_000 },
  );
}

/** Waits until RBAC gives `allowed` for the user's get of the ConfigMap `name` of this file's namespace. */
const waitForConfigMapRead = (client: KubeClient, name: string, allowed: boolean) =>
  waitForAccess(client, { verb: "get", resource: "configmaps", namespace: ns, name }, allowed);

/** A merge patch of the Referable's spec, as `client`. */
const patchSpec = (client: KubeClient, name: string, spec: Record<string, unknown>) =>
  client.request("PATCH", `${RF}/${name}`, { body: { spec }, contentType: "application/merge-patch+json" });

function createReferable(
  client: KubeClient,
  source: Record<string, unknown>,
  name = uniqueName("rf"),
  extra: Record<string, unknown> = {},
) {
  return client.request("POST", RF, {
    body: {
      apiVersion: "referable.dev/v1alpha1",
      kind: "Referable",
      metadata: { name, labels: webhook.labels },
      spec: { source, ...extra },
    },
  });
}

const configMap = (name: string, fieldPath?: string) => configMapField(ns, name, fieldPath);

describe("a Referable may only export where its author may write", () => {
  it("refuses an author who may read the source but not create and patch the target, and allows one who may", async () => {
    const erin = await newConfigMapReader("erin");
    const exportTo = (kind: string, name: string) => ({
      export: [{ kind, namespace: ns, name, key: "DB_HOST" }],
    });
    const name = uniqueName("rf");
    const message = await refusal(
      createReferable(erin.client, configMap("db"), name, exportTo("ConfigMap", "app")),
    );
    expect(message).toContain(
      `user "${erin.username}" may not create configmaps in namespace "${ns}" and may not patch configmaps "app" in namespace "${ns}": ${EXPORT_REFUSAL_SUFFIX}`,
    );
    expect(
      await admin.request("GET", `${RF}/${name}`).catch((e: { statusCode?: number }) => e.statusCode),
    ).toBe(404);
    // A Secret is checked as a Secret: rights on ConfigMaps do not stand in.
    await grant(erin, [{ apiGroups: [""], resources: ["configmaps"], verbs: ["create", "patch"] }], ns);
    await waitForAccess(
      erin.client,
      { verb: "patch", resource: "configmaps", namespace: ns, name: "app" },
      true,
    );
    expect(
      await refusal(createReferable(erin.client, configMap("db"), undefined, exportTo("Secret", "app"))),
    ).toContain(
      `may not create secrets in namespace "${ns}" and may not patch secrets "app" in namespace "${ns}"`,
    );
    await createReferable(erin.client, configMap("db"), undefined, exportTo("ConfigMap", "app"));
  });

  it("checks an update that adds a target, though the source is unchanged", async () => {
    const frank = await newConfigMapReader("frank");
    const name = uniqueName("rf");
    await createReferable(frank.client, configMap("db"), name);
    const message = await refusal(
      patchSpec(frank.client, name, {
        export: [{ kind: "ConfigMap", namespace: ns, name: "app", key: "K" }],
      }),
    );
    expect(message).toContain(`may not create configmaps in namespace "${ns}"`);
  });
});

describe("a Referable may only export into a field where its author may patch the object", () => {
  it("refuses an author who may read the source but not patch the object a field is exported into, and allows one who may", async () => {
    const gina = await newConfigMapReader("gina");
    const field = {
      export: [
        {
          apiVersion: "apps/v1",
          kind: "Deployment",
          namespace: ns,
          name: "web",
          fieldPath: "spec.template.metadata.annotations[example.com/db-host]",
        },
      ],
    };
    const name = uniqueName("rf");
    expect(await refusal(createReferable(gina.client, configMap("db"), name, field))).toContain(
      `user "${gina.username}" may not patch deployments.apps "web" in namespace "${ns}": ${EXPORT_REFUSAL_SUFFIX}`,
    );
    expect(
      await admin.request("GET", `${RF}/${name}`).catch((e: { statusCode?: number }) => e.statusCode),
    ).toBe(404);
    // patch of that object is enough: no create, since an object is never created for a field.
    await grant(
      gina,
      [{ apiGroups: ["apps"], resources: ["deployments"], verbs: ["patch"], resourceNames: ["web"] }],
      ns,
    );
    await waitForAccess(
      gina.client,
      { verb: "patch", group: "apps", resource: "deployments", namespace: ns, name: "web" },
      true,
    );
    await createReferable(gina.client, configMap("db"), name, field);
  });
});

describe("a Referable may only read what its author can read", () => {
  it("refuses a user who may not get the ConfigMap or the Secret, naming the missing permission", async () => {
    const alice = await newUser("alice");
    const name = uniqueName("rf");
    const cm = await refusal(createReferable(alice.client, configMap("db"), name));
    expect(cm).toContain(
      `denied the request: user "${alice.username}" may not get configmaps "db" in namespace "${ns}": ${REFUSAL_SUFFIX}`,
    );
    const secret = await refusal(
      createReferable(alice.client, {
        apiVersion: "v1",
        kind: "Secret",
        namespace: ns,
        name: "creds",
        fieldPath: "data.password",
      }),
    );
    expect(secret).toContain(`user "${alice.username}" may not get secrets "creds" in namespace "${ns}"`);
    expect(secret).not.toContain("hunter2");
    // Nothing was stored.
    expect(
      await admin.request("GET", `${RF}/${name}`).catch((e: { statusCode?: number }) => e.statusCode),
    ).toBe(404);
  });

  it("allows the user once RBAC lets them get the object", async () => {
    const bob = await newConfigMapReader("bob", ["db"]);
    await createReferable(bob.client, configMap("db"));
    // resourceNames is honoured: another ConfigMap in the same namespace is still refused.
    expect(await refusal(createReferable(bob.client, configMap("other")))).toContain(
      `may not get configmaps "other" in namespace "${ns}"`,
    );
  });

  it("a selector needs list in the namespace, which get does not give", async () => {
    const carol = await newUser("carol");
    const selector = {
      apiVersion: "v1",
      kind: "ConfigMap",
      namespace: ns,
      selector: { matchLabels: { app: "web" } },
      fieldPath: "data.v",
    };
    await grant(carol, [{ apiGroups: [""], resources: ["configmaps"], verbs: ["get"] }], ns);
    await waitForConfigMapRead(carol.client, "db", true);
    expect(await refusal(createReferable(carol.client, selector))).toContain(
      `user "${carol.username}" may not list configmaps in namespace "${ns}": ${REFUSAL_SUFFIX}`,
    );
    await grant(carol, [{ apiGroups: [""], resources: ["configmaps"], verbs: ["list"] }], ns);
    await waitForAccess(carol.client, { verb: "list", resource: "configmaps", namespace: ns }, true);
    await createReferable(carol.client, selector);
  });

  it("a cluster-scoped source needs the permission cluster-wide", async () => {
    const dave = await newUser("dave");
    const source = { apiVersion: "v1", kind: "Namespace", name: ns, fieldPath: "metadata.name" };
    expect(await refusal(createReferable(dave.client, source))).toContain(
      `user "${dave.username}" may not get namespaces "${ns}" cluster-wide: ${REFUSAL_SUFFIX}`,
    );
    await grant(dave, [{ apiGroups: [""], resources: ["namespaces"], verbs: ["get"] }]);
    await waitForAccess(dave.client, { verb: "get", resource: "namespaces", name: ns }, true);
    await createReferable(dave.client, source);
  });

  it("a kind the API server does not serve yet needs read access to every resource of its group", async () => {
    const erin = await newUser("erin");
    const group = `${uniqueName("later")}.example.com`;
    const source = testCrdSource(group, "Queue", ns, "q", "spec.url");
    const refused = await refusal(createReferable(erin.client, source));
    expect(refused).toContain(`the API server does not serve ${group}/v1`);
    expect(refused).toContain(
      `user "${erin.username}" may not get every resource of API group "${group}" in namespace "${ns}"`,
    );
    await grant(erin, [{ apiGroups: [group], resources: ["*"], verbs: ["get"] }], ns);
    await waitForAccess(erin.client, { verb: "get", group, resource: "*", namespace: ns }, true);
    await createReferable(erin.client, source);
  });
});

describe("updates", () => {
  it("an update that changes spec.source is checked again", async () => {
    const frank = await newConfigMapReader("frank", ["db"]);
    const name = uniqueName("rf");
    await createReferable(frank.client, configMap("db"), name);
    const refused = await refusal(patchSpec(frank.client, name, { source: { name: "other" } }));
    expect(refused).toContain(`user "${frank.username}" may not get configmaps "other" in namespace "${ns}"`);
    const stored = await admin.request<{ spec: { source: { name: string } } }>("GET", `${RF}/${name}`);
    expect(stored.spec.source.name).toBe("db");
  });

  it("an update that leaves spec alone is not even sent to the webhook; a change of spec.default is checked again", async () => {
    const grace = await newUser("grace");
    const revoke = await grant(grace, [{ apiGroups: [""], resources: ["configmaps"], verbs: ["get"] }], ns);
    await waitForConfigMapRead(grace.client, "db", true);
    const name = uniqueName("rf");
    await createReferable(grace.client, configMap("db"), name);
    await revoke();
    await waitForConfigMapRead(grace.client, "db", false);

    const checksBefore = webhook.accessReviews;
    const reviewsBefore = webhook.reviews;
    await grace.client.request("PATCH", `${RF}/${name}`, {
      body: { metadata: { annotations: { note: "relabelled" } } },
      contentType: "application/merge-patch+json",
    });
    // deploy/'s matchConditions keep it from the webhook altogether...
    expect(webhook.reviews).toBe(reviewsBefore);
    expect(webhook.accessReviews).toBe(checksBefore);
    // ...while any change of spec, even only of the default it publishes, is checked: refused now.
    for (const spec of [{ default: "fallback" }, { source: { fieldPath: "data.other" } }])
      expect(await refusal(patchSpec(grace.client, name, spec))).toContain(
        `may not get configmaps "db" in namespace "${ns}"`,
      );
    // (No count of reviews here: the API server judges a patch again when it retries it after a
    // conflict, e.g. with a controller of another test file writing the status meanwhile.)
  });
});

describe("authorization follows the value: who changes what is written must be allowed to write it", () => {
  it("refuses an author who may update Referables a change of another's Referable that exports into a Secret she may not write", async () => {
    const victim = await createNamespace(admin, "team-b");
    const owner = uniqueName("rf");
    // The owner's Referable (created by the admin, who may do anything) exports into team-b.
    await createReferable(admin, configMap("db"), owner, {
      export: [{ kind: "Secret", namespace: victim, name: "creds", key: "password" }],
    });
    // mallory may update every Referable and read her own ConfigMap, and nothing in team-b.
    const mallory = `mallory-${uniqueName("u")}@example.com`;
    await bindUser(mallory, authorRole);
    const roleName = uniqueName("mallory-reads");
    await createRole(
      admin,
      roleName,
      [{ apiGroups: [""], resources: ["configmaps"], verbs: ["get", "list"] }],
      ns,
    );
    await bindRole(admin, roleName, roleName, [user(mallory)], ns, "Role");
    const client = impersonatingClient(mallory);
    await waitForConfigMapRead(client, "other", true);
    const missing = `user "${mallory}" may not create secrets in namespace "${victim}" and may not patch secrets "creds" in namespace "${victim}": ${EXPORT_REFUSAL_SUFFIX}`;

    const attempts: Array<[string, unknown]> = [
      ["a constant transform", { spec: { transform: "'mallory was here'" } }],
      ["her own ConfigMap as the source", { spec: { source: { name: "other" } } }],
      ["a default", { spec: { default: "mallory" } }],
    ];
    for (const [what, body] of attempts) {
      const refused = await refusal(
        client.request("PATCH", `${RF}/${owner}`, { body, contentType: "application/merge-patch+json" }),
      );
      expect([what, refused]).toEqual([what, expect.stringContaining(missing)]);
    }
    // Dropping the target would make the controller remove the key there: patch on it is needed.
    expect(
      await refusal(
        client.request("PATCH", `${RF}/${owner}`, {
          body: [{ op: "remove", path: "/spec/export" }],
          contentType: "application/json-patch+json",
        }),
      ),
    ).toContain(`user "${mallory}" may not patch secrets "creds" in namespace "${victim}"`);
    const stored = await admin.request<{ spec: Record<string, unknown> }>("GET", `${RF}/${owner}`);
    expect(stored.spec).toEqual({
      source: configMap("db"),
      export: [{ kind: "Secret", namespace: victim, name: "creds", key: "password" }],
    });

    // Allowed to write the Secret, the same change goes through: the refusal was that check's.
    await grant(
      { name: "", username: mallory, client } as User,
      [{ apiGroups: [""], resources: ["secrets"], verbs: ["create", "patch"] }],
      victim,
      { kind: "User", name: mallory, apiGroup: "rbac.authorization.k8s.io" },
    );
    await waitForAccess(
      client,
      { verb: "patch", resource: "secrets", namespace: victim, name: "creds" },
      true,
    );
    await client.request("PATCH", `${RF}/${owner}`, {
      body: { spec: { transform: "'allowed now'" } },
      contentType: "application/merge-patch+json",
    });
  });
});

describe("spec.transform", () => {
  const withTransform = (transform: string, name = uniqueName("rf")) =>
    admin.request("POST", RF, {
      body: {
        apiVersion: "referable.dev/v1alpha1",
        kind: "Referable",
        metadata: { name, labels: webhook.labels },
        spec: { source: configMap("db"), transform },
      },
    });

  it("refuses a transform that does not parse, with its position, and stores nothing", async () => {
    const name = uniqueName("rf");
    const refused = await refusal(withTransform("'postgres://' + value +", name));
    expect(refused).toContain("spec.transform: does not parse");
    expect(refused).toContain("line 1, column");
    const stored = await admin.request("GET", `${RF}/${name}`).catch((err: unknown) => err);
    expect(isApiError(stored) && stored.statusCode).toBe(404);
  });

  it("refuses a transform that does not type-check, and an update that breaks one", async () => {
    expect(await refusal(withTransform("values.size()"))).toContain("Unknown variable: values");
    const name = uniqueName("rf");
    await withTransform("'postgres://' + value", name);
    const refused = await refusal(patchSpec(admin, name, { transform: "1 + 'a'" }));
    expect(refused).toContain("does not type-check: no such overload: int + string");
    const stored = await admin.request<{ spec: { transform: string } }>("GET", `${RF}/${name}`);
    expect(stored.spec.transform).toBe("'postgres://' + value");
  });
});

describe("the webhook's own certificate and outages", () => {
  it("rotating the serving certificate takes effect without a restart", async () => {
    const before = await presentedFingerprint(webhook.port, webhook.caFile);
    expect(before).toBe(await webhook.currentFingerprint());
    const rotated = await webhook.rotate();
    expect(rotated).not.toBe(before);
    await waitFor(
      "the server to present the new certificate",
      async () => (await presentedFingerprint(webhook.port, webhook.caFile)) === rotated,
    );
    // Make the API server open a new connection, so its next call must accept the new certificate.
    webhook.server.closeIdleConnections();
    const handshakesBefore = webhook.handshakes.length;
    const name = uniqueName("rf");
    await createReferable(admin, configMap("db"), name);
    expect(webhook.handshakes.slice(handshakesBefore)).toContain(rotated);
    expect(webhook.handshakes.slice(handshakesBefore)).not.toContain(before);
  });

  it("while the webhook is down, Referable changes are refused and status writes still go through", async () => {
    const name = uniqueName("rf");
    await createReferable(admin, configMap("db"), name);
    await webhook.stopServer();
    const refused = await refusal(createReferable(admin, configMap("db")));
    expect(refused).toContain("failed calling webhook");
    expect(await refusal(patchSpec(admin, name, { default: "x" }))).toContain("failed calling webhook");
    // The controller's writes go to the status subresource, which the webhook does not match.
    await admin.request("PATCH", `${RF}/${name}/status`, {
      body: { status: { observedGeneration: 1 } },
      contentType: "application/merge-patch+json",
    });
    // Its finalizer changes leave spec alone: matchConditions keep them from the webhook, so an
    // exporting Referable is deleted, its finalizer let go, whatever the webhook's state.
    const finalizer = "referable.dev/export";
    await admin.request("PATCH", `${RF}/${name}`, {
      body: { metadata: { finalizers: [finalizer] } },
      contentType: "application/merge-patch+json",
    });
    await admin.request("DELETE", `${RF}/${name}`);
    await admin.request("PATCH", `${RF}/${name}`, {
      body: [
        { op: "test", path: "/metadata/finalizers", value: [finalizer] },
        { op: "remove", path: "/metadata/finalizers" },
      ],
      contentType: "application/json-patch+json",
    });
    await waitFor("the Referable to be gone", async () => {
      const gone = await admin.request("GET", `${RF}/${name}`).catch((err: unknown) => err);
      return isApiError(gone) && gone.statusCode === 404;
    });
  });
});
