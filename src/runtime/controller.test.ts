import { Controller, type ControllerObserver, type ReconcileOutcome } from "./controller.ts";
import { TerminalError, type Reconciler, type Result } from "./reconciler.ts";

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
