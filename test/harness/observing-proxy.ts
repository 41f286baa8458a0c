/**
 * A reverse proxy in front of the test cluster's API server that reports every request going
 * through it, as `kubectl proxy` would serve them: for a test that must see every request of a
 * component it only reaches through a public API (a resolver made by `createResolver`, a
 * controller on `@kubernetes/client-node`), without hooking into its internals.
 */
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import { request as httpsRequest, type RequestOptions } from "node:https";
import type { AddressInfo } from "node:net";
import { KubeConfig } from "@kubernetes/client-node";
import { testKubeConfig } from "./kube.ts";

/** One request, reported when it reaches the proxy (before it is forwarded). */
export interface ProxiedRequest {
  /** `watch`, `get/list`, or the HTTP method of any other request (`PATCH`, `POST`, ...). */
  verb: string;
  /** The path, without the query. */
  path: string;
}

/** A running proxy; close it in afterAll. */
export interface ObservingProxy {
  /** A kubeconfig that connects through the proxy (plain HTTP on 127.0.0.1, no credentials). */
  readonly kubeConfig: KubeConfig;
  close(): Promise<void>;
}

/**
 * Starts a proxy on 127.0.0.1 that forwards every request to the test cluster with the admin
 * credentials, streaming both ways (a watch stays open), and calls `onRequest` for each one.
 */
export async function observingProxy(onRequest: (request: ProxiedRequest) => void): Promise<ObservingProxy> {
  const upstream = testKubeConfig();
  const cluster = upstream.getCurrentCluster();
  if (!cluster) throw new Error("the test kubeconfig has no cluster");
  const target = new URL(cluster.server);
  // The admin's TLS client certificate (an https.Agent) and any Authorization header.
  const tls: RequestOptions = {};
  await upstream.applyToHTTPSOptions(tls);

  const forward = (req: IncomingMessage, res: ServerResponse) => {
    const url = new URL(req.url ?? "/", "http://proxy");
    const watch = ["true", "1"].includes(url.searchParams.get("watch") ?? "");
    const method = req.method ?? "GET";
    onRequest({ verb: method !== "GET" ? method : watch ? "watch" : "get/list", path: url.pathname });
    const up = httpsRequest(
      {
        protocol: "https:",
        hostname: target.hostname,
        port: target.port,
        method,
        path: req.url,
        agent: tls.agent,
        headers: { ...req.headers, ...tls.headers, host: target.host },
      },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        // Now, not with the first byte of the body: a watch's answer may have no body for long,
        // and its client waits for the headers.
        res.flushHeaders();
        answer.pipe(res);
      },
    );
    up.on("error", () => res.destroy());
    // The client closed (a watch it stopped): close the upstream request too.
    res.on("close", () => {
      if (!res.writableFinished) up.destroy();
    });
    req.pipe(up);
  };

  const server = createServer(forward);
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  const kubeConfig = new KubeConfig();
  kubeConfig.loadFromOptions({
    // client-node takes plain HTTP only with skipTLSVerify set; there is no TLS to verify on this
    // loopback leg (the proxy verifies the API server's certificate on the other).
    clusters: [{ name: "proxy", server: `http://127.0.0.1:${port}`, skipTLSVerify: true }],
    users: [{ name: "proxy" }],
    contexts: [{ name: "proxy", cluster: "proxy", user: "proxy" }],
    currentContext: "proxy",
  });
  return {
    kubeConfig,
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
