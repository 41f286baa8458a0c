/**
 * The resolver's core through its seam: a fake of our own SourceCache interface that decodes
 * objects the way the real one does (projections made with the interests' extractors at the
 * moment an object arrives), and a fake KindResolver. No HTTP anywhere.
 */
import { afterEach, describe, expect, it } from "@jest/globals";
import { setImmediate as nextTurn } from "node:timers/promises";
import { objectKey, type InformerState, type RefreshTarget } from "../informers/informer.ts";
import { project, type Projection } from "../informers/projection.ts";
import type { KindHandle, KindInterest, SourceCache } from "../informers/source-cache.ts";
import type { KubeObject } from "../kube/client.ts";
import type { KindResolver, ResourceInfo } from "../kube/discovery.ts";
import { ResolutionError } from "../errors.ts";
import { Resolver } from "./resolver.ts";
import type { AnyReference } from "./request.ts";
import type { ResolutionResult } from "./types.ts";

const CONFIGMAPS: ResourceInfo = {
  group: "",
  version: "v1",
  resource: "configmaps",
  kind: "ConfigMap",
  namespaced: true,
  verbs: ["get", "list", "watch"],
};

const discovery: KindResolver = {
  peek: (apiVersion, kind) => (apiVersion === "v1" && kind === "ConfigMap" ? CONFIGMAPS : undefined),
  lookup: async (apiVersion, kind) => {
    if (apiVersion === "v1" && kind === "ConfigMap") return CONFIGMAPS;
    throw new ResolutionError("KindNotFound", `the API server serves no ${kind} in ${apiVersion}`, {
      retryable: false,
    });
  },
  invalidate: () => undefined,
};

/** One kind's fake cache: raw objects "on the server", projections "in the cache". */
class FakeKind {
  readonly server = new Map<string, KubeObject>();
  readonly cached = new Map<string, Projection>();
  readonly interests = new Set<KindInterest>();
  readonly refreshes: RefreshTarget[] = [];
  readonly prunes: RefreshTarget[] = [];
  state: InformerState = { phase: "Synced" };
  released = 0;

  decode(obj: KubeObject): Projection {
    const meta = { name: obj.metadata!.name!, namespace: obj.metadata!.namespace } as Projection["metadata"];
    const extractors = [...this.interests].flatMap((i) => [
      ...i.extractorsFor({ ...meta, labels: obj.metadata!.labels } as Projection["metadata"]),
    ]);
    return project(structuredClone(obj), extractors, 32 * 1024);
  }

  /** The server changes `obj` and the watch delivers it. */
  put(obj: KubeObject): void {
    const key = objectKey(obj.metadata?.namespace, obj.metadata!.name!);
    this.server.set(key, obj);
    const old = this.cached.get(key);
    const now = this.decode(obj);
    this.cached.set(key, now);
    for (const i of this.interests) i.onEvent({ type: old ? "MODIFIED" : "ADDED", object: now, old });
  }

  /** Serves the refreshes asked for so far, as the real cache does: re-decode what is cached. */
  serveRefreshes(): void {
    for (const target of this.refreshes.splice(0)) {
      for (const [key, obj] of this.server) {
        const old = this.cached.get(key);
        if (!old) continue;
        const matches =
          "name" in target
            ? key === objectKey(target.namespace, target.name)
            : obj.metadata?.namespace === target.namespace;
        if (!matches) continue;
        const now = this.decode(obj);
        this.cached.set(key, now);
        for (const i of this.interests) i.onEvent({ type: "MODIFIED", object: now, old });
      }
    }
  }

  setState(state: InformerState): void {
    this.state = state;
    for (const i of this.interests) i.onState(state);
  }
}

class FakeCache implements SourceCache {
  readonly kind = new FakeKind();
  acquire(resource: ResourceInfo, _namespace: string | undefined, interest: KindInterest): KindHandle {
    const kind = this.kind;
    kind.interests.add(interest);
    return {
      resource,
      get state() {
        return kind.state;
      },
      get: (ns, name) => kind.cached.get(objectKey(ns, name)),
      list: (ns) => [...kind.cached.values()].filter((p) => ns === undefined || p.metadata.namespace === ns),
      refresh: (target) => void kind.refreshes.push(target),
      prune: (target) => void kind.prunes.push(target),
      release: () => {
        kind.interests.delete(interest);
        kind.released++;
      },
    };
  }
  get size() {
    return this.kind.interests.size > 0 ? 1 : 0;
  }
  keys() {
    return [];
  }
  async stop() {}
}

const cm = (name: string, v: string, labels?: Record<string, string>): KubeObject => ({
  apiVersion: "v1",
  kind: "ConfigMap",
  metadata: { name, namespace: "team-a", uid: `uid-${name}`, resourceVersion: "1", labels },
  data: { v, other: "never read" },
});

const byName: AnyReference = {
  apiVersion: "v1",
  kind: "ConfigMap",
  namespace: "team-a",
  name: "db",
  fieldPath: "data.v",
};
const bySelector: AnyReference = {
  apiVersion: "v1",
  kind: "ConfigMap",
  namespace: "team-a",
  matchLabels: { app: "web" },
  mode: "Multiple",
  fieldPath: "data.v",
} as AnyReference;

let resolver: Resolver | undefined;
afterEach(async () => {
  await resolver?.stop();
  resolver = undefined;
});

function setup() {
  const cache = new FakeCache();
  // CRDs are not followed here: the fake cache serves one kind.
  resolver = new Resolver({ cache, discovery, watchCustomResourceDefinitions: false });
  const pushed: ResolutionResult[] = [];
  return { cache, kind: cache.kind, resolver, pushed, push: (r: ResolutionResult) => pushed.push(r) };
}

const summary = (r: ResolutionResult | undefined) =>
  r === undefined
    ? undefined
    : r.ok
      ? { reason: r.reason, ...("values" in r ? { values: r.values } : { value: r.value }) }
      : { reason: r.error.reason };

describe("resolver core through the SourceCache seam", () => {
  it.each([
    {
      reason:
        "an object decoded while the reference was registered keeps its read: the first push is the value",
      ref: byName,
      before: [] as KubeObject[],
      after: [cm("db", "one")],
      want: { reason: "Available", value: "one" },
    },
    {
      reason: "a missing object is SourceNotFound at once (identity is kept for every object)",
      ref: byName,
      before: [cm("other", "x")],
      after: [],
      want: { reason: "SourceNotFound" },
    },
    {
      reason: "a selector's matches decoded after it registered give their values in order",
      ref: bySelector,
      before: [],
      after: [cm("b", "B", { app: "web" }), cm("a", "A", { app: "web" }), cm("c", "C", { app: "db" })],
      want: { reason: "Available", values: ["A", "B"] },
    },
  ])("$reason", async ({ ref, before, after, want }) => {
    const { kind, resolver, pushed, push } = setup();
    for (const obj of before) kind.put(obj);
    resolver.watch(ref, push);
    for (const obj of after) kind.put(obj);
    await nextTurn();
    expect(summary(pushed.at(-1))).toEqual(want);
  });

  it.each([
    {
      reason: "a named object decoded before anyone read it",
      ref: byName,
      objects: [cm("db", "one")],
      want: { reason: "Available", value: "one" },
      target: { namespace: "team-a", name: "db" },
    },
    {
      reason: "a selector's matches decoded before the selector existed",
      ref: bySelector,
      objects: [cm("a", "A", { app: "web" }), cm("b", "B", { app: "web" })],
      want: { reason: "Available", values: ["A", "B"] },
      target: { namespace: "team-a", labelSelector: "app=web" },
    },
  ])(
    "data not kept: $reason is read again, and nothing is pushed until it is",
    async ({ ref, objects, want, target }) => {
      const { kind, resolver, pushed, push } = setup();
      for (const obj of objects) kind.put(obj);
      expect([...kind.cached.values()].every((p) => p.reads === undefined)).toBe(true);
      resolver.watch(ref, push);
      await nextTurn();
      expect(pushed).toEqual([]);
      expect(kind.refreshes).toEqual([target]);
      kind.serveRefreshes();
      await nextTurn();
      expect(pushed.map(summary)).toEqual([want]);
    },
  );

  it("the cache is asked to keep a subscription's reads only for the objects it reads", () => {
    const { kind, resolver, push } = setup();
    resolver.watch(byName, push);
    resolver.watch(bySelector, push);
    kind.put(cm("db", "one"));
    kind.put(cm("a", "A", { app: "web" }));
    kind.put(cm("unread", "big", { app: "other" }));
    expect([...(kind.cached.get("team-a/db")?.reads?.keys() ?? [])]).toEqual(["path:data.v"]);
    expect(kind.cached.get("team-a/a")?.reads?.size).toBe(1);
    expect(kind.cached.get("team-a/unread")?.reads).toBeUndefined();
  });

  it("closing a subscription prunes its objects while others remain, and releases the kind with the last", () => {
    const { kind, resolver, push } = setup();
    const a = resolver.watch(byName, push);
    const b = resolver.watch(bySelector, push);
    a.close();
    expect(kind.prunes).toEqual([{ namespace: "team-a", name: "db" }]);
    expect(kind.released).toBe(0);
    b.close();
    expect(kind.released).toBe(1);
    expect(kind.interests.size).toBe(0);
  });

  it.each([
    {
      reason: "a refused list is Forbidden, with the cache's message",
      state: { phase: "Failed", reason: "Forbidden", message: "may not list" } as InformerState,
      want: "Forbidden",
    },
    {
      reason: "a kind gone from the server is KindNotFound",
      state: { phase: "Failed", reason: "KindNotFound", message: "gone" } as InformerState,
      want: "KindNotFound",
    },
  ])("state: $reason", async ({ state, want }) => {
    const { kind, resolver, pushed, push } = setup();
    kind.put(cm("db", "one"));
    resolver.watch(byName, push);
    kind.setState(state);
    await nextTurn();
    expect(summary(pushed.at(-1))).toEqual({ reason: want });
  });
});
