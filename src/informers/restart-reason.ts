/**
 * Why an informer's list or watch started again, as one value of a fixed set: the metric label
 * `reason` of `referable_informer_restarts_total` and the `reason` of the warn log that goes with
 * each restart. Bounded by construction (never a message, a name or a value), so a run at
 * 100,000 objects says what made its informers relist without anyone reading its logs.
 *
 * The classification reads error data only (status codes, error names and codes), never
 * message text. Beside it, what a failure leaves the informer's readers ({@link failedState})
 * and what of it a log may say ({@link safeMessage}).
 */
import { asError } from "../api/errors.ts";
import { isApiError } from "../kube/client.ts";
import { ListStreamError } from "../kube/list-stream.ts";

/** Every restart reason, in the order the metric's series are made. */
export const RESTART_REASONS = [
  /** A watch's resourceVersion was compacted (410 Gone): relist, as the informer contract says. */
  "watch-expired",
  /** A paged list's continue token outlived the compaction (410 Expired): the list starts again. */
  "list-expired",
  /** A watch was silent past the watchdog window: reopened from its resourceVersion. */
  "watchdog",
  /** 429 Too Many Requests (API Priority and Fairness, max-inflight) once the client's retries ran out. */
  "throttled",
  /** The request's deadline passed, or the server answered 504 (its own timeout). */
  "timeout",
  /** Any other 5xx. */
  "server-error",
  /** 401: credentials expired or rotated. */
  "unauthorized",
  /** 403: access withdrawn. */
  "forbidden",
  /** 404: the resource is not served (or not yet). */
  "not-found",
  /** Any other 4xx. */
  "rejected",
  /** The list's or watch's bytes were not the JSON they should be, or broke a bound. */
  "decode",
  /** The connection failed or was cut (refused, reset, closed mid-response). */
  "connection",
  /** A watch ended at once with nothing on it (a proxy, a server shutting down). */
  "watch-ended-early",
  /** Anything else. */
  "other",
] as const;

/** Why an informer's list or watch started again; see {@link RESTART_REASONS}. */
export type RestartReason = (typeof RESTART_REASONS)[number];

/** What an informer tells of a restart: its signal (the metric's older label) and its reason. */
export type InformerSignal = "relist" | "watchdog" | "error" | "expired";

/** Reasons a restart counts as `expired` rather than `error`: the server's compaction, not a fault. */
const EXPIRED: ReadonlySet<RestartReason> = new Set(["watch-expired", "list-expired"]);

/** The signal a restart for `reason` counts under (before its relist, if any). */
export function signalOf(reason: RestartReason): Exclude<InformerSignal, "relist"> {
  if (reason === "watchdog") return "watchdog";
  return EXPIRED.has(reason) ? "expired" : "error";
}

/** The `[signal, reason]` pairs an informer can report, for a metric's series made up front. */
export function signalReasonPairs(): Array<[InformerSignal, RestartReason]> {
  const pairs: Array<[InformerSignal, RestartReason]> = [];
  for (const reason of RESTART_REASONS) {
    pairs.push([signalOf(reason), reason]);
    // A watchdog reopens the watch from where it was; every other restart lists again.
    if (reason !== "watchdog") pairs.push(["relist", reason]);
  }
  return pairs;
}

/** A paged list's continue token expired (410) before its last page: the list must start again. */
export class ListExpired extends Error {
  constructor(path: string, options?: ErrorOptions) {
    super(`list ${path}: the continue token expired (410) before the last page`, options);
    this.name = "ListExpired";
  }
}

/** A watch sent an ERROR event other than 410 Gone: the Status's code and reason. */
export class WatchEventError extends Error {
  readonly statusCode: number | undefined;
  constructor(path: string, statusCode: number | undefined, statusReason: string | undefined) {
    super(`watch ${path} sent an error: ${statusCode ?? ""} ${statusReason ?? ""}`.trim());
    this.name = "WatchEventError";
    this.statusCode = statusCode;
  }
}

/** A watch ended at once with nothing on it. */
export class WatchEndedEarly extends Error {
  constructor(path: string) {
    super(`watch ${path} ended immediately without an event`);
    this.name = "WatchEndedEarly";
  }
}

/** The reason of an HTTP status that is not a success. */
export function reasonOfStatus(code: number): RestartReason {
  if (code === 410) return "watch-expired";
  if (code === 429) return "throttled";
  if (code === 504) return "timeout";
  if (code >= 500) return "server-error";
  if (code === 401) return "unauthorized";
  if (code === 403) return "forbidden";
  if (code === 404) return "not-found";
  if (code >= 400) return "rejected";
  return "other";
}

/** Error codes of Node's sockets and undici's that say the connection failed or was cut. */
const CONNECTION_CODE =
  /^(E[A-Z]+|ERR_HTTP2_[A-Z_]+|ERR_STREAM_PREMATURE_CLOSE|UND_ERR_(SOCKET|CLOSED|DESTROYED|CONNECT_TIMEOUT|ABORTED|INFO))$/;

/**
 * Why a list or watch failed, from the error it threw (walking `cause` a few levels): status
 * codes of API errors and watch ERROR events, the names of timeouts and decode errors, the codes
 * of socket errors. A 410 on a list is `list-expired` (the pager throws {@link ListExpired}); a
 * 410 anywhere else is `watch-expired`.
 */
export function classifyFailure(err: unknown): RestartReason {
  for (let e = err, depth = 0; e !== undefined && e !== null && depth < 4; depth++) {
    const reason = classifyOne(e);
    if (reason) return reason;
    e = typeof e === "object" ? (e as { cause?: unknown }).cause : undefined;
  }
  return "other";
}

function classifyOne(e: unknown): RestartReason | undefined {
  if (typeof e !== "object") return undefined;
  const { name, code } = e as { name?: unknown; code?: unknown };
  if (name === "ListExpired") return "list-expired";
  if (name === "WatchEndedEarly") return "watch-ended-early";
  if (isApiError(e)) return reasonOfStatus(e.statusCode);
  if (name === "WatchEventError") {
    const status = (e as WatchEventError).statusCode;
    return status === undefined ? "other" : reasonOfStatus(status);
  }
  // The client's own deadline (AbortSignal with a TimeoutError reason), undici's timeouts.
  if (name === "TimeoutError" || code === "UND_ERR_HEADERS_TIMEOUT" || code === "UND_ERR_BODY_TIMEOUT")
    return "timeout";
  if (name === ListStreamError.name || e instanceof SyntaxError) return "decode";
  if (typeof code === "string" && CONNECTION_CODE.test(code)) return "connection";
  return undefined;
}

/** The Failed informer state (one of `InformerState`, which is made of this file's reasons). */
export interface FailedState {
  phase: "Failed";
  reason: "Forbidden" | "KindNotFound";
  message: string;
}

/**
 * The state a failed list or watch of `resource` (its text for messages) leaves: Failed for a
 * 403, and for a 404 that `confirmGone` confirms while `running`; undefined for anything else,
 * which is transient: the cache and the state are kept, so no value flaps.
 */
export async function failedState(
  err: unknown,
  resource: string,
  confirmGone: (() => Promise<boolean>) | undefined,
  running: () => boolean,
): Promise<FailedState | undefined> {
  // 403 only: a 401 is a credential that expired or rotated, not access withdrawn, and under
  // the contract a refusal withdraws values (the client reloads credentials on its own).
  if (isApiError(err, 403)) {
    return {
      phase: "Failed",
      reason: "Forbidden",
      message: `the controller may not list/watch ${resource}: grant it list and watch on that resource`,
    };
  }
  if (isApiError(err, 404)) {
    const gone = confirmGone ? await confirmGone().catch(() => false) : true;
    if (gone && running())
      return {
        phase: "Failed",
        reason: "KindNotFound",
        message: `the API server no longer serves ${resource}`,
      };
  }
  return undefined;
}

/**
 * An error's message for a log, unless it may quote what the server sent: a decode error's
 * message can hold a piece of the body (JSON.parse quotes it), so only its name is kept.
 */
export function safeMessage(err: unknown, reason: RestartReason): string {
  const e = asError(err);
  return reason === "decode" ? e.name : e.message;
}
