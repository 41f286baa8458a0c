/**
 * The resolver's pure helpers for results: when two results are the same push, the error a
 * failed read stands for, and the placeholder request of a reference that does not compile.
 */
import { asError, isResolutionError, ResolutionError } from "../api/errors.ts";
import { isApiError } from "../kube/client.ts";
import { stableStringify } from "../api/stable-json.ts";
import type { ResourceInfo } from "../kube/discovery.ts";
import type { ResolverOptions } from "./options.ts";
import type { CompiledRequest } from "./request.ts";
import type { ResolutionResult } from "./types.ts";

/** A result's identity for pushes: the reason, the sources read and the value. */
export function fingerprint(result: ResolutionResult): string {
  if (!result.ok) return stableStringify(["error", result.error.reason, result.error.message]);
  const sources = "sources" in result ? result.sources : result.source ? [result.source] : [];
  const ids = sources.map((s) => [s.namespace ?? "", s.name, s.uid]);
  const payload = "values" in result ? result.values : result.value;
  return stableStringify([
    "ok",
    result.reason,
    ids,
    payload === undefined ? null : payload,
    "values" in result,
  ]);
}

/** A successful result without its `ok` flag, as the one-shot API returns it. */
export function stripOk(result: ResolutionResult): unknown {
  const { ok: _ok, ...rest } = result as { ok: true } & Record<string, unknown>;
  return rest;
}

/** Any failure as a ResolutionError (an unexpected one is Pending: not resolved yet). */
export function toResolutionError(err: unknown): ResolutionError {
  if (isResolutionError(err)) return err;
  return new ResolutionError("Pending", `could not resolve yet: ${asError(err).message}`, { cause: err });
}

/** A fresh read's failure as the reason the informer would have given for it. */
export function freshReadError(
  err: unknown,
  resource: ResourceInfo,
  namespace: string | undefined,
): ResolutionError {
  const gr = resource.group ? `${resource.resource}.${resource.group}` : resource.resource;
  const where = namespace ? `${gr} in namespace ${namespace}` : gr;
  if (isApiError(err, 403))
    return new ResolutionError(
      "Forbidden",
      `the resolver may not list ${where}: grant it list on that resource`,
      {
        cause: err,
      },
    );
  if (isApiError(err, 404))
    return new ResolutionError("KindNotFound", `the API server does not serve ${where} (404 on list)`, {
      cause: err,
    });
  return toResolutionError(err);
}

/** The request of a reference that did not compile: enough to carry its InvalidSpec. */
export function placeholderRequest(ref: unknown): CompiledRequest {
  const raw = (typeof ref === "object" && ref !== null ? ref : {}) as Record<string, unknown>;
  return {
    target: "external",
    apiVersion: String(raw.apiVersion ?? ""),
    kind: String(raw.kind ?? ""),
    namespace: undefined,
    name: undefined,
    selector: undefined,
    external: undefined,
    fieldPath: undefined,
    fieldPathText: "",
    mode: "Single",
    minMatch: 1,
    maxMatch: undefined,
    sortBy: undefined,
    requireConditions: [],
    hasDefault: false,
    defaultValue: undefined,
    resolution: "Required",
    describe: "an invalid reference",
    extractors: [],
    fieldKey: undefined,
    sortKey: undefined,
    conditionsKey: undefined,
  };
}

/**
 * InvalidSpec when the request does not fit how its kind is served (scope, verbs), Forbidden
 * when the source policy refuses it; undefined when it may be read.
 */
export function checkResource(
  req: CompiledRequest,
  resource: ResourceInfo,
  sourcePolicy: ResolverOptions["sourcePolicy"],
): ResolutionError | undefined {
  if (resource.namespaced && !req.namespace) {
    return new ResolutionError("InvalidSpec", `${req.kind} is namespaced: set the source's namespace`);
  }
  if (!resource.namespaced && req.namespace) {
    return new ResolutionError("InvalidSpec", `${req.kind} is cluster-scoped: remove the source's namespace`);
  }
  if (!resource.verbs.includes("list") || !resource.verbs.includes("watch")) {
    return new ResolutionError(
      "InvalidSpec",
      `${req.kind} (${resource.resource}) cannot be watched: the API server offers only ${resource.verbs.join(", ") || "no verbs"} on it`,
      { retryable: false },
    );
  }
  const source: { namespace?: string; name?: string } = {};
  if (req.namespace !== undefined) source.namespace = req.namespace;
  if (req.name !== undefined) source.name = req.name;
  const refusal = sourcePolicy?.(resource, source);
  if (refusal) return new ResolutionError("Forbidden", refusal);
  return undefined;
}

/** Why `request`'s selector keeps nothing: its kind's `total` label keys are all taken. */
export function tooManyLabelKeys(request: CompiledRequest, total: number): ResolutionError {
  return new ResolutionError(
    "TooManyLabelKeys",
    `${request.describe}: its selector names label keys that no other selector of ${request.kind} uses, and the controller keeps at most ${total} label keys per watched kind (--max-label-keys-per-kind), all taken by selectors that came first: select on label keys other selectors of this kind already use, or name fewer keys (it is retried when a selector of the kind goes)`,
  );
}
