/**
 * The library as a consumer uses it, calls mixed against the real API server: by name, by
 * selector (Single and Multiple), `watch`, `close`, `resolve` again, with objects created,
 * labelled and relabelled after the first request, in several namespaces of one kind.
 *
 * Each test makes its resolver as docs/library.md does (`createResolver({ kubeConfig })`, the
 * library's defaults: an informer nobody uses lingers 10 s), so a selector often joins a kind
 * whose objects were decoded before its label keys were kept. Each namespace also holds large
 * ConfigMaps that sort after the test's own objects: reading the kind again then takes several
 * pages, and a selector computes between them. Before the fix, a selector that met an object
 * whose labels were not kept waited for that object to be read again, but the read of an object
 * it does not select never reached it: `resolveSelector` rejected `Pending` after its timeout.
 */
import { createResolver, type Resolver } from "../../src/resolver/resolver.ts";
import type { GenericReference, GenericSelector, ResolutionResult } from "../../src/resolver/types.ts";
import type { KubeClient } from "../../src/kube/client.ts";
import {
  adminClient,
  closeTestClients,
  createConfigMap,
  createNamespace,
  mergePatch,
  testKubeConfig,
  uniqueName,
} from "../harness/kube.ts";
import { ResultRecorder, reasonOf } from "../harness/recorder.ts";

/** Generous for a loaded machine, well under the default 30 s a hang would take. */
const RESOLVE_TIMEOUT_MS = 15_000;
const TEST_MS = 90_000;
/** Large ConfigMaps per namespace: 10 MB, so reading the namespace again takes several pages. */
const FILLERS = 20;
const FILLER_BYTES = 500_000;

let admin: KubeClient;
const resolvers: Resolver[] = [];

beforeAll(() => {
  admin = adminClient();
});
afterAll(async () => {
  for (const r of resolvers) await r.stop();
  await closeTestClients();
});

/** A resolver as a library user makes one: only the kubeConfig (and a shorter resolve timeout). */
function newResolver(): Resolver {
  const resolver = createResolver({ kubeConfig: testKubeConfig(), resolveTimeoutMs: RESOLVE_TIMEOUT_MS });
  resolvers.push(resolver);
  return resolver;
}

/**
 * A new resolver whose first request is by name, for a ConfigMap of `ns` created just before it:
 * what the calls after it mix with (the informer it starts serves them).
 */
async function resolverAfterFirstRequest(ns: string): Promise<Resolver> {
  const resolver = newResolver();
  const first = uniqueName("a-first");
  await createConfigMap(admin, ns, first, { v: "first" });
  expect((await resolver.resolve(byName(ns, first))).value).toBe("first");
  return resolver;
}

/** A namespace of the test's own, with the large unlabelled ConfigMaps that sort after its objects. */
async function namespaceWithFillers(prefix: string): Promise<string> {
  const ns = await createNamespace(admin, prefix);
  const big = "z".repeat(FILLER_BYTES);
  for (let i = 0; i < FILLERS; i += 5)
    await Promise.all(
      Array.from({ length: 5 }, (_, j) => createConfigMap(admin, ns, `zz-filler-${i + j}`, { v: big })),
    );
  return ns;
}

const byName = (namespace: string, name: string): GenericReference => ({
  apiVersion: "v1",
  kind: "ConfigMap",
  namespace,
  name,
  fieldPath: "data.v",
});

const selector = (
  namespace: string,
  matchLabels: Record<string, string>,
  mode: "Single" | "Multiple" = "Multiple",
): GenericSelector => ({
  apiVersion: "v1",
  kind: "ConfigMap",
  namespace,
  matchLabels,
  fieldPath: "data.v",
  mode,
});

const labelsPath = (ns: string, name: string) => `/api/v1/namespaces/${ns}/configmaps/${name}`;
const relabel = (ns: string, name: string, labels: Record<string, string | null>) =>
  mergePatch(admin, labelsPath(ns, name), { metadata: { labels } });

/**
 * Waits (with a deadline) until `resolver`'s cache holds `name` with value `v`, by a watch by
 * name, closed after: what a consumer's own by-name reads do, and what makes the next call see
 * every object created before it (the watch delivers in order).
 */
async function seen(resolver: Resolver, ns: string, name: string, v: string): Promise<void> {
  const rec = new ResultRecorder();
  const sub = resolver.watch(byName(ns, name), rec.push);
  try {
    await rec.next(`${ns}/${name} = ${v}`, (r) => r.ok && "value" in r && r.value === v, 20_000);
  } finally {
    sub.close();
  }
}

const valuesOf = (r: ResolutionResult) => (r.ok && "values" in r ? r.values : undefined);

describe("a consumer mixing calls on one kind", () => {
  it(
    "resolves by name, then a Multiple selector over ConfigMaps created and labelled after the first request",
    async () => {
      const ns = await namespaceWithFillers("mixed-multiple");
      const resolver = await resolverAfterFirstRequest(ns);

      // After the first request: two created with the label, one created bare and labelled.
      const [x, y, z] = [uniqueName("b-x"), uniqueName("b-y"), uniqueName("b-z")];
      await createConfigMap(admin, ns, x, { v: "x" }, { app: "mixed" });
      await createConfigMap(admin, ns, y, { v: "y" }, { app: "mixed" });
      await createConfigMap(admin, ns, z, { v: "z" });
      await relabel(ns, z, { app: "mixed" });
      await seen(resolver, ns, z, "z");

      const many = await resolver.resolveSelector(selector(ns, { app: "mixed" }));
      expect(many.values).toEqual([x, y, z].sort().map((n) => n.split("-")[1]));
      expect(many.sources.map((s) => s.name)).toEqual([x, y, z].sort());
      // And by name again, on the same informer.
      expect((await resolver.resolve(byName(ns, y))).value).toBe("y");
    },
    TEST_MS,
  );

  it(
    "resolves by name, then a Single selector on an object labelled after it; relabelled away and onto another, a watch follows",
    async () => {
      const ns = await namespaceWithFillers("mixed-single");
      const resolver = await resolverAfterFirstRequest(ns);

      const [one, two] = [uniqueName("b-one"), uniqueName("b-two")];
      await createConfigMap(admin, ns, one, { v: "one" });
      await createConfigMap(admin, ns, two, { v: "two" }, { role: "standby" });
      await relabel(ns, one, { role: "primary" });
      await seen(resolver, ns, two, "two");
      await seen(resolver, ns, one, "one");

      const single = await resolver.resolveSelector(selector(ns, { role: "primary" }, "Single"));
      expect(single.values).toEqual(["one"]);

      const rec = new ResultRecorder();
      const sub = resolver.watch(selector(ns, { role: "primary" }, "Single"), rec.push);
      try {
        await rec.next("one", (r) => r.ok && "value" in r && r.value === "one");
        // Relabelled away: nothing matches.
        await relabel(ns, one, { role: "retired" });
        await rec.reason("SourceNotFound");
        // Another relabelled onto it.
        await relabel(ns, two, { role: "primary" });
        await rec.next("two", (r) => r.ok && "value" in r && r.value === "two");
      } finally {
        sub.close();
      }
      // resolve again after close, by selector and by name.
      expect((await resolver.resolveSelector(selector(ns, { role: "primary" }, "Single"))).values).toEqual([
        "two",
      ]);
      expect((await resolver.resolve(byName(ns, one))).value).toBe("one");
    },
    TEST_MS,
  );

  it(
    "keeps a watch by name open while a selector's watch joins, closes them in turn, and resolves again",
    async () => {
      const ns = await namespaceWithFillers("mixed-watch");
      const resolver = newResolver();
      const first = uniqueName("a-first");
      await createConfigMap(admin, ns, first, { v: "first" });
      const named = new ResultRecorder();
      const nameSub = resolver.watch(byName(ns, first), named.push);
      try {
        await named.next("first", (r) => r.ok && "value" in r && r.value === "first");
        const [p, q] = [uniqueName("b-p"), uniqueName("b-q")];
        await createConfigMap(admin, ns, p, { v: "p" }, { tier: "gold" });
        await createConfigMap(admin, ns, q, { v: "q" });
        await seen(resolver, ns, q, "q");

        const selected = new ResultRecorder();
        const selSub = resolver.watch(selector(ns, { tier: "gold" }), selected.push);
        try {
          const firstValues = await selected.next(
            "[p]",
            (r) => JSON.stringify(valuesOf(r)) === JSON.stringify(["p"]),
            RESOLVE_TIMEOUT_MS,
          );
          expect(firstValues.ok).toBe(true);
          // Every result it pushed before the answer was Pending, never a guess.
          expect(
            selected.results
              .slice(0, -1)
              .map(reasonOf)
              .filter((r) => r !== "Pending"),
          ).toEqual([]);
          nameSub.close();
          await relabel(ns, q, { tier: "gold" });
          await selected.next("[p, q]", (r) => JSON.stringify(valuesOf(r)) === JSON.stringify(["p", "q"]));
          await mergePatch(admin, labelsPath(ns, first), { data: { v: "changed" } });
        } finally {
          selSub.close();
        }
        await seen(resolver, ns, first, "changed");
        expect((await resolver.resolve(byName(ns, first))).value).toBe("changed");
        expect((await resolver.resolveSelector(selector(ns, { tier: "gold" }))).values).toEqual(["p", "q"]);
      } finally {
        nameSub.close();
      }
    },
    TEST_MS,
  );

  it(
    "serves several namespaces of one kind from one informer: by name in one, selectors in both, each sees only its own",
    async () => {
      const [nsA, nsB] = [await namespaceWithFillers("mixed-ns-a"), await namespaceWithFillers("mixed-ns-b")];
      const resolver = await resolverAfterFirstRequest(nsA);

      const [a1, b1, b2] = [uniqueName("b-a1"), uniqueName("b-b1"), uniqueName("b-b2")];
      await createConfigMap(admin, nsA, a1, { v: "a1" }, { team: "blue" });
      await createConfigMap(admin, nsB, b1, { v: "b1" }, { team: "blue" });
      await createConfigMap(admin, nsB, b2, { v: "b2" });
      await relabel(nsB, b2, { team: "blue" });
      await seen(resolver, nsB, b2, "b2");
      await seen(resolver, nsA, a1, "a1");

      expect((await resolver.resolveSelector(selector(nsB, { team: "blue" }))).values).toEqual(["b1", "b2"]);
      expect((await resolver.resolveSelector(selector(nsA, { team: "blue" }))).values).toEqual(["a1"]);
      expect(resolver.informerKeys()).toEqual(["/v1/configmaps@*"]);
    },
    TEST_MS,
  );
});
