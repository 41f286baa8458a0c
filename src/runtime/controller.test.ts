import { controller, Controller, type ControllerObserver, type ReconcileOutcome } from "./controller.ts";
import { enqueueKey, enqueueMapped, enqueueObject } from "./handler.ts";
import { notOwnEcho } from "./predicate.ts";
import { TerminalError, type Reconciler, type Result } from "./reconciler.ts";
import { Channel, informerSource, type ObjectEvent } from "./source.ts";

/** A reconciler that answers each key from a script, recording every call. */
function scripted(answers: Record<string, Array<Result | Error>>): Reconciler & { calls: string[] } {
  const calls: string[] = [];
  return {
    calls,
    reconcile: async (key) => {
      calls.push(key);
      const next = answers[key]?.shift() ?? {};
      if (next instanceof Error) throw next;
      return next;
    },
  };
}

/** An observer that records each reconcile's outcome. */
function outcomes(): ControllerObserver & { seen: ReconcileOutcome[] } {
  const seen: ReconcileOutcome[] = [];
  return { seen, onReconcile: (outcome) => void seen.push(outcome) };
}

/** Resolves once `condition()` holds, checking on every turn of the event loop; rejects after 2 s. */
async function waitUntil(condition: () => boolean): Promise<void> {
  const deadline = performance.now() + 2000;
  while (!condition()) {
    if (performance.now() > deadline) throw new Error("condition not met within 2 s");
    await new Promise((resolve) => setImmediate(resolve));
  }
}

/** A rate limiter that retries at once, so a test need not wait for backoff. */
const immediate = { when: () => 0, forget: () => undefined, numRequeues: () => 0 };

describe("Controller", () => {
  it.each([
    {
      reason: "an empty result is done: the key is reconciled once",
      answers: [{}],
      want: { calls: 1, outcomes: ["success"] },
    },
    {
      reason: "requeueAfterMs brings the key back after the delay",
      answers: [{ requeueAfterMs: 1 }, {}],
      want: { calls: 2, outcomes: ["requeue_after", "success"] },
    },
    {
      reason: "requeue brings the key back on its backoff, without counting an error",
      answers: [{ requeue: true }, {}],
      want: { calls: 2, outcomes: ["requeue", "success"] },
    },
    {
      reason: "a retryable error brings the key back on its backoff, counted as an error",
      answers: [new Error("the API server is away"), {}],
      want: { calls: 2, outcomes: ["error", "success"] },
    },
    {
      reason: "a terminal error is counted and not retried",
      answers: [new TerminalError("cannot be mended by retrying")],
      want: { calls: 1, outcomes: ["error"] },
    },
  ])("$reason", async ({ answers, want }) => {
    const reconciler = scripted({ k: [...answers] });
    const observer = outcomes();
    const controller = new Controller({
      name: "test",
      reconciler,
      observer,
      rateLimiter: immediate,
      concurrency: 2,
    });
    controller.start();
    controller.enqueue("k");
    await waitUntil(() => observer.seen.length >= want.outcomes.length);
    // A retry the result asked for at once is already queued: drain still runs it.
    await controller.drain();
    expect({ calls: reconciler.calls.length, outcomes: observer.seen }).toEqual(want);
  });

  it("never runs one key twice at once, and reconciles a key added meanwhile once more", async () => {
    let running = 0;
    let most = 0;
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const calls: string[] = [];
    const controller = new Controller({
      name: "test",
      concurrency: 4,
      reconciler: {
        reconcile: async (key) => {
          calls.push(key);
          most = Math.max(most, ++running);
          if (calls.length === 1) await gate;
          running--;
          return {};
        },
      },
    });
    controller.start();
    controller.enqueue("k");
    await waitUntil(() => calls.length === 1);
    controller.enqueue("k");
    controller.enqueue("k");
    release();
    await waitUntil(() => calls.length === 2);
    await controller.drain();
    expect({ calls: calls.length, most }).toEqual({ calls: 2, most: 1 });
  });

  it("drain waits for the running reconcile, and takes no key after", async () => {
    let finish!: () => void;
    const calls: string[] = [];
    const controller = new Controller({
      name: "test",
      reconciler: {
        reconcile: async (key) => {
          calls.push(key);
          await new Promise<void>((resolve) => (finish = resolve));
          return {};
        },
      },
    });
    controller.start();
    controller.enqueue("a");
    await waitUntil(() => calls.length === 1);
    let drained = false;
    const draining = controller.drain().then(() => (drained = true));
    controller.enqueue("b");
    await Promise.resolve();
    expect(drained).toBe(false);
    finish();
    await draining;
    expect(calls).toEqual(["a"]);
  });
});

describe("controller(name): the builder and its watches", () => {
  type Obj = { metadata: { name: string; resourceVersion: string } };
  const event = (type: ObjectEvent<Obj>["type"], name: string, resourceVersion = "1"): ObjectEvent<Obj> => ({
    type,
    object: { metadata: { name, resourceVersion } },
    old: undefined,
  });

  it("queues the event's own key, the keys an event maps to, and a channel's keys, each once", async () => {
    const objects = new Channel<ObjectEvent<Obj>>();
    const pushes = new Channel<string>();
    const reconciler = scripted({});
    const built = controller("test")
      .watches(
        objects,
        enqueueObject((e) => e.object.metadata.name),
      )
      .watches(
        objects,
        enqueueMapped((e) => (e.type === "DELETED" ? ["claimant-1", "claimant-2"] : [])),
      )
      .watches(pushes, enqueueKey())
      .build(reconciler);
    objects.emit(event("ADDED", "a"));
    objects.emit(event("DELETED", "b"));
    pushes.emit("a");
    pushes.emit("c");
    built.start();
    await waitUntil(() => reconciler.calls.length >= 5);
    await built.drain();
    expect(reconciler.calls.sort()).toEqual(["a", "b", "c", "claimant-1", "claimant-2"]);
  });

  it("drops what a predicate refuses: the echo of the controller's own write", async () => {
    const objects = new Channel<ObjectEvent<Obj>>();
    const reconciler = scripted({});
    const echoed: string[] = [];
    const built = controller("test")
      .watches(
        objects,
        enqueueObject((e) => e.object.metadata.name),
        notOwnEcho<Obj>({ written: () => "7", echoed: (obj) => void echoed.push(obj.metadata.name) }),
      )
      .build(reconciler);
    objects.emit(event("MODIFIED", "echo", "7"));
    objects.emit(event("MODIFIED", "other-write", "8"));
    objects.emit(event("ADDED", "new", "7"));
    built.start();
    await waitUntil(() => reconciler.calls.length >= 2);
    await built.drain();
    expect({ calls: reconciler.calls.sort(), echoed }).toEqual({
      calls: ["new", "other-write"],
      echoed: ["echo"],
    });
  });

  it("admits only the keys its gate admits, and runs the reconciler through the gate's wrapper", async () => {
    const keys = new Channel<string>();
    const reconciler = scripted({});
    const wrapped: string[] = [];
    const built = controller("test")
      .watches(keys, enqueueKey())
      .admit({
        admits: (key) => key !== "elsewhere",
        wrap: (inner) => ({ reconcile: (key, signal) => (wrapped.push(key), inner.reconcile(key, signal)) }),
      })
      .build(reconciler);
    keys.emit("here");
    keys.emit("elsewhere");
    built.start();
    await waitUntil(() => reconciler.calls.length >= 1);
    await built.drain();
    expect({ calls: reconciler.calls, wrapped }).toEqual({ calls: ["here"], wrapped: ["here"] });
  });

  it("is synced once every source is, and an informer's events reach the handler", async () => {
    let listener: { onEvent(e: ObjectEvent<Obj>): void } | undefined;
    let settle!: () => void;
    const settled = new Promise<void>((resolve) => (settle = resolve));
    const informer = { addListener: (l: typeof listener) => void (listener = l), whenSettled: () => settled };
    const reconciler = scripted({});
    const built = controller("test")
      .watches(
        informerSource(informer),
        enqueueObject((e) => e.object.metadata.name),
      )
      .build(reconciler);
    let synced = false;
    void built.whenSynced().then(() => (synced = true));
    await new Promise((resolve) => setImmediate(resolve));
    expect(synced).toBe(false);
    settle();
    await waitUntil(() => synced);
    listener!.onEvent(event("ADDED", "listed"));
    built.start();
    await waitUntil(() => reconciler.calls.length >= 1);
    await built.drain();
    expect(reconciler.calls).toEqual(["listed"]);
  });

  it("stop aborts the signal of the running reconcile and reconciles no key still queued", async () => {
    const keys = new Channel<string>();
    const seen: Array<{ key: string; aborted: boolean }> = [];
    let started!: () => void;
    const running = new Promise<void>((resolve) => (started = resolve));
    const built = controller("test")
      .with({ concurrency: 1 })
      .watches(keys, enqueueKey())
      .build({
        reconcile: async (key, signal) => {
          started();
          await new Promise<void>((resolve) => signal.addEventListener("abort", () => resolve()));
          seen.push({ key, aborted: signal.aborted });
          return {};
        },
      });
    built.start();
    keys.emit("first");
    await running;
    keys.emit("queued");
    await built.stop();
    expect(seen).toEqual([{ key: "first", aborted: true }]);
  });
});
