/**
 * A consistent read (see ResolveOptions.consistent): the result of a reference computed from a
 * fresh list of the API server, not from the cache. The objects listed now are the whole truth
 * for a name or a selector, so nothing cached (an object since deleted, a label since removed)
 * can linger.
 */
import type { Projection } from "../informers/projection.ts";
import type { RefreshTarget, SourceCache, SourceView } from "../informers/source-cache.ts";
import type { ResourceInfo } from "../kube/discovery.ts";
import type { ResolverOptions } from "./options.ts";
import { compileRequest, type AnyReference, type CompiledRequest } from "./request.ts";
import { checkResource, freshReadError, toResolutionError } from "./results.ts";
import type { ResolutionResult } from "./types.ts";

/** What a consistent read needs of the resolver. */
export interface FreshReadDeps {
  /** Discovery, asked afresh when it says the kind is not served. */
  lookup(apiVersion: string, kind: string): Promise<ResourceInfo>;
  sourcePolicy: ResolverOptions["sourcePolicy"];
  cache: Pick<SourceCache, "readFresh">;
  /** Refuses a request its identity may not read (see access-reviews.ts), before anything is read. @default every request is read */
  authorize?(request: CompiledRequest, resource: ResourceInfo): Promise<ResolutionResult | undefined>;
  /** The result (transformed) from a view of the objects read. */
  compute(request: CompiledRequest, view: SourceView): Promise<ResolutionResult>;
}

/** A view with no objects and a first list not done: what an external value is computed from. */
export const PENDING_VIEW: SourceView = { state: { phase: "Pending" }, get: () => undefined, list: () => [] };

/** The result of `ref` from a fresh read; never rejects for what a result can say. */
export async function freshResult(ref: AnyReference, deps: FreshReadDeps): Promise<ResolutionResult> {
  let request: CompiledRequest;
  try {
    request = compileRequest(ref);
  } catch (err) {
    return { ok: false, error: toResolutionError(err) };
  }
  if (request.target === "external") return await deps.compute(request, PENDING_VIEW);
  let resource: ResourceInfo;
  try {
    resource = await deps.lookup(request.apiVersion, request.kind);
  } catch (err) {
    return { ok: false, error: toResolutionError(err) };
  }
  const problem = checkResource(request, resource, deps.sourcePolicy);
  if (problem) return { ok: false, error: problem };
  const refused = await deps.authorize?.(request, resource);
  if (refused) return refused;
  const namespace = resource.namespaced ? request.namespace : undefined;
  const target: RefreshTarget =
    request.target === "name"
      ? { namespace, name: request.name! }
      : { namespace, labelSelector: request.selector!.key };
  let items: Projection[];
  try {
    items = await deps.cache.readFresh(resource, target, request.extractors, request.selector?.keys ?? []);
  } catch (err) {
    return { ok: false, error: freshReadError(err, resource, namespace) };
  }
  const view: SourceView = {
    state: { phase: "Synced" },
    get: (_ns, name) => items.find((p) => p.metadata.name === name),
    list: () => items,
  };
  return await deps.compute(request, view);
}
