/**
 * The webhook's HTTPS endpoint: `POST /validate-referable` takes an AdmissionReview and answers
 * with the handler's verdict; `GET /healthz` says the server answers. The serving certificate is
 * reloaded from its files when they change (see ./serving-certificate.ts), so cert-manager's
 * rotation works without a restart; or it comes from a {@link CertificateSource} such as the
 * controller's own certificate management (./cert-rotator.ts).
 *
 * Every replica serves this, leader or not: admission must not wait for an election.
 */
import { createServer, type Server } from "node:https";
import type { IncomingMessage, ServerResponse } from "node:http";
import { parseBindAddress } from "./bind-address.ts";
import { asError } from "../api/errors.ts";
import { silentLogger, type Logger } from "../api/log.ts";
import type { AdmissionHandler } from "./admission.ts";
import { isInvalidAdmissionReview } from "./admission-review.ts";
import { describeCertificate, ServingCertificate, type KeyPair } from "./serving-certificate.ts";

/** The path the ValidatingWebhookConfiguration calls. */
export const WEBHOOK_PATH = "/validate-referable";

/** Where the serving pair comes from, other than files: the pair now, until closed. */
export interface CertificateSource {
  readonly current: KeyPair;
  close(): void;
}

/** Opens a {@link CertificateSource} that calls `onChange` with each new pair. */
export type OpenCertificate = (onChange: (pair: KeyPair) => void) => Promise<CertificateSource>;

/** Options for {@link startWebhookServer}. */
export interface WebhookServerOptions {
  /** Where to listen, `[host]:port` (":9443" for every interface, as controller-runtime). */
  address: string;
  /** PEM certificate chain (`tls.crt` of a cert-manager Secret); unused with `certificate`. */
  certFile?: string;
  /** PEM private key (`tls.key`); unused with `certificate`. */
  keyFile?: string;
  /** The serving pair from elsewhere than files (the controller's own CA). */
  certificate?: OpenCertificate;
  /** Judges each AdmissionReview. */
  handler: AdmissionHandler;
  /** @default a silent logger */
  logger?: Logger;
  /** How often the certificate files are checked besides watching them. @default 10000 */
  certCheckIntervalMs?: number;
  /**
   * Largest request body. An AdmissionReview holds the object twice (old and new) and the API
   * server accepts objects up to 3 MiB. @default 8 MiB
   */
  maxBodyBytes?: number;
}

// TLS settings both for the first context and every reloaded one.
const TLS = { minVersion: "TLSv1.2" } as const;

/**
 * Starts the HTTPS server once the certificate has loaded and the port is bound; rejects when
 * either fails. Closing the returned server also stops following the certificate files.
 */
export async function startWebhookServer(options: WebhookServerOptions): Promise<Server> {
  const bind = parseBindAddress(options.address);
  if (!bind)
    throw new Error(`the webhook needs an address to listen on, not ${JSON.stringify(options.address)}`);
  const logger = options.logger ?? silentLogger;
  const maxBodyBytes = options.maxBodyBytes ?? 8 * 1024 * 1024;

  // The certificate is read before the server exists; changes after that go to the server.
  const target: { server?: Server } = {};
  // New connections get the new pair; open ones keep theirs until they close.
  const onChange = (pair: KeyPair) => target.server?.setSecureContext({ ...TLS, ...pair });
  const certificate: CertificateSource = options.certificate
    ? await options.certificate(onChange)
    : await ServingCertificate.open({
        certFile: required(options.certFile, "certFile"),
        keyFile: required(options.keyFile, "keyFile"),
        logger,
        ...(options.certCheckIntervalMs !== undefined
          ? { checkIntervalMs: options.certCheckIntervalMs }
          : {}),
        onChange,
      });
  const server = createServer({ ...TLS, ...certificate.current }, (req, res) => {
    void serve(req, res, options.handler, maxBodyBytes, logger);
  });
  target.server = server;
  server.requestTimeout = 30_000;
  server.headersTimeout = 10_000;
  server.on("tlsClientError", (err) => logger.debug({ err: err.message }, "a TLS handshake failed"));
  server.on("close", () => certificate.close());

  try {
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(bind.port, bind.host, () => {
        server.off("error", reject);
        resolve();
      });
    });
  } catch (err) {
    certificate.close();
    throw new Error(`the webhook cannot listen on ${options.address}: ${asError(err).message}`, {
      cause: err,
    });
  }
  logger.info(
    { address: options.address, ...describeCertificate(certificate.current.cert) },
    "webhook server listening",
  );
  return server;
}

function required(value: string | undefined, name: string): string {
  if (value === undefined) throw new Error(`the webhook needs ${name} or a certificate source`);
  return value;
}

async function serve(
  req: IncomingMessage,
  res: ServerResponse,
  handler: AdmissionHandler,
  maxBodyBytes: number,
  logger: Logger,
): Promise<void> {
  const path = (req.url ?? "").split("?")[0];
  if (path === "/healthz") {
    res.writeHead(200, { "Content-Type": "text/plain" }).end("ok");
    return;
  }
  if (path !== WEBHOOK_PATH) {
    res.writeHead(404, { "Content-Type": "text/plain" }).end("not found");
    return;
  }
  if (req.method !== "POST") {
    res.writeHead(405, { Allow: "POST", "Content-Type": "text/plain" }).end("use POST");
    return;
  }
  let body: unknown;
  try {
    const text = await readBody(req, maxBodyBytes);
    if (text === undefined) {
      res
        .writeHead(413, { "Content-Type": "text/plain", Connection: "close" })
        .end(`the body is over ${maxBodyBytes} bytes`);
      return;
    }
    body = JSON.parse(text);
  } catch (err) {
    if (!res.headersSent)
      res
        .writeHead(400, { "Content-Type": "text/plain" })
        .end(`the body is not JSON: ${asError(err).message}`);
    return;
  }
  try {
    const review = await handler(body);
    res.writeHead(200, { "Content-Type": "application/json" }).end(JSON.stringify(review));
  } catch (err) {
    if (isInvalidAdmissionReview(err)) {
      res.writeHead(400, { "Content-Type": "text/plain" }).end(err.message);
      return;
    }
    // The API server applies the webhook's failurePolicy (Fail: the request is refused).
    logger.error({ err: asError(err).message }, "the admission handler failed");
    res.writeHead(500, { "Content-Type": "text/plain" }).end("the admission check failed");
  }
}

/** The body as text, or undefined once it passes `limit` bytes (the rest is not read). */
function readBody(req: IncomingMessage, limit: number): Promise<string | undefined> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) {
        req.off("data", onData);
        req.resume();
        resolve(undefined);
        return;
      }
      chunks.push(chunk);
    };
    req.on("data", onData);
    req.once("end", () => resolve(Buffer.concat(chunks).toString("utf8")));
    req.once("error", reject);
  });
}
