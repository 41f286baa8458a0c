import { ApiError, toApiError } from "../kube/api-error.ts";
import { ListStreamError } from "../kube/list-stream.ts";
import {
  classifyFailure,
  ListExpired,
  RESTART_REASONS,
  signalOf,
  signalReasonPairs,
  WatchEndedEarly,
  WatchEventError,
  type RestartReason,
} from "./restart-reason.ts";

const api = (code: number, reason?: string) => new ApiError("GET", "/api/v1/configmaps", code, reason, "m");
const sys = (code: string) => Object.assign(new Error("socket trouble"), { code });

describe("classifyFailure", () => {
  it.each<{ reason: string; err: unknown; want: RestartReason }>([
    {
      reason: "a list page's 410 (the pager's ListExpired)",
      err: new ListExpired("/p", { cause: api(410) }),
      want: "list-expired",
    },
    { reason: "a watch's 410", err: api(410, "Gone"), want: "watch-expired" },
    {
      reason: "a watch ERROR event 410",
      err: new WatchEventError("/p", 410, "Expired"),
      want: "watch-expired",
    },
    { reason: "429 once the client's retries ran out", err: api(429, "TooManyRequests"), want: "throttled" },
    { reason: "504 (the server's own timeout)", err: api(504, "Timeout"), want: "timeout" },
    {
      reason: "the client's deadline",
      err: new DOMException("The operation was aborted due to timeout", "TimeoutError"),
      want: "timeout",
    },
    { reason: "undici's body timeout", err: sys("UND_ERR_BODY_TIMEOUT"), want: "timeout" },
    { reason: "500", err: api(500, "InternalError"), want: "server-error" },
    { reason: "503", err: api(503, "ServiceUnavailable"), want: "server-error" },
    {
      reason: "a watch ERROR event 500",
      err: new WatchEventError("/p", 500, "InternalError"),
      want: "server-error",
    },
    { reason: "401", err: api(401, "Unauthorized"), want: "unauthorized" },
    { reason: "403", err: api(403, "Forbidden"), want: "forbidden" },
    { reason: "404", err: api(404, "NotFound"), want: "not-found" },
    { reason: "400", err: api(400, "BadRequest"), want: "rejected" },
    {
      reason: "a list body that is not a list",
      err: new ListStreamError("a list item is not a JSON object"),
      want: "decode",
    },
    { reason: "an item that does not parse", err: new SyntaxError("Unexpected token"), want: "decode" },
    {
      reason: "a watch line that does not parse (the cause is the SyntaxError)",
      err: new Error("watch /p: the server sent a line that is not JSON", { cause: new SyntaxError("x") }),
      want: "decode",
    },
    { reason: "a connection reset", err: sys("ECONNRESET"), want: "connection" },
    { reason: "a connection refused", err: sys("ECONNREFUSED"), want: "connection" },
    { reason: "undici: other side closed", err: sys("UND_ERR_SOCKET"), want: "connection" },
    { reason: "an HTTP/2 stream reset", err: sys("ERR_HTTP2_STREAM_ERROR"), want: "connection" },
    {
      reason: "a socket error wrapped once",
      err: new Error("fetch failed", { cause: sys("ECONNRESET") }),
      want: "connection",
    },
    { reason: "a watch that ended at once", err: new WatchEndedEarly("/p"), want: "watch-ended-early" },
    {
      reason: "a watch ERROR event without a code",
      err: new WatchEventError("/p", undefined, "Weird"),
      want: "other",
    },
    { reason: "a plain Error", err: new Error("something"), want: "other" },
    { reason: "not an Error at all", err: "a string", want: "other" },
    { reason: "a cause chain that loops", err: loop(), want: "other" },
  ])("$reason: $want", ({ err, want }) => {
    expect(classifyFailure(err)).toBe(want);
  });
});

function loop(): Error {
  const e = new Error("a") as Error & { cause?: unknown };
  e.cause = e;
  return e;
}

describe("signals and reasons", () => {
  it("an expiry is expired, the watchdog is watchdog, every other reason an error", () => {
    expect(RESTART_REASONS.map((r) => `${r}:${signalOf(r)}`)).toEqual([
      "watch-expired:expired",
      "list-expired:expired",
      "watchdog:watchdog",
      ...RESTART_REASONS.slice(3).map((r) => `${r}:error`),
    ]);
  });

  it("makes one series per pair that can happen: a relist for every reason but the watchdog", () => {
    const pairs = signalReasonPairs().map(([s, r]) => `${s}:${r}`);
    expect(pairs).toHaveLength(RESTART_REASONS.length * 2 - 1);
    expect(pairs).toContain("relist:list-expired");
    expect(pairs).not.toContain("relist:watchdog");
    expect(pairs).not.toContain("error:list-expired");
  });
});

describe("toApiError: the server's retryAfterSeconds", () => {
  it.each([
    { reason: "a 429 Status with details.retryAfterSeconds", seconds: 3, want: 3_000 },
    { reason: "a minute at most", seconds: 3_600, want: 60_000 },
    { reason: "zero is no advice", seconds: 0, want: undefined },
    { reason: "a non-number is no advice", seconds: "3", want: undefined },
  ])("$reason", ({ seconds, want }) => {
    const body = JSON.stringify({
      kind: "Status",
      code: 429,
      reason: "TooManyRequests",
      details: { retryAfterSeconds: seconds },
    });
    expect(toApiError("GET", "/p", 429, body).retryAfterMs).toBe(want);
  });

  it("a body that is no Status has none", () => {
    expect(toApiError("GET", "/p", 429, "<html>").retryAfterMs).toBeUndefined();
  });
});
