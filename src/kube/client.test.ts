import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { isApiError, KubeClient, retryAfter } from "./client.ts";

/** A real HTTP server that answers each request from a script, recording when it came. */
async function scriptedServer(
  answers: Array<(res: ServerResponse) => void>,
): Promise<{ server: Server; url: string; arrivals: Array<{ at: number; body: string }> }> {
  const arrivals: Array<{ at: number; body: string }> = [];
  const server = createServer((req: IncomingMessage, res) => {
    let body = "";
    req.on("data", (chunk: Buffer) => (body += chunk.toString()));
    req.on("end", () => {
      arrivals.push({ at: performance.now(), body });
      const answer = answers[arrivals.length - 1] ?? ok;
      answer(res);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, arrivals };
}

const ok = (res: ServerResponse) => {
  res.writeHead(200, { "Content-Type": "application/json" });
  res.end(JSON.stringify({ kind: "ConfigMap" }));
};
const status =
  (code: number, headers: Record<string, string> = {}) =>
  (res: ServerResponse) => {
    res.writeHead(code, { "Content-Type": "application/json", ...headers });
    res.end(
      JSON.stringify({
        kind: "Status",
        reason: code === 429 ? "TooManyRequests" : "InternalError",
        message: "busy",
      }),
    );
  };

function clientOf(url: string, options: { maxRetries?: number } = {}): KubeClient {
  return new KubeClient({
    access: { server: url, tls: async () => ({}), headers: async () => ({}) },
    ...options,
  });
}

/** The scripted server and the client of the test that runs, if it made them: closed after it. */
let server: Server | undefined;
let client: KubeClient | undefined;
afterEach(async () => {
  const open = server;
  await client?.close();
  if (open) await new Promise((resolve) => open.close(resolve));
  server = undefined;
  client = undefined;
});

describe("KubeClient and 429 Too Many Requests", () => {
  it("sends the request again after the Retry-After the server gave, body and all", async () => {
    const s = await scriptedServer([status(429, { "Retry-After": "1" }), ok]);
    server = s.server;
    client = clientOf(s.url);
    const answer = await client.request("POST", "/api/v1/namespaces/a/events", { body: { n: 1 } });
    expect(answer).toEqual({ kind: "ConfigMap" });
    expect(s.arrivals.map((a) => a.body)).toEqual(['{"n":1}', '{"n":1}']);
    expect(s.arrivals[1]!.at - s.arrivals[0]!.at).toBeGreaterThanOrEqual(950);
  });

  it("gives up after maxRetries and throws the 429", async () => {
    const s = await scriptedServer([
      status(429, { "Retry-After": "0" }),
      status(429, { "Retry-After": "0" }),
    ]);
    server = s.server;
    client = clientOf(s.url, { maxRetries: 1 });
    const err: unknown = await client.request("GET", "/api/v1/configmaps").catch((e: unknown) => e);
    expect(isApiError(err, 429)).toBe(true);
    expect(s.arrivals).toHaveLength(2);
  });

  it("does not wait past the request's own timeout", async () => {
    const s = await scriptedServer([status(429, { "Retry-After": "30" })]);
    server = s.server;
    client = clientOf(s.url);
    const started = performance.now();
    const err: unknown = await client
      // 2 s: far below the 30 s Retry-After, and room for the 429 to arrive first on a loaded
      // machine (at 300 ms the deadline once fired before the answer came).
      .request("GET", "/api/v1/configmaps", { timeoutMs: 2_000 })
      .catch((e: unknown) => e);
    expect(isApiError(err, 429)).toBe(true);
    expect(performance.now() - started).toBeLessThan(5_000);
    expect(s.arrivals).toHaveLength(1);
  });
});

describe("KubeClient request deadlines", () => {
  /** A server that takes requests and never answers them. */
  const silent = () => () => undefined;

  it("ends a request the server does not answer at its timeout, as a TimeoutError", async () => {
    const s = await scriptedServer([silent()]);
    server = s.server;
    client = clientOf(s.url);
    const err: unknown = await client
      .request("GET", "/api/v1/configmaps", { timeoutMs: 200 })
      .catch((e: unknown) => e);
    expect((err as Error).name).toBe("TimeoutError");
  });

  it("ends a request when the caller's signal aborts, with the caller's reason", async () => {
    const s = await scriptedServer([silent()]);
    server = s.server;
    client = clientOf(s.url);
    const caller = new AbortController();
    const pending = client
      .request("GET", "/api/v1/configmaps", { signal: caller.signal })
      .catch((e: unknown) => e);
    await until(() => s.arrivals.length === 1);
    caller.abort(new Error("stopping"));
    expect(((await pending) as Error).message).toBe("stopping");
  });

  it("sends nothing for a caller's signal that has already aborted", async () => {
    const s = await scriptedServer([]);
    server = s.server;
    client = clientOf(s.url);
    const err: unknown = await client
      .request("GET", "/api/v1/configmaps", { signal: AbortSignal.abort(new Error("stopped")) })
      .catch((e: unknown) => e);
    expect((err as Error).message).toBe("stopped");
    expect(s.arrivals).toHaveLength(0);
  });
});

/** Waits for `condition`, up to 5 s. */
async function until(condition: () => boolean): Promise<void> {
  const deadline = Date.now() + 5_000;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error("timed out waiting for the condition");
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

describe("KubeClient lists with onItem", () => {
  it("hands out each item before the page has ended, and returns the list without them", async () => {
    // The second item is sent only once the client has taken the first: a client that waited
    // for the whole page would wait forever (the test's timeout).
    let tookFirst!: () => void;
    const first = new Promise<void>((resolve) => (tookFirst = resolve));
    const s = await scriptedServer([
      (res) => {
        res.writeHead(200, { "Content-Type": "application/json" });
        res.write(
          '{"kind":"ConfigMapList","metadata":{"continue":"next"},"items":[{"metadata":{"name":"a"}}',
        );
        void first.then(() => res.end(',{"metadata":{"name":"b","labels":{"x":"1","y":"2"}}}]}'));
      },
    ]);
    server = s.server;
    client = clientOf(s.url);
    const items: unknown[] = [];
    let length = 0;
    const list = await client.request("GET", "/api/v1/configmaps", {
      onItem: (item) => {
        items.push(item);
        tookFirst();
      },
      itemFilter: { keepLabels: () => ({ keys: ["y"], has: (key) => key === "y" }) },
      onBodyLength: (n) => (length = n),
    });
    expect(items).toEqual([{ metadata: { name: "a" } }, { metadata: { name: "b", labels: { y: "2" } } }]);
    expect(list).toEqual({ kind: "ConfigMapList", metadata: { continue: "next" }, items: [] });
    expect(length).toBeGreaterThan(100);
  });

  it("fails the request, and ends the answer, when an item cannot be read", async () => {
    const s = await scriptedServer([
      (res) => {
        res.writeHead(200, { "Content-Type": "application/json" });
        res.end('{"items":[{"a":1},2]}');
      },
    ]);
    server = s.server;
    client = clientOf(s.url);
    const items: unknown[] = [];
    const err: unknown = await client
      .request("GET", "/api/v1/configmaps", { onItem: (item) => items.push(item) })
      .catch((e: unknown) => e);
    expect((err as Error).message).toMatch(/a list item is not a JSON object/);
    expect(items).toEqual([{ a: 1 }]);
  });
});

describe("retryAfter", () => {
  const h = (value?: string) => ({
    get: (name: string) => (name === "retry-after" ? (value ?? null) : null),
  });
  it.each([
    { status: 429, header: "3", want: 3_000, why: "the server's Retry-After, in seconds" },
    { status: 429, header: undefined, want: 1_000, why: "a 429 without one: client-go's one second" },
    {
      status: 429,
      header: "Wed, 21 Oct 2015 07:28:00 GMT",
      want: 1_000,
      why: "a date is not honoured: one second",
    },
    {
      status: 429,
      header: "86400",
      want: 60_000,
      why: "capped, so a server cannot park a request for a day",
    },
    { status: 503, header: "2", want: 2_000, why: "a 5xx that says when to come back" },
    { status: 500, header: undefined, want: undefined, why: "a plain 5xx is the caller's to retry" },
    { status: 409, header: "1", want: undefined, why: "a conflict is never retried blindly" },
  ])("$status $header: $why", ({ status: code, header, want }) => {
    expect(retryAfter(code, h(header))).toBe(want);
  });
});

describe("KubeClient watches with parseLine", () => {
  it("reads each line with parseLine, and parses it whole where parseLine gives undefined", async () => {
    const s = await scriptedServer([
      (res) => {
        res.writeHead(200, { "Content-Type": "application/json" });
        res.write('{"type":"ADDED","object":{"metadata":{"name":"a"}}}\n{"type":"BOOKMARK",');
        res.end('"object":{"metadata":{"resourceVersion":"9"}}}\n');
      },
    ]);
    server = s.server;
    client = clientOf(s.url);
    const lines: string[] = [];
    const events: unknown[] = [];
    const stream = client.watch(
      "/api/v1/configmaps",
      {},
      (event) => events.push(event),
      (line) => {
        lines.push(line);
        return line.includes('"ADDED"')
          ? { type: "ADDED", object: { metadata: { name: "cheap" } } }
          : undefined;
      },
    );
    await stream.done;
    expect(lines).toHaveLength(2);
    expect(events).toEqual([
      { type: "ADDED", object: { metadata: { name: "cheap" } } },
      { type: "BOOKMARK", object: { metadata: { resourceVersion: "9" } } },
    ]);
  });
});

describe("KubeClient and impersonation", () => {
  it("sends the user and each group as impersonation headers, and none without impersonate", async () => {
    const seen: Array<Record<string, string | string[] | undefined>> = [];
    server = createServer((req, res) => {
      seen.push({ user: req.headers["impersonate-user"], groups: req.headersDistinct["impersonate-group"] });
      ok(res);
    });
    await new Promise<void>((resolve) => server!.listen(0, "127.0.0.1", resolve));
    client = clientOf(`http://127.0.0.1:${(server.address() as AddressInfo).port}`);
    await client.request("GET", "/api/v1/namespaces/a/configmaps/b", {
      impersonate: { user: "system:serviceaccount:a:b", groups: ["g1", "g2"] },
    });
    await client.request("GET", "/api/v1/namespaces/a/configmaps/b");
    expect(seen).toEqual([
      { user: "system:serviceaccount:a:b", groups: ["g1", "g2"] },
      { user: undefined, groups: undefined },
    ]);
  });
});
