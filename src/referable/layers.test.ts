import type { Informer, InformerEvent, InformerListener, InformerState } from "../informers/informer.ts";
import type { KubeObject } from "../kube/client.ts";
import { SlotLayers } from "./layers.ts";

/** An informer of our own small interface: its store set by hand, its events as an informer emits them. */
class FakeLayer {
  readonly store = new Map<string, KubeObject>();
  state: InformerState = { phase: "Pending" };
  started = false;
  stopped = false;
  private readonly listeners: InformerListener[] = [];
  private settled: Array<() => void> = [];

  readonly selector: string;

  constructor(selector: string) {
    this.selector = selector;
  }

  get(_ns: string | undefined, name: string): KubeObject | undefined {
    return this.store.get(name);
  }
  list(): Iterable<KubeObject> {
    return this.store.values();
  }
  addListener(listener: InformerListener): void {
    this.listeners.push(listener);
  }
  whenSettled(): Promise<void> {
    return this.state.phase === "Pending"
      ? new Promise((resolve) => this.settled.push(resolve))
      : Promise.resolve();
  }
  start(): void {
    this.started = true;
  }
  async stop(): Promise<void> {
    this.stopped = true;
  }
  put(name: string, version: string): KubeObject {
    const obj = { metadata: { name, resourceVersion: version } } as KubeObject;
    const old = this.store.get(name);
    this.store.set(name, obj);
    this.emit({ type: old ? "MODIFIED" : "ADDED", object: obj, old });
    return obj;
  }
  remove(name: string): void {
    const old = this.store.get(name)!;
    this.store.delete(name);
    this.emit({ type: "DELETED", object: old, old });
  }
  sync(): void {
    this.state = { phase: "Synced" };
    for (const l of this.listeners) l.onState(this.state);
    for (const resolve of this.settled.splice(0)) resolve();
  }
  private emit(event: InformerEvent): void {
    for (const l of this.listeners) l.onEvent(event);
  }
}

/** Bucket of a name: its last character's digit, of two buckets. */
const bucketOf = (name: string) => Number(name.at(-1)) % 2;

function layers() {
  const made: FakeLayer[] = [];
  const store = new SlotLayers(
    (selector) => {
      const layer = new FakeLayer(selector);
      made.push(layer);
      return layer as unknown as Informer;
    },
    bucketOf,
    (bucket) => `bucket-${bucket}`,
    "stray",
    "view",
    (obj) => misplaced.push(obj.metadata?.name ?? ""),
  );
  const misplaced: string[] = [];
  const events: string[] = [];
  const states: string[] = [];
  store.addListener({
    onEvent: (e) => events.push(`${e.type} ${e.object.metadata?.name}@${e.object.metadata?.resourceVersion}`),
    onState: (s) => states.push(s.phase),
  });
  const [stray, view] = made as [FakeLayer, FakeLayer];
  const bucket = (selector: string) => made.find((l) => l.selector === selector)!;
  /** Opens bucket `b`, its list in at once (empty). */
  const opened = (b: number) => {
    void store.openBucket(b);
    const layer = bucket(`bucket-${b}`);
    layer.sync();
    return layer;
  };
  return { store, stray, view, bucket, opened, events, states, misplaced };
}

describe("SlotLayers: one store over the buckets served, the stray watch and the graph view", () => {
  it("is synced once the stray watch and the view are, before any bucket is open", async () => {
    const { store, stray, view, states } = layers();
    store.start();
    expect(stray.started && view.started).toBe(true);
    const settled = store.whenSettled();
    stray.sync();
    expect(store.state.phase).toBe("Pending");
    view.sync();
    await settled;
    expect(store.state.phase).toBe("Synced");
    expect(states).toEqual(["Synced"]);
  });

  it("a name's object is its bucket's, else the stray watch's, else the view's, with one event per change of it", async () => {
    const { store, stray, view, bucket, events } = layers();
    view.put("r0", "1");
    const opened = store.openBucket(0);
    const b0 = bucket("bucket-0");
    expect(store.listing("r0")).toBe(true);
    const whole = b0.put("r0", "2");
    b0.sync();
    await opened;
    expect(store.listing("r0")).toBe(false);
    expect(store.get("r0")).toBe(whole);
    // The view's echo of a name held whole: no event (the bucket's informer has its own).
    view.put("r0", "3");
    b0.put("r0", "3");
    stray.put("r1", "4");
    expect(events).toEqual(["ADDED r0@1", "MODIFIED r0@2", "MODIFIED r0@3", "ADDED r1@4"]);
    expect([...store.list()].map((o) => o.metadata?.name).sort()).toEqual(["r0", "r1"]);
    expect([...store.listBucket(0)].map((o) => o.metadata?.name)).toEqual(["r0"]);
    expect([...store.listBucket(1)].map((o) => o.metadata?.name)).toEqual(["r1"]);
  });

  it("a stray Referable labelled into a bucket moves without a second copy, in either order of the two watches", async () => {
    const { stray, opened, events } = layers();
    const b0 = opened(0);
    stray.put("r0", "1");
    b0.put("r0", "2");
    stray.remove("r0");
    stray.put("r2", "3");
    stray.remove("r2");
    b0.put("r2", "4");
    expect(events).toEqual(["ADDED r0@1", "MODIFIED r0@2", "ADDED r2@3", "DELETED r2@3", "ADDED r2@4"]);
  });

  it("a bucket given back: its Referables fall back to the view's records or leave, without events after", async () => {
    const { store, view, opened, events } = layers();
    const b0 = opened(0);
    view.put("r0", "1");
    b0.put("r0", "1");
    b0.put("r2", "1");
    events.length = 0;
    await store.closeBucket(0);
    expect(b0.stopped).toBe(true);
    expect(events).toEqual(["MODIFIED r0@1", "DELETED r2@1"]);
    expect(store.get("r0")).toBe(view.get(undefined, "r0"));
    expect(store.get("r2")).toBeUndefined();
    // A late event of the closed informer, still stopping: nothing.
    b0.put("r4", "2");
    expect(events).toHaveLength(2);
    expect(store.listing("r4")).toBe(false);
  });

  it("a Referable whose slot label names another bucket's slot is told of, and kept out of the store", async () => {
    const { store, opened, events, misplaced } = layers();
    const b1 = opened(1);
    b1.put("r0", "1");
    b1.put("r0", "2");
    b1.remove("r0");
    expect(misplaced).toEqual(["r0", "r0"]);
    expect(events).toEqual([]);
    b1.put("r0", "3");
    b1.put("r1", "4");
    expect(store.get("r0")).toBeUndefined();
    expect([...store.list()].map((o) => o.metadata?.name)).toEqual(["r1"]);
    expect([...store.listBucket(1)].map((o) => o.metadata?.name)).toEqual(["r1"]);
    // Given back: only what was in the store leaves it.
    events.length = 0;
    await store.closeBucket(1);
    expect(events).toEqual(["DELETED r1@4"]);
  });
});
