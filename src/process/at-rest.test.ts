import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { memoryReducingCollection, RestCollector, type RestTimers } from "./at-rest.ts";

/** Timers a test fires by hand: `tick()` ends one window. */
function handTimers(): RestTimers & { tick(): void; running(): boolean } {
  let run: (() => void) | undefined;
  return {
    every: (fn) => {
      run = fn;
      return "handle";
    },
    clear: () => (run = undefined),
    tick: () => run?.(),
    running: () => run !== undefined,
  };
}

/**
 * A collector over scripted windows, and the windows it collected in; `heaps` the heap in use at
 * each window's end (a small heap where not given; the fake collection frees nothing).
 */
function scripted(heaps: readonly number[] = []) {
  const timers = handTimers();
  const collections: number[] = [];
  let utilization = 0;
  let window = 0;
  const collector = new RestCollector({
    timers,
    maxUtilization: 0.02,
    utilization: () => utilization,
    heapUsed: () => heaps[window - 1] ?? 1024,
    collect: () => collections.push(window),
  });
  collector.start();
  /** Ends one window whose event loop was busy `u` of the time. */
  const windowOf = (u: number) => {
    window++;
    utilization = u;
    timers.tick();
  };
  return { collector, collections, windowOf, timers };
}

describe("RestCollector", () => {
  it.each([
    {
      reason: "the start is work: the first quiet window collects",
      windows: [0.001],
      collectedIn: [1],
    },
    {
      reason: "busy windows collect nothing; the first quiet one after them does",
      windows: [0.3, 0.5, 0.001],
      collectedIn: [3],
    },
    {
      reason: "rest after rest collects once, however long it lasts",
      windows: [0.001, 0.001, 0.0, 0.001],
      collectedIn: [1],
    },
    {
      reason: "a long rest collects again once the heap has grown by the regrowth bound since",
      windows: [0.001, 0.001, 0.001, 0.001, 0.001],
      heapUsed: [1024, 2048, 3 * 2 ** 20, 4 * 2 ** 20 + 1024, 4 * 2 ** 20 + 2048],
      collectedIn: [1, 4],
    },
    {
      reason: "work after a collection makes the next quiet window collect again",
      windows: [0.001, 0.2, 0.001, 0.001],
      collectedIn: [1, 3],
    },
    {
      reason: "a window at the threshold is rest (an idle leader renews its Lease)",
      windows: [0.02],
      collectedIn: [1],
    },
  ])("$reason", ({ windows, collectedIn, heapUsed }) => {
    const { collections, windowOf } = scripted(heapUsed);
    for (const u of windows) windowOf(u);
    expect(collections).toEqual(collectedIn);
  });

  it("leaves a heap over the bound (32 MiB by default) alone, and collects once it is under it", () => {
    let heapUsed = 40 * 2 ** 20;
    const timers = handTimers();
    let collected = 0;
    const collector = new RestCollector({
      timers,
      utilization: () => 0,
      heapUsed: () => heapUsed,
      collect: () => collected++,
    });
    collector.start();
    timers.tick();
    timers.tick();
    expect(collected).toBe(0);
    heapUsed = 20 * 2 ** 20;
    timers.tick();
    expect(collected).toBe(1);
  });

  it("tells what each collection did", () => {
    const timers = handTimers();
    const heaps = [40, 10];
    const told: unknown[] = [];
    const collector = new RestCollector({
      timers,
      utilization: () => 0,
      heapUsed: () => heaps.shift() ?? 0,
      collect: () => undefined,
      onCollected: (done) => told.push(done),
    });
    collector.start();
    timers.tick();
    expect(told).toEqual([{ ms: expect.any(Number), heapBefore: 40, heapAfter: 10 }]);
  });

  it("stops reading the event loop on stop", () => {
    const { collector, collections, windowOf, timers } = scripted();
    collector.stop();
    expect(timers.running()).toBe(false);
    windowOf(0);
    expect(collections).toEqual([]);
  });
});

describe("memoryReducingCollection", () => {
  it("collects garbage, without a gc on the global object", async () => {
    const hadGc = "gc" in globalThis;
    const collect = memoryReducingCollection();
    let target: object | undefined = { some: "garbage" };
    const ref = new WeakRef(target);
    target = undefined;
    // A WeakRef's target lives until the job that made it ends.
    await new Promise((r) => setImmediate(r));
    collect();
    expect(ref.deref()).toBeUndefined();
    expect("gc" in globalThis).toBe(hadGc);
  });
});

describe("keepWasmAtBaseline", () => {
  // A process of its own: V8's flags are the process's. A WebAssembly function with a hot loop
  // is compiled by Liftoff, then, once hot, by TurboFan; with the flags set first it stays in
  // Liftoff code. %IsLiftoffFunction is V8's test intrinsic (--allow-natives-syntax).
  const atRest = fileURLToPath(new URL("./at-rest.ts", import.meta.url));
  const script = (keep: boolean) => `
    ${keep ? `const { keepWasmAtBaseline } = await import(${JSON.stringify(atRest)}); keepWasmAtBaseline();` : ""}
    // (func (export "spin") (param i32) (result i32): counts its argument down to 0 in a loop.
    const bytes = new Uint8Array([
      0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00,
      0x01, 0x06, 0x01, 0x60, 0x01, 0x7f, 0x01, 0x7f,
      0x03, 0x02, 0x01, 0x00,
      0x07, 0x08, 0x01, 0x04, 0x73, 0x70, 0x69, 0x6e, 0x00, 0x00,
      0x0a, 0x1a, 0x01, 0x18, 0x00,
      0x02, 0x40, 0x03, 0x40, 0x20, 0x00, 0x45, 0x0d, 0x01,
      0x20, 0x00, 0x41, 0x01, 0x6b, 0x21, 0x00, 0x0c, 0x00, 0x0b, 0x0b,
      0x20, 0x00, 0x0b,
    ]);
    const { spin } = new WebAssembly.Instance(new WebAssembly.Module(bytes)).exports;
    const deadline = Date.now() + 5_000;
    // Tier-up compiles in the background: run until it is done, or for 5 s (it takes well under 1 s).
    let rounds = 0;
    while (Date.now() < deadline && (%IsLiftoffFunction(spin) || rounds < 200)) {
      spin(1_000_000);
      rounds++;
      if (rounds % 50 === 0) await new Promise((r) => setTimeout(r, 20));
    }
    console.log(%IsLiftoffFunction(spin) ? "liftoff" : "optimized");
  `;
  const run = (keep: boolean) =>
    spawnSync(process.execPath, ["--allow-natives-syntax", "--input-type=module", "-e", script(keep)], {
      encoding: "utf8",
      timeout: 60_000,
    });

  it.each([
    { reason: "without the flags, V8 tiers the hot function up", keep: false, tier: "optimized" },
    { reason: "with them, the function stays baseline code", keep: true, tier: "liftoff" },
  ])("$reason", ({ keep, tier }) => {
    const result = run(keep);
    expect(result.stderr).toBe("");
    expect(result.stdout.trim()).toBe(tier);
  });
});
