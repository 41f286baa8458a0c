/**
 * The webhook's certificate without cert-manager (src/webhook/cert-rotator.ts), against the real
 * API server, as the controller's ServiceAccount with exactly the chart's RBAC for it: get and
 * update on the one Secret and the one ValidatingWebhookConfiguration (resourceNames), create on
 * Secrets in the namespace.
 *
 * - replicas starting at once make one Secret (one create wins) and all serve its certificate,
 *   with the caBundle set to its CA;
 * - the serving certificate is renewed before it expires, by the same CA (caBundle unchanged);
 *   a CA near its end is replaced, the old one kept in the caBundle while replicas switch;
 * - a cleared caBundle and a Secret that holds no certificate are put right;
 * - without the RBAC, a replica serves a throwaway certificate, says once what to grant, and
 *   picks up the Secret once granted.
 *
 * The webhook configuration here judges nothing (its rule names a resource no one has), so it
 * never touches another test file's requests.
 */
import { X509Certificate } from "node:crypto";
import type { KubeClient } from "../../src/kube/client.ts";
import { CertRotator, type CertRotatorOptions } from "../../src/webhook/cert-rotator.ts";
import { memoryLogger } from "../harness/faults.ts";
import {
  adminClient,
  closeTestClients,
  createNamespace,
  serviceAccountToken,
  tokenClient,
  uniqueName,
  waitFor,
} from "../harness/kube.ts";
import { bindRole, createRole, serviceAccount } from "../harness/rbac.ts";

const WAIT = { timeoutMs: 60_000, intervalMs: 100 };
/** Each test's deadline: generous, for a loaded 2-core machine. */
const STEP_MS = 180_000;
const DAY_MS = 24 * 3_600_000;
const VWC = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations";

type Secret = { metadata: { resourceVersion?: string }; type?: string; data: Record<string, string> };
type Vwc = { webhooks: Array<{ clientConfig: { caBundle?: string } }> };

let admin: KubeClient;
const rotators: CertRotator[] = [];
const configurations: string[] = [];

beforeAll(() => {
  admin = adminClient();
});

afterAll(async () => {
  for (const r of rotators) r.close();
  for (const name of configurations) await admin.request("DELETE", `${VWC}/${name}`).catch(() => undefined);
  await closeTestClients();
}, STEP_MS);

/** A namespace, a webhook configuration that judges nothing, and a ServiceAccount for the controller. */
async function setup(withRbac = true) {
  const namespace = await createNamespace(admin, "webhook-cert");
  const secretName = "referable-webhook-cert";
  const webhookConfigurationName = uniqueName("referable-validating-webhook");
  await admin.request("POST", VWC, {
    body: {
      apiVersion: "admissionregistration.k8s.io/v1",
      kind: "ValidatingWebhookConfiguration",
      metadata: { name: webhookConfigurationName },
      webhooks: [
        {
          name: "referables.referable.dev",
          admissionReviewVersions: ["v1"],
          sideEffects: "None",
          failurePolicy: "Ignore",
          clientConfig: { service: { name: "referable-webhook", namespace, path: "/validate-referable" } },
          rules: [
            {
              apiGroups: ["none.referable.dev"],
              apiVersions: ["v1"],
              operations: ["CREATE"],
              resources: ["nothings"],
            },
          ],
        },
      ],
    },
  });
  configurations.push(webhookConfigurationName);
  const account = "referable-controller";
  const token = await serviceAccountToken(admin, namespace, account);
  const grant = async () => {
    await createRole(
      admin,
      "webhook-cert",
      [
        { apiGroups: [""], resources: ["secrets"], resourceNames: [secretName], verbs: ["get", "update"] },
        { apiGroups: [""], resources: ["secrets"], verbs: ["create"] },
      ],
      namespace,
    );
    await bindRole(
      admin,
      "webhook-cert",
      "webhook-cert",
      [serviceAccount(account, namespace)],
      namespace,
      "Role",
    );
    const clusterRole = uniqueName("webhook-configuration");
    await createRole(admin, clusterRole, [
      {
        apiGroups: ["admissionregistration.k8s.io"],
        resources: ["validatingwebhookconfigurations"],
        resourceNames: [webhookConfigurationName],
        verbs: ["get", "update"],
      },
    ]);
    await bindRole(admin, clusterRole, clusterRole, [serviceAccount(account, namespace)]);
  };
  if (withRbac) await grant();
  const options = (extra: Partial<CertRotatorOptions> = {}): CertRotatorOptions => ({
    client: tokenClient(token),
    namespace,
    secretName,
    serviceName: "referable-webhook",
    webhookConfigurationName,
    onChange: () => undefined,
    ...extra,
  });
  const start = async (extra: Partial<CertRotatorOptions> = {}) => {
    const rotator = await CertRotator.start(options(extra));
    rotators.push(rotator);
    return rotator;
  };
  const secret = () => admin.request<Secret>("GET", `/api/v1/namespaces/${namespace}/secrets/${secretName}`);
  const caBundle = async () =>
    (await admin.request<Vwc>("GET", `${VWC}/${webhookConfigurationName}`)).webhooks[0]!.clientConfig
      .caBundle;
  return { namespace, secretName, webhookConfigurationName, start, secret, caBundle, grant };
}

const pem = (base64: string) => Buffer.from(base64, "base64").toString("utf8");
const certificates = (bundle: string) =>
  (bundle.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----\n?/g) ?? []).map(
    (p) => new X509Certificate(p),
  );

it(
  "replicas starting at once make one Secret and serve its certificate, with the caBundle set to its CA",
  async () => {
    const t = await setup();
    const [a, b, c] = await Promise.all([t.start(), t.start(), t.start()]);
    const secret = await t.secret();
    expect(secret.type).toBe("kubernetes.io/tls");
    expect(Object.keys(secret.data).sort()).toEqual(["ca.crt", "ca.key", "tls.crt", "tls.key"]);
    for (const r of [a!, b!, c!]) {
      expect(r.ready).toBe(true);
      expect(r.current.cert.toString()).toBe(pem(secret.data["tls.crt"]!));
      expect(r.current.key.toString()).toBe(pem(secret.data["tls.key"]!));
    }
    expect(await t.caBundle()).toBe(secret.data["ca.crt"]);
    const [ca] = certificates(pem(secret.data["ca.crt"]!));
    const cert = new X509Certificate(pem(secret.data["tls.crt"]!));
    expect(ca!.ca).toBe(true);
    expect(cert.checkIssued(ca!) && cert.verify(ca!.publicKey)).toBe(true);
    for (const name of [
      `referable-webhook.${t.namespace}.svc`,
      `referable-webhook.${t.namespace}.svc.cluster.local`,
    ])
      expect(cert.checkHost(name)).toBe(name);
    // A round with nothing due writes nothing.
    const before = secret.metadata.resourceVersion;
    await a!.check();
    expect((await t.secret()).metadata.resourceVersion).toBe(before);
  },
  STEP_MS,
);

it(
  "renews the serving certificate before it expires, with the same CA and caBundle",
  async () => {
    const t = await setup();
    const first = await t.start();
    const old = await t.secret();
    const changes: string[] = [];
    // A replica that renews 400 days ahead: the certificate (a year) is due, the CA (ten) is not.
    const later = await t.start({
      renewBeforeMs: 400 * DAY_MS,
      onChange: (pair) => changes.push(pair.cert.toString()),
    });
    later.close();
    const renewed = await t.secret();
    expect(renewed.data["tls.crt"]).not.toBe(old.data["tls.crt"]);
    expect(renewed.data["ca.crt"]).toBe(old.data["ca.crt"]);
    expect(renewed.data["ca.key"]).toBe(old.data["ca.key"]);
    expect(await t.caBundle()).toBe(old.data["ca.crt"]);
    expect(later.current.cert.toString()).toBe(pem(renewed.data["tls.crt"]!));
    const cert = new X509Certificate(pem(renewed.data["tls.crt"]!));
    expect(Date.parse(cert.validTo)).toBeGreaterThan(Date.now() + 300 * DAY_MS);
    // The first replica takes the new certificate on its next round, without a restart.
    expect(first.current.cert.toString()).toBe(pem(old.data["tls.crt"]!));
    await first.check();
    expect(first.current.cert.toString()).toBe(pem(renewed.data["tls.crt"]!));
    expect(changes).toEqual([pem(renewed.data["tls.crt"]!)]);
  },
  STEP_MS,
);

it(
  "replaces a CA near its end and keeps the old one in the caBundle while replicas switch",
  async () => {
    const t = await setup();
    await t.start();
    const old = await t.secret();
    const [oldCa] = certificates(pem(old.data["ca.crt"]!));
    // A replica that renews more than ten years ahead: the CA is due.
    (await t.start({ renewBeforeMs: 3700 * DAY_MS })).close();
    const renewed = await t.secret();
    const bundle = certificates(pem(renewed.data["ca.crt"]!));
    expect(bundle).toHaveLength(2);
    expect(bundle[0]!.fingerprint256).not.toBe(oldCa!.fingerprint256);
    expect(bundle[1]!.fingerprint256).toBe(oldCa!.fingerprint256);
    const cert = new X509Certificate(pem(renewed.data["tls.crt"]!));
    expect(cert.checkIssued(bundle[0]!) && cert.verify(bundle[0]!.publicKey)).toBe(true);
    expect(await t.caBundle()).toBe(renewed.data["ca.crt"]);
  },
  STEP_MS,
);

it(
  "puts back a cleared caBundle, and repairs a Secret that holds no certificate",
  async () => {
    const t = await setup();
    const rotator = await t.start();
    const good = await t.secret();
    const vwc = await admin.request<Vwc & Record<string, unknown>>(
      "GET",
      `${VWC}/${t.webhookConfigurationName}`,
    );
    vwc.webhooks[0]!.clientConfig.caBundle = undefined;
    await admin.request("PUT", `${VWC}/${t.webhookConfigurationName}`, { body: vwc });
    expect(await t.caBundle()).toBeUndefined();
    await rotator.check();
    expect(await t.caBundle()).toBe(good.data["ca.crt"]);

    await admin.request("PUT", `/api/v1/namespaces/${t.namespace}/secrets/${t.secretName}`, {
      body: {
        ...good,
        data: { ...good.data, "tls.crt": Buffer.from("not a certificate").toString("base64") },
      },
    });
    await rotator.check();
    const repaired = await t.secret();
    // The CA was fine: only the serving certificate is made again.
    expect(repaired.data["ca.crt"]).toBe(good.data["ca.crt"]);
    const cert = new X509Certificate(pem(repaired.data["tls.crt"]!));
    expect(cert.checkIssued(certificates(pem(good.data["ca.crt"]!))[0]!)).toBe(true);
    expect(rotator.current.cert.toString()).toBe(pem(repaired.data["tls.crt"]!));
  },
  STEP_MS,
);

it(
  "without the RBAC serves a throwaway certificate, says once what to grant, and picks up once granted",
  async () => {
    const t = await setup(false);
    const logger = memoryLogger();
    const changes: string[] = [];
    const rotator = await t.start({ logger, onChange: (pair) => changes.push(pair.cert.toString()) });
    expect(rotator.ready).toBe(false);
    // A certificate to serve all the same: the server starts, and the API server does not trust it.
    expect(
      new X509Certificate(rotator.current.cert).checkHost(`referable-webhook.${t.namespace}.svc`),
    ).toBeDefined();
    const errors = () => logger.lines.filter((l) => l.level === "error");
    expect(errors()).toHaveLength(1);
    expect(errors()[0]!.message).toContain("needs get, update (and create, when missing) on the Secret");
    expect(String(errors()[0]!.fields.err)).toMatch(/forbidden/i);
    await rotator.check();
    expect(errors()).toHaveLength(1); // not once per try
    await t.grant();
    await waitFor("the rotator to pick up after the grant", () => rotator.ready, WAIT);
    const secret = await t.secret();
    expect(changes).toEqual([pem(secret.data["tls.crt"]!)]);
    expect(await t.caBundle()).toBe(secret.data["ca.crt"]);
    expect(logger.lines.some((l) => l.message === "the webhook certificate is managed again")).toBe(true);
  },
  STEP_MS,
);
