import { jest } from "@jest/globals";
import type { KubeClient, RequestOptions, WatchEvent, WatchStream } from "../kube/client.ts";
import type { ResourceInfo } from "../kube/discovery.ts";
import { Informer } from "./informer.ts";
import { InformerPool, informerKey } from "./pool.ts";
import { CONFIGMAPS } from "../../test/harness/fake-kube.ts";

const configMaps = CONFIGMAPS;
const secrets: ResourceInfo = { ...configMaps, resource: "secrets", kind: "Secret" };
const widgetsV1: ResourceInfo = { ...configMaps, group: "example.com", resource: "widgets", kind: "Widget" };
const widgetsV2: ResourceInfo = { ...widgetsV1, version: "v2" };
const nodes: ResourceInfo = { ...configMaps, resource: "nodes", kind: "Node", namespaced: false };

/** Lists nothing and keeps every watch open until it is closed; counts what is open. */
class QuietKube implements Pick<KubeClient, "request" | "watch"> {
  lists = 0;
  openWatches = 0;

  async request<T>(_method: string, _path: string, _options?: RequestOptions): Promise<T> {
    this.lists++;
    return { metadata: { resourceVersion: "1" }, items: [] } as T;
  }

  watch(_path: string, _query: RequestOptions["query"], _onEvent: (event: WatchEvent) => void): WatchStream {
    this.openWatches++;
    let close!: () => void;
    const done = new Promise<void>((resolve) => (close = resolve));
    let closed = false;
    return {
      done,
      close: () => {
        if (closed) return;
        closed = true;
        this.openWatches--;
        close();
      },
    };
  }
}

let stopSpy: jest.SpiedFunction<Informer["stop"]>;
/** The informers stopped so far. */
const stopped = () => stopSpy.mock.contexts as Informer[];

let pool: InformerPool | undefined;

function newPool(lingerMs: number) {
  const kube = new QuietKube();
  pool = new InformerPool({ client: kube, lingerMs });
  return { kube, pool };
}

beforeEach(() => {
  jest.useFakeTimers();
  stopSpy = jest.spyOn(Informer.prototype, "stop");
});

afterEach(async () => {
  await pool?.stop();
  pool = undefined;
  jest.useRealTimers();
  jest.restoreAllMocks();
});

describe("InformerPool sharing", () => {
  const cases: {
    reason: string;
    a: [ResourceInfo, string | undefined];
    b: [ResourceInfo, string | undefined];
    shared: boolean;
  }[] = [
    { reason: "same resource, same namespace", a: [configMaps, "x"], b: [configMaps, "x"], shared: true },
    {
      reason: "same resource, every namespace",
      a: [configMaps, undefined],
      b: [configMaps, undefined],
      shared: true,
    },
    {
      reason: "a namespaced resource in two namespaces",
      a: [configMaps, "x"],
      b: [configMaps, "y"],
      shared: false,
    },
    {
      reason: "a namespaced resource in one namespace and in all",
      a: [configMaps, "x"],
      b: [configMaps, undefined],
      shared: false,
    },
    {
      reason: "a cluster-scoped resource ignores the namespace",
      a: [nodes, "x"],
      b: [nodes, "y"],
      shared: true,
    },
    {
      reason: "a cluster-scoped resource with and without one",
      a: [nodes, "x"],
      b: [nodes, undefined],
      shared: true,
    },
    { reason: "two resources of one group version", a: [configMaps, "x"], b: [secrets, "x"], shared: false },
    { reason: "one resource in two versions", a: [widgetsV1, "x"], b: [widgetsV2, "x"], shared: false },
  ];

  it.each(cases)("$reason: shared=$shared", ({ a, b, shared }) => {
    const { pool } = newPool(0);
    const first = pool.acquire(...a);
    const second = pool.acquire(...b);
    expect(first.informer === second.informer).toBe(shared);
    expect(pool.size).toBe(shared ? 1 : 2);
    expect(informerKey(...a) === informerKey(...b)).toBe(shared);
  });

  it("a cluster-scoped informer has no namespace", () => {
    const { pool } = newPool(0);
    expect(pool.acquire(nodes, "x").informer.namespace).toBeUndefined();
    expect(pool.keys()).toEqual(["/v1/nodes@*"]);
  });

  it("starts each informer once, however many hold it", async () => {
    const { kube, pool } = newPool(0);
    const leases = [
      pool.acquire(configMaps, "x"),
      pool.acquire(configMaps, "x"),
      pool.acquire(configMaps, "x"),
    ];
    await leases[0]!.informer.whenSettled();
    await jest.advanceTimersByTimeAsync(0);
    expect(kube.lists).toBe(1);
    expect(kube.openWatches).toBe(1);
  });
});

describe("InformerPool reference counting and linger", () => {
  it("with lingerMs 0, stops the informer when the last holder releases it, not before", async () => {
    const { kube, pool } = newPool(0);
    const a = pool.acquire(configMaps, "x");
    const b = pool.acquire(configMaps, "x");
    await a.informer.whenSettled();
    await jest.advanceTimersByTimeAsync(0);
    expect(kube.openWatches).toBe(1);

    a.release();
    expect(pool.size).toBe(1);
    expect(stopped()).toEqual([]);

    b.release();
    expect(pool.size).toBe(0);
    expect(stopped()).toEqual([b.informer]);
    expect(kube.openWatches).toBe(0); // the watch is closed at once
  });

  it("with lingerMs > 0, keeps the informer until the linger timer fires", async () => {
    const { pool } = newPool(1_000);
    const lease = pool.acquire(configMaps, "x");
    lease.release();
    await jest.advanceTimersByTimeAsync(999);
    expect(pool.size).toBe(1);
    expect(stopped()).toEqual([]);
    await jest.advanceTimersByTimeAsync(1);
    expect(pool.size).toBe(0);
    expect(stopped()).toEqual([lease.informer]);
  });

  it("re-acquiring during the linger keeps the same informer and cancels its stop", async () => {
    const { kube, pool } = newPool(1_000);
    const first = pool.acquire(configMaps, "x");
    await first.informer.whenSettled();
    first.release();
    await jest.advanceTimersByTimeAsync(500);
    const again = pool.acquire(configMaps, "x");
    expect(again.informer).toBe(first.informer);
    await jest.advanceTimersByTimeAsync(5_000);
    expect(pool.size).toBe(1);
    expect(stopped()).toEqual([]);
    expect(kube.lists).toBe(1); // no relist for the user that came back

    // Its own release lingers afresh.
    again.release();
    await jest.advanceTimersByTimeAsync(999);
    expect(pool.size).toBe(1);
    await jest.advanceTimersByTimeAsync(1);
    expect(stopped()).toEqual([first.informer]);
  });

  it("after a stop, acquiring the same key starts a new informer", () => {
    const { pool } = newPool(0);
    const first = pool.acquire(configMaps, "x");
    first.release();
    const second = pool.acquire(configMaps, "x");
    expect(second.informer).not.toBe(first.informer);
    expect(pool.size).toBe(1);
  });

  it("releasing a lease twice counts once", () => {
    const { pool } = newPool(0);
    const a = pool.acquire(configMaps, "x");
    const b = pool.acquire(configMaps, "x");
    a.release();
    a.release();
    expect(pool.size).toBe(1);
    expect(stopped()).toEqual([]);
    b.release();
    expect(stopped()).toEqual([b.informer]);
  });

  it("releasing informers of other keys leaves each alone", () => {
    const { pool } = newPool(0);
    const x = pool.acquire(configMaps, "x");
    const y = pool.acquire(configMaps, "y");
    x.release();
    expect(pool.keys()).toEqual(["/v1/configmaps@y"]);
    expect(stopped()).toEqual([x.informer]);
    expect(y.informer.namespace).toBe("y");
  });
});

describe("InformerPool.stop", () => {
  it("stops every informer, lingering ones included, and refuses new claims", async () => {
    const { kube, pool } = newPool(1_000);
    const held = pool.acquire(configMaps, "x");
    const lingering = pool.acquire(nodes);
    await held.informer.whenSettled();
    await lingering.informer.whenSettled();
    await jest.advanceTimersByTimeAsync(0);
    lingering.release();

    await pool.stop();
    expect(pool.size).toBe(0);
    expect(new Set(stopped())).toEqual(new Set([held.informer, lingering.informer]));
    expect(kube.openWatches).toBe(0);
    expect(() => pool.acquire(configMaps, "x")).toThrow("the informer pool is stopped");

    // A release after the stop, and the linger timer's time passing, change nothing.
    held.release();
    await jest.advanceTimersByTimeAsync(5_000);
    expect(stopped()).toHaveLength(2);
  });
});
