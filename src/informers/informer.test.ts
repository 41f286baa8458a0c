import { jest } from "@jest/globals";
import { setImmediate as nextTurn } from "node:timers/promises";
import {
  ApiError,
  type KubeClient,
  type KubeObject,
  type RequestOptions,
  type WatchEvent,
  type WatchStream,
} from "../kube/client.ts";
import type { Logger } from "../api/log.ts";
import {
  compareResourceVersions,
  EARLY_ENDS_BEFORE_RELIST,
  Informer,
  type InformerEvent,
  type InformerOptions,
  type InformerState,
} from "./informer.ts";
import { CONFIGMAPS } from "../../test/harness/fake-kube.ts";

const configMaps = CONFIGMAPS;

/** One watch the informer opened; the test drives it as the API server would. */
class FakeWatch implements WatchStream {
  readonly path: string;
  readonly query: RequestOptions["query"];
  readonly done: Promise<void>;
  closed = false;
  private settled = false;
  private readonly onEvent: (event: WatchEvent) => void;
  private resolve!: () => void;
  private reject!: (err: Error) => void;

  constructor(path: string, query: RequestOptions["query"], onEvent: (event: WatchEvent) => void) {
    this.path = path;
    this.query = query;
    this.onEvent = onEvent;
    this.done = new Promise<void>((resolve, reject) => {
      this.resolve = resolve;
      this.reject = reject;
    });
    // As the real client does: a rejection nobody awaits yet is not unhandled.
    this.done.catch(() => undefined);
  }

  /** Delivers one event; like the real client, a throwing handler ends the stream with that error. */
  send(type: WatchEvent["type"], object: KubeObject): void {
    if (this.settled) throw new Error(`the test sent ${type} on a watch that has ended`);
    try {
      this.onEvent({ type, object: structuredClone(object) });
    } catch (err) {
      this.fail(err as Error);
    }
  }

  /** The server ends the watch cleanly (its timeoutSeconds passed). */
  end(): void {
    this.settled = true;
    this.resolve();
  }

  /** The stream fails (a network error, or an error status when it opened). */
  fail(err: Error): void {
    if (this.settled) return;
    this.settled = true;
    this.reject(err);
  }

  close(): void {
    this.closed = true;
    this.settled = true;
    this.resolve();
  }
}

interface ListCall {
  path: string;
  query: RequestOptions["query"];
  at: number;
}

/**
 * A fake of the two client methods the informer uses, over an in-memory set of objects.
 * Lists are paged (`continue` is an offset); `listErrors` are thrown by the next lists, in order.
 */
class FakeKube implements Pick<KubeClient, "request" | "watch"> {
  readonly objects = new Map<string, KubeObject>();
  readonly lists: ListCall[] = [];
  readonly watches: FakeWatch[] = [];
  listErrors: Error[] = [];
  /** Thrown by the next lists that carry a continue token (a page after the first), in order. */
  continueErrors: Error[] = [];
  /** Thrown by the next unpaged lists (no limit), in order. */
  unpagedErrors: Error[] = [];
  private rv = 100;

  /** Creates or replaces an object, with a new resourceVersion; returns a copy of it. */
  put(name: string, data: Record<string, unknown> = {}, namespace = "team-a"): KubeObject {
    const obj: KubeObject = {
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: {
        name,
        namespace,
        resourceVersion: String(++this.rv),
        managedFields: [{ manager: "kubectl", operation: "Apply" }],
      },
      data,
    };
    this.objects.set(`${namespace}/${name}`, obj);
    return structuredClone(obj);
  }

  /** Removes an object; returns it as a DELETED event carries it. */
  remove(name: string, namespace = "team-a"): KubeObject {
    const obj = this.objects.get(`${namespace}/${name}`);
    if (!obj) throw new Error(`no object ${namespace}/${name} to remove`);
    this.objects.delete(`${namespace}/${name}`);
    return { ...structuredClone(obj), metadata: { ...obj.metadata, resourceVersion: String(++this.rv) } };
  }

  /** The resourceVersion lists answer with, when set (a watch cache behind the newest state). */
  listResourceVersion: string | undefined;

  get resourceVersion(): string {
    return String(this.rv);
  }

  async request<T>(method: string, path: string, options: RequestOptions = {}): Promise<T> {
    if (method !== "GET") throw new Error(`the informer only lists, not ${method}`);
    this.lists.push({ path, query: options.query, at: Date.now() });
    const err =
      this.listErrors.shift() ??
      (options.query?.continue ? this.continueErrors.shift() : undefined) ??
      (options.query?.limit === undefined ? this.unpagedErrors.shift() : undefined);
    if (err) throw err;
    const fieldSelector = options.query?.fieldSelector;
    const items = [...this.objects.values()].filter(
      (o) => fieldSelector === undefined || fieldSelector === `metadata.name=${o.metadata?.name}`,
    );
    const start = Number(options.query?.continue ?? 0);
    const limit = Number(options.query?.limit ?? items.length);
    const next = start + limit < items.length ? String(start + limit) : undefined;
    const page = {
      metadata: { resourceVersion: this.listResourceVersion ?? this.resourceVersion, continue: next },
      items,
    };
    page.items = items.slice(start, start + limit);
    options.onBodyLength?.(JSON.stringify(page).length);
    return structuredClone(page) as T;
  }

  watch(path: string, query: RequestOptions["query"], onEvent: (event: WatchEvent) => void): WatchStream {
    const w = new FakeWatch(path, query, onEvent);
    this.watches.push(w);
    return w;
  }

  /** The newest watch. */
  get last(): FakeWatch {
    const w = this.watches.at(-1);
    if (!w) throw new Error("no watch has been opened");
    return w;
  }
}

/** Records what a listener is told, in a form that reads well in a failed expectation. */
class Recorder {
  readonly events: string[] = [];
  readonly raw: InformerEvent[] = [];
  readonly states: InformerState[] = [];
  onEvent(event: InformerEvent): void {
    this.raw.push(event);
    const rv = (o: KubeObject | undefined) =>
      o ? `${o.metadata?.name}@${o.metadata?.resourceVersion}` : "-";
    this.events.push(`${event.type} ${rv(event.object)} old=${rv(event.old)}`);
  }
  onState(state: InformerState): void {
    this.states.push(state);
  }
}

/**
 * Waits, turn by turn of the event loop (never by sleeping), until `cond` holds; fails after
 * `turns` turns with `what`, so a broken informer fails the test instead of hanging it.
 */
async function until(what: string, cond: () => boolean, turns = 200): Promise<void> {
  for (let i = 0; i < turns; i++) {
    if (cond()) return;
    await nextTurn();
  }
  throw new Error(`gave up waiting for ${what}`);
}

/** Lets every pending promise run, for asserting that something did NOT happen. */
async function quiesce(turns = 20): Promise<void> {
  for (let i = 0; i < turns; i++) await nextTurn();
}

const running: Informer[] = [];

function start(kube: FakeKube, options: Partial<InformerOptions> = {}) {
  const recorder = new Recorder();
  const signals: string[] = [];
  const reasons: string[] = [];
  const informer = new Informer({
    client: kube,
    resource: configMaps,
    namespace: "team-a",
    minBackoffMs: 100,
    maxBackoffMs: 1_000,
    watchdogMs: 10_000,
    onSignal: (s, r) => {
      signals.push(s);
      reasons.push(`${s}:${r}`);
    },
    ...options,
  });
  informer.addListener(recorder);
  informer.start();
  running.push(informer);
  return { informer, recorder, signals, reasons };
}

/** Starts an informer and waits until its first watch is open. */
async function startWatching(kube: FakeKube, options: Partial<InformerOptions> = {}) {
  const started = start(kube, options);
  await until("the first watch", () => kube.watches.length === 1);
  return started;
}

beforeEach(() => {
  jest.useFakeTimers();
});

afterEach(async () => {
  await Promise.all(running.splice(0).map((i) => i.stop()));
  jest.useRealTimers();
  jest.restoreAllMocks();
});

describe("Informer: list, then watch", () => {
  it("lists every page, then watches from the list's resourceVersion with bookmarks", async () => {
    const kube = new FakeKube();
    for (const n of ["a", "b", "c", "d", "e"]) kube.put(n);
    const { informer } = await startWatching(kube, { pageSize: 2 });

    expect(kube.lists.map((l) => l.query)).toEqual([
      { limit: 2, continue: undefined },
      { limit: 2, continue: "2" },
      { limit: 2, continue: "4" },
    ]);
    expect(kube.lists.every((l) => l.path === "/api/v1/namespaces/team-a/configmaps")).toBe(true);
    expect(informer.size).toBe(5);
    expect(informer.state).toEqual({ phase: "Synced" });
    expect(kube.last.path).toBe("/api/v1/namespaces/team-a/configmaps");
    expect(kube.last.query).toMatchObject({ resourceVersion: "105", allowWatchBookmarks: true });
  });

  it.each([
    {
      reason: "a namespaced resource in one namespace",
      resource: configMaps,
      namespace: "team-a" as string | undefined,
      want: "/api/v1/namespaces/team-a/configmaps",
    },
    {
      reason: "a namespaced resource in every namespace",
      resource: configMaps,
      namespace: undefined,
      want: "/api/v1/configmaps",
    },
    {
      reason: "a cluster-scoped resource ignores the namespace",
      resource: {
        ...configMaps,
        group: "rbac.authorization.k8s.io",
        resource: "clusterroles",
        namespaced: false,
      },
      namespace: "team-a",
      want: "/apis/rbac.authorization.k8s.io/v1/clusterroles",
    },
  ])("lists and watches the right path: $reason", async ({ resource, namespace, want }) => {
    const kube = new FakeKube();
    await startWatching(kube, { resource, namespace });
    expect(kube.lists[0]?.path).toBe(want);
    expect(kube.last.path).toBe(want);
  });

  it("drops metadata.managedFields from listed and watched objects", async () => {
    const kube = new FakeKube();
    kube.put("listed");
    const { informer, recorder } = await startWatching(kube);
    kube.last.send("ADDED", kube.put("watched"));
    for (const name of ["listed", "watched"]) {
      expect(informer.get("team-a", name)?.metadata).not.toHaveProperty("managedFields");
    }
    expect(recorder.raw.every((e) => !("managedFields" in (e.object.metadata ?? {})))).toBe(true);
  });

  it("whenSettled() waits for the first list", async () => {
    const kube = new FakeKube();
    kube.put("a");
    const { informer } = start(kube);
    let settled = false;
    const waiting = informer.whenSettled().then(() => (settled = true));
    expect(settled).toBe(false);
    await waiting;
    expect(informer.state).toEqual({ phase: "Synced" });
    expect(informer.size).toBe(1);
  });
});

describe("Informer: watch events", () => {
  const cases: {
    reason: string;
    /** Drives the watch; returns nothing. */
    act: (kube: FakeKube, w: FakeWatch) => void;
    wantEvents: string[];
    wantNames: string[];
    wantResourceVersion: string;
  }[] = [
    {
      reason: "ADDED of a new object caches it; old is undefined",
      act: (kube, w) => w.send("ADDED", kube.put("b")),
      wantEvents: ["ADDED b@102 old=-"],
      wantNames: ["a", "b"],
      wantResourceVersion: "102",
    },
    {
      reason: "MODIFIED replaces the object; old is the one it replaces",
      act: (kube, w) => w.send("MODIFIED", kube.put("a", { v: 2 })),
      wantEvents: ["MODIFIED a@102 old=a@101"],
      wantNames: ["a"],
      wantResourceVersion: "102",
    },
    {
      reason: "DELETED removes the object; old is the cached object",
      act: (kube, w) => w.send("DELETED", kube.remove("a")),
      wantEvents: ["DELETED a@102 old=a@101"],
      wantNames: [],
      wantResourceVersion: "102",
    },
    {
      reason: "an ADDED for an object already cached is told as MODIFIED, with old",
      act: (kube, w) => w.send("ADDED", kube.put("a", { v: 3 })),
      wantEvents: ["MODIFIED a@102 old=a@101"],
      wantNames: ["a"],
      wantResourceVersion: "102",
    },
    {
      reason: "a BOOKMARK changes no object, tells no listener, and advances the resourceVersion",
      act: (_kube, w) => w.send("BOOKMARK", { metadata: { resourceVersion: "4242" } }),
      wantEvents: [],
      wantNames: ["a"],
      wantResourceVersion: "4242",
    },
  ];

  it.each(cases)("$reason", async ({ act, wantEvents, wantNames, wantResourceVersion }) => {
    const kube = new FakeKube();
    kube.put("a");
    const { informer, recorder } = await startWatching(kube);
    recorder.events.length = 0;

    act(kube, kube.last);
    expect(recorder.events).toEqual(wantEvents);
    expect([...informer.list()].map((o) => o.metadata?.name).sort()).toEqual(wantNames);

    // The server ends the watch cleanly: the next watch resumes from the last version seen, no relist.
    kube.last.end();
    await until("the second watch", () => kube.watches.length === 2);
    expect(kube.last.query).toMatchObject({ resourceVersion: wantResourceVersion });
    expect(kube.lists).toHaveLength(1);
  });

  it("a listener that throws does not keep the others from hearing", async () => {
    const kube = new FakeKube();
    const logged: string[] = [];
    const logger: Logger = {
      debug: () => undefined,
      info: () => undefined,
      warn: () => undefined,
      error: (_fields, message) => logged.push(message),
    };
    const informer = new Informer({ client: kube, resource: configMaps, namespace: "team-a", logger });
    running.push(informer);
    const thrower = {
      onEvent: () => {
        throw new Error("boom");
      },
      onState: () => {
        throw new Error("boom");
      },
    };
    const before = new Recorder();
    const after = new Recorder();
    informer.addListener(before);
    informer.addListener(thrower);
    informer.addListener(after);
    informer.start();
    await until("the first watch", () => kube.watches.length === 1);
    kube.last.send("ADDED", kube.put("a"));
    kube.last.send("MODIFIED", kube.put("a", { v: 2 }));

    for (const r of [before, after]) {
      expect(r.states).toEqual([{ phase: "Synced" }]);
      expect(r.events).toEqual(["ADDED a@101 old=-", "MODIFIED a@102 old=a@101"]);
    }
    expect(logged).toEqual(["informer listener threw", "informer listener threw", "informer listener threw"]);
    expect(kube.last.closed).toBe(false);
    expect(informer.get("team-a", "a")?.metadata?.resourceVersion).toBe("102");
  });

  it("removeListener stops the events to that listener", async () => {
    const kube = new FakeKube();
    const { informer, recorder } = await startWatching(kube);
    informer.removeListener(recorder);
    kube.last.send("ADDED", kube.put("a"));
    expect(recorder.events).toEqual([]);
    expect(informer.size).toBe(1);
  });
});

describe("Informer: 410 Gone relists, and a relist tells only what differs", () => {
  it.each([
    {
      reason: "an ERROR event with code 410",
      expire: (w: FakeWatch) =>
        w.send("ERROR", { kind: "Status", code: 410, reason: "Expired", message: "too old" } as KubeObject),
    },
    {
      reason: "an ERROR event with reason Gone and no code",
      expire: (w: FakeWatch) => w.send("ERROR", { kind: "Status", reason: "Gone" } as KubeObject),
    },
    {
      reason: "a watch that rejects with ApiError 410",
      expire: (w: FakeWatch) => w.fail(new ApiError("GET", w.path, 410, "Expired", "too old")),
    },
  ])("$reason", async ({ expire }) => {
    const kube = new FakeKube();
    kube.put("same"); // 101
    kube.put("gone"); // 102
    kube.put("changed"); // 103
    const { informer, recorder, signals, reasons } = await startWatching(kube);
    recorder.events.length = 0;
    recorder.states.length = 0;

    // While the watch was not listening, the server moved on.
    kube.remove("gone"); // 104
    kube.put("changed", { v: 2 }); // 105
    kube.put("new"); // 106
    expire(kube.last);

    // Relisted at once: no backoff timer has to fire.
    await until("the relist and its watch", () => kube.watches.length === 2);
    expect(kube.lists).toHaveLength(2);
    expect(recorder.events.sort()).toEqual(
      ["ADDED new@106 old=-", "DELETED gone@102 old=gone@102", "MODIFIED changed@105 old=changed@103"].sort(),
    );
    expect(recorder.states).toEqual([]); // still Synced: nothing to tell
    expect(informer.state).toEqual({ phase: "Synced" });
    expect(kube.last.query).toMatchObject({ resourceVersion: "106" });
    // The first list is not a relist; the one after 410 Gone is.
    expect(signals).toEqual(["expired", "relist"]);
    expect(reasons).toEqual(["expired:watch-expired", "relist:watch-expired"]);
  });
});

describe("Informer: a relist answered by a cache a little behind", () => {
  it("keeps what the cache here holds newer than the list, tells nothing of it, and watches from the list", async () => {
    const kube = new FakeKube();
    const a1 = kube.put("a"); // 101
    kube.put("b"); // 102
    const { informer, recorder } = await startWatching(kube);
    kube.last.send("MODIFIED", kube.put("a", { v: 2 })); // 103
    kube.last.send("ADDED", kube.put("c")); // 104
    recorder.events.length = 0;
    // The server's next answer is as of 102: a as it was, c not yet there.
    kube.objects.set("team-a/a", a1);
    kube.objects.delete("team-a/c");
    kube.listResourceVersion = "102";
    kube.last.fail(new ApiError("GET", kube.last.path, 410, "Expired", "too old"));
    await until("the relist's watch", () => kube.watches.length === 2);
    expect(recorder.events).toEqual([]);
    expect(informer.get("team-a", "a")?.metadata?.resourceVersion).toBe("103");
    expect(informer.get("team-a", "c")?.metadata?.resourceVersion).toBe("104");
    expect(kube.last.query).toMatchObject({ resourceVersion: "102" });
  });
});

describe("Informer: a paged list whose continue token expired", () => {
  const expired = () =>
    new ApiError("GET", "/api/v1/namespaces/team-a/configmaps", 410, "Expired", "continue too old");

  it("lists again at once in one unpaged request, counted as expired (list-expired), not as an error", async () => {
    const kube = new FakeKube();
    for (let i = 0; i < 30; i++) kube.put(`cm-${i}`);
    kube.continueErrors = [expired()];
    const { informer, recorder, reasons } = start(kube);

    // No backoff timer has to fire: the list starts again at once.
    await until("the watch after the second list", () => kube.watches.length === 1);
    expect(kube.lists.map((l) => ({ limit: l.query?.limit, continue: l.query?.continue }))).toEqual([
      { limit: 10, continue: undefined },
      { limit: expect.any(Number), continue: "10" },
      { limit: undefined, continue: undefined }, // unpaged: no continue token to expire
    ]);
    expect(kube.lists[2]!.query?.resourceVersion).toBe("0"); // from the watch cache as it is
    expect(reasons).toEqual(["expired:list-expired", "relist:list-expired"]);
    // Listeners heard the complete list once, nothing of the list that was cut short.
    expect(recorder.events).toHaveLength(30);
    expect(informer.size).toBe(30);
    expect(informer.state).toEqual({ phase: "Synced" });
  });

  it("the next relist is paged again, and an unpaged list that fails backs off as an error", async () => {
    const kube = new FakeKube();
    for (let i = 0; i < 30; i++) kube.put(`cm-${i}`);
    const { reasons } = await startWatching(kube, { pageSize: 10 });
    // Relist (paged) -> its second page expires -> unpaged, which the server cuts off.
    kube.continueErrors = [expired()];
    kube.unpagedErrors = [Object.assign(new Error("other side closed"), { code: "UND_ERR_SOCKET" })];
    kube.last.fail(new ApiError("GET", kube.last.path, 410, "Expired", "too old"));
    // Pages of 10: the first list is three; the relist's second page expires.
    const unpaged = (l: ListCall) => l.query?.limit === undefined;
    await until("the unpaged list", () => kube.lists.some(unpaged));
    await quiesce();
    expect(kube.lists.length).toBe(6); // waiting out the backoff, not listing again at once
    await jest.advanceTimersToNextTimerAsync();
    await until("the watch after the list that followed the backoff", () => kube.watches.length === 2);
    expect(kube.lists.map((l) => (unpaged(l) ? "unpaged" : "page"))).toEqual([
      ...["page", "page", "page"],
      ...["page", "page", "unpaged"],
      ...["page", "page", "page"],
    ]);
    expect(reasons).toEqual([
      "expired:watch-expired",
      "relist:watch-expired",
      "expired:list-expired",
      "relist:list-expired",
      "error:connection",
      "relist:connection",
    ]);
  });
});

describe("Informer: failures", () => {
  it.each([
    {
      reason: "403 on the list is Forbidden",
      err: new ApiError("GET", "/api/v1/namespaces/team-a/configmaps", 403, "Forbidden", "no"),
      want: { phase: "Failed", reason: "Forbidden" },
      message: "configmaps in namespace team-a",
    },
    {
      reason: "404 on the list is KindNotFound",
      err: new ApiError("GET", "/api/v1/namespaces/team-a/configmaps", 404, "NotFound", "gone"),
      want: { phase: "Failed", reason: "KindNotFound" },
      message: "no longer serves configmaps",
    },
  ])(
    "$reason, settles whenSettled(), and recovers once the list succeeds",
    async ({ err, want, message }) => {
      const kube = new FakeKube();
      kube.put("a");
      kube.listErrors = [err];
      const { informer, recorder } = start(kube);

      await informer.whenSettled();
      expect(informer.state).toMatchObject(want);
      expect(informer.state.phase === "Failed" && informer.state.message).toContain(message);
      expect(kube.watches).toHaveLength(0);

      await jest.advanceTimersToNextTimerAsync(); // the backoff
      await until("the retried list's watch", () => kube.watches.length === 1);
      expect(recorder.states).toEqual([want, { phase: "Synced" }].map((s) => expect.objectContaining(s)));
      expect(informer.size).toBe(1);
    },
  );

  it.each([
    {
      reason:
        "a 404 discovery does not confirm (an API server just restarted) is transient: nothing is cleared",
      gone: false,
      want: [{ phase: "Synced" }],
    },
    {
      reason: "a 404 discovery confirms is KindNotFound",
      gone: true,
      want: [{ phase: "Synced" }, { phase: "Failed", reason: "KindNotFound" }],
    },
  ])("$reason", async ({ gone, want }) => {
    const kube = new FakeKube();
    kube.put("a");
    const asked: number[] = [];
    const { informer, recorder } = await startWatching(kube, {
      confirmGone: async () => {
        asked.push(1);
        return gone;
      },
    });
    kube.listErrors = [new ApiError("GET", "/api/v1/namespaces/team-a/configmaps", 404, "NotFound", "gone")];
    kube.last.fail(new Error("watch dropped"));
    await jest.advanceTimersToNextTimerAsync(); // the backoff
    await until("the relist's 404", () => kube.lists.length === 2);
    await until("discovery asked", () => asked.length === 1);
    await quiesce();
    expect(recorder.states).toEqual(want.map((s) => expect.objectContaining(s)));
    expect(informer.get("team-a", "a")).toBeDefined();
  });

  it("a 401 (a credential expired or rotated) is transient: no Forbidden, nothing cleared", async () => {
    const kube = new FakeKube();
    kube.put("a");
    const { informer, recorder } = await startWatching(kube);
    kube.listErrors = [
      new ApiError("GET", "/api/v1/namespaces/team-a/configmaps", 401, "Unauthorized", "expired"),
    ];
    kube.last.fail(new Error("watch dropped"));
    await jest.advanceTimersToNextTimerAsync(); // the backoff
    await until("the relist's 401", () => kube.lists.length === 2);
    await quiesce();
    expect(recorder.states).toEqual([{ phase: "Synced" }]);
    expect(informer.get("team-a", "a")).toBeDefined();
  });

  it("gives each watch a server-side lifetime within watchTimeoutSeconds, so access withdrawn is noticed", async () => {
    const kube = new FakeKube();
    await startWatching(kube);
    const timeout = Number(kube.last.query?.timeoutSeconds);
    expect(timeout).toBeGreaterThanOrEqual(30);
    expect(timeout).toBeLessThanOrEqual(50);
  });

  it("retries a refused list with a jittered backoff that grows and stays under maxBackoffMs", async () => {
    const forbidden = () =>
      new ApiError("GET", "/api/v1/namespaces/team-a/configmaps", 403, "Forbidden", "no");
    // Math.random sets where in [base/2, base] each wait falls; the base doubles from 100 to the cap of 1000.
    const bases = [100, 200, 400, 800, 1000, 1000, 1000];
    const cases = [
      { reason: "at the bottom of the jitter, half the base", random: 0 },
      { reason: "in the middle of the jitter", random: 0.5 },
      { reason: "at the top of the jitter, the base itself", random: 0.999 },
    ];
    for (const { reason, random } of cases) {
      jest.spyOn(Math, "random").mockReturnValue(random);
      const kube = new FakeKube();
      kube.listErrors = bases.map(forbidden);
      const { informer } = start(kube, { minBackoffMs: 100, maxBackoffMs: 1_000 });
      for (let i = 1; i <= bases.length; i++) {
        await until(`list ${i}`, () => kube.lists.length === i);
        await jest.advanceTimersToNextTimerAsync();
      }
      await until("the watch after the last failure", () => kube.watches.length === 1);
      const waits = kube.lists.slice(1).map((l, i) => l.at - kube.lists[i]!.at);
      // Fake timers count whole milliseconds.
      const want = bases.map((b) => Math.floor(b / 2 + random * (b / 2)));
      expect({ reason, waits }).toEqual({ reason, waits: want });
      expect(waits.every((w, i) => i === 0 || w >= waits[i - 1]!)).toBe(true);
      expect(Math.max(...waits)).toBeLessThanOrEqual(1_000);
      expect(informer.state).toEqual({ phase: "Synced" });
      await informer.stop();
    }
  });

  it("a 429 waits at least the Retry-After the server gave, jittered upwards by up to a half", async () => {
    jest.spyOn(Math, "random").mockReturnValue(0.5);
    const kube = new FakeKube();
    kube.listErrors = [
      new ApiError("GET", "/api/v1/namespaces/team-a/configmaps", 429, "TooManyRequests", "slow down", 4_000),
    ];
    const { reasons } = start(kube, { minBackoffMs: 100, maxBackoffMs: 1_000 });
    await until("the first list", () => kube.lists.length === 1);
    await jest.advanceTimersToNextTimerAsync();
    await until("the watch", () => kube.watches.length === 1);
    // Over maxBackoffMs: the server's word wins over the informer's own cap.
    expect(kube.lists[1]!.at - kube.lists[0]!.at).toBe(4_000 + 0.5 * 2_000);
    expect(reasons).toEqual(["error:throttled", "relist:throttled"]);
  });

  it("a watch refused with 429 opens again from the same resourceVersion after the wait, without a relist", async () => {
    jest.spyOn(Math, "random").mockReturnValue(0);
    const kube = new FakeKube();
    kube.put("a");
    const { reasons } = await startWatching(kube, { minBackoffMs: 100, maxBackoffMs: 1_000 });
    const refused = (w: FakeWatch) =>
      w.fail(new ApiError("GET", w.path, 429, "TooManyRequests", "storage is (re)initializing", 1_000));
    refused(kube.last);
    await quiesce();
    expect(kube.watches).toHaveLength(1); // waiting as told
    await jest.advanceTimersToNextTimerAsync();
    await until("the watch opened again", () => kube.watches.length === 2);
    expect(kube.last.query).toMatchObject({ resourceVersion: kube.resourceVersion });
    // Refused again: the wait grows from the server's (never under it).
    refused(kube.last);
    await quiesce();
    await jest.advanceTimersToNextTimerAsync();
    await until("the third watch", () => kube.watches.length === 3);
    expect(kube.watches[2]!.query).toMatchObject({ resourceVersion: kube.resourceVersion });
    expect(kube.lists).toHaveLength(1);
    expect(reasons).toEqual(["error:throttled", "error:throttled"]);
  });

  it("a watch that ends at once with nothing on it opens again from the same resourceVersion, and only the fourth in a row relists", async () => {
    jest.spyOn(Math, "random").mockReturnValue(0);
    const kube = new FakeKube();
    kube.put("a");
    const { informer, reasons } = await startWatching(kube, { minBackoffMs: 100, maxBackoffMs: 1_000 });
    for (let i = 1; i <= EARLY_ENDS_BEFORE_RELIST; i++) {
      kube.last.end();
      await quiesce();
      expect(kube.watches).toHaveLength(i); // the backoff first: no hot loop
      await jest.advanceTimersToNextTimerAsync();
      await until(`watch ${i + 1}`, () => kube.watches.length === i + 1);
      expect(kube.last.query).toMatchObject({ resourceVersion: kube.resourceVersion });
    }
    expect(kube.lists).toHaveLength(1);
    kube.last.end();
    await quiesce();
    await jest.advanceTimersToNextTimerAsync();
    await until("the relist", () => kube.lists.length === 2);
    expect(reasons).toEqual([
      ...Array.from({ length: EARLY_ENDS_BEFORE_RELIST }, () => "error:watch-ended-early"),
      "error:watch-ended-early",
      "relist:watch-ended-early",
    ]);
    expect(informer.get("team-a", "a")).toBeDefined();
  });

  it("real jitter: every wait is within [base/2, base], never over maxBackoffMs", async () => {
    const kube = new FakeKube();
    const failures = 12;
    kube.listErrors = Array.from({ length: failures }, () => new Error("connect ECONNREFUSED"));
    start(kube, { minBackoffMs: 100, maxBackoffMs: 1_000 });
    for (let i = 1; i <= failures; i++) {
      await until(`list ${i}`, () => kube.lists.length === i);
      await jest.advanceTimersToNextTimerAsync();
    }
    await until("the watch", () => kube.watches.length === 1);
    const waits = kube.lists.slice(1).map((l, i) => l.at - kube.lists[i]!.at);
    waits.forEach((wait, i) => {
      const base = Math.min(1_000, 100 * 2 ** i);
      expect(wait).toBeGreaterThanOrEqual(base / 2);
      expect(wait).toBeLessThanOrEqual(base);
    });
  });

  it.each([
    {
      reason: "a watch that fails with a 500",
      fail: (w: FakeWatch) => w.fail(new ApiError("GET", w.path, 500, "InternalError", "etcd")),
      relistError: undefined as Error | undefined,
    },
    {
      reason: "a watch dropped by the network",
      fail: (w: FakeWatch) => w.fail(new Error("socket hang up")),
      relistError: undefined,
    },
    {
      reason: "an ERROR event that is not 410",
      fail: (w: FakeWatch) =>
        w.send("ERROR", { kind: "Status", code: 500, reason: "InternalError" } as KubeObject),
      relistError: undefined,
    },
    {
      reason: "a dropped watch whose relist fails too (API server restarting)",
      fail: (w: FakeWatch) => w.fail(new Error("socket hang up")),
      relistError: new ApiError(
        "GET",
        "/api/v1/namespaces/team-a/configmaps",
        503,
        "ServiceUnavailable",
        "down",
      ),
    },
  ])("$reason keeps the cache and Synced, then relists after a backoff", async ({ fail, relistError }) => {
    const kube = new FakeKube();
    kube.put("a");
    const { informer, recorder, signals } = await startWatching(kube);
    recorder.states.length = 0;
    recorder.events.length = 0;
    if (relistError) kube.listErrors = [relistError];

    fail(kube.last);
    await quiesce();
    // Nothing was cleared, and nothing was relisted before the backoff.
    expect(informer.state).toEqual({ phase: "Synced" });
    expect(informer.get("team-a", "a")).toBeDefined();
    expect(kube.lists).toHaveLength(1);

    const wantLists = relistError ? 3 : 2;
    for (let i = 2; i <= wantLists; i++) {
      await jest.advanceTimersToNextTimerAsync();
      await until(`list ${i}`, () => kube.lists.length === i);
      expect(informer.get("team-a", "a")).toBeDefined();
      expect(informer.state).toEqual({ phase: "Synced" });
    }
    await until("the watch after the relist", () => kube.watches.length === 2);
    expect(recorder.states).toEqual([]);
    expect(recorder.events).toEqual([]); // the relist found nothing new
    expect(signals.filter((s) => s === "error")).toHaveLength(relistError ? 2 : 1);
  });

  it("a transient error on the first list leaves whenSettled() waiting until a list succeeds", async () => {
    const kube = new FakeKube();
    kube.listErrors = [new Error("connect ECONNREFUSED")];
    const { informer } = start(kube);
    let settled = false;
    void informer.whenSettled().then(() => (settled = true));
    await until("the first list", () => kube.lists.length === 1);
    await quiesce();
    expect(settled).toBe(false);
    expect(informer.state).toEqual({ phase: "Pending" });
    await jest.advanceTimersToNextTimerAsync();
    await until("whenSettled", () => settled);
    expect(informer.state).toEqual({ phase: "Synced" });
  });
});

describe("Informer: watchdog", () => {
  it("closes a watch silent for watchdogMs and reopens it from the last resourceVersion, without a relist", async () => {
    const kube = new FakeKube();
    kube.put("a");
    const { informer, recorder, signals } = await startWatching(kube, { watchdogMs: 1_000 });
    const first = kube.last;

    await jest.advanceTimersByTimeAsync(900);
    first.send("MODIFIED", kube.put("a", { v: 2 })); // traffic re-arms the watchdog
    await jest.advanceTimersByTimeAsync(900);
    first.send("BOOKMARK", { metadata: { resourceVersion: "500" } }); // so does a bookmark
    await jest.advanceTimersByTimeAsync(999);
    expect(first.closed).toBe(false);
    expect(kube.watches).toHaveLength(1);

    await jest.advanceTimersByTimeAsync(1);
    expect(first.closed).toBe(true);
    await until("the reopened watch", () => kube.watches.length === 2);
    expect(kube.last.query).toMatchObject({ resourceVersion: "500" });
    expect(kube.lists).toHaveLength(1);
    expect(signals).toEqual(["watchdog"]);
    expect(informer.get("team-a", "a")?.data).toEqual({ v: 2 });
    expect(recorder.states).toEqual([{ phase: "Synced" }]);
  });

  it("a watch that never sends anything is closed after watchdogMs too", async () => {
    const kube = new FakeKube();
    await startWatching(kube, { watchdogMs: 1_000 });
    await jest.advanceTimersByTimeAsync(1_000);
    await until("the reopened watch", () => kube.watches.length === 2);
    expect(kube.watches[0]?.closed).toBe(true);
    expect(kube.lists).toHaveLength(1);
  });
});

/** Lets `ms` pass, then how many lists and watches `kube` has seen in all. */
async function requestsAfter(kube: FakeKube, ms: number): Promise<{ lists: number; watches: number }> {
  await jest.advanceTimersByTimeAsync(ms);
  await quiesce();
  return { lists: kube.lists.length, watches: kube.watches.length };
}

describe("Informer: stop", () => {
  it("while watching: closes the stream, resolves, and opens nothing more", async () => {
    const kube = new FakeKube();
    const { informer } = await startWatching(kube);
    await informer.stop();
    expect(kube.last.closed).toBe(true);
    expect(await requestsAfter(kube, 60_000)).toEqual({ lists: 1, watches: 1 });
  });

  it("while backing off: resolves without waiting for the backoff", async () => {
    const kube = new FakeKube();
    kube.listErrors = [new Error("connect ECONNREFUSED")];
    const { informer } = start(kube, { minBackoffMs: 60_000, maxBackoffMs: 60_000 });
    await until("the first list", () => kube.lists.length === 1);
    await quiesce();
    let stopped = false;
    const stopping = informer.stop().then(() => (stopped = true));
    await until("stop() to resolve", () => stopped);
    await stopping;
    expect(await requestsAfter(kube, 120_000)).toEqual({ lists: 1, watches: 0 });
  });

  it("settles a pending whenSettled(), and whenSettled() after stop resolves at once", async () => {
    const kube = new FakeKube();
    kube.listErrors = [new Error("connect ECONNREFUSED")];
    const { informer } = start(kube);
    const waiting = informer.whenSettled();
    await until("the first list", () => kube.lists.length === 1);
    await informer.stop();
    await waiting;
    await informer.whenSettled();
    expect(informer.state).toEqual({ phase: "Pending" });
  });
});

describe("Informer list pages", () => {
  it.each([
    {
      reason: "large objects: after a first page of 10, pages shrink to about pageBytes",
      count: 30,
      bytes: 100_000,
      pageBytes: 250_000,
      want: (limits: number[]) => expect(limits.slice(0, 2)).toEqual([10, 2]),
    },
    {
      reason: "small objects: after a first page of 10, pages grow to pageSize",
      count: 600,
      bytes: 10,
      pageBytes: 250_000,
      pageSize: 500,
      want: (limits: number[]) => expect(limits.slice(0, 2)).toEqual([10, 500]),
    },
    {
      reason:
        "the default pageSize is 5000: a watch cache's paged list costs the API server a pass over the rest of the collection a page",
      count: 6000,
      bytes: 10,
      pageBytes: undefined,
      want: (limits: number[]) => expect(limits).toEqual([10, 5000, 5000]),
    },
  ])("$reason", async ({ count, bytes, pageBytes, pageSize, want }) => {
    const kube = new FakeKube();
    for (let i = 0; i < count; i++) kube.put(`cm-${i}`, { blob: "x".repeat(bytes) });
    const { informer } = await startWatching(kube, {
      ...(pageBytes !== undefined && { pageBytes }),
      ...(pageSize !== undefined && { pageSize }),
    });
    want(kube.lists.map((l) => Number(l.query?.limit)));
    expect(informer.size).toBe(count);
  });
});

describe("Informer.refresh", () => {
  it("reads a cached object again by name with the list verb and tells listeners, unless the cache is newer", async () => {
    const kube = new FakeKube();
    kube.put("a", { v: 1 });
    kube.put("b", { v: 1 });
    const { informer, recorder } = await startWatching(kube);
    recorder.events.length = 0;
    kube.put("a", { v: 2 }); // rv 103: the watch has not delivered it yet
    informer.refresh({ namespace: "team-a", name: "a" });
    await until("the refresh", () => recorder.events.length === 1);
    expect(kube.lists.at(-1)?.query?.fieldSelector).toBe("metadata.name=a");
    expect(recorder.events).toEqual(["MODIFIED a@103 old=a@101"]);
    expect(informer.get("team-a", "a")?.data).toEqual({ v: 2 });

    // The watch catches up with an event older than the cache: dropped, nothing told.
    kube.last.send("MODIFIED", {
      ...structuredClone(kube.objects.get("team-a/a")!),
      metadata: { name: "a", namespace: "team-a", resourceVersion: "102" },
    });
    await quiesce();
    expect(recorder.events).toHaveLength(1);
    expect(informer.get("team-a", "a")?.metadata?.resourceVersion).toBe("103");
  });

  it("never adds an object the watch has not brought (the watch owns additions and deletions)", async () => {
    const kube = new FakeKube();
    const { informer, recorder } = await startWatching(kube);
    kube.put("new");
    informer.refresh({ namespace: "team-a", name: "new" });
    await until("the refresh list", () => kube.lists.length === 2);
    await quiesce();
    expect(informer.get("team-a", "new")).toBeUndefined();
    expect(recorder.events).toEqual([]);
  });

  it("requests made together are read together, a failed read is retried with backoff, and an unchanged object tells nothing", async () => {
    const kube = new FakeKube();
    kube.put("a");
    kube.put("b");
    const { informer, recorder } = await startWatching(kube);
    recorder.events.length = 0;
    kube.put("a", { v: 2 }); // rv 103, and b 104: news only a refresh brings
    kube.put("b", { v: 2 });
    kube.listErrors = [new ApiError("GET", "/x", 500, "InternalError", "etcd is slow")];
    informer.refresh({ namespace: "team-a", name: "a" });
    informer.refresh({ namespace: "team-a", name: "a" });
    informer.refresh({ namespace: "team-a", name: "b" });
    await until("the failed round", () => kube.lists.length === 3);
    await quiesce();
    // One read per object asked for (the two requests for a are one), a's failed.
    expect(kube.lists.slice(1).map((l) => l.query?.fieldSelector)).toEqual([
      "metadata.name=a",
      "metadata.name=b",
    ]);
    expect(recorder.events).toEqual(["MODIFIED b@104 old=b@102"]);
    jest.advanceTimersByTime(1_000);
    await until("the retried round", () => recorder.events.some((e) => e.startsWith("MODIFIED a@")));
    await quiesce();
    // b read again, unchanged: nothing to tell.
    expect(recorder.events).toEqual(["MODIFIED b@104 old=b@102", "MODIFIED a@103 old=a@101"]);
    expect(kube.lists.slice(3).map((l) => l.query?.fieldSelector)).toEqual([
      "metadata.name=a",
      "metadata.name=b",
    ]);
  });
});

describe("compareResourceVersions", () => {
  it.each([
    { reason: "integers compare by value, not as text", a: "9", b: "10", want: -1 },
    { reason: "equal is 0", a: "42", b: "42", want: 0 },
    {
      reason: "longer integers beyond 2^53 still compare exactly",
      a: "90071992547409930",
      b: "90071992547409929",
      want: 1,
    },
    { reason: "an opaque (non-integer) version never compares", a: "abc", b: "10", want: 0 },
    { reason: "an absent version never compares", a: undefined, b: "10", want: 0 },
  ])("$reason", ({ a, b, want }) => {
    expect(Math.sign(compareResourceVersions(a, b))).toBe(want);
  });
});
