/**
 * The resolver's core through its seam: a fake of our own SourceCache interface that decodes
 * objects the way the real one does (projections made with the interests' extractors at the
 * moment an object arrives), and a fake KindResolver. No HTTP anywhere.
 */
import { afterEach, describe, expect, it } from "@jest/globals";
import { setImmediate as nextTurn } from "node:timers/promises";
import { objectKey, type InformerState, type RefreshTarget } from "../informers/informer.ts";
import { LabelKeys } from "../informers/label-keys.ts";
import { project, projectMeta, type Extractor, type Projection } from "../informers/projection.ts";
import type { KindHandle, KindInterest, SourceCache } from "../informers/source-cache.ts";
import { ApiError, type KubeObject } from "../kube/client.ts";
import type { KindResolver, ResourceInfo } from "../kube/discovery.ts";
import { ResolutionError } from "../api/errors.ts";
import { compileTransform } from "../transform/index.ts";
import { AccessReviews } from "./access-reviews.ts";
import { Resolver } from "./resolver.ts";
import type { TransformRunner } from "./transform.ts";
import type { AnyReference } from "./request.ts";
import type { ResolutionResult } from "./types.ts";
import { CONFIGMAPS as LISTED_CONFIGMAPS } from "../../test/harness/fake-kube.ts";

const CONFIGMAPS: ResourceInfo = { ...LISTED_CONFIGMAPS, verbs: ["get", "list", "watch"] };

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
  /** The label keys the interests named, counted, as the real cache keeps them. */
  readonly labelKeys = new Map<string, number>();

  decode(obj: KubeObject): Projection {
    const labelKeys = new LabelKeys(this.labelKeys.keys());
    const meta = projectMeta(obj, { labelKeys });
    const extractors = [...this.interests].flatMap((i) => [...i.extractorsFor(meta)]);
    return project(structuredClone(obj), extractors, 32 * 1024, { labelKeys });
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

  /** The server changes or deletes an object, and the watch has not delivered it yet. */
  serverOnly(key: string, obj: KubeObject | undefined): void {
    if (obj) this.server.set(key, obj);
    else this.server.delete(key);
  }

  setState(state: InformerState): void {
    this.state = state;
    for (const i of this.interests) i.onState(state);
  }
}

class FakeCache implements SourceCache {
  readonly kind = new FakeKind();
  /** What fresh reads were asked for; a value set here is thrown by the next one instead. */
  readonly freshReads: RefreshTarget[] = [];
  freshError: Error | undefined;
  async readFresh(
    _resource: ResourceInfo,
    target: RefreshTarget,
    extractors: readonly Extractor[],
    labelKeys: readonly string[] = [],
  ) {
    this.freshReads.push(target);
    if (this.freshError) throw this.freshError;
    // The server's view, not the cache's. A label selector is served as the whole namespace:
    // the resolver filters by its selector again, as it must for any server.
    return [...this.kind.server.entries()]
      .filter(([key, obj]) =>
        "name" in target
          ? key === objectKey(target.namespace, target.name)
          : obj.metadata?.namespace === target.namespace,
      )
      .map(([, obj]) =>
        project(structuredClone(obj), extractors, 32 * 1024, { labelKeys: new LabelKeys(labelKeys) }),
      );
  }
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
      addLabelKeys: (keys) => {
        for (const k of keys) kind.labelKeys.set(k, (kind.labelKeys.get(k) ?? 0) + 1);
        return true;
      },
      removeLabelKeys: (keys) => {
        for (const k of keys) {
          const n = (kind.labelKeys.get(k) ?? 0) - 1;
          if (n > 0) kind.labelKeys.set(k, n);
          else kind.labelKeys.delete(k);
        }
      },
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

/** A resolver over a fake cache, with `wiring` added (CRDs are not followed: the cache serves one kind). */
function setup(wiring: Partial<ConstructorParameters<typeof Resolver>[0]> = {}) {
  const cache = new FakeCache();
  resolver = new Resolver({ cache, discovery, watchCustomResourceDefinitions: false, ...wiring });
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

  it("cachedVersion reads the cache only: a watched kind's cached object, and nothing else", () => {
    const { kind, resolver, push } = setup();
    const db = { apiVersion: "v1", kind: "ConfigMap", namespace: "team-a", name: "db" };
    kind.put({ ...cm("db", "one"), metadata: { ...cm("db", "one").metadata, resourceVersion: "42" } });
    // No subscription of the kind yet: not watched here, so nothing is known (and nothing read).
    expect(resolver.cachedVersion(db)).toBeUndefined();
    expect(kind.interests.size).toBe(0);
    // Another subscription of the kind (its own read of the cache asked for).
    resolver.watch(bySelector, push);
    const refreshes = kind.refreshes.length;
    expect(resolver.cachedVersion(db)).toBe("42");
    expect(resolver.cachedVersion({ ...db, name: "gone" })).toBeUndefined();
    expect(resolver.cachedVersion({ ...db, kind: "Unknown" })).toBeUndefined();
    expect(kind.refreshes).toHaveLength(refreshes);
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

describe("consistent reads: resolve(ref, { consistent: true })", () => {
  const web = { app: "web" };
  it.each([
    {
      reason: "an update the watch has not delivered yet",
      ref: byName,
      cached: [cm("db", "old")],
      server: { "team-a/db": cm("db", "new") },
      stale: { reason: "Available", value: "old" },
      want: { reason: "Available", value: "new" },
    },
    {
      reason: "an object deleted since it was cached is SourceNotFound",
      ref: byName,
      cached: [cm("db", "old")],
      server: { "team-a/db": undefined },
      stale: { reason: "Available", value: "old" },
      want: { reason: "SourceNotFound" },
    },
    {
      reason: "an object created since: found, where the cache says SourceNotFound",
      ref: byName,
      cached: [],
      server: { "team-a/db": cm("db", "new") },
      stale: { reason: "SourceNotFound" },
      want: { reason: "Available", value: "new" },
    },
    {
      reason: "a label just added: the object is among the matches",
      ref: bySelector,
      cached: [cm("a", "A", web), cm("b", "B")],
      server: { "team-a/b": cm("b", "B", web) },
      stale: { reason: "Available", values: ["A"] },
      want: { reason: "Available", values: ["A", "B"] },
    },
    {
      reason: "a label just removed: the object does not linger among the matches",
      ref: bySelector,
      cached: [cm("a", "A", web), cm("b", "B", web)],
      server: { "team-a/b": cm("b", "B") },
      stale: { reason: "Available", values: ["A", "B"] },
      want: { reason: "Available", values: ["A"] },
    },
    {
      reason: "a match just deleted does not linger either",
      ref: bySelector,
      cached: [cm("a", "A", web), cm("b", "B", web)],
      server: { "team-a/a": undefined },
      stale: { reason: "Available", values: ["A", "B"] },
      want: { reason: "Available", values: ["B"] },
    },
  ])("$reason", async ({ ref, cached, server, stale, want }) => {
    const { cache, kind, resolver } = setup();
    // The cache knows `cached` (with the reads the reference wants), the server has moved on.
    const sub = resolver.watch(ref, () => undefined);
    for (const obj of cached) kind.put(obj);
    for (const [key, obj] of Object.entries(server)) kind.serverOnly(key, obj);
    await nextTurn();
    expect(summary(sub.current)).toEqual(stale);
    const settle = async (fresh: boolean) => {
      const opts = { consistent: fresh };
      try {
        return summary({
          ok: true,
          ...("matchLabels" in ref
            ? await resolver.resolveSelector(ref as never, opts)
            : await resolver.resolve(ref as never, opts)),
        } as ResolutionResult);
      } catch (err) {
        return { reason: (err as ResolutionError).reason };
      }
    };
    expect(await settle(false)).toEqual(stale);
    expect(cache.freshReads).toEqual([]);
    expect(await settle(true)).toEqual(want);
    expect(cache.freshReads).toHaveLength(1);
    // The cache is left as it was: the watch brings the change to subscribers.
    expect(summary(sub.current)).toEqual(stale);
    sub.close();
  });

  it("takes no claim on the cache: no informer, no subscription", async () => {
    const { cache, kind, resolver } = setup();
    kind.serverOnly("team-a/db", cm("db", "v"));
    await expect(resolver.resolve(byName as never, { consistent: true })).resolves.toMatchObject({
      value: "v",
    });
    expect(kind.interests.size).toBe(0);
    expect(resolver.subscriptionCount).toBe(0);
    expect(cache.freshReads).toEqual([{ namespace: "team-a", name: "db" }]);
  });

  it("reads nothing for an external literal", async () => {
    const { cache, resolver } = setup();
    const ref = { apiVersion: "v1", kind: "ConfigMap", external: "arn:x" };
    await expect(resolver.resolve(ref, { consistent: true })).resolves.toMatchObject({ value: "arn:x" });
    expect(cache.freshReads).toEqual([]);
  });

  it.each([
    {
      reason: "a 403 is Forbidden, naming the resource",
      error: new ApiError("GET", "/api/v1/namespaces/team-a/configmaps", 403, "Forbidden", "no"),
      want: { reason: "Forbidden", message: "may not list configmaps in namespace team-a" },
    },
    {
      reason: "a 404 is KindNotFound",
      error: new ApiError("GET", "/api/v1/namespaces/team-a/configmaps", 404, "NotFound", "no"),
      want: { reason: "KindNotFound", message: "does not serve configmaps in namespace team-a" },
    },
    {
      reason: "anything else (here, a timeout) is retryable",
      error: new Error("request timed out"),
      want: { reason: "Pending", message: "request timed out" },
    },
  ])("a failed read: $reason", async ({ error, want }) => {
    const { cache, resolver } = setup();
    cache.freshError = error;
    const got = await resolver
      .resolve(byName as never, { consistent: true })
      .catch((err: ResolutionError) => err);
    expect(got).toBeInstanceOf(ResolutionError);
    expect((got as ResolutionError).reason).toBe(want.reason);
    expect((got as ResolutionError).retryable).toBe(true);
    expect((got as ResolutionError).message).toContain(want.message);
  });

  it("an unknown kind is KindNotFound without a read", async () => {
    const { cache, resolver } = setup();
    const ref = { apiVersion: "v1", kind: "Nope", namespace: "a", name: "x", fieldPath: "data.v" };
    await expect(resolver.resolve(ref, { consistent: true })).rejects.toMatchObject({
      reason: "KindNotFound",
    });
    expect(cache.freshReads).toEqual([]);
  });
});

describe("transforms run asynchronously, one evaluation per subscription at a time", () => {
  /** A runner whose evaluations end when the test says: the worker pool's seam. */
  function gatedRunner() {
    const pending: Array<{ input: unknown; finish: () => void }> = [];
    const runner: TransformRunner = {
      evaluate: (text, shape, input, limits) =>
        new Promise((resolve, reject) => {
          pending.push({
            input: input.value,
            finish: () => {
              try {
                resolve(compileTransform(text, shape).evaluate(input, limits));
              } catch (err) {
                reject(err);
              }
            },
          });
        }),
    };
    return { runner, pending };
  }

  function setupGated() {
    const { runner, pending } = gatedRunner();
    return { ...setup({ transformRunner: runner }), pending };
  }

  const transformed: AnyReference = { ...byName, transform: "value + '!'" } as AnyReference;

  it("a change while an evaluation runs waits for it, then the latest state is evaluated; the stale result is never pushed", async () => {
    const { kind, resolver, pending, pushed, push } = setupGated();
    resolver.watch(transformed, push);
    kind.put(cm("db", "one"));
    await nextTurn();
    expect(pending.map((p) => p.input)).toEqual(["one"]);
    kind.put(cm("db", "two"));
    kind.put(cm("db", "three"));
    await nextTurn();
    // No second evaluation while the first runs.
    expect(pending.map((p) => p.input)).toEqual(["one"]);
    pending[0]!.finish();
    await nextTurn();
    await nextTurn();
    expect(pending.map((p) => p.input)).toEqual(["one", "three"]);
    pending[1]!.finish();
    await nextTurn();
    // SourceNotFound before the object arrived; never "one!" nor "two!".
    expect(pushed.map(summary)).toEqual([
      { reason: "SourceNotFound" },
      { reason: "Available", value: "three!" },
    ]);
  });

  it("a result without a value, computed while an evaluation runs, is pushed at once and the evaluation's result dropped", async () => {
    const { kind, resolver, pending, pushed, push } = setupGated();
    resolver.watch(transformed, push);
    kind.put(cm("db", "one"));
    await nextTurn();
    kind.put({ ...cm("db", "one"), data: {} });
    await nextTurn();
    const want = [{ reason: "SourceNotFound" }, { reason: "FieldNotFound" }];
    expect(pushed.map(summary)).toEqual(want);
    pending[0]!.finish();
    await nextTurn();
    await nextTurn();
    expect(pushed.map(summary)).toEqual(want);
  });
});

describe("unknown options of one call are InvalidSpec, before any read", () => {
  it.each([
    { reason: "resolve", call: (r: Resolver) => r.resolve(byName as never, { consistant: true } as never) },
    {
      reason: "resolveSelector",
      call: (r: Resolver) => r.resolveSelector(bySelector as never, { consistant: true } as never),
    },
  ])("$reason refuses a typo of consistent", async ({ call }) => {
    const { cache, resolver } = setup();
    await expect(call(resolver)).rejects.toMatchObject({
      reason: "InvalidSpec",
      message: expect.stringContaining('unknown key "consistant"'),
    });
    expect(cache.freshReads).toEqual([]);
  });

  it("watch pushes the refusal to its callback, as it does for a bad reference", () => {
    const { resolver, pushed, push } = setup();
    resolver.watch(byName, push, { fieldprefix: "spec" } as never).close();
    expect(pushed[0]).toMatchObject({
      ok: false,
      error: { reason: "InvalidSpec", message: expect.stringContaining('did you mean "fieldPrefix"?') },
    });
  });
});

describe("a watch with a ServiceAccount: its results are used only while the account may read", () => {
  /** Access reviews over a fake endpoint: `allowed` decides each, and every review is counted. */
  function reviewed(allowed: (attrs: Record<string, string>) => boolean) {
    const asked: Array<Record<string, string>> = [];
    const access = new AccessReviews({
      client: {
        request: async <T>(_m: string, _p: string, o?: { body?: unknown }) => {
          const attrs = (o!.body as { spec: { resourceAttributes: Record<string, string> } }).spec
            .resourceAttributes;
          asked.push(attrs);
          return { status: { allowed: allowed(attrs) } } as T;
        },
        watch: () => {
          throw new Error("no watch here");
        },
      },
      watchRbac: false,
    });
    return { access, asked };
  }
  const account = { namespace: "team-a", name: "reader" };

  it("pushes Forbidden, never the value, when the account may not get the source", async () => {
    const { access } = reviewed(() => false);
    const { cache, resolver, pushed, push } = setup({ accessReviews: access });
    cache.kind.put(cm("db", "secret-ish"));
    resolver.watch(byName, push, { serviceAccount: account });
    await waitUntil(() => pushed.length > 0);
    expect(pushed.map(summary)).toEqual([{ reason: "Forbidden" }]);
    expect(!pushed[0]!.ok && pushed[0]!.error.message).toBe(
      'serviceaccount team-a/reader may not get configmaps "db" in namespace "team-a": grant it that (a Role and a RoleBinding), or act as another ServiceAccount',
    );
  });

  it("pushes the value when it may, and asks once for many watches of one namespace", async () => {
    const { access, asked } = reviewed(() => true);
    const { cache, resolver, pushed, push } = setup({ accessReviews: access });
    for (let i = 0; i < 20; i++) resolver.watch(byName, push, { serviceAccount: account });
    cache.kind.put(cm("db", "one"));
    await waitUntil(() => pushed.filter((r) => r.ok).length === 20);
    expect(pushed.filter((r) => r.ok).map(summary)).toEqual(
      Array(20).fill({ reason: "Available", value: "one" }),
    );
    expect(asked).toEqual([{ verb: "get", group: "", resource: "configmaps", namespace: "team-a" }]);
    // A change of the source is pushed without another review.
    cache.kind.put(cm("db", "two"));
    await waitUntil(() => pushed.filter((r) => r.ok).length === 40);
    expect(asked).toHaveLength(1);
  });

  it("withdraws the value when the answers are dropped and the account may no longer read", async () => {
    let allow = true;
    const { access } = reviewed(() => allow);
    const { cache, resolver, pushed, push } = setup({ accessReviews: access });
    resolver.watch(byName, push, { serviceAccount: account });
    cache.kind.put(cm("db", "one"));
    await waitUntil(() => pushed.some((r) => r.ok));
    allow = false;
    access.dropAll();
    await waitUntil(() => !pushed.at(-1)!.ok);
    expect(pushed.map(summary).slice(-2)).toEqual([
      { reason: "Available", value: "one" },
      { reason: "Forbidden" },
    ]);
  });
});

async function waitUntil(done: () => boolean, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!done()) {
    if (Date.now() > deadline) throw new Error("timed out");
    await new Promise((r) => setTimeout(r, 5));
  }
}
