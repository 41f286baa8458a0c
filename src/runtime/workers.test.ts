import { jest } from "@jest/globals";
import { track } from "../../test/harness/promises.ts";
import { TerminalError, type Result } from "./reconciler.ts";
import { runWorkers, settle, type ReconcileOutcome } from "./workers.ts";
import { WorkQueue } from "./workqueue.ts";

beforeEach(() => {
  jest.useFakeTimers();
});
afterEach(() => {
  jest.useRealTimers();
});

/** Runs due timers and settles the promise callbacks they start. */
const advance = (ms: number) => jest.advanceTimersByTimeAsync(ms);

/** A handler result the test decides on later. */
function deferred<T>(): { promise: Promise<T>; resolve: (value: T) => void; reject: (err: Error) => void } {
  let resolve!: (value: T) => void;
  let reject!: (err: Error) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

describe("runWorkers", () => {
  it("runs at most `concurrency` handlers at once, and never one key twice at once", async () => {
    const queue = new WorkQueue();
    const pending = new Map<string, ReturnType<typeof deferred<Result>>>();
    let running = 0;
    let most = 0;
    const handled: string[] = [];
    const overlapping: string[] = [];
    const done = runWorkers(queue, 2, async (key) => {
      // Recorded, not asserted here: a throwing handler would only be retried.
      if (pending.has(key)) overlapping.push(key);
      running++;
      most = Math.max(most, running);
      handled.push(key);
      const d = deferred<Result>();
      pending.set(key, d);
      try {
        return await d.promise;
      } finally {
        pending.delete(key);
        running--;
      }
    });
    for (const key of ["a", "b", "c", "a", "d"]) queue.add(key);
    await advance(0);
    expect([...pending.keys()]).toEqual(["a", "b"]);
    queue.add("a"); // while "a" is processed: must wait, not go to a free worker

    for (let round = 0; round < 10 && pending.size > 0; round++) {
      for (const d of [...pending.values()]) d.resolve({});
      await advance(0);
    }
    expect(most).toBe(2);
    expect(overlapping).toEqual([]);
    expect(handled).toEqual(["a", "b", "c", "d", "a"]);

    queue.shutDown();
    await expect(done).resolves.toBeUndefined();
  });

  it.each([
    {
      results: [{ requeue: true }, { requeue: true }, {}] as Result[],
      at: [0, 5, 15],
      requeuesAfter: 0,
      reason: "{ requeue: true } retries with backoff; {} forgets the backoff",
    },
    {
      results: [new Error("boom"), new Error("boom"), new Error("boom"), {}] as Array<Result | Error>,
      at: [0, 5, 15, 35],
      requeuesAfter: 0,
      reason: "a thrown error retries with exponential backoff, and never stops the worker",
    },
    {
      results: [new TerminalError("boom")] as Array<Result | Error>,
      at: [0],
      requeuesAfter: 0,
      reason: "a TerminalError is reported and not retried (controller-runtime's reconcile.TerminalError)",
    },
    {
      results: [new Error("boom"), new Error("boom"), new TerminalError("boom")] as Array<Result | Error>,
      at: [0, 5, 15],
      requeuesAfter: 0,
      reason: "a TerminalError after retries ends them and forgets the backoff",
    },
    {
      results: [{ requeueAfterMs: 1000 }, {}] as Result[],
      at: [0, 1000],
      requeuesAfter: 0,
      reason: "requeueAfterMs adds after that delay and forgets the backoff",
    },
    {
      results: [new Error("boom"), { requeueAfterMs: 50 }, new Error("boom"), {}] as Array<Result | Error>,
      at: [0, 5, 55, 60],
      requeuesAfter: 0,
      reason: "requeueAfterMs resets the backoff, so the next error starts from the base again",
    },
  ])("$reason", async ({ results, at, requeuesAfter }) => {
    const queue = new WorkQueue();
    const calls: number[] = [];
    const errors: string[] = [];
    let i = 0;
    const done = runWorkers(
      queue,
      1,
      async () => {
        calls.push(Date.now() - start);
        const result = results[i++];
        if (result instanceof Error) throw result;
        return result ?? {};
      },
      { onError: (key, err) => errors.push(`${key}: ${err.message}`) },
    );
    const start = Date.now();
    queue.add("k");
    await advance(10_000);
    expect(calls).toEqual(at);
    expect(errors).toEqual(results.filter((r) => r instanceof Error).map(() => "k: boom"));
    expect(queue.numRequeues("k")).toBe(requeuesAfter);
    queue.shutDown();
    await done;
  });

  it("survives a handler that throws synchronously, a non-Error, and an onError that throws", async () => {
    const queue = new WorkQueue();
    let calls = 0;
    const done = runWorkers(
      queue,
      1,
      ((key: string) => {
        calls++;
        if (calls === 1) throw new Error(`sync ${key}`);
        if (calls === 2) return Promise.reject("a string");
        return Promise.resolve({});
      }) as (key: string) => Promise<Result>,
      {
        onError: () => {
          throw new Error("broken reporter");
        },
      },
    );
    queue.add("k");
    await advance(100);
    expect(calls).toBe(3);
    queue.shutDown();
    await expect(done).resolves.toBeUndefined();
  });

  it("resolves only when every worker has finished after shut down", async () => {
    const queue = new WorkQueue();
    const d = deferred<Result>();
    const done = track(runWorkers(queue, 3, () => d.promise));
    queue.add("a");
    await advance(0);
    queue.shutDown();
    await advance(0);
    expect(done.settled()).toBe(false);
    d.resolve({});
    await advance(0);
    expect(done.settled()).toBe(true);
  });

  it("measures a stuck worker: unfinished work and the longest-running processor grow while it holds its key", async () => {
    const queue = new WorkQueue();
    const stuck = deferred<Result>();
    const done = runWorkers(queue, 2, (key) => (key === "stuck" ? stuck.promise : Promise.resolve({})));
    queue.add("stuck");
    await advance(0);
    await advance(3_000);
    queue.add("quick");
    await advance(0);
    expect(queue.unfinishedWork()).toEqual({ unfinishedWorkSeconds: 3, longestRunningProcessorSeconds: 3 });
    stuck.resolve({});
    await advance(0);
    expect(queue.unfinishedWork()).toEqual({ unfinishedWorkSeconds: 0, longestRunningProcessorSeconds: 0 });
    queue.shutDown();
    await done;
  });

  it.each([0, -1, 1.5, NaN])("rejects a concurrency of %p", async (concurrency) => {
    await expect(runWorkers(new WorkQueue(), concurrency, async () => ({}))).rejects.toThrow(
      /concurrency must be a positive integer/,
    );
  });
});

describe("settle", () => {
  const cases: Array<{
    reason: string;
    ending: Parameters<typeof settle>[2];
    want: ReconcileOutcome;
    requeues: number;
    delayed: boolean;
  }> = [
    {
      reason: "the empty result is done: the backoff forgotten, nothing queued",
      ending: { result: {} },
      want: "success",
      requeues: 0,
      delayed: false,
    },
    {
      reason: "requeueAfterMs forgets the backoff and brings the key back later",
      ending: { result: { requeueAfterMs: 50 } },
      want: "requeue_after",
      requeues: 0,
      delayed: true,
    },
    {
      reason: "requeue counts one more on the backoff",
      ending: { result: { requeue: true } },
      want: "requeue",
      requeues: 2,
      delayed: true,
    },
    {
      reason: "an error counts one more on the backoff",
      ending: { error: new Error("away") },
      want: "error",
      requeues: 2,
      delayed: true,
    },
    {
      reason: "a TerminalError forgets the backoff and queues nothing",
      ending: { error: new TerminalError("no") },
      want: "error",
      requeues: 0,
      delayed: false,
    },
  ];
  it.each(cases)("$reason", async ({ ending, want, requeues, delayed }) => {
    const queue = new WorkQueue();
    queue.addRateLimited("k"); // one failure already counted
    await advance(1_000);
    const key = (await queue.get())!;
    expect(settle(queue, key, ending)).toBe(want);
    queue.done(key);
    expect(queue.numRequeues(key)).toBe(requeues);
    await advance(10_000);
    expect(queue.len).toBe(delayed ? 1 : 0);
  });
});
