import { jest } from "@jest/globals";
import { track } from "../../test/harness/promises.ts";
import {
  BucketRateLimiter,
  defaultControllerRateLimiter,
  ItemExponentialFailureRateLimiter,
} from "./rate-limiter.ts";
import { classifyError, TerminalError } from "./reconciler.ts";
import { WorkQueue, type WorkQueueObserver } from "./workqueue.ts";

beforeEach(() => {
  jest.useFakeTimers();
});
afterEach(() => {
  jest.useRealTimers();
});

/** Runs due timers and settles the promise callbacks they start. */
const advance = (ms: number) => jest.advanceTimersByTimeAsync(ms);

/** Takes every queued key at once (each is then being processed) and calls done on them. */
async function drainQueued(queue: WorkQueue): Promise<string[]> {
  const keys: string[] = [];
  while (queue.len > 0) keys.push((await queue.get())!);
  for (const key of keys) queue.done(key);
  return keys;
}

/** A queue that has handed `key` out to a worker: the key is being processed. */
async function processing(key: string): Promise<WorkQueue> {
  const queue = new WorkQueue();
  queue.add(key);
  expect(await queue.get()).toBe(key);
  return queue;
}

describe("WorkQueue.add", () => {
  it.each([
    {
      adds: ["a", "a", "a"],
      want: ["a"],
      reason: "a key added many times before processing is processed once",
    },
    { adds: ["a", "b", "a", "c", "b"], want: ["a", "b", "c"], reason: "dedupe keeps first-add order" },
    { adds: [], want: [], reason: "nothing added, nothing handed out" },
  ])("$reason", async ({ adds, want }) => {
    const queue = new WorkQueue();
    for (const key of adds) queue.add(key);
    expect(queue.len).toBe(want.length);
    expect(await drainQueued(queue)).toEqual(want);
  });

  it("never hands a key being processed to a second worker; it is requeued once on done", async () => {
    const queue = await processing("a");

    queue.add("a");
    queue.add("a");
    expect(queue.len).toBe(0); // held back while "a" is processed
    const second = track(queue.get());
    await advance(0);
    expect(second.settled()).toBe(false);

    queue.done("a");
    await advance(0);
    expect(second.value()).toBe("a");
    queue.done("a");
    expect(queue.len).toBe(0); // the two adds during processing made one more round, not two
  });

  it("does not requeue on done when the key was not added meanwhile", async () => {
    const queue = new WorkQueue();
    queue.add("a");
    queue.done((await queue.get())!);
    expect(queue.len).toBe(0);
  });

  it("lets other keys through while one is processed", async () => {
    const queue = await processing("a");
    queue.add("a");
    queue.add("b");
    expect(await queue.get()).toBe("b");
  });
});

describe("WorkQueue.add with a priority: the low lane", () => {
  it.each([
    {
      adds: [
        ["a", "low"],
        ["b", "normal"],
        ["c", "low"],
        ["d", "normal"],
      ],
      want: ["b", "d", "a", "c"],
      reason: "low keys wait behind every normal key, each lane in first-add order",
    },
    {
      adds: [
        ["a", "low"],
        ["b", "low"],
        ["b", "normal"],
      ],
      want: ["b", "a"],
      reason: "a low key added again with the normal priority moves to the normal lane",
    },
    {
      adds: [
        ["a", "normal"],
        ["b", "low"],
        ["a", "low"],
      ],
      want: ["a", "b"],
      reason: "a normal key added again low stays normal",
    },
    {
      adds: [
        ["a", "low"],
        ["a", "low"],
        ["a", "normal"],
        ["a", "low"],
      ],
      want: ["a"],
      reason: "one key, however often and in whatever lane it is added, is handed out once",
    },
  ] as Array<{ adds: Array<[string, "low" | "normal"]>; want: string[]; reason: string }>)(
    "$reason",
    async ({ adds, want }) => {
      const queue = new WorkQueue();
      for (const [key, priority] of adds) queue.add(key, priority);
      expect(queue.len).toBe(want.length);
      expect(await drainQueued(queue)).toEqual(want);
    },
  );

  it("a key added low while processed is queued again in the low lane on done, or in the normal one if added so too", async () => {
    const queue = await processing("a");
    queue.add("a", "low");
    queue.add("b", "low");
    queue.add("c");
    queue.done("a");
    expect(await drainQueued(queue)).toEqual(["c", "b", "a"]);

    queue.add("x");
    expect(await queue.get()).toBe("x");
    queue.add("x", "low");
    queue.add("x");
    queue.add("y", "low");
    queue.done("x");
    expect(await drainQueued(queue)).toEqual(["x", "y"]);
  });

  it("hands out tens of thousands of keys in order, the entries left behind by promoted keys dropped", async () => {
    const queue = new WorkQueue();
    const n = 30_000;
    for (let i = 0; i < n; i++) queue.add(`k${i}`, "low");
    // Every other key promoted: the low lane keeps entries for them until dropped or passed.
    for (let i = 0; i < n; i += 2) queue.add(`k${i}`);
    expect(queue.len).toBe(n);
    const got = await drainQueued(queue);
    const evens = Array.from({ length: n / 2 }, (_, i) => `k${2 * i}`);
    const odds = Array.from({ length: n / 2 }, (_, i) => `k${2 * i + 1}`);
    expect(got).toEqual([...evens, ...odds]);
    expect(queue.len).toBe(0);
  });

  it("after shut down, still hands out the keys of both lanes, then undefined", async () => {
    const queue = new WorkQueue();
    queue.add("a", "low");
    queue.add("b");
    queue.shutDown();
    queue.add("c");
    expect(await queue.get()).toBe("b");
    expect(await queue.get()).toBe("a");
    expect(await queue.get()).toBeUndefined();
  });
});

describe("WorkQueue.addAfter", () => {
  it.each([
    {
      calls: [
        ["a", 100],
        ["b", 50],
      ] as const,
      at: { 49: [], 50: ["b"], 100: ["a"] },
      reason: "keys become ready in order of their delays, not of the calls",
    },
    {
      calls: [
        ["a", 100],
        ["a", 30],
      ] as const,
      at: { 30: ["a"], 100: [] },
      reason: "an earlier delay for a pending key wins, and the later one does not fire again",
    },
    {
      calls: [
        ["a", 30],
        ["a", 100],
      ] as const,
      at: { 30: ["a"], 100: [] },
      reason: "a later delay never postpones a pending key",
    },
    {
      calls: [
        ["a", 0],
        ["b", -5],
      ] as const,
      at: { 0: ["a", "b"] },
      reason: "a delay of zero or less adds at once",
    },
    {
      calls: [
        ["a", 20],
        ["b", 20],
        ["c", 10],
      ] as const,
      at: { 10: ["c"], 20: ["a", "b"] },
      reason: "keys due at the same time keep the order of their calls",
    },
  ])("$reason", async ({ calls, at }) => {
    const queue = new WorkQueue();
    for (const [key, ms] of calls) queue.addAfter(key, ms);
    let now = 0;
    for (const [time, want] of Object.entries(at)) {
      await advance(Number(time) - now);
      now = Number(time);
      expect({ time, got: await drainQueued(queue) }).toEqual({ time, got: want });
    }
  });
  it("holds thousands of delayed keys (writes waiting for the budget) on one timer, due in order", async () => {
    const queue = new WorkQueue();
    // 5,000 places reserved 2 ms apart (500 writes a second), added out of order.
    const n = 5000;
    for (let i = n - 1; i >= 0; i--) queue.addAfter(`k${i}`, 2 * (i + 1));
    expect(jest.getTimerCount()).toBe(1);
    const got: string[] = [];
    for (let t = 0; t < 2 * n; t += 100) {
      await advance(100);
      got.push(...(await drainQueued(queue)));
      expect(jest.getTimerCount()).toBeLessThanOrEqual(1);
    }
    expect(got).toEqual(Array.from({ length: n }, (_, i) => `k${i}`));
    expect(jest.getTimerCount()).toBe(0);
  });

  it("a key moved sooner again and again fires once, at its soonest time", async () => {
    const queue = new WorkQueue();
    for (let ms = 3000; ms > 0; ms -= 1) queue.addAfter("a", ms);
    queue.addAfter("b", 2);
    expect(jest.getTimerCount()).toBe(1);
    await advance(1);
    expect(await drainQueued(queue)).toEqual(["a"]);
    await advance(1);
    expect(await drainQueued(queue)).toEqual(["b"]);
    await advance(3000);
    expect(await drainQueued(queue)).toEqual([]);
    expect(jest.getTimerCount()).toBe(0);
  });
});

describe("rate limiters", () => {
  it.each([
    { base: 5, max: 1_000_000, failures: 6, want: [5, 10, 20, 40, 80, 160], reason: "doubles from the base" },
    { base: 5, max: 30, failures: 5, want: [5, 10, 20, 30, 30], reason: "capped at the maximum" },
    {
      base: 5,
      max: 1_000_000,
      failures: 40,
      want: [...Array.from({ length: 18 }, (_, i) => 5 * 2 ** i), ...Array(22).fill(1_000_000)],
      reason: "client-go's defaults reach the 1000 s cap at the 19th failure and stay there",
    },
  ])("exponential backoff: $reason", ({ base, max, failures, want }) => {
    const limiter = new ItemExponentialFailureRateLimiter({ baseDelayMs: base, maxDelayMs: max });
    const got = Array.from({ length: failures }, () => limiter.when("a"));
    expect(got).toEqual(want);
    expect(limiter.numRequeues("a")).toBe(failures);
    expect(limiter.numRequeues("b")).toBe(0);
  });

  it("tracks backoff per key, and forget resets one key only", () => {
    const limiter = new ItemExponentialFailureRateLimiter();
    expect([limiter.when("a"), limiter.when("a"), limiter.when("b")]).toEqual([5, 10, 5]);
    limiter.forget("a");
    expect(limiter.numRequeues("a")).toBe(0);
    expect([limiter.when("a"), limiter.when("b")]).toEqual([5, 10]);
  });

  it.each([
    {
      qps: 10,
      burst: 3,
      steps: [[0, 0, 0, 0, 100, 200]],
      reason: "a burst passes, then one token per 100 ms",
    },
    {
      qps: 10,
      burst: 2,
      steps: [
        [0, 0, 0, 100],
        [250, 0, 50],
      ],
      reason: "tokens refill with time; a taken token is owed until refilled",
    },
    {
      qps: 10,
      burst: 2,
      steps: [
        [0, 0],
        [10_000, 0, 0, 100],
      ],
      reason: "a long pause refills the bucket only up to the burst",
    },
  ])("token bucket: $reason", ({ qps, burst, steps }) => {
    const limiter = new BucketRateLimiter({ qps, burst });
    for (const [wait, ...want] of steps) {
      jest.advanceTimersByTime(wait!);
      const got = want.map(() => limiter.when());
      expect(got.map((ms) => Math.round(ms))).toEqual(want);
    }
  });

  it("the default controller limiter is the larger of backoff and bucket (10 qps, burst 100)", () => {
    const limiter = defaultControllerRateLimiter();
    const delays = Array.from({ length: 102 }, (_, i) => limiter.when(`k${i}`));
    expect(delays.slice(0, 100)).toEqual(Array(100).fill(5)); // per-key backoff dominates
    expect(delays.slice(100).map(Math.round)).toEqual([100, 200]); // then the bucket does
    expect(limiter.when("k0")).toBeGreaterThanOrEqual(300); // bucket owed beyond k0's 10 ms
    expect(limiter.numRequeues("k0")).toBe(2);
  });
});

describe("WorkQueue.addRateLimited", () => {
  it("delays each retry of a key twice as long, until forget", async () => {
    const queue = new WorkQueue();
    const readyAfter: number[] = [];
    for (let i = 0; i < 4; i++) {
      queue.addRateLimited("a");
      let waited = 0;
      while (queue.len === 0) {
        await advance(1);
        waited++;
      }
      readyAfter.push(waited);
      await drainQueued(queue);
    }
    expect(readyAfter).toEqual([5, 10, 20, 40]);
    expect(queue.numRequeues("a")).toBe(4);

    queue.forget("a");
    expect(queue.numRequeues("a")).toBe(0);
    queue.addRateLimited("a");
    await advance(4);
    expect(queue.len).toBe(0);
    await advance(1);
    expect(queue.len).toBe(1);
  });

  it("limits a burst of distinct keys to the bucket", async () => {
    const queue = new WorkQueue({
      rateLimiter: defaultControllerRateLimiter({ qps: 10, burst: 2 }),
    });
    for (const key of ["a", "b", "c", "d"]) queue.addRateLimited(key);
    await advance(5);
    expect(await drainQueued(queue)).toEqual(["a", "b"]);
    await advance(95);
    expect(await drainQueued(queue)).toEqual(["c"]);
    await advance(100);
    expect(await drainQueued(queue)).toEqual(["d"]);
  });
});

describe("WorkQueue shut down", () => {
  it("resolves a waiting get to undefined", async () => {
    const queue = new WorkQueue();
    const waiting = track(queue.get());
    queue.shutDown();
    await advance(0);
    expect(waiting.settled()).toBe(true);
    expect(waiting.value()).toBeUndefined();
  });

  it("still hands out the keys already queued, then undefined at once", async () => {
    const queue = new WorkQueue();
    queue.add("a");
    queue.add("b");
    queue.shutDown();
    expect(queue.isShuttingDown).toBe(true);
    expect([await queue.get(), await queue.get(), await queue.get()]).toEqual(["a", "b", undefined]);
  });

  it.each([
    { name: "add", act: (q: WorkQueue) => q.add("x") },
    { name: "addAfter", act: (q: WorkQueue) => q.addAfter("x", 10) },
    { name: "addRateLimited", act: (q: WorkQueue) => q.addRateLimited("x") },
  ])("ignores $name after shut down (nothing new is accepted)", async ({ act }) => {
    const queue = new WorkQueue();
    queue.shutDown();
    act(queue);
    await advance(10_000);
    expect(queue.len).toBe(0);
    expect(await queue.get()).toBeUndefined();
  });

  it("drops keys still waiting on a delay", async () => {
    const queue = new WorkQueue();
    queue.addAfter("a", 10);
    queue.shutDown();
    await advance(100);
    expect(queue.len).toBe(0);
    expect(jest.getTimerCount()).toBe(0);
  });

  it("shutDownWithDrain waits for keys being processed, and only for them", async () => {
    const queue = new WorkQueue();
    queue.add("a");
    queue.add("b");
    const a = (await queue.get())!;
    const b = (await queue.get())!;
    const drained = track(queue.shutDownWithDrain());
    queue.done(a);
    await advance(0);
    expect(drained.settled()).toBe(false);
    queue.done(b);
    await advance(0);
    expect(drained.settled()).toBe(true);
    await expect(new WorkQueue().shutDownWithDrain()).resolves.toBeUndefined();
  });
});

describe("WorkQueueObserver", () => {
  it("reports adds, depth, queue latency, work duration, retries and unfinished work", async () => {
    const seen = {
      adds: 0,
      retries: 0,
      depth: [] as number[],
      latency: [] as number[],
      work: [] as number[],
    };
    const observer: WorkQueueObserver = {
      onAdd: () => seen.adds++,
      onRetry: () => seen.retries++,
      onDepth: (d) => seen.depth.push(d),
      onGet: (s) => seen.latency.push(s),
      onDone: (s) => seen.work.push(s),
    };
    const queue = new WorkQueue({ observer });
    queue.add("a");
    queue.add("a"); // merged: not an add
    queue.add("b");
    await advance(250);
    const a = (await queue.get())!;
    await advance(1500);
    expect(queue.unfinishedWork()).toEqual({
      unfinishedWorkSeconds: 1.5,
      longestRunningProcessorSeconds: 1.5,
    });
    const b = (await queue.get())!;
    await advance(500);
    expect(queue.unfinishedWork()).toEqual({ unfinishedWorkSeconds: 2.5, longestRunningProcessorSeconds: 2 });
    queue.done(a);
    queue.done(b);
    queue.addAfter("c", 10);

    expect(seen.adds).toBe(2);
    expect(seen.depth).toEqual([1, 2, 1, 0]);
    expect(seen.latency).toEqual([0.25, 1.75]);
    expect(seen.work).toEqual([2, 0.5]);
    expect(seen.retries).toBe(1);
    expect(queue.unfinishedWork()).toEqual({ unfinishedWorkSeconds: 0, longestRunningProcessorSeconds: 0 });
  });

  it("keeps working when the observer throws", async () => {
    const queue = new WorkQueue({
      observer: {
        onAdd: () => {
          throw new Error("broken metrics");
        },
      },
    });
    queue.add("a");
    expect(await queue.get()).toBe("a");
  });
});

describe("classifyError", () => {
  const cases: Array<{ reason: string; err: unknown; want: "terminal" | "panic" | "error" }> = [
    { reason: "an ordinary failure is retried", err: new Error("the API server is away"), want: "error" },
    { reason: "a TerminalError is terminal", err: new TerminalError("refused"), want: "terminal" },
    {
      reason: "a TerminalError from another copy of the module (the brand, not instanceof)",
      err: Object.defineProperty(new Error("x"), Symbol.for("referable.dev/TerminalError"), { value: true }),
      want: "terminal",
    },
    { reason: "a TypeError is a bug: a panic", err: new TypeError("x is undefined"), want: "panic" },
    { reason: "a ReferenceError is a panic", err: new ReferenceError("y"), want: "panic" },
    {
      reason: "a RangeError is a panic",
      err: new RangeError("Maximum call stack size exceeded"),
      want: "panic",
    },
    {
      reason: "fetch's failed connection (a TypeError with a cause) is the network's, not a bug",
      err: new TypeError("fetch failed", { cause: new Error("read ECONNRESET") }),
      want: "error",
    },
    { reason: "a thrown string is a panic", err: "a string", want: "panic" },
    { reason: "a thrown undefined is a panic", err: undefined, want: "panic" },
    {
      reason: "a malformed response (SyntaxError) is not our bug",
      err: new SyntaxError("JSON"),
      want: "error",
    },
  ];
  it.each(cases)("$reason", ({ err, want }) => {
    expect(classifyError(err)).toBe(want);
  });
});
