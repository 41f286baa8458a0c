/**
 * The library's host helper, `createReferenceController`, against the real API server with RBAC
 * on: it lists and watches the objects with the library's own informer, keeps one subscription
 * per reference an object names, runs the reconcile on the controller's runtime (a push or an
 * event only queues the key; a throw is retried on the per-object backoff; requeueAfterMs comes
 * back), and refuses to start when the list is refused for good.
 */
import {
  createReferenceController,
  type GenericReference,
  type ReferenceController,
  type ReferenceControllerOptions,
} from "../../src/index.ts";
import type { KubeClient } from "../../src/kube/client.ts";
import type { WatchCallback } from "../../src/resolver/subscription.ts";
import {
  adminClient,
  closeTestClients,
  createConfigMap,
  createNamespace,
  kubeConfigWithToken,
  mergePatch,
  serviceAccountToken,
  testKubeConfig,
  uniqueName,
  waitFor,
} from "../harness/kube.ts";

type ConfigMap = { metadata: { name: string; namespace: string }; data?: Record<string, string> };

let admin: KubeClient;
let ns: string;

beforeAll(async () => {
  admin = adminClient();
  ns = await createNamespace(admin, "host-controller");
});
afterAll(async () => {
  await admin.request("DELETE", `/api/v1/namespaces/${ns}`).catch(() => undefined);
  await closeTestClients();
});

/** A resolver that records each subscription and lets the test push to it. */
function fakeResolver() {
  const open = new Map<string, WatchCallback>();
  return {
    open,
    watch: (ref: GenericReference, callback: WatchCallback) => {
      open.set(ref.name ?? "", callback);
      return { current: undefined, close: () => void open.delete(ref.name ?? "") };
    },
    push: (name: string) => open.get(name)?.({ ok: false, error: new Error("pushed") } as never),
  };
}

const refTo = (name: string): GenericReference => ({
  apiVersion: "v1",
  kind: "ConfigMap",
  namespace: ns,
  name,
  fieldPath: "data.v",
});

/** A controller of the ConfigMaps of `ns`, as the admin, with no references unless `options` say otherwise. */
function configMapController(
  options: Partial<ReferenceControllerOptions<ConfigMap>> &
    Pick<ReferenceControllerOptions<ConfigMap>, "reconcile">,
): ReferenceController {
  return createReferenceController<ConfigMap>({
    kubeConfig: testKubeConfig(),
    resolver: fakeResolver(),
    group: "",
    version: "v1",
    plural: "configmaps",
    namespace: ns,
    referencesOf: () => [],
    ...options,
  });
}

describe("createReferenceController", () => {
  let loop: ReferenceController | undefined;
  afterEach(async () => {
    await loop?.stop();
    loop = undefined;
  });

  it("reconciles each object, again on its event and on a push, retries a throw, and follows its references", async () => {
    const name = uniqueName("host");
    await createConfigMap(admin, ns, name, { ref: "first", v: "1" });
    const resolver = fakeResolver();
    const seen: string[] = [];
    let failOnce = true;
    loop = configMapController({
      resolver,
      backoffMs: [20, 200],
      referencesOf: (cm) => (cm.data?.ref ? [refTo(cm.data.ref)] : []),
      reconcile: async (cm) => {
        if (cm.metadata.name !== name) return;
        seen.push(cm.data?.v ?? "");
        if (cm.data?.v === "2" && failOnce) {
          failOnce = false;
          throw new Error("a failure the backoff retries");
        }
      },
    });
    await loop.start();
    await waitFor("the listed object reconciled", () => seen.includes("1"));
    expect(loop.subscriptionsOf(ns, name)).toBe(1);
    expect([...resolver.open.keys()]).toEqual(["first"]);

    // An event: reconciled with the new version; the throw is retried with backoff.
    await mergePatch(admin, `/api/v1/namespaces/${ns}/configmaps/${name}`, {
      data: { v: "2", ref: "second" },
    });
    await waitFor("the failed reconcile retried", () => seen.filter((v) => v === "2").length >= 2);
    expect([...resolver.open.keys()]).toEqual(["second"]);

    // A push only queues the key: the object as cached is reconciled again.
    const before = seen.length;
    resolver.push("second");
    await waitFor("the push reconciled", () => seen.length > before);

    await admin.request("DELETE", `/api/v1/namespaces/${ns}/configmaps/${name}`);
    await waitFor("the subscription closed with the object", () => loop!.subscriptionsOf(ns, name) === 0);
  });

  it("asks again after requeueAfterMs, and aborts the signal on stop", async () => {
    const name = uniqueName("again");
    await createConfigMap(admin, ns, name, { v: "1" });
    let runs = 0;
    let aborted: AbortSignal | undefined;
    loop = configMapController({
      reconcile: async (cm, signal) => {
        if (cm.metadata.name !== name) return;
        aborted = signal;
        return ++runs < 3 ? { requeueAfterMs: 10 } : undefined;
      },
    });
    await loop.start();
    await waitFor("three runs, two of them asked for", () => runs >= 3);
    await loop.stop();
    loop = undefined;
    expect(aborted?.aborted).toBe(true);
  });

  it("refuses to start when the list is forbidden (RBAC), naming the resource", async () => {
    const token = await serviceAccountToken(admin, ns, uniqueName("nobody"));
    const refused = configMapController({
      kubeConfig: kubeConfigWithToken(token),
      reconcile: async () => undefined,
    });
    await expect(refused.start()).rejects.toThrow(/could not list configmaps: .*forbidden/);
    expect(refused.subscriptionsOf(ns, "x")).toBe(0);
  });
});
