import type { KubeClient } from "../kube/client.ts";
import { silentLogger } from "../api/log.ts";
import { ShardGate } from "../runtime/shard-gate.ts";
import { ReferableCache } from "./cache.ts";
import { ReferableStates } from "./state.ts";

/** A client that is never asked: these caches are not started. */
const idle: Pick<KubeClient, "request" | "watch"> = {
  request: () => Promise.reject(new Error("not started")),
  watch: () => {
    throw new Error("not started");
  },
};

describe("ReferableCache", () => {
  it.each([
    { how: "one informer of every Referable", buckets: undefined, bySlot: false },
    { how: "by slot (16 buckets)", buckets: 16, bySlot: true },
    { how: "every Referable listed (12 buckets do not divide 1024)", buckets: 12, bySlot: false },
  ])("$how: a name not cached is undefined, never a throw", ({ buckets, bySlot }) => {
    const gate = buckets === undefined ? undefined : new ShardGate(buckets);
    const cache = new ReferableCache({
      client: idle,
      states: new ReferableStates(),
      logger: silentLogger,
      ...(gate && { serves: (name: string) => gate.admits(name), buckets: gate }),
    });
    expect(cache.bySlot).toBe(bySlot);
    expect(cache.get("missing")).toBeUndefined();
    expect(cache.raw("missing")).toBeUndefined();
    expect([...cache.list()]).toEqual([]);
    expect([...cache.listBucket(0)]).toEqual([]);
    expect(cache.size).toBe(0);
    expect(cache.state).toEqual({ phase: "Pending" });
    expect(cache.listing("missing")).toBe(false);
  });
});
