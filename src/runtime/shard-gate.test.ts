import { DONE, type Result } from "./reconciler.ts";
import { MAX_BUCKETS, ShardGate } from "./shard-gate.ts";

/** A reconciler whose reconciles end when the test says so. */
function heldReconciler() {
  const calls: string[] = [];
  const finish = new Map<string, () => void>();
  return {
    calls,
    finish: (key: string) => finish.get(key)?.(),
    reconciler: {
      reconcile: (key: string) =>
        new Promise<Result>((resolve) => {
          calls.push(key);
          finish.set(key, () => resolve({ requeueAfterMs: 5 }));
        }),
    },
  };
}

/** A key of `bucket` among `buckets`. */
function keyOf(gate: ShardGate, bucket: number): string {
  for (let i = 0; ; i++) if (gate.bucketOf(`key-${i}`) === bucket) return `key-${i}`;
}

const flush = () => new Promise<void>((resolve) => setImmediate(resolve));
/** A signal no test aborts. */
const signal = new AbortController().signal;

describe("ShardGate", () => {
  it.each([
    { reason: "zero buckets", buckets: 0 },
    { reason: "more than the bound", buckets: MAX_BUCKETS + 1 },
    { reason: "a fraction", buckets: 1.5 },
  ])("refuses $reason", ({ buckets }) => {
    expect(() => new ShardGate(buckets)).toThrow(/whole number from 1 to 1024/);
  });

  it("admits only the keys of buckets served, and answers the others done without a call", async () => {
    const gate = new ShardGate(4);
    const held = heldReconciler();
    const wrapped = gate.wrap(held.reconciler);
    const served = keyOf(gate, 1);
    const other = keyOf(gate, 2);
    gate.add(1);
    expect([gate.admits(served), gate.admits(other)]).toEqual([true, false]);
    await expect(wrapped.reconcile(other, signal)).resolves.toBe(DONE);
    const running = wrapped.reconcile(served, signal);
    held.finish(served);
    await expect(running).resolves.toEqual({ requeueAfterMs: 5 });
    expect(held.calls).toEqual([served]);
  });

  it("gives a bucket back only after its running reconciles end, then tells the listeners", async () => {
    const gate = new ShardGate(4);
    const events: string[] = [];
    gate.listen({
      onBucketAdded: (b) => events.push(`added ${b}`),
      onBucketRemoved: (b) => events.push(`removed ${b}`),
    });
    const held = heldReconciler();
    const wrapped = gate.wrap(held.reconciler);
    const key = keyOf(gate, 3);
    gate.add(3);
    const running = wrapped.reconcile(key, signal);
    let removed = false;
    const removing = gate.remove(3).then(() => (removed = true));
    await flush();
    // No longer admitted at once, but not given back while its reconcile runs.
    expect({ admits: gate.admits(key), removed, events }).toEqual({
      admits: false,
      removed: false,
      events: ["added 3"],
    });
    held.finish(key);
    await running;
    await removing;
    expect(events).toEqual(["added 3", "removed 3"]);
  });

  it("keeps a bucket added back while it drained, without telling the listeners it went", async () => {
    const gate = new ShardGate(2);
    const events: string[] = [];
    gate.listen({ onBucketRemoved: (b) => events.push(`removed ${b}`) });
    const held = heldReconciler();
    const key = keyOf(gate, 0);
    gate.add(0);
    const running = gate.wrap(held.reconciler).reconcile(key, signal);
    const removing = gate.remove(0);
    gate.add(0);
    held.finish(key);
    await running;
    await removing;
    expect({ admits: gate.admits(key), events }).toEqual({ admits: true, events: [] });
  });

  it("survives a listener that throws", () => {
    const gate = new ShardGate(2);
    gate.listen({
      onBucketAdded: () => {
        throw new Error("boom");
      },
    });
    expect(() => gate.add(1)).not.toThrow();
    expect(gate.held.has(1)).toBe(true);
  });
});
