/**
 * The process's HTTP endpoints: `/metrics` on the metrics address, `/healthz` and `/readyz` on
 * the probe address (controller-runtime's defaults :8080 and :8081). Nothing else is served.
 */
import type { IncomingMessage, Server, ServerResponse } from "node:http";
import type { Registry } from "prom-client";
// One parse of "[host]:port" for every listener of the process; the webhook's listener is the lowest user.
import { parseBindAddress } from "../webhook/bind-address.ts";

/**
 * The HTTP answer for one request: 200 go on, 401 no or bad token, 403 not allowed, 503 cannot
 * check now. The server's own word for what a judge of callers returns (./metrics-auth.ts is one),
 * so the server imports nothing of its judges.
 */
export interface MetricsDecision {
  status: 200 | 401 | 403 | 503;
  /** Said to the caller (never the token, never the API server's reason verbatim). */
  message: string;
}

/** What serving /metrics securely takes: a TLS identity and a judge of each caller. */
export interface SecureMetrics {
  /** The PEM certificate and key served first. */
  tls: { cert: string | Buffer; key: string | Buffer };
  /** Decides on a request's Authorization header (a MetricsAuthorizer). */
  authorize: (authorization: string | undefined) => Promise<MetricsDecision>;
  /** Called with the server, so a certificate that rotates can be set on it (setSecureContext). */
  onServer?: (server: Server) => void;
}

// node:http and node:https as CommonJS modules, not by an ESM import: importing node:http makes
// Node read every export into the module's namespace, and http's WebSocket, CloseEvent and
// MessageEvent getters load Node's own copy of undici (fetch, WebSocket: 0.7 MiB of source,
// 12 MiB of RSS once run) into a process that never uses them (nodejs/node#59686).
// process.getBuiltinModule returns the module itself and runs no getter.
const { createServer } = process.getBuiltinModule("node:http");
const { createServer: createHttpsServer } = process.getBuiltinModule("node:https");

async function listen(server: Server, address: string): Promise<Server | undefined> {
  const bind = parseBindAddress(address);
  if (!bind) return undefined;
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(bind.port, bind.host, () => {
      server.off("error", reject);
      resolve();
    });
  });
  return server;
}

/** The port a started server listens on (useful with port 0). */
export function portOf(server: Server | undefined): number | undefined {
  const address = server?.address();
  return typeof address === "object" && address ? address.port : undefined;
}

/**
 * Serves /metrics from `registry`, calling `beforeScrape` first to refresh gauges. With
 * `secure`, over HTTPS and only to callers `secure.authorize` lets through (401 without a
 * valid token, 403 without the permission), as kubebuilder's secure metrics.
 */
export async function startMetricsServer(
  address: string,
  registry: Registry,
  beforeScrape: () => void,
  secure?: SecureMetrics,
): Promise<Server | undefined> {
  if (!parseBindAddress(address)) return undefined;
  const scrape = (res: ServerResponse) => {
    beforeScrape();
    registry.metrics().then(
      (text) => res.writeHead(200, { "Content-Type": registry.contentType }).end(text),
      (err: unknown) => res.writeHead(500).end(String((err as Error).message)),
    );
  };
  const handle = (req: IncomingMessage, res: ServerResponse) => {
    if (req.method !== "GET" || req.url?.split("?")[0] !== "/metrics") {
      res.writeHead(404).end();
      return;
    }
    if (!secure) return scrape(res);
    void secure.authorize(req.headers.authorization).then((decision) => {
      if (decision.status === 200) scrape(res);
      else {
        const headers: Record<string, string> = { "Content-Type": "text/plain; charset=utf-8" };
        if (decision.status === 401) headers["WWW-Authenticate"] = 'Bearer realm="referable-controller"';
        res.writeHead(decision.status, headers).end(`${decision.message}\n`);
      }
    });
  };
  const server: Server = secure
    ? (createHttpsServer({ minVersion: "TLSv1.2", ...secure.tls }, handle) as unknown as Server)
    : createServer(handle);
  // Bounded per caller: headers within 10 s, a whole request within 30 s.
  server.headersTimeout = 10_000;
  server.requestTimeout = 30_000;
  secure?.onServer?.(server);
  return listen(server, address);
}

/**
 * Serves /healthz (the process answers) and /readyz (`ready()` says so: true, false for "caches
 * not synced", or a string saying why not, e.g. a start-up problem and its fix).
 */
export async function startProbeServer(
  address: string,
  ready: () => boolean | string,
  healthy: () => boolean,
): Promise<Server | undefined> {
  const server = createServer((req, res) => {
    const path = req.url?.split("?")[0];
    if (path === "/healthz") res.writeHead(healthy() ? 200 : 500).end(healthy() ? "ok" : "unhealthy");
    else if (path === "/readyz") {
      const state = ready();
      if (state === true) res.writeHead(200).end("ok");
      else res.writeHead(503).end(state === false ? "caches not synced" : state);
    } else res.writeHead(404).end();
  });
  return listen(server, address);
}

/** Closes a server, dropping idle keep-alive connections. */
export async function closeServer(server: Server | undefined): Promise<void> {
  if (!server) return;
  server.closeIdleConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
}
