import type { InformerEvent } from "../informers/informer.ts";
import type { Projection } from "../informers/projection.ts";
import type { KindHandle, SourceCache } from "../informers/source-cache.ts";
import type { ResourceInfo } from "../kube/discovery.ts";
import { CONFIGMAPS } from "../../test/harness/fake-kube.ts";
import { KindIndex } from "./kind-index.ts";
import { compileRequest } from "./request.ts";
import { Sub } from "./subscription.ts";

/** A cache of our own interface that only hands out a handle. */
const cache = {
  acquire: () => ({ prune: () => undefined, release: () => undefined }) as unknown as KindHandle,
};
const NODES: ResourceInfo = { ...CONFIGMAPS, resource: "nodes", kind: "Node", namespaced: false };

function sub(namespace: string | undefined, name: string, kind = "ConfigMap"): Sub {
  return new Sub(
    compileRequest({ apiVersion: "v1", kind, namespace, name, fieldPath: "metadata.uid" }),
    () => undefined,
    () => undefined,
  );
}

/** The subscriptions an event of the object `namespace/name` reaches. */
function reached(index: KindIndex, namespace: string | undefined, name: string): Sub[] {
  const scheduled: Sub[] = [];
  (index as unknown as { schedule: (s: Sub) => void }).schedule = (s) => void scheduled.push(s);
  index.onEvent({ type: "MODIFIED", object: { metadata: { namespace, name } } } as InformerEvent<Projection>);
  return scheduled;
}

describe("KindIndex routes an object's event to the subscriptions that name it", () => {
  it("by namespace and name, one subscription or several, until they are removed", () => {
    const index = new KindIndex(cache as unknown as SourceCache, CONFIGMAPS, undefined, () => undefined);
    const [a, b, other, noNamespace] = [
      sub("ns", "db"),
      sub("ns", "db"),
      sub("ns2", "db"),
      sub(undefined, "db"),
    ];
    for (const s of [a, b, other, noNamespace]) index.add(s);
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
    const index = new KindIndex(cache as unknown as SourceCache, NODES, undefined, () => undefined);
    const node = sub("ignored", "n1", "Node");
    index.add(node);
    expect(reached(index, undefined, "n1")).toEqual([node]);
  });
});
