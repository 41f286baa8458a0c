import type { InformerEvent } from "../informers/informer.ts";
import { LabelKeys, NO_LABEL_KEYS } from "../informers/label-keys.ts";
import { projectMeta, type Projection } from "../informers/projection.ts";
import type { KindHandle, SourceCache } from "../informers/source-cache.ts";
import type { ResourceInfo } from "../kube/discovery.ts";
import { CONFIGMAPS } from "../../test/harness/fake-kube.ts";
import { KindIndex } from "./kind-index.ts";
import { compileRequest } from "./request.ts";
import { Sub } from "./subscription.ts";

/** A cache of our own interface that only hands out a handle. */
const cache = {
  acquire: () =>
    ({
      prune: () => undefined,
      release: () => undefined,
      addLabelKeys: () => true,
      removeLabelKeys: () => undefined,
    }) as unknown as KindHandle,
};
const NODES: ResourceInfo = { ...CONFIGMAPS, resource: "nodes", kind: "Node", namespaced: false };

function sub(namespace: string | undefined, name: string, kind = "ConfigMap"): Sub {
  return new Sub(
    compileRequest({ apiVersion: "v1", kind, namespace, name, fieldPath: "metadata.uid" }),
    () => undefined,
    () => undefined,
  );
}

/** A KindIndex of `resource` holding `subs`. */
function indexOf(resource: ResourceInfo, ...subs: Sub[]): KindIndex<Sub> {
  const index = new KindIndex<Sub>(cache as unknown as SourceCache, resource, undefined, () => undefined);
  for (const s of subs) index.add(s);
  return index;
}

/** The subscriptions a MODIFIED event of `object` (that was `old`) reaches. */
function reachedBy(index: KindIndex<Sub>, object: unknown, old?: Projection): Sub[] {
  const scheduled: Sub[] = [];
  (index as unknown as { schedule: (s: Sub) => void }).schedule = (s) => void scheduled.push(s);
  index.onEvent({ type: "MODIFIED", object, old } as InformerEvent<Projection>);
  return scheduled;
}

/** The subscriptions an event of the object `namespace/name` reaches. */
function reached(index: KindIndex<Sub>, namespace: string | undefined, name: string): Sub[] {
  return reachedBy(index, { metadata: { namespace, name } });
}

describe("KindIndex routes an object's event to the subscriptions that name it", () => {
  it("by namespace and name, one subscription or several, until they are removed", () => {
    const [a, b, other, noNamespace] = [
      sub("ns", "db"),
      sub("ns", "db"),
      sub("ns2", "db"),
      sub(undefined, "db"),
    ];
    const index = indexOf(CONFIGMAPS, a, b, other, noNamespace);
    expect(reached(index, "ns", "db")).toEqual([a, b]);
    expect(reached(index, "ns2", "db")).toEqual([other]);
    expect(reached(index, "ns", "web")).toEqual([]);
    index.remove(a);
    expect(reached(index, "ns", "db")).toEqual([b]);
    index.remove(b);
    index.remove(other);
    expect([reached(index, "ns", "db"), reached(index, "ns2", "db")]).toEqual([[], []]);
  });

  it("ignores a request's namespace for a cluster-scoped kind", () => {
    const node = sub("ignored", "n1", "Node");
    const index = indexOf(NODES, node);
    expect(reached(index, undefined, "n1")).toEqual([node]);
  });
});

describe("KindIndex routes an event to the selectors it may concern", () => {
  const selectorSub = (matchLabels: Record<string, string>) =>
    new Sub(
      compileRequest({
        apiVersion: "v1",
        kind: "ConfigMap",
        namespace: "ns",
        matchLabels,
        fieldPath: "data.v",
      }),
      () => undefined,
      () => undefined,
    );
  /** A projection of `ns/name` with `labels`, made keeping `keys`. */
  const projection = (name: string, labels: Record<string, string>, keys: LabelKeys) =>
    ({
      metadata: projectMeta({ metadata: { namespace: "ns", name, labels } }, { labelKeys: keys }),
    }) as Projection;

  it("those it matches now or matched before; not the others", () => {
    const [web, db] = [selectorSub({ app: "web" }), selectorSub({ app: "db" })];
    const index = indexOf(CONFIGMAPS, web, db);
    const keys = new LabelKeys(["app"]);
    expect(
      reachedBy(index, projection("o", { app: "web" }, keys), projection("o", { app: "web" }, keys)),
    ).toEqual([web]);
    expect(
      reachedBy(index, projection("o", { app: "db" }, keys), projection("o", { app: "web" }, keys)),
    ).toEqual([web, db]);
    expect(
      reachedBy(index, projection("o", { app: "x" }, keys), projection("o", { app: "x" }, keys)),
    ).toEqual([]);
  });

  it("every selector whose keys the object lacked before: read again, it decides now, matching or not", () => {
    const [web, tier] = [selectorSub({ app: "web" }), selectorSub({ tier: "gold" })];
    const index = indexOf(CONFIGMAPS, web, tier);
    const before = new LabelKeys(["tier"]);
    const now = new LabelKeys(["app", "tier"]);
    // Decoded keeping no label, read again keeping both: neither selector matches it, both hear.
    expect(
      reachedBy(index, projection("o", { app: "x" }, now), projection("o", { app: "x" }, NO_LABEL_KEYS)),
    ).toEqual([web, tier]);
    // Decoded keeping "tier" only: the selector on "app" could not judge it; the one on "tier" could.
    expect(
      reachedBy(index, projection("o", { app: "x" }, now), projection("o", { app: "x" }, before)),
    ).toEqual([web]);
  });
});
