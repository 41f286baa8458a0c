/**
 * The errors of {@link KubeClient} and when it sends a request again: {@link ApiError} for an
 * answer that is not a success, and the `Retry-After` of a 429 or a 5xx.
 */

/** Longest `Retry-After` honoured, so a server (or proxy) cannot park a request for hours. */
const MAX_RETRY_AFTER_MS = 60_000;

/** A response from the API server that is not a success, with the fields of its `Status`. */
export class ApiError extends Error {
  readonly statusCode: number;
  /** `Status.reason` (NotFound, Forbidden, Conflict, Expired, ...), when the server sent one. */
  readonly statusReason: string | undefined;
  readonly method: string;
  readonly path: string;
  /**
   * How long the server asked to wait before trying again (`Status.details.retryAfterSeconds`
   * of a 429 or a 504, at most a minute), when it said so.
   */
  readonly retryAfterMs: number | undefined;

  constructor(
    method: string,
    path: string,
    statusCode: number,
    statusReason: string | undefined,
    message: string,
    retryAfterMs?: number,
  ) {
    super(`${method} ${path}: ${statusCode}${statusReason ? ` ${statusReason}` : ""}: ${message}`);
    this.name = "ApiError";
    this.statusCode = statusCode;
    this.statusReason = statusReason;
    this.method = method;
    this.path = path;
    this.retryAfterMs = retryAfterMs;
  }
}

/** True for an {@link ApiError} with the given HTTP status (any, when omitted). */
export function isApiError(err: unknown, statusCode?: number): err is ApiError {
  if (typeof err !== "object" || err === null || (err as Error).name !== "ApiError") return false;
  return statusCode === undefined || (err as ApiError).statusCode === statusCode;
}

/**
 * How long to wait before sending a request again, from an answer: `Retry-After` (seconds) on a
 * 429 (1 s when absent), or on a 5xx that sends one; undefined when the answer is not one to
 * retry.
 */
export function retryAfter(
  status: number,
  headers: { get(name: string): string | null },
): number | undefined {
  if (status !== 429 && !(status >= 500 && status <= 599)) return undefined;
  const header = headers.get("retry-after");
  const seconds = header !== null && /^\s*\d+\s*$/.test(header) ? Number(header) : undefined;
  if (seconds === undefined) return status === 429 ? 1_000 : undefined;
  return Math.min(seconds * 1000, MAX_RETRY_AFTER_MS);
}

/** A `get(name)` over undici's response headers (lower-case names; a value may repeat). */
export function headerReader(headers: Record<string, string | string[] | undefined>): {
  get(name: string): string | null;
} {
  return {
    get: (name) => {
      const value = headers[name.toLowerCase()];
      return value === undefined ? null : Array.isArray(value) ? (value[0] ?? null) : value;
    },
  };
}

export function toApiError(method: string, path: string, statusCode: number, body: string): ApiError {
  let reason: string | undefined;
  let message = body.slice(0, 500);
  let retryAfterMs: number | undefined;
  try {
    const status = JSON.parse(body) as {
      reason?: string;
      message?: string;
      details?: { retryAfterSeconds?: unknown };
    };
    reason = status.reason;
    if (typeof status.message === "string") message = status.message;
    const seconds = status.details?.retryAfterSeconds;
    if (typeof seconds === "number" && Number.isFinite(seconds) && seconds > 0)
      retryAfterMs = Math.min(seconds * 1000, MAX_RETRY_AFTER_MS);
  } catch {
    // not a Status: keep the start of the text
  }
  return new ApiError(method, path, statusCode, reason, message, retryAfterMs);
}
