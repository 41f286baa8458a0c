/**
 * What every check of the admission webhook (admission.ts) works with: the handler's options
 * with their defaults applied, the decision it returns, and the small helpers each check shares.
 */
import type { KubeClient } from "../kube/client.ts";
import type { KindResolver } from "../kube/discovery.ts";
import type { Logger } from "../api/log.ts";
import type { AdmissionRequest, AdmissionResponse } from "./admission-review.ts";

/** What the webhook answers (the response without its uid). */
export type Decision = Omit<AdmissionResponse, "uid">;

/** Allowed, with a warning for the user when given. */
export const allow = (warning?: string): Decision =>
  warning ? { allowed: true, warnings: [warning] } : { allowed: true };

/** Refused with an HTTP code, a reason and a message saying what to fix. */
export const refuse = (code: number, reason: string, message: string): Decision => ({
  allowed: false,
  status: { code, reason, message },
});

/** What the checks need of the handler's options, with the defaults applied. */
export interface Judge {
  client: Pick<KubeClient, "request">;
  discovery: KindResolver;
  logger: Logger;
  timeoutMs: number;
  limits: { maxValueBytes: number; costBudget?: number };
  /** See AdmissionHandlerOptions.controllerUsername. */
  controllerUsername: ((signal?: AbortSignal) => Promise<string>) | undefined;
}

/** The object's spec, if any. */
export function specOf(object: unknown): unknown {
  return (object as { spec?: unknown } | null | undefined)?.spec;
}

/** The Referable's name (or generateName), for logs. */
export function referableName(
  request: AdmissionRequest,
  object: unknown = request.object,
): string | undefined {
  const meta = (object as { metadata?: { name?: unknown; generateName?: unknown } } | undefined)?.metadata;
  const name = meta?.name ?? meta?.generateName;
  return typeof name === "string" ? name : undefined;
}

/** `promise`, or a rejection with the signal's reason once it aborts (the promise runs on, ignored). */
export function untilAborted<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    if (signal.aborted) {
      promise.catch(() => undefined);
      reject(signal.reason as Error);
      return;
    }
    const onAbort = () => reject(signal.reason as Error);
    signal.addEventListener("abort", onAbort, { once: true });
    promise.then(
      (value) => {
        signal.removeEventListener("abort", onAbort);
        resolve(value);
      },
      (err: unknown) => {
        signal.removeEventListener("abort", onAbort);
        reject(err as Error);
      },
    );
  });
}
