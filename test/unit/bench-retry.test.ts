import { ApiError, type RequestOptions } from "../../src/kube/client.ts";
import {
  deleteAll,
  forEachPage,
  isTransient,
  pool,
  RetryingClient,
  withRetry,
  type BenchClient,
} from "../../bench/retry.ts";

const socketClosed = Object.assign(new Error("other side closed"), { code: "UND_ERR_SOCKET" });
const api = (code: number, reason = "") => new ApiError("GET", "/x", code, reason, "answer");
const noWait = { sleep: async () => undefined };

describe("isTransient: which failures a retry can fix", () => {
  const cases: Array<{ reason: string; err: unknown; want: boolean }> = [
    { reason: "429: the server asked to slow down", err: api(429), want: true },
    { reason: "500: the server failed", err: api(500), want: true },
    { reason: "504: a deletecollection past the server's 60 s", err: api(504, "Timeout"), want: true },
    { reason: "404 is an answer", err: api(404, "NotFound"), want: false },
    { reason: "409 is an answer", err: api(409, "AlreadyExists"), want: false },
    { reason: "422 is an answer", err: api(422, "Invalid"), want: false },
    { reason: "undici's 'other side closed'", err: socketClosed, want: true },
    {
      reason: "a reset wrapped as the cause of a fetch failure",
      err: new TypeError("fetch failed", { cause: Object.assign(new Error("read"), { code: "ECONNRESET" }) }),
      want: true,
    },
    { reason: "the request's own deadline", err: new DOMException("timed out", "TimeoutError"), want: true },
    { reason: "a bug is not retried", err: new TypeError("x is not a function"), want: false },
    { reason: "a non-Error is not retried", err: "boom", want: false },
  ];
  it.each(cases)("$reason", ({ err, want }) => {
    expect(isTransient(err)).toBe(want);
  });
});

describe("withRetry", () => {
  it("retries transient failures with growing waits, then returns the answer", async () => {
    const waits: number[] = [];
    const retried: boolean[] = [];
    let calls = 0;
    const got = await withRetry(
      "GET /x",
      async (r) => {
        retried.push(r);
        if (++calls < 4) throw calls === 2 ? socketClosed : api(503);
        return "ok";
      },
      { sleep: async (ms) => void waits.push(ms), baseMs: 100, maxMs: 1000 },
    );
    expect(got).toBe("ok");
    expect(retried).toEqual([false, true, true, true]);
    expect(waits).toHaveLength(3);
    // Jittered into [d/2, d] of 100, 200, 400.
    [100, 200, 400].forEach((d, i) => {
      expect(waits[i]).toBeGreaterThanOrEqual(d / 2);
      expect(waits[i]).toBeLessThanOrEqual(d);
    });
  });

  it("throws an answer as it came, without retrying it", async () => {
    let calls = 0;
    const err = api(404, "NotFound");
    await expect(
      withRetry(
        "GET /x",
        async () => {
          calls++;
          throw err;
        },
        noWait,
      ),
    ).rejects.toBe(err);
    expect(calls).toBe(1);
  });

  it("stops after the bound and reports what failed, the last failure its cause", async () => {
    let calls = 0;
    const reported: number[] = [];
    const failure = await withRetry(
      "DELETE /rf",
      async () => {
        calls++;
        throw api(504, "Timeout");
      },
      { ...noWait, attempts: 3, onRetry: (_w, _e, attempt) => reported.push(attempt) },
    ).catch((e: unknown) => e as Error);
    expect(calls).toBe(3);
    expect(reported).toEqual([1, 2]);
    expect(failure.message).toMatch(/^DELETE \/rf: still failing after 3 attempts: .*504/);
    expect((failure.cause as ApiError).statusCode).toBe(504);
  });
});

/** A fake of the bench's client: answers from a script, records requests. */
class ScriptedClient implements BenchClient {
  readonly requests: Array<{ method: string; path: string; query: RequestOptions["query"] }> = [];
  private readonly answer: (method: string, path: string, query: RequestOptions["query"]) => unknown;
  constructor(answer: (method: string, path: string, query: RequestOptions["query"]) => unknown) {
    this.answer = answer;
  }
  async request<T>(method: string, path: string, options: RequestOptions = {}): Promise<T> {
    this.requests.push({ method, path, query: options.query });
    const a = this.answer(method, path, options.query);
    if (a instanceof Error) throw a;
    return a as T;
  }
  watch(): never {
    throw new Error("no watches here");
  }
}

describe("RetryingClient: a retried write that was applied is a success", () => {
  const cases = [
    { reason: "a create retried after a reset finds its object", method: "POST", then: 409, ok: true },
    { reason: "a delete retried after a reset finds it gone", method: "DELETE", then: 404, ok: true },
    { reason: "a get retried finds nothing: that is the answer", method: "GET", then: 404, ok: false },
    { reason: "a create retried finds something else wrong", method: "POST", then: 422, ok: false },
  ];
  it.each(cases)("$reason", async ({ method, then, ok }) => {
    let calls = 0;
    const inner = new ScriptedClient(() => (++calls === 1 ? socketClosed : api(then)));
    const client = new RetryingClient(inner, noWait);
    const result = client.request(method, "/x").then(
      () => "ok",
      (e: unknown) => (e as ApiError).statusCode,
    );
    expect(await result).toBe(ok ? "ok" : then);
    expect(calls).toBe(2);
  });

  it("a first answer of 409 is not hidden: nothing was retried", async () => {
    const client = new RetryingClient(new ScriptedClient(() => api(409)), noWait);
    await expect(client.request("POST", "/x")).rejects.toMatchObject({ statusCode: 409 });
  });
});

describe("forEachPage", () => {
  it("hands each page to the caller before asking for the next, following continue tokens", async () => {
    const seen: string[] = [];
    const client = new ScriptedClient((_m, _p, q) => {
      seen.push(`list ${String(q?.continue ?? "")}`);
      if (!q?.continue) return { metadata: { continue: "t1" }, items: [{ metadata: { name: "a" } }] };
      return { metadata: {}, items: [{ metadata: { name: "b" } }, { metadata: { name: "c" } }] };
    });
    await forEachPage(client, "/cm", "set=x", async (names) => void seen.push(names.join(",")), 2);
    expect(seen).toEqual(["list ", "a", "list t1", "b,c"]);
    expect(client.requests[0]!.query).toMatchObject({ labelSelector: "set=x", limit: 2 });
  });

  it("starts over when the continue token expired (410)", async () => {
    let lists = 0;
    const pages: string[][] = [];
    const client = new ScriptedClient((_m, _p, q) => {
      lists++;
      if (q?.continue === "old") return api(410, "Expired");
      if (lists === 1) return { metadata: { continue: "old" }, items: [{ metadata: { name: "a" } }] };
      return { metadata: {}, items: [{ metadata: { name: "b" } }] };
    });
    await forEachPage(client, "/cm", "set=x", async (names) => void pages.push(names));
    expect(pages).toEqual([["a"], ["b"]]);
    expect(lists).toBe(3);
  });
});

describe("deleteAll", () => {
  it("deletes by batch label, tolerates a batch's 504, then deletes what is left one by one", async () => {
    const left = new Set(["rf1", "rf2"]);
    const inner = new ScriptedClient((method, path, q) => {
      if (method === "DELETE" && path === "/rf" && String(q?.labelSelector).endsWith("batch=b1"))
        return api(504, "Timeout");
      if (method === "DELETE" && path === "/rf") return {};
      if (method === "GET") return { metadata: {}, items: [...left].map((name) => ({ metadata: { name } })) };
      // Someone else deleted rf2 between the list and its DELETE.
      if (method === "DELETE" && path === "/rf/rf2") return left.delete("rf2") && api(404, "NotFound");
      if (method === "DELETE") return left.delete(path.slice(4)) && {};
      return api(400);
    });
    const client = new RetryingClient(inner, { ...noWait, attempts: 2 });
    const deleted = await deleteAll(client, ["/rf"], "set=x", {
      batchLabel: { key: "batch", values: ["b0", "b1"] },
    });
    expect(deleted).toBe(2);
    expect(left.size).toBe(0);
    const batchDeletes = inner.requests.filter((r) => r.method === "DELETE" && r.path === "/rf");
    // b0 once; b1 twice (retried once, then left to the paged pass).
    expect(batchDeletes.map((r) => r.query?.labelSelector)).toEqual([
      "set=x,batch=b0",
      "set=x,batch=b1",
      "set=x,batch=b1",
    ]);
  });

  it("reports a delete that fails for good", async () => {
    const client = new ScriptedClient((method) =>
      method === "GET" ? { metadata: {}, items: [{ metadata: { name: "a" } }] } : api(403, "Forbidden"),
    );
    await expect(deleteAll(client, ["/rf"], "set=x")).rejects.toMatchObject({ statusCode: 403 });
  });
});

describe("pool", () => {
  it("keeps at most `limit` in flight and runs every item", async () => {
    let inFlight = 0;
    let most = 0;
    const done: number[] = [];
    await pool([1, 2, 3, 4, 5], 2, async (i) => {
      most = Math.max(most, ++inFlight);
      await Promise.resolve();
      done.push(i);
      inFlight--;
    });
    expect(most).toBe(2);
    expect(done.sort()).toEqual([1, 2, 3, 4, 5]);
  });

  it("throws the first failure once the workers in flight settle, starting no more", async () => {
    const started: number[] = [];
    await expect(
      pool([1, 2, 3, 4], 1, async (i) => {
        started.push(i);
        if (i === 2) throw new Error("two");
      }),
    ).rejects.toThrow("two");
    expect(started).toEqual([1, 2]);
  });
});
