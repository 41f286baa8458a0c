/**
 * What a resolver test file works in: the admin client, a namespace of its own, and a resolver
 * over the test cluster, opened before its tests and stopped after them.
 */
import { afterAll, beforeAll } from "@jest/globals";
import type { KubeClient } from "../../src/kube/client.ts";
import type { Resolver } from "../../src/resolver/resolver.ts";
import { startedResolver } from "./controller.ts";
import { closeScope, createConfigMap, openScope } from "./kube.ts";

export interface ResolverScope {
  admin: KubeClient;
  /** The file's own namespace. */
  ns: string;
  resolver: Resolver;
  /** Creates the ConfigMap `name` with `data` (and `labels`) in `ns`. */
  createConfigMap(name: string, data: Record<string, string>, labels?: Record<string, string>): Promise<void>;
}

/**
 * Registers in the calling test file a beforeAll that opens a namespace named after `prefix` and
 * the resolver `start` makes (by default a started one that keeps no informer nobody reads), and
 * an afterAll that stops it. The scope's fields are set from beforeAll on.
 */
export function useResolverScope(
  prefix: string,
  start: () => Promise<Resolver> = startedResolver,
): ResolverScope {
  const scope = {
    createConfigMap: (name, data, labels) => createConfigMap(scope.admin, scope.ns, name, data, labels),
  } as ResolverScope;
  beforeAll(async () => {
    const { admin, ns, started } = await openScope(prefix, start);
    Object.assign(scope, { admin, ns, resolver: started });
  });
  afterAll(() => closeScope(scope.resolver));
  return scope;
}
