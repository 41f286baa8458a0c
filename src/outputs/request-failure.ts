/**
 * A failed request of an output (a GET, an apply, a patch, a delete of the object it writes
 * into) as the `Exported` condition's reason and message. A message keeps the HTTP status, the
 * server's reason code and the field paths of the causes ({@link ApiError.summary}), never the
 * server's own words: those can quote the object (a CRD rule's `messageExpression` may print
 * another field of the target), and a condition is read by everyone with the consumer role. The
 * values written are cut out of the field paths all the same, should a map key be one.
 */
import { isApiError, type ApiError } from "../kube/client.ts";
import { ExportError } from "./keys/errors.ts";

/** How one output words its failures; the rest of each message is common to the outputs. */
export interface FailureWording {
  /** The object, as messages name it. */
  what: string;
  /** What was refused, for a 403: "may not get configmaps in namespace ns". */
  forbidden: string;
  /** An administrator's way out of a 403, appended when given. */
  forbiddenHint?: string;
  /** What another manager owns, for an apply conflict: "key", "field". */
  unit: string;
  /** What is never done to another manager's `unit`: "overwritten", "taken". */
  never: string;
  /**
   * The output's own reading of a status the common rules do not cover (a 404, a refused
   * value), given the scrubbed summary of the answer; undefined leaves it to the common rules.
   */
  special?: (err: ApiError, summary: string) => ExportError | undefined;
}

/**
 * The condition reason and a message for a failed request of `verb`; anything but an API error
 * (a network error, which the caller retries) is returned as it is.
 */
export function toRequestFailure(
  err: unknown,
  verb: string,
  wording: FailureWording,
  values: unknown[] = [],
): unknown {
  if (!isApiError(err)) return err;
  const { what } = wording;
  const apiMessage = scrub(err.summary, values).slice(0, 600);
  const special = wording.special?.(err, apiMessage);
  if (special) return special;
  if (err.statusCode === 403)
    return new ExportError(
      "ExportForbidden",
      `${what}: ${wording.forbidden} (${apiMessage})${wording.forbiddenHint ? `: ${wording.forbiddenHint}` : ""}`,
      { cause: err },
    );
  if (
    err.statusCode === 409 &&
    (err.causes.some((c) => c.reason === "FieldManagerConflict") || err.serverSaid(/Apply failed with/))
  )
    return new ExportError(
      "ExportConflict",
      `another writer owns the ${wording.unit} in ${what} (${apiMessage}): it is never ${wording.never}; remove it there, or export to another ${wording.unit}`,
      { cause: err },
    );
  if (err.statusCode === 409)
    return new ExportError("ExportFailed", `${what} changed meanwhile (${apiMessage}); retrying`, {
      cause: err,
    });
  return new ExportError("ExportFailed", `the API server refused to ${verb} ${what}: ${apiMessage}`, {
    cause: err,
  });
}

/** `message` with every value of four characters or more (as text and as JSON) cut out. */
function scrub(message: string, values: unknown[]): string {
  let out = message;
  for (const v of values) {
    if (v === undefined || v === null) continue;
    const texts = [typeof v === "string" ? v : JSON.stringify(v), JSON.stringify(v)];
    for (const t of texts) if (t.length >= 4) out = out.split(t).join("<value>");
  }
  return out;
}
