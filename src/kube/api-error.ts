/**
 * The errors of {@link KubeClient} and when it sends a request again: {@link ApiError} for an
 * answer that is not a success, and the `Retry-After` of a 429 or a 5xx.
 */

/** Longest `Retry-After` honoured, so a server (or proxy) cannot park a request for hours. */
const MAX_RETRY_AFTER_MS = 60_000;

/**
 * One cause of a refusal as the server's `Status.details.causes` names it: its reason code and
 * the path of the field, never its message.
 */
export interface ApiErrorCause {
  /** `FieldValueInvalid`, `FieldManagerConflict`, ...; absent unless it looks like a code. */
  reason?: string;
  /** `spec.password`, `.data.key`, ...: at most {@link MAX_CAUSE_FIELD} characters. */
  field?: string;
  /**
   * For a `FieldManagerConflict`, the other field manager's name, as the object's managedFields
   * show it (`kubectl-patch`): read from the cause's message only when that message is exactly
   * the server's `conflict with "<manager>"`, never any other of its text.
   */
  manager?: string;
}

/** What an {@link ApiError} holds besides its status. */
export interface ApiErrorDetails {
  /** The causes of the refusal (`Status.details.causes`); the first eight are kept. */
  causes?: readonly ApiErrorCause[];
  /** How many causes the server named, when more than `causes`. */
  causeCount?: number;
  /**
   * Whether `message` quotes the server's own text (for a person at a terminal: tests, scripts;
   * never the controller, whose errors become conditions, Events and logs). @default false
   */
  quote?: boolean;
}

/** Most causes an {@link ApiError} keeps; a refusal with more says how many are left out. */
const MAX_CAUSES = 8;
/** Longest field path of a cause kept. */
const MAX_CAUSE_FIELD = 256;
/** A `FieldManagerConflict` cause's whole message, as the API server words it. */
const MANAGER_CONFLICT = /^conflict with "([^"\\]{1,128})"(?: using [a-z0-9./-]{1,317})?$/;
/** The shape of a reason code (`NotFound`, `FieldValueInvalid`); anything else is not kept. */
const REASON_CODE = /^[A-Za-z][A-Za-z0-9]{0,63}$/;

/**
 * A response from the API server that is not a success, with the fields of its `Status`.
 *
 * Its `message` holds the request, the HTTP status, the server's reason code and the field paths
 * of the causes, never the server's own free text: that text can quote the object (a CRD rule's
 * `messageExpression` may print another field of it, say a password), and this message ends up in
 * conditions, Events and logs. The text is kept apart only to be tested ({@link serverSaid}),
 * unless the client was made to quote it for a person at a terminal (`serverMessages`: tests,
 * scripts), never the controller.
 */
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
  /** The causes the server named (`Status.details.causes`), at most eight. */
  readonly causes: readonly ApiErrorCause[];
  /** The status, reason and causes without the request: `422 Invalid (FieldValueInvalid at spec)`. */
  readonly summary: string;
  readonly #serverText: string;

  constructor(
    method: string,
    path: string,
    statusCode: number,
    statusReason: string | undefined,
    serverText: string,
    retryAfterMs?: number,
    more: ApiErrorDetails = {},
  ) {
    const reason = statusReason !== undefined && REASON_CODE.test(statusReason) ? statusReason : undefined;
    const causes = more.causes ?? [];
    const kept = causes.slice(0, MAX_CAUSES);
    const summary = `${statusCode}${reason ? ` ${reason}` : ""}${describeCauses(kept, more.causeCount ?? causes.length)}`;
    super(`${method} ${path}: ${summary}${more.quote ? `: ${serverText}` : ""}`);
    this.name = "ApiError";
    this.statusCode = statusCode;
    this.statusReason = reason;
    this.method = method;
    this.path = path;
    this.retryAfterMs = retryAfterMs;
    this.causes = kept;
    this.summary = summary;
    this.#serverText = serverText;
  }

  /**
   * Whether the server's own message matches `pattern`: to tell one refusal from another where
   * the status and reason do not (an admission webhook's 422, a typed-patch 500). The text itself
   * is never handed out.
   */
  serverSaid(pattern: RegExp): boolean {
    return pattern.test(this.#serverText);
  }
}

/** ` (FieldValueInvalid at spec, FieldValueRequired at spec.a)`, or nothing without causes. */
function describeCauses(causes: readonly ApiErrorCause[], count: number): string {
  const parts = causes
    .map((c) =>
      [
        c.manager === undefined ? c.reason : `conflict with ${JSON.stringify(c.manager)}`,
        c.field && `at ${c.field}`,
      ]
        .filter(Boolean)
        .join(" "),
    )
    .filter((p) => p !== "");
  if (parts.length === 0) return "";
  const more = count > causes.length ? ` and ${count - causes.length} more` : "";
  return ` (${parts.join(", ")}${more})`;
}

/** The reason code and field of each of `causes` (a `Status.details.causes`), never a message. */
function readCauses(causes: unknown): ApiErrorCause[] {
  if (!Array.isArray(causes)) return [];
  return causes.slice(0, MAX_CAUSES).map((c: unknown) => {
    const { reason, field, message } = (typeof c === "object" && c !== null ? c : {}) as Record<
      string,
      unknown
    >;
    const cause: ApiErrorCause = {};
    if (typeof reason === "string" && REASON_CODE.test(reason)) cause.reason = reason;
    if (typeof field === "string" && field !== "") cause.field = field.slice(0, MAX_CAUSE_FIELD);
    const manager =
      reason === "FieldManagerConflict" && typeof message === "string" && MANAGER_CONFLICT.exec(message);
    if (manager) cause.manager = manager[1]!;
    return cause;
  });
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

/**
 * The {@link ApiError} of a response that is not a success, from its body (a `Status`, or any
 * text: a proxy's page is kept only to be tested, like the server's message, unless `quote`).
 */
export function toApiError(
  method: string,
  path: string,
  statusCode: number,
  body: string,
  quote = false,
): ApiError {
  let reason: string | undefined;
  let text = body.slice(0, 500);
  let retryAfterMs: number | undefined;
  let causes: ApiErrorCause[] = [];
  let causeCount = 0;
  try {
    const status = JSON.parse(body) as {
      reason?: unknown;
      message?: unknown;
      details?: { retryAfterSeconds?: unknown; causes?: unknown };
    };
    if (typeof status.reason === "string") reason = status.reason;
    if (typeof status.message === "string") text = status.message;
    const seconds = status.details?.retryAfterSeconds;
    if (typeof seconds === "number" && Number.isFinite(seconds) && seconds > 0)
      retryAfterMs = Math.min(seconds * 1000, MAX_RETRY_AFTER_MS);
    causes = readCauses(status.details?.causes);
    causeCount = Array.isArray(status.details?.causes) ? status.details.causes.length : 0;
  } catch {
    // not a Status: nothing but the code to show
  }
  return new ApiError(method, path, statusCode, reason, text, retryAfterMs, { causes, causeCount, quote });
}
