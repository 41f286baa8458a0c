import { spawnSync } from "node:child_process";
import { request, type Server } from "node:http";
import { request as httpsRequest } from "node:https";
import { fileURLToPath } from "node:url";
import { selfSignedCertificate } from "../webhook/self-signed.ts";
import { Counter, Registry } from "prom-client";
import { closeServer, portOf, startMetricsServer, startProbeServer } from "./server.ts";

/** GETs (or `method`s) a path on a local server without keeping the connection. */
function get(
  server: Server | undefined,
  path: string,
  method = "GET",
): Promise<{ status: number; body: string }> {
  const port = portOf(server);
  if (port === undefined) throw new Error("server is not listening");
  return new Promise((resolve, reject) => {
    const req = request({ host: "127.0.0.1", port, path, method, agent: false }, (res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (chunk: string) => (body += chunk));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on("error", reject);
    req.end();
  });
}

describe("startMetricsServer", () => {
  let server: Server | undefined;
  let scrapes = 0;
  beforeAll(async () => {
    const registry = new Registry();
    const counter = new Counter({ name: "test_things_total", help: "things", registers: [registry] });
    server = await startMetricsServer("127.0.0.1:0", registry, () => {
      scrapes++;
      counter.inc();
    });
  });
  afterAll(() => closeServer(server));

  it("serves the registry, refreshed just before each scrape", async () => {
    const first = await get(server, "/metrics");
    expect(first.status).toBe(200);
    expect(first.body).toContain("test_things_total 1");
    const second = await get(server, "/metrics?x=1");
    expect(second.body).toContain("test_things_total 2");
    expect(scrapes).toBe(2);
  });

  const notServed: Array<{ reason: string; path: string; method: string }> = [
    { reason: "another path", path: "/", method: "GET" },
    { reason: "a probe path on the metrics port", path: "/healthz", method: "GET" },
    { reason: "a prefix of the path", path: "/metricsx", method: "GET" },
    { reason: "another method", path: "/metrics", method: "POST" },
  ];
  it.each(notServed)("answers 404 to $reason", async ({ path, method }) => {
    const before = scrapes;
    expect((await get(server, path, method)).status).toBe(404);
    expect(scrapes).toBe(before);
  });
});

/** GETs /metrics over HTTPS, trusting `ca` (the server's self-signed certificate). */
function getTls(
  server: Server | undefined,
  ca: string,
  authorization?: string,
): Promise<{ status: number; body: string; headers: Record<string, unknown> }> {
  return new Promise((resolve, reject) => {
    const req = httpsRequest(
      {
        host: "127.0.0.1",
        port: portOf(server),
        path: "/metrics",
        ca,
        agent: false,
        headers: authorization ? { authorization } : {},
      },
      (res) => {
        let body = "";
        res.setEncoding("utf8");
        res.on("data", (chunk: string) => (body += chunk));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, body, headers: res.headers }));
      },
    );
    req.on("error", reject);
    req.end();
  });
}

describe("startMetricsServer, secure", () => {
  let server: Server | undefined;
  const tls = selfSignedCertificate();
  const seen: Array<string | undefined> = [];
  beforeAll(async () => {
    const registry = new Registry();
    new Counter({ name: "test_secure_total", help: "things", registers: [registry] }).inc();
    server = await startMetricsServer("127.0.0.1:0", registry, () => undefined, {
      tls,
      authorize: async (header) => {
        seen.push(header);
        if (header === "Bearer good") return { status: 200, message: "" };
        if (header === "Bearer other") return { status: 403, message: "Forbidden: no" };
        return { status: 401, message: "Unauthorized: a bearer token is required" };
      },
    });
  });
  afterAll(() => closeServer(server));

  const cases: Array<{ reason: string; header?: string; status: number; body: string }> = [
    { reason: "no token: 401", status: 401, body: "Unauthorized" },
    { reason: "a token the judge refuses: 403", header: "Bearer other", status: 403, body: "Forbidden: no" },
    {
      reason: "an allowed token: the metrics",
      header: "Bearer good",
      status: 200,
      body: "test_secure_total 1",
    },
  ];
  it.each(cases)("answers over TLS: $reason", async ({ header, status, body }) => {
    const res = await getTls(server, tls.cert, header);
    expect(res.status).toBe(status);
    expect(res.body).toContain(body);
    if (status === 401) expect(res.headers["www-authenticate"]).toMatch(/^Bearer /);
    expect(seen.at(-1)).toBe(header);
  });

  it("serves no plain HTTP on the metrics port", async () => {
    await expect(get(server, "/metrics")).rejects.toThrow();
  });
});

describe("startProbeServer", () => {
  let server: Server | undefined;
  let ready: boolean | string = false;
  let healthy = true;
  beforeAll(async () => {
    server = await startProbeServer(
      "127.0.0.1:0",
      () => ready,
      () => healthy,
    );
  });
  afterAll(() => closeServer(server));

  const cases: Array<{
    reason: string;
    ready: boolean | string;
    healthy: boolean;
    path: string;
    want: number;
    body?: string;
  }> = [
    {
      reason: "not ready before the caches sync",
      ready: false,
      healthy: true,
      path: "/readyz",
      want: 503,
      body: "caches not synced",
    },
    {
      reason: "a start-up problem is the body, so a probe's failure says the fix",
      ready: "the Referable CRD is not installed: run kubectl apply",
      healthy: true,
      path: "/readyz",
      want: 503,
      body: "the Referable CRD is not installed: run kubectl apply",
    },
    { reason: "ready once synced", ready: true, healthy: true, path: "/readyz", want: 200 },
    { reason: "query strings are ignored", ready: true, healthy: true, path: "/readyz?verbose", want: 200 },
    { reason: "healthy while not ready", ready: false, healthy: true, path: "/healthz", want: 200 },
    { reason: "unhealthy", ready: true, healthy: false, path: "/healthz", want: 500 },
    { reason: "no other path", ready: true, healthy: true, path: "/metrics", want: 404 },
  ];
  it.each(cases)("$path is $want: $reason", async (c) => {
    ready = c.ready;
    healthy = c.healthy;
    const got = await get(server, c.path);
    expect(got.status).toBe(c.want);
    if (c.body !== undefined) expect(got.body).toBe(c.body);
  });
});

describe("listening", () => {
  it("starts nothing for address 0", async () => {
    expect(
      await startProbeServer(
        "0",
        () => true,
        () => true,
      ),
    ).toBeUndefined();
    expect(await startMetricsServer("0", new Registry(), () => undefined)).toBeUndefined();
    await closeServer(undefined);
    expect(portOf(undefined)).toBeUndefined();
  });

  it("rejects when the port is taken", async () => {
    const first = await startProbeServer(
      "127.0.0.1:0",
      () => true,
      () => true,
    );
    try {
      await expect(
        startProbeServer(
          `127.0.0.1:${portOf(first)}`,
          () => true,
          () => true,
        ),
      ).rejects.toThrow("EADDRINUSE");
    } finally {
      await closeServer(first);
    }
  });

  it("closes a server that has served a request", async () => {
    const server = await startProbeServer(
      "127.0.0.1:0",
      () => true,
      () => true,
    );
    expect((await get(server, "/healthz")).status).toBe(200);
    await closeServer(server);
    expect(server?.listening).toBe(false);
  });
});

describe("the server module", () => {
  it("does not load Node's bundled undici (an ESM import of node:http would, through its getters)", () => {
    // A process of its own: jest's module loader is not Node's.
    const server = fileURLToPath(new URL("./server.ts", import.meta.url));
    const script = `await import(${JSON.stringify(server)});
      console.log(process.moduleLoadList.includes("NativeModule internal/deps/undici/undici"));`;
    const result = spawnSync(process.execPath, ["--input-type=module", "-e", script], {
      encoding: "utf8",
      timeout: 60_000,
    });
    expect(result.stderr).toBe("");
    expect(result.stdout.trim()).toBe("false");
  });
});
