/**
 * `resolve(ref, { consistent: true })` and `resolveSelector(selector, { consistent: true })`
 * against the real API server: right after a write (label, unlabel, update, delete) the answer
 * reflects it, every time, even while the resolver's cache (kept warm by a subscription on the
 * same objects) may still hold the object as it was.
 */
import { isResolutionError, type GenericSelector, type Resolver } from "../../src/index.ts";
import { installTestCrd, uniqueName, testCrdSource } from "../harness/kube.ts";
import { useResolverScope } from "../harness/resolver-scope.ts";
import { ResultRecorder } from "../harness/recorder.ts";

const scope = useResolverScope("consistent");

/** Rounds of write-then-read: each one a chance for a stale cache to show. */
const ROUNDS = 15;

const cmPath = (name = "") => `/api/v1/namespaces/${scope.ns}/configmaps${name ? `/${name}` : ""}`;

async function patch(name: string, body: Record<string, unknown>) {
  await scope.admin.request("PATCH", cmPath(name), { body, contentType: "application/merge-patch+json" });
}

/** Keeps the scope.resolver's informer for ConfigMaps (and the reads of `ref`) warm, as a controller would. */
async function warm(ref: Parameters<Resolver["watch"]>[0]): Promise<{ close(): void; rec: ResultRecorder }> {
  const rec = new ResultRecorder();
  const sub = scope.resolver.watch(ref, rec.push);
  await rec.next("a first result that is not Pending", (r) => r.ok || r.error.reason !== "Pending");
  return { close: () => sub.close(), rec };
}

async function reasonOf(p: Promise<unknown>): Promise<string> {
  try {
    await p;
    return "resolved";
  } catch (err) {
    if (isResolutionError(err)) return err.reason;
    throw err;
  }
}

/** `data.host` of every ConfigMap labelled `tier`, none required. */
const hostsOfTier = (tier: string): GenericSelector => ({
  apiVersion: "v1",
  kind: "ConfigMap",
  namespace: scope.ns,
  matchLabels: { tier },
  fieldPath: "data.host",
  mode: "Multiple",
  minMatch: 0,
});

describe("a consistent read right after a write", () => {
  it("a label just added is matched by resolveSelector at once", async () => {
    const tier = uniqueName("tier");
    const selector = hostsOfTier(tier);
    const warmed = await warm(selector);
    try {
      const names: string[] = [];
      for (let i = 0; i < ROUNDS; i++) {
        const name = `${tier}-${i}`;
        await scope.createConfigMap(name, { host: name });
        await patch(name, { metadata: { labels: { tier } } });
        names.push(name);
        const got = await scope.resolver.resolveSelector(selector, { consistent: true });
        expect(got.sources.map((s) => s.name)).toEqual([...names].sort());
        expect(got.values).toEqual([...names].sort());
      }
    } finally {
      warmed.close();
    }
  }, 60_000);

  it("a label just removed, or an object just deleted, is not among the matches", async () => {
    const tier = uniqueName("tier");
    const selector = hostsOfTier(tier);
    const names = Array.from({ length: ROUNDS }, (_, i) => `${tier}-${String(i).padStart(2, "0")}`);
    for (const name of names) await scope.createConfigMap(name, { host: name }, { tier });
    const warmed = await warm(selector);
    try {
      // Every object is in the cache: the reads below could be answered (wrongly) from it.
      expect(warmed.rec.last).toMatchObject({ ok: true, values: names });
      const left = [...names];
      for (let i = 0; i < ROUNDS; i++) {
        const name = left.shift()!;
        if (i % 2 === 0) await patch(name, { metadata: { labels: { tier: null } } });
        else await scope.admin.request("DELETE", cmPath(name));
        const got = await scope.resolver.resolveSelector(selector, { consistent: true });
        expect(got.values).toEqual(left);
      }
    } finally {
      warmed.close();
    }
  }, 60_000);

  it("an update is seen by resolve at once", async () => {
    const name = uniqueName("cm");
    await scope.createConfigMap(name, { host: "v0" });
    const ref = { apiVersion: "v1", kind: "ConfigMap", namespace: scope.ns, name, fieldPath: "data.host" };
    const warmed = await warm(ref);
    try {
      for (let i = 1; i <= ROUNDS; i++) {
        await patch(name, { data: { host: `v${i}` } });
        expect(await scope.resolver.resolve(ref, { consistent: true })).toMatchObject({
          reason: "Available",
          value: `v${i}`,
          source: { name, namespace: scope.ns },
        });
      }
    } finally {
      warmed.close();
    }
  }, 60_000);

  it("an object just deleted is SourceNotFound at once, and one that never existed too", async () => {
    for (let i = 0; i < ROUNDS; i++) {
      const name = uniqueName("gone");
      await scope.createConfigMap(name, { host: "here" });
      const ref = { apiVersion: "v1", kind: "ConfigMap", namespace: scope.ns, name, fieldPath: "data.host" };
      const warmed = await warm(ref);
      try {
        expect(warmed.rec.last).toMatchObject({ ok: true, value: "here" });
        await scope.admin.request("DELETE", cmPath(name));
        expect(await reasonOf(scope.resolver.resolve(ref, { consistent: true }))).toBe("SourceNotFound");
      } finally {
        warmed.close();
      }
    }
    const never = {
      apiVersion: "v1",
      kind: "ConfigMap",
      namespace: scope.ns,
      name: uniqueName("never"),
      fieldPath: "data.host",
    };
    const started = performance.now();
    expect(await reasonOf(scope.resolver.resolve(never, { consistent: true }))).toBe("SourceNotFound");
    expect(performance.now() - started).toBeLessThan(5_000);
  }, 60_000);

  it("a kind whose CRD was installed after a miss is found (discovery is asked again)", async () => {
    const group = `${uniqueName("c")}.referable.dev`;
    const ref = testCrdSource(group, "Gadget", scope.ns, "g", "spec.size");
    expect(await reasonOf(scope.resolver.resolve(ref, { consistent: true }))).toBe("KindNotFound");
    await installTestCrd(scope.admin, group, "Gadget");
    await scope.admin.request("POST", `/apis/${group}/v1/namespaces/${scope.ns}/gadgets`, {
      body: { apiVersion: `${group}/v1`, kind: "Gadget", metadata: { name: "g" }, spec: { size: 3 } },
    });
    expect(await scope.resolver.resolve(ref, { consistent: true })).toMatchObject({ value: 3 });
    // A consistent read starts no informer.
    expect(scope.resolver.informerKeys().filter((k) => k.includes(group))).toEqual([]);
  }, 60_000);
});
