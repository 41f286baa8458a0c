/**
 * The admission webhook in the test process, registered with the shared control plane: a CA
 * and a serving certificate for 127.0.0.1 made with openssl (as the control plane's own PKI),
 * the HTTPS server on a free loopback port, and a ValidatingWebhookConfiguration that calls it.
 *
 * The configuration has an objectSelector on a label of its own, so it judges only the
 * Referables of the test that started it and never blocks another test file's. (A real
 * deployment must not have one: a user would skip the check by leaving the label out.)
 */
import { execFile } from "node:child_process";
import { mkdir, mkdtemp, readFile, rename, rm, symlink, writeFile } from "node:fs/promises";
import type { Server } from "node:https";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { connect, type TLSSocket } from "node:tls";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { load } from "js-yaml";
import type { KubeClient, RequestOptions } from "../../src/kube/client.ts";
import { Discovery } from "../../src/kube/discovery.ts";
import { createAdmissionHandler, startWebhookServer, WEBHOOK_PATH } from "../../src/webhook/index.ts";
import { uniqueName, waitFor } from "./kube.ts";

const execFileAsync = promisify(execFile);
const openssl = (args: string[]) => execFileAsync("openssl", args);

/** A test certificate authority: its files, and a way to issue serving certificates from it. */
export interface TestCa {
  certFile: string;
  keyFile: string;
  /** Issues a key and certificate for 127.0.0.1 and localhost into `dir` (tls.key, tls.crt). */
  issue(dir: string): Promise<{ certFile: string; keyFile: string }>;
}

/** Makes a CA in `dir` with openssl (EC P-256, valid two days). */
export async function makeTestCa(dir: string): Promise<TestCa> {
  await mkdir(dir, { recursive: true });
  const certFile = join(dir, "ca.crt");
  const keyFile = join(dir, "ca.key");
  await openssl(["ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", keyFile]);
  await openssl([
    "req",
    "-x509",
    "-new",
    "-key",
    keyFile,
    "-days",
    "2",
    "-subj",
    "/CN=referable-webhook-test-ca",
    "-out",
    certFile,
  ]);
  let serial = 0;
  return {
    certFile,
    keyFile,
    issue: async (out) => {
      await mkdir(out, { recursive: true });
      const key = join(out, "tls.key");
      const csr = join(out, "tls.csr");
      const crt = join(out, "tls.crt");
      const ext = join(out, "tls.ext");
      await openssl(["ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", key]);
      await openssl(["req", "-new", "-key", key, "-subj", "/CN=127.0.0.1", "-out", csr]);
      await writeFile(ext, "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n");
      await openssl([
        "x509",
        "-req",
        "-in",
        csr,
        "-CA",
        certFile,
        "-CAkey",
        keyFile,
        "-set_serial",
        String(Date.now() * 100 + serial++),
        "-days",
        "2",
        "-extfile",
        ext,
        "-out",
        crt,
      ]);
      return { certFile: crt, keyFile: key };
    },
  };
}

/**
 * A folder laid out as the kubelet lays out a mounted Secret: `tls.crt` and `tls.key` are
 * symlinks through `..data`, which points at a timestamped folder and is swapped atomically on
 * each update. Rotating here exercises exactly what cert-manager rotation looks like in a pod.
 */
export async function secretVolume(
  dir: string,
  ca: TestCa,
): Promise<{ certFile: string; keyFile: string; rotate: () => Promise<void> }> {
  await mkdir(dir, { recursive: true });
  let version = 0;
  const publish = async () => {
    const target = `..${Date.now()}_${version++}`;
    await ca.issue(join(dir, target));
    await symlink(target, join(dir, "..data_tmp"));
    await rename(join(dir, "..data_tmp"), join(dir, "..data"));
  };
  await publish();
  await symlink(join("..data", "tls.crt"), join(dir, "tls.crt"));
  await symlink(join("..data", "tls.key"), join(dir, "tls.key"));
  return { certFile: join(dir, "tls.crt"), keyFile: join(dir, "tls.key"), rotate: publish };
}

/** The SHA-256 fingerprint of the certificate a TLS server presents (X509Certificate format). */
export async function presentedFingerprint(port: number, caFile: string): Promise<string> {
  const ca = await readFile(caFile);
  return new Promise((resolve, reject) => {
    const socket: TLSSocket = connect({ host: "127.0.0.1", port, ca, servername: "localhost" }, () => {
      const fingerprint = socket.getPeerCertificate().fingerprint256;
      socket.end();
      resolve(fingerprint);
    });
    socket.once("error", reject);
  });
}

/** deploy/'s ValidatingWebhookConfiguration, which the test webhook registers as shipped. */
const DEPLOYED_WEBHOOK = fileURLToPath(
  new URL("../../deploy/webhook/validating-webhook-configuration.yaml", import.meta.url),
);

/** The one webhook of deploy/'s configuration, without its clientConfig (a Service there). */
function deployedWebhook(text: string): Record<string, unknown> & { timeoutSeconds: number } {
  const doc = load(text) as { webhooks?: Array<Record<string, unknown>> };
  const webhook = doc.webhooks?.[0];
  if (!webhook || doc.webhooks?.length !== 1)
    throw new Error(`${DEPLOYED_WEBHOOK}: expected exactly one webhook`);
  const { clientConfig: _service, ...rest } = webhook;
  return rest as Record<string, unknown> & { timeoutSeconds: number };
}

/** A webhook started by {@link startTestWebhook}. */
export interface TestWebhook {
  /** Put these labels on the Referables this webhook should judge. */
  labels: Record<string, string>;
  /** Name of the ValidatingWebhookConfiguration. */
  configurationName: string;
  port: number;
  caFile: string;
  server: Server;
  /** AdmissionReviews judged so far. */
  readonly reviews: number;
  /** SubjectAccessReviews the handler has posted so far. */
  readonly accessReviews: number;
  /** Fingerprints of the certificates presented to each TLS connection, in order. */
  readonly handshakes: readonly string[];
  /** Issues a new serving certificate from the same CA and swaps it in as the kubelet would. */
  rotate(): Promise<string>;
  /** Fingerprint of the serving certificate on disk now. */
  currentFingerprint(): Promise<string>;
  /** Closes the server but leaves the configuration: the webhook is down. */
  stopServer(): Promise<void>;
  /** Removes the configuration, closes the server and deletes the files. */
  stop(): Promise<void>;
}

/** Starts the webhook in this process and registers it; see the module comment. */
export async function startTestWebhook(
  admin: KubeClient,
  options: {
    timeoutSeconds?: number;
    /** Who the controller is, to refuse spec changes made as it; see AdmissionHandlerOptions. */
    controllerUsername?: (signal?: AbortSignal) => Promise<string>;
  } = {},
): Promise<TestWebhook> {
  const dir = await mkdtemp(join(tmpdir(), "referable-webhook-"));
  const ca = await makeTestCa(join(dir, "ca"));
  const volume = await secretVolume(join(dir, "serving-certs"), ca);
  let reviews = 0;
  let accessReviews = 0;
  const handshakes: string[] = [];
  const counting: Pick<KubeClient, "request"> = {
    request: <T>(method: string, path: string, opts?: RequestOptions) => {
      if (path.endsWith("/subjectaccessreviews")) accessReviews++;
      return admin.request<T>(method, path, opts);
    },
  };
  const handler = createAdmissionHandler({
    client: counting,
    discovery: new Discovery({ client: admin }),
    ...(options.controllerUsername && { controllerUsername: options.controllerUsername }),
  });
  const server = await startWebhookServer({
    address: "127.0.0.1:0",
    certFile: volume.certFile,
    keyFile: volume.keyFile,
    handler: async (review) => {
      reviews++;
      return handler(review);
    },
  });
  server.on("secureConnection", (socket: TLSSocket) => {
    const cert = socket.getCertificate();
    if (cert && "fingerprint256" in cert) handshakes.push(cert.fingerprint256);
  });
  const port = (server.address() as AddressInfo).port;
  const configurationName = uniqueName("referable-test-webhook");
  const labels = { "test.referable.dev/webhook": configurationName };
  const closeServer = () =>
    new Promise<void>((resolve) => {
      if (!server.listening) return resolve();
      server.closeAllConnections();
      server.close(() => resolve());
    });

  // The webhook as deploy/ wires it (rules, matchConditions, policies), with only the endpoint,
  // the CA, the test's objectSelector and (when asked) the timeout replaced.
  const shipped = deployedWebhook(await readFile(DEPLOYED_WEBHOOK, "utf8"));
  await admin.request("POST", "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations", {
    body: {
      apiVersion: "admissionregistration.k8s.io/v1",
      kind: "ValidatingWebhookConfiguration",
      metadata: { name: configurationName },
      webhooks: [
        {
          ...shipped,
          clientConfig: {
            url: `https://127.0.0.1:${port}${WEBHOOK_PATH}`,
            caBundle: (await readFile(ca.certFile)).toString("base64"),
          },
          objectSelector: { matchLabels: labels },
          timeoutSeconds: options.timeoutSeconds ?? shipped.timeoutSeconds,
        },
      ],
    },
  });

  // The API server picks a new configuration up asynchronously: a dry-run create (no side
  // effects, and nothing stored) that reaches the handler proves it is in force.
  const before = reviews;
  await waitFor(
    `webhook ${configurationName} to be called by the API server`,
    async () => {
      await admin.request("POST", "/apis/referable.dev/v1alpha1/referables", {
        query: { dryRun: "All" },
        body: {
          apiVersion: "referable.dev/v1alpha1",
          kind: "Referable",
          metadata: { name: uniqueName("probe"), labels },
          spec: {
            source: { apiVersion: "v1", kind: "Namespace", name: "default", fieldPath: "metadata.name" },
          },
        },
      });
      return reviews > before;
    },
    { timeoutMs: 30_000, intervalMs: 100 },
  );

  return {
    labels,
    configurationName,
    port,
    caFile: ca.certFile,
    server,
    get reviews() {
      return reviews;
    },
    get accessReviews() {
      return accessReviews;
    },
    handshakes,
    rotate: async () => {
      await volume.rotate();
      return fingerprintOf(volume.certFile);
    },
    currentFingerprint: () => fingerprintOf(volume.certFile),
    stopServer: closeServer,
    stop: async () => {
      await deleteWebhookConfiguration(admin, configurationName);
      await closeServer();
      await rm(dir, { recursive: true, force: true });
    },
  };
}

/** Deletes the ValidatingWebhookConfiguration `name`, for a test's clean-up: gone already is fine. */
export async function deleteWebhookConfiguration(admin: KubeClient, name: string): Promise<void> {
  await admin
    .request("DELETE", `/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/${name}`)
    .catch(() => undefined);
}

async function fingerprintOf(certFile: string): Promise<string> {
  const { X509Certificate } = await import("node:crypto");
  return new X509Certificate(await readFile(certFile)).fingerprint256;
}
