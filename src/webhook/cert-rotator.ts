/**
 * The webhook's certificate without cert-manager, as external-secrets' cert-controller and
 * controller-runtime's certificate rotator do it: the controller keeps a CA and a serving
 * certificate signed by it in one Secret of its namespace, serves the webhook with that
 * certificate, and keeps the caBundle of its ValidatingWebhookConfiguration set to the CA.
 *
 * Every replica runs this, leader or not (admission must not wait for an election). They
 * cooperate through the API server's optimistic concurrency: whoever finds the Secret missing
 * creates it (one create wins, the others get AlreadyExists and read the winner's), whoever finds
 * it due for renewal updates it at the resourceVersion it read (one update wins, the others get
 * Conflict and read again). So all replicas serve the one certificate the Secret holds.
 *
 * Renewal: the serving certificate is re-signed by the same CA before it expires (the caBundle
 * does not change). A new CA (the old one near its end, or the Secret unreadable) is put in
 * the Secret's ca.crt ahead of the old one while the old one is valid, so the caBundle accepts
 * certificates of both while replicas switch. A replica puts a CA into the caBundle before it
 * serves a certificate signed by it.
 *
 * The Secret holds ca.crt, ca.key, tls.crt and tls.key (type kubernetes.io/tls). RBAC: get and
 * update on that Secret and on the ValidatingWebhookConfiguration (resourceNames), create on
 * Secrets in the namespace (only when it is missing).
 */
import { X509Certificate, createPrivateKey } from "node:crypto";
import { createSecureContext } from "node:tls";
import { asError } from "../api/errors.ts";
import { isApiError, type KubeClient } from "../kube/client.ts";
import { resourcePath, SECRETS, VALIDATING_WEBHOOK_CONFIGURATIONS } from "../kube/resource-path.ts";
import { silentLogger, type Logger } from "../api/log.ts";
import { backoffDelay } from "../timing/backoff.ts";
import {
  certificateAuthority,
  selfSignedCertificate,
  signedCertificate,
  type SelfSignedPair,
} from "./self-signed.ts";
import { describeCertificate, type KeyPair } from "./serving-certificate.ts";

const DAY_MS = 24 * 3_600_000;

/** Options for {@link CertRotator}. */
export interface CertRotatorOptions {
  client: KubeClient;
  /** The namespace of the Secret and of the webhook's Service. */
  namespace: string;
  /** The Secret holding the CA and the serving certificate. */
  secretName: string;
  /** The webhook's Service: the certificate is for `<service>.<namespace>.svc` (and `.cluster.local`). */
  serviceName: string;
  /** The ValidatingWebhookConfiguration whose webhooks' caBundle is kept set to the CA. */
  webhookConfigurationName: string;
  /** Called with each serving pair taken from the Secret (the first included), before it is current. */
  onChange: (pair: KeyPair) => void;
  logger?: Logger;
  /** How often the Secret and the caBundle are checked. @default 60000 */
  checkIntervalMs?: number;
  /** Validity of a new CA. @default ten years */
  caValidityMs?: number;
  /** Validity of a new serving certificate. @default one year */
  certValidityMs?: number;
  /** Renew a certificate (the CA or the serving one) when it expires within this. @default 90 days */
  renewBeforeMs?: number;
}

/** The Secret's certificate material, decoded. */
interface Material {
  /** PEM: the CA that signs (first), then earlier CAs still valid. */
  caBundle: string;
  caKey: string;
  cert: string;
  key: string;
}

/** Why the material must be renewed: "ca" (a new CA), "cert" (re-sign with the CA), or nothing. */
type Renewal = { what: "ca" | "cert"; why: string } | undefined;

/** The PEM certificates of a bundle, in order. */
function splitPem(bundle: string): string[] {
  return bundle.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----\n?/g) ?? [];
}

/**
 * Keeps the webhook's certificate in a Secret and the caBundle current; see the module comment.
 * {@link CertRotator.start} makes one and runs the first round.
 */
export class CertRotator {
  private readonly options: CertRotatorOptions;
  private readonly logger: Logger;
  private pair: KeyPair;
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private closed = false;
  private failures = 0;
  /** Whether the pair in use came from the Secret (not the placeholder). */
  private fromSecret = false;

  private constructor(options: CertRotatorOptions, placeholder: KeyPair) {
    this.options = options;
    this.logger = options.logger ?? silentLogger;
    this.pair = placeholder;
  }

  /**
   * Runs the first round and starts checking every interval. When the first round fails (RBAC,
   * the API server), the server still starts, with a throwaway certificate the API server does
   * not trust (the webhook's failurePolicy applies), and the rounds go on with a backoff until
   * one succeeds; the error is logged with what to fix.
   */
  static async start(options: CertRotatorOptions): Promise<CertRotator> {
    const names = dnsNames(options.serviceName, options.namespace);
    const placeholder = selfSignedCertificate({ commonName: names[0], dnsNames: names, ipAddresses: [] });
    const rotator = new CertRotator(options, {
      cert: Buffer.from(placeholder.cert),
      key: Buffer.from(placeholder.key),
    });
    await rotator.check();
    return rotator;
  }

  /** The pair to serve. */
  get current(): KeyPair {
    return this.pair;
  }

  /** Whether the pair in use is the Secret's (false while only the throwaway one is served). */
  get ready(): boolean {
    return this.fromSecret;
  }

  /** One round now (rounds never overlap: a call during one waits for it). Never rejects. */
  check(): Promise<void> {
    if (this.closed) return Promise.resolve();
    this.running ??= this.round().finally(() => {
      this.running = undefined;
      this.schedule();
    });
    return this.running;
  }

  /** Stops the checks. */
  close(): void {
    this.closed = true;
    clearTimeout(this.timer);
  }

  private schedule(): void {
    if (this.closed) return;
    clearTimeout(this.timer);
    const interval = this.options.checkIntervalMs ?? 60_000;
    // After failures: 1 s, 2 s, 4 s, ... up to the interval, so a fixed RBAC is seen soon.
    const delay =
      this.failures === 0 ? interval : backoffDelay(this.failures - 1, { baseMs: 1000, maxMs: interval });
    this.timer = setTimeout(() => void this.check(), delay);
    this.timer.unref();
  }

  private async round(): Promise<void> {
    try {
      const material = await this.ensureSecret();
      await this.ensureCaBundle(material.caBundle);
      this.use(material);
      if (this.failures > 0) this.logger.info({}, "the webhook certificate is managed again");
      this.failures = 0;
    } catch (err) {
      this.failures++;
      // Once per outage at error level, then quietly: the backoff keeps trying.
      const log =
        this.failures === 1 ? this.logger.error.bind(this.logger) : this.logger.debug.bind(this.logger);
      log(
        {
          err: asError(err).message,
          secret: `${this.options.namespace}/${this.options.secretName}`,
          webhookConfiguration: this.options.webhookConfigurationName,
        },
        "cannot manage the webhook certificate: the controller needs get, update (and create, when missing) on the Secret, and get and update on the ValidatingWebhookConfiguration",
      );
    }
  }

  private use(material: Material): void {
    const next = { cert: Buffer.from(material.cert), key: Buffer.from(material.key) };
    if (this.fromSecret && next.cert.equals(this.pair.cert) && next.key.equals(this.pair.key)) return;
    if (this.closed) return;
    this.options.onChange(next);
    this.pair = next;
    this.fromSecret = true;
    this.logger.info(describeCertificate(next.cert), "serving the webhook certificate of the Secret");
  }

  private get secretPath(): string {
    return resourcePath(SECRETS, { namespace: this.options.namespace, name: this.options.secretName });
  }

  /** The Secret's material, made, renewed or repaired first when it needs to be. */
  private async ensureSecret(): Promise<Material> {
    // Two tries: a create or update that lost to another replica reads the winner's Secret.
    for (let attempt = 0; ; attempt++) {
      let secret: SecretObject | undefined;
      try {
        secret = await this.options.client.request<SecretObject>("GET", this.secretPath);
      } catch (err) {
        if (!isApiError(err, 404)) throw err;
      }
      const current = secret ? decode(secret) : undefined;
      const renewal = current
        ? this.assess(current)
        : {
            what: "ca" as const,
            why: secret ? "the Secret holds no usable CA and certificate" : "no Secret yet",
          };
      if (!renewal && current) return current;
      const next = this.renew(current, renewal!);
      this.logger.info(
        {
          why: renewal!.why,
          renewed: renewal!.what === "ca" ? "CA and serving certificate" : "serving certificate",
        },
        "renewing the webhook certificate",
      );
      try {
        if (secret) {
          await this.options.client.request("PUT", this.secretPath, {
            body: { ...secret, type: secret.type ?? "kubernetes.io/tls", data: encode(next) },
          });
        } else {
          await this.options.client.request(
            "POST",
            resourcePath(SECRETS, { namespace: this.options.namespace }),
            {
              body: {
                apiVersion: "v1",
                kind: "Secret",
                metadata: {
                  name: this.options.secretName,
                  namespace: this.options.namespace,
                  labels: { "app.kubernetes.io/managed-by": "referable-controller" },
                },
                type: "kubernetes.io/tls",
                data: encode(next),
              },
            },
          );
        }
        return next;
      } catch (err) {
        // Another replica wrote first: read what it wrote.
        if (attempt < 2 && isApiError(err, 409)) continue;
        throw err;
      }
    }
  }

  /** What the material needs, judged now. */
  private assess(m: Material): Renewal {
    const now = Date.now();
    const renewBefore = this.options.renewBeforeMs ?? 90 * DAY_MS;
    let ca: X509Certificate;
    let cert: X509Certificate;
    try {
      const first = splitPem(m.caBundle)[0];
      if (!first) return { what: "ca", why: "ca.crt holds no certificate" };
      ca = new X509Certificate(first);
      if (!ca.ca) return { what: "ca", why: "ca.crt is not a CA" };
      if (!ca.checkPrivateKey(createPrivateKey(m.caKey)))
        return { what: "ca", why: "ca.key is not the CA's key" };
    } catch (err) {
      return { what: "ca", why: `the CA does not load: ${asError(err).message}` };
    }
    if (Date.parse(ca.validTo) - now < renewBefore) return { what: "ca", why: "the CA expires soon" };
    if (Date.parse(ca.validFrom) > now) return { what: "ca", why: "the CA is not valid yet" };
    try {
      cert = new X509Certificate(m.cert);
      createSecureContext({ cert: m.cert, key: m.key });
    } catch (err) {
      return { what: "cert", why: `the serving certificate does not load: ${asError(err).message}` };
    }
    if (!cert.checkIssued(ca) || !cert.verify(ca.publicKey))
      return { what: "cert", why: "the serving certificate is not signed by the CA" };
    const names = dnsNames(this.options.serviceName, this.options.namespace);
    if (names.some((name) => cert.checkHost(name, { wildcards: false }) !== name))
      return { what: "cert", why: "the serving certificate is not for the webhook's Service" };
    if (Date.parse(cert.validTo) - now < renewBefore)
      return { what: "cert", why: "the serving certificate expires soon" };
    if (Date.parse(cert.validFrom) > now)
      return { what: "cert", why: "the serving certificate is not valid yet" };
    return undefined;
  }

  private renew(current: Material | undefined, renewal: NonNullable<Renewal>): Material {
    const now = new Date();
    const names = dnsNames(this.options.serviceName, this.options.namespace);
    let ca: SelfSignedPair;
    let caBundle: string;
    if (renewal.what === "cert" && current) {
      ca = { cert: splitPem(current.caBundle)[0]!, key: current.caKey };
      caBundle = current.caBundle;
    } else {
      ca = certificateAuthority({
        commonName: `${this.options.serviceName}.${this.options.namespace}-ca`,
        now,
        validForMs: this.options.caValidityMs,
      });
      // Earlier CAs stay trusted while valid: replicas still serving a certificate of one keep working.
      const earlier = current
        ? splitPem(current.caBundle).filter((pem) => stillValid(pem, now.getTime()))
        : [];
      caBundle = [ca.cert, ...earlier.slice(0, 1)].join("");
    }
    const leaf = signedCertificate(ca, {
      commonName: names[0],
      dnsNames: names,
      ipAddresses: [],
      now,
      validForMs: this.options.certValidityMs,
    });
    return { caBundle, caKey: ca.key, cert: leaf.cert, key: leaf.key };
  }

  private get webhookConfigurationPath(): string {
    return resourcePath(VALIDATING_WEBHOOK_CONFIGURATIONS, { name: this.options.webhookConfigurationName });
  }

  /** Sets the caBundle of every webhook of the configuration to `bundle` (PEM). */
  private async ensureCaBundle(bundle: string): Promise<void> {
    const want = Buffer.from(bundle).toString("base64");
    for (let attempt = 0; ; attempt++) {
      const config = await this.options.client.request<WebhookConfigurationObject>(
        "GET",
        this.webhookConfigurationPath,
      );
      const webhooks = config.webhooks ?? [];
      if (webhooks.every((w) => w.clientConfig?.caBundle === want)) return;
      const updated = {
        ...config,
        webhooks: webhooks.map((w) => ({ ...w, clientConfig: { ...w.clientConfig, caBundle: want } })),
      };
      try {
        await this.options.client.request("PUT", this.webhookConfigurationPath, { body: updated });
        this.logger.info(
          { webhookConfiguration: this.options.webhookConfigurationName, webhooks: webhooks.length },
          "set the webhook configuration's caBundle",
        );
        return;
      } catch (err) {
        if (attempt < 2 && isApiError(err, 409)) continue;
        throw err;
      }
    }
  }
}

interface SecretObject {
  apiVersion?: string;
  kind?: string;
  metadata: Record<string, unknown>;
  type?: string;
  data?: Record<string, string>;
  [key: string]: unknown;
}

interface WebhookConfigurationObject {
  metadata: Record<string, unknown>;
  webhooks?: Array<{ clientConfig?: { caBundle?: string; [key: string]: unknown }; [key: string]: unknown }>;
  [key: string]: unknown;
}

/** The DNS names the API server may call the Service by. */
export function dnsNames(service: string, namespace: string): string[] {
  return [`${service}.${namespace}.svc`, `${service}.${namespace}.svc.cluster.local`];
}

function decode(secret: SecretObject): Material | undefined {
  const data = secret.data ?? {};
  const text = (key: string) => (data[key] ? Buffer.from(data[key], "base64").toString("utf8") : "");
  const m = { caBundle: text("ca.crt"), caKey: text("ca.key"), cert: text("tls.crt"), key: text("tls.key") };
  return m.caBundle && m.caKey ? m : undefined;
}

function encode(m: Material): Record<string, string> {
  const b64 = (s: string) => Buffer.from(s).toString("base64");
  return { "ca.crt": b64(m.caBundle), "ca.key": b64(m.caKey), "tls.crt": b64(m.cert), "tls.key": b64(m.key) };
}

function stillValid(pem: string, now: number): boolean {
  try {
    return Date.parse(new X509Certificate(pem).validTo) > now;
  } catch {
    return false;
  }
}
