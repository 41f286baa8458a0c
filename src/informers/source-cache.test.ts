/**
 * The source cache keeps only the labels its kind's selectors name (label-keys.ts), and a
 * selector naming a key not kept yet still gets the exact answer: the real InformerSourceCache
 * and the real resolver over a fake of our own client interface (list, and a silent watch).
 */
import { afterEach, describe, expect, it } from "@jest/globals";
import { setImmediate as nextTurn } from "node:timers/promises";
import type { KubeClient, KubeObject, RequestOptions, WatchEvent, WatchStream } from "../kube/client.ts";
import type { KindResolver } from "../kube/discovery.ts";
import { Resolver } from "../resolver/resolver.ts";
import type { AnyReference } from "../resolver/request.ts";
import type { ResolutionResult } from "../resolver/types.ts";
import { UNSELECTABLE_VALUE } from "./label-keys.ts";
import type { Projection } from "./projection.ts";
import { InformerSourceCache } from "./source-cache.ts";
import { CONFIGMAPS, answerAsJson, silentWatch, syncedClaim } from "../../test/harness/fake-kube.ts";

/** The API server, as far as the cache sees it: lists (with selectors) and silent watches. */
class FakeServer implements Pick<KubeClient, "request" | "watch"> {
  readonly objects = new Map<string, KubeObject>();
  /** The list requests made, as `namespace|labelSelector|fieldSelector`. */
  readonly lists: string[] = [];
  private rv = 100;

  put(name: string, labels: Record<string, string>, v = name, namespace = "team-a"): void {
    this.objects.set(`${namespace}/${name}`, {
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: { name, namespace, uid: `uid-${name}`, resourceVersion: String(++this.rv), labels },
      data: { v },
    });
  }

  async request<T>(_method: string, path: string, options: RequestOptions = {}): Promise<T> {
    const ns = /\/namespaces\/([^/]+)\//.exec(path)?.[1];
    const labelSelector = options.query?.labelSelector as string | undefined;
    const fieldSelector = options.query?.fieldSelector as string | undefined;
    this.lists.push(`${ns ?? ""}|${labelSelector ?? ""}|${fieldSelector ?? ""}`);
    const items = [...this.objects.values()].filter((o) => {
      if (ns && o.metadata?.namespace !== ns) return false;
      if (fieldSelector && fieldSelector !== `metadata.name=${o.metadata?.name}`) return false;
      // Equality requirements only: all the tests below send to the server.
      for (const req of (labelSelector ?? "").split(",").filter(Boolean)) {
        const [k, v] = req.split("=");
        if (o.metadata?.labels?.[k!] !== v) return false;
      }
      return true;
    });
    return answerAsJson<T>({ metadata: { resourceVersion: String(this.rv) }, items }, options);
  }

  readonly watch: KubeClient["watch"] = silentWatch;
}

const discovery: KindResolver = {
  lookup: async () => CONFIGMAPS,
  peek: () => CONFIGMAPS,
  invalidate: () => undefined,
};

let stops: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const stop of stops.reverse()) await stop();
  stops = [];
});

function cacheOver(server: FakeServer): InformerSourceCache {
  const cache = new InformerSourceCache({ client: server, lingerMs: 0 });
  stops.push(() => cache.stop());
  return cache;
}

const labelsOf = (p: Projection | undefined) => (p?.metadata.labels ? { ...p.metadata.labels } : undefined);

async function until(what: string, ok: () => boolean): Promise<void> {
  for (let i = 0; i < 200; i++) {
    if (ok()) return;
    await nextTurn();
  }
  throw new Error(`never: ${what}`);
}

describe("InformerSourceCache label-key total", () => {
  it("refuses keys new to the kind past its total, and nothing else; keys already kept always fit", async () => {
    const server = new FakeServer();
    server.put("a", { a1: "x", a2: "y", b1: "z" });
    const cache = new InformerSourceCache({ client: server, lingerMs: 0, maxLabelKeys: 3 });
    stops.push(() => cache.stop());
    const handle = await syncedClaim(cache, ["a1", "a2"]);
    expect(cache.labelKeysKept()).toBe(2);
    // Two new keys: over the total of 3, refused whole.
    expect(handle.addLabelKeys(["b1", "b2"])).toBe(false);
    expect(cache.labelKeysKept()).toBe(2);
    // Keys already kept fit whatever the total; one new key fits.
    expect(handle.addLabelKeys(["a1"])).toBe(true);
    expect(handle.addLabelKeys(["b1"])).toBe(true);
    expect(cache.labelKeysKept()).toBe(3);
    expect(handle.addLabelKeys(["b2"])).toBe(false);
    // A key let go of makes room.
    handle.removeLabelKeys(["a2"]);
    expect(handle.addLabelKeys(["b2"])).toBe(true);
    expect(cache.labelKeysKept()).toBe(3);
  });
});

describe("InformerSourceCache labels", () => {
  it("keeps no label of a kind no selector reads, whatever the objects carry", async () => {
    const server = new FakeServer();
    const huge = Object.fromEntries(Array.from({ length: 500 }, (_, i) => [`k${i}`, "v".repeat(63)]));
    server.put("big", huge);
    const handle = await syncedClaim(cacheOver(server));
    expect(handle.get("team-a", "big")?.metadata.labels).toBeUndefined();
    expect(handle.get("team-a", "big")?.metadata.labelKeys.size).toBe(0);
  });

  it("keeps the keys its selectors name, with values bounded", async () => {
    const server = new FakeServer();
    server.put("a", { app: "web", tier: "x".repeat(100), noise: "1", constructor: "c" });
    const handle = await syncedClaim(cacheOver(server), ["app", "tier", "constructor"]);
    expect(labelsOf(handle.get("team-a", "a"))).toEqual({
      app: "web",
      tier: UNSELECTABLE_VALUE,
      constructor: "c",
    });
  });

  it("reads the kind again when a key is named for the first time, and keeps it from then on", async () => {
    const server = new FakeServer();
    server.put("a", { app: "web", tier: "gold" });
    server.put("b", { app: "web" }, "b", "team-b");
    const handle = await syncedClaim(cacheOver(server), ["app"]);
    expect(labelsOf(handle.get("team-a", "a"))).toEqual({ app: "web" });
    const before = server.lists.length;
    handle.addLabelKeys(["tier"]);
    await until("the re-read", () => handle.get("team-a", "a")?.metadata.labelKeys.has("tier") === true);
    // One list of the whole kind (a cluster-wide claim: every namespace), no selector.
    expect(server.lists.slice(before)).toEqual(["||"]);
    expect(labelsOf(handle.get("team-a", "a"))).toEqual({ app: "web", tier: "gold" });
    expect(handle.get("team-b", "b")?.metadata.labelKeys.has("tier")).toBe(true);
  });

  it("narrows in place, without a read, when no selector names a key any more", async () => {
    const server = new FakeServer();
    server.put("a", { app: "web", tier: "gold" });
    const handle = await syncedClaim(cacheOver(server), ["app", "tier"]);
    const before = server.lists.length;
    handle.removeLabelKeys(["tier"]);
    await until("the narrowing", () => handle.get("team-a", "a")?.metadata.labelKeys.has("tier") === false);
    expect(labelsOf(handle.get("team-a", "a"))).toEqual({ app: "web" });
    expect(server.lists.length).toBe(before);
  });

  it("a refresh for a selector reads the whole scope while some object lacks a kept key", async () => {
    const server = new FakeServer();
    server.put("a", { app: "web" });
    const handle = await syncedClaim(cacheOver(server));
    // An object decoded without "app": the server would answer the selector without it.
    handle.addLabelKeys(["app"]);
    handle.refresh({ namespace: "team-a", labelSelector: "app=web" });
    await until("the re-read", () => handle.get("team-a", "a")?.metadata.labelKeys.has("app") === true);
    expect(server.lists).not.toContain("team-a|app=web|");
  });

  it("a released claim gives its keys back", async () => {
    const server = new FakeServer();
    server.put("a", { app: "web", tier: "gold" });
    const cache = cacheOver(server);
    const first = await syncedClaim(cache, ["app"]);
    const second = await syncedClaim(cache, ["tier"]);
    second.release();
    await until("the narrowing", () => first.get("team-a", "a")?.metadata.labelKeys.has("tier") === false);
    expect(labelsOf(first.get("team-a", "a"))).toEqual({ app: "web" });
  });
});

describe("the resolver over the real cache: selectors on keys kept late", () => {
  /** Watches `ref` and resolves with the first result `ok` accepts. */
  async function resultOf(
    resolver: Resolver,
    ref: AnyReference,
    ok: (r: ResolutionResult) => boolean,
  ): Promise<ResolutionResult> {
    let last: ResolutionResult | undefined;
    let found: ResolutionResult | undefined;
    const sub = resolver.watch(ref, (r) => {
      last = r;
      if (ok(r)) found = r;
    });
    stops.push(async () => sub.close());
    await until(`a result; last ${JSON.stringify(last)}`, () => found !== undefined);
    return found!;
  }

  const valuesOf = (r: ResolutionResult) => (r.ok && "values" in r ? r.values : undefined);
  const selector = (extra: Record<string, unknown>): AnyReference =>
    ({
      apiVersion: "v1",
      kind: "ConfigMap",
      namespace: "team-a",
      fieldPath: "data.v",
      mode: "Multiple",
      minMatch: 0,
      ...extra,
    }) as AnyReference;

  it.each([
    {
      reason: "In on a key not kept: matches found after the re-read",
      late: { matchExpressions: [{ key: "tier", operator: "In", values: ["gold"] }] },
      want: ["a"],
    },
    {
      reason: "NotIn on a key not kept: never everything, as absent labels would say",
      late: { matchExpressions: [{ key: "tier", operator: "NotIn", values: ["gold"] }] },
      want: ["b", "c"],
    },
    {
      reason: "DoesNotExist on a key not kept: only objects really without it",
      late: { matchExpressions: [{ key: "tier", operator: "DoesNotExist" }] },
      want: ["c"],
    },
    {
      reason: "Exists on constructor, an ordinary key",
      late: { matchExpressions: [{ key: "constructor", operator: "Exists" }] },
      want: ["c"],
    },
  ])("$reason", async ({ late, want }) => {
    const server = new FakeServer();
    server.put("a", { app: "web", tier: "gold" });
    server.put("b", { app: "web", tier: "silver" });
    server.put("c", { app: "web", constructor: "yes" });
    const cache = cacheOver(server);
    const resolver = new Resolver({ cache, discovery });
    stops.push(() => resolver.stop());
    // First a selector on "app" only: the kind is listed keeping "app" and nothing else.
    const first = await resultOf(resolver, selector({ matchLabels: { app: "web" } }), (r) => r.ok);
    expect(valuesOf(first)).toEqual(["a", "b", "c"]);
    // A Pending or a wrong answer would be a guess on labels not kept: only the right one comes.
    const seen: ResolutionResult[] = [];
    const sub = resolver.watch(selector(late), (r) => seen.push(r));
    stops.push(async () => sub.close());
    await until("an answer", () => seen.length > 0);
    expect(seen.map(valuesOf)).toEqual([want]);
  });
});

describe("an object nobody reads", () => {
  it("keeps no uid; read later, it is read again and its result names its uid", async () => {
    const server = new FakeServer();
    server.put("a", {});
    server.put("deleting", {});
    server.objects.get("team-a/deleting")!.metadata!.deletionTimestamp = "2026-11-28T00:00:00Z";
    const cache = cacheOver(server);
    const handle = await syncedClaim(cache, ["app"]);
    const a = handle.get("team-a", "a")!;
    expect(a.reads).toBeUndefined();
    expect(a.metadata.uid).toBeUndefined();
    expect(a.metadata.resourceVersion).toBe("101");
    expect(a.metadata.labelKeys.has("app")).toBe(true);
    // A deletion timestamp is kept (and the uid with it): selection and status read it.
    expect(handle.get("team-a", "deleting")?.metadata.deletionTimestamp).toBe("2026-11-28T00:00:00Z");

    const resolver = new Resolver({ cache, discovery });
    stops.push(() => resolver.stop());
    let result: ResolutionResult | undefined;
    const ref = { apiVersion: "v1", kind: "ConfigMap", namespace: "team-a", name: "a", fieldPath: "data.v" };
    const sub = resolver.watch(ref as AnyReference, (r) => (result = r));
    stops.push(async () => sub.close());
    await until("a result", () => result !== undefined);
    expect(result).toMatchObject({
      ok: true,
      value: "a",
      source: { name: "a", uid: "uid-a", resourceVersion: "101" },
    });
    expect(handle.get("team-a", "a")?.metadata.uid).toBe("uid-a");
  });
});

/**
 * A server whose lists arrive item by item across turns of the event loop (as a large list does
 * over the network), and whose watch tells every change: a selector can compute in the middle of
 * a read of the kind.
 */
class StreamingServer extends FakeServer {
  private readonly watchers = new Set<(event: WatchEvent) => void>();

  change(name: string, labels: Record<string, string> | undefined, v = name): void {
    const type = this.objects.has(`team-a/${name}`) ? "MODIFIED" : "ADDED";
    this.put(name, labels ?? {}, v);
    const object = structuredClone(this.objects.get(`team-a/${name}`)!);
    for (const w of this.watchers) w({ type, object });
  }

  override async request<T>(method: string, path: string, options: RequestOptions = {}): Promise<T> {
    const body = await super.request<{ metadata: unknown; items: KubeObject[] }>(method, path, {
      ...options,
      onItem: undefined,
    });
    if (!options.onItem) return body as T;
    for (const item of body.items) {
      options.onItem(item);
      await nextTurn();
    }
    return { ...body, items: [] } as T;
  }

  override readonly watch = (
    _path: string,
    _query: unknown,
    onEvent: (e: WatchEvent) => void,
  ): WatchStream => {
    let end!: () => void;
    const done = new Promise<void>((resolve) => (end = resolve));
    this.watchers.add(onEvent);
    return {
      done,
      close: () => {
        this.watchers.delete(onEvent);
        end();
      },
    };
  };
}

describe("a selector joining a kind decoded without its label keys", () => {
  it("answers when objects it does not select are read again after it computed (the kind's informer lingering after a resolve by name)", async () => {
    const server = new StreamingServer();
    server.change("first", undefined, "first");
    const cache = new InformerSourceCache({ client: server, lingerMs: 10_000 });
    stops.push(() => cache.stop());
    const resolver = new Resolver({ cache, discovery, resolveTimeoutMs: 5_000 });
    stops.push(() => resolver.stop());
    const ref = {
      apiVersion: "v1",
      kind: "ConfigMap",
      namespace: "team-a",
      name: "first",
      fieldPath: "data.v",
    };
    expect((await resolver.resolve(ref)).value).toBe("first");
    // After the first request: two labelled (one of them afterwards), and some that are not.
    server.change("a-x", { app: "mixed" });
    server.change("a-y", undefined);
    server.change("a-y", { app: "mixed" });
    for (let i = 0; i < 5; i++) server.change(`z-${i}`, undefined);
    const many = await resolver.resolveSelector({
      apiVersion: "v1",
      kind: "ConfigMap",
      namespace: "team-a",
      matchLabels: { app: "mixed" },
      fieldPath: "data.v",
      mode: "Multiple",
    });
    expect(many.values).toEqual(["a-x", "a-y"]);
  }, 15_000);
});
