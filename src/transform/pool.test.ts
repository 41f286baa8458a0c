import { spawnSync } from "node:child_process";
import { isResolutionError } from "../api/errors.ts";
import { compileTransform, type TransformInput, type TransformShape } from "./engine.ts";
import { TransformPool } from "./pool.ts";

const S: TransformShape = { mode: "Single", hasDefault: false };
const input = (value: unknown): TransformInput => ({ value, sources: [] });
const LIMITS = { maxValueBytes: 32 * 1024 };
/** No budget to speak of: these cases are about what stops an evaluation the meter lets run. */
const UNMETERED = { maxValueBytes: 32 * 1024, costBudget: 1e15 };
const hundred = `[${Array.from({ length: 100 }, (_, i) => i).join(", ")}]`;
/** 10^8 steps: minutes of CPU if nothing stops it. */
const SPIN = `${hundred}.map(a, ${hundred}.map(b, ${hundred}.map(c, ${hundred}.map(d, a + b + c + d).size()).size()).size()).size()`;
/** Lists of lists of a thousand strings: hundreds of MiB if nothing stops it. */
const HOG = `cel.bind(l, ${hundred}.map(i, 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx' + string(i)), l.map(a, l.map(b, l.map(c, [a, b, c]))).size())`;

async function outcome(p: Promise<{ value: unknown }>): Promise<unknown> {
  try {
    return (await p).value;
  } catch (err) {
    if (!isResolutionError(err)) throw err;
    return { reason: err.reason, message: err.message };
  }
}

describe("TransformPool", () => {
  let pool: TransformPool;
  afterEach(async () => {
    await pool.close();
  });

  it("evaluates in a worker as the engine does in process", async () => {
    pool = new TransformPool();
    const inProcess = compileTransform("value + '!'", S).evaluate(input("v"), LIMITS);
    await expect(pool.evaluate("value + '!'", S, input("v"), LIMITS)).resolves.toEqual(inProcess);
    // The engine's own failures come back as they are.
    expect(await outcome(pool.evaluate("value.missing", S, input({}), LIMITS))).toEqual({
      reason: "TransformFailed",
      message: expect.stringContaining("the transform failed"),
    });
  });

  it("stops an evaluation past its deadline, says so, and the next evaluation runs in a new worker", async () => {
    pool = new TransformPool({ timeoutMs: 50 });
    const started = Date.now();
    expect(await outcome(pool.evaluate(SPIN, S, input(null), UNMETERED))).toEqual({
      reason: "TransformFailed",
      message:
        "the transform ran past its time limit of 50 ms: make it do less work (quarantined: evaluated again in 1 s, apart from the other transforms)",
    });
    // At most the hard wall-clock deadline (10x), whatever the machine's load.
    expect(Date.now() - started).toBeLessThan(50 * 10 + 2000);
    await expect(pool.evaluate("value + 1", S, input(1), LIMITS)).resolves.toMatchObject({ value: 2 });
  });

  it("stops an evaluation that reaches the heap ceiling, says so, and carries on", async () => {
    pool = new TransformPool({ timeoutMs: 60_000, maxHeapMiB: 16 });
    expect(await outcome(pool.evaluate(HOG, S, input(null), UNMETERED))).toEqual({
      reason: "TransformFailed",
      message:
        "the transform ran out of its memory limit of 16 MiB: make it build smaller values (quarantined: evaluated again in 1 s, apart from the other transforms)",
    });
    await expect(pool.evaluate("value + 1", S, input(1), LIMITS)).resolves.toMatchObject({ value: 2 });
  });

  it("fails only the evaluation that overran: those queued behind it in the same worker are answered", async () => {
    pool = new TransformPool({ workers: 1, timeoutMs: 50 });
    const hostile = outcome(pool.evaluate(SPIN, S, input(null), UNMETERED));
    const canaries = Array.from({ length: 20 }, (_, i) =>
      outcome(pool.evaluate("value * 2", S, input(i), LIMITS)),
    );
    expect(await hostile).toMatchObject({ reason: "TransformFailed" });
    expect(await Promise.all(canaries)).toEqual(Array.from({ length: 20 }, (_, i) => i * 2));
  });

  it("fails an expression that overran at once, for its backoff, and only that expression", async () => {
    pool = new TransformPool({ timeoutMs: 50, quarantineBackoffMs: [60_000, 300_000] });
    const first = await outcome(pool.evaluate(SPIN, S, input(null), UNMETERED));
    expect(pool.quarantined).toBe(1);
    // The same message, so a status does not change for it; no worker spent on it: it is
    // answered before the event loop reaches I/O (a worker's answer cannot be), and nothing ran
    // in the quarantine's lane.
    const again = outcome(pool.evaluate(SPIN, S, input(null), UNMETERED));
    const waited = new Promise((resolve) => setImmediate(() => resolve("answered only after I/O")));
    expect(await Promise.race([again, waited])).toEqual(first);
    expect(pool.quarantineEvaluations).toBe(0);
    // Another input too, until the backoff (now at most its first step again) ends; it says when.
    expect(await outcome(pool.evaluate(SPIN, S, input(1), UNMETERED))).toEqual(first);
    expect(pool.quarantineEvaluations).toBe(0);
    expect(pool.retryAfterMs(SPIN, S)).toBeGreaterThan(50_000);
    expect(pool.retryAfterMs("value + 1", S)).toBeUndefined();
    await expect(pool.evaluate("value + 1", S, input(1), LIMITS)).resolves.toMatchObject({ value: 2 });
  });

  it("evaluates a quarantined expression again after its backoff, in its own lane, doubling the backoff on the same input and restarting it on a new one", async () => {
    pool = new TransformPool({ timeoutMs: 50, quarantineBackoffMs: [200, 300_000] });
    await outcome(pool.evaluate(SPIN, S, input(null), UNMETERED));
    await new Promise((resolve) => setTimeout(resolve, 250));
    // Past the backoff, the same input: evaluated again (in the quarantine's lane), twice as long.
    expect(await outcome(pool.evaluate(SPIN, S, input(null), UNMETERED))).toMatchObject({
      message: expect.stringContaining("evaluated again in 400 ms"),
    });
    expect(pool.quarantineEvaluations).toBe(1);
    // A new input brings the wait back to its first step at most.
    expect(await outcome(pool.evaluate(SPIN, S, input(1), UNMETERED))).toMatchObject({
      reason: "TransformFailed",
    });
    expect(pool.retryAfterMs(SPIN, S)).toBeLessThanOrEqual(200);
    await new Promise((resolve) => setTimeout(resolve, 250));
    expect(await outcome(pool.evaluate(SPIN, S, input(1), UNMETERED))).toMatchObject({
      message: expect.stringContaining("evaluated again in 200 ms"),
    });
    expect(pool.quarantineEvaluations).toBe(2);
  }, 30_000);

  it("never makes a healthy expression wait behind quarantined ones", async () => {
    pool = new TransformPool({ workers: 1, timeoutMs: 50, quarantineBackoffMs: [100, 300_000] });
    // Ten expressions quarantined, then each evaluated again after its backoff: ten deadlines
    // (and ten worker starts) of work in the quarantine's lane.
    const bad = Array.from({ length: 10 }, (_, i) => `${SPIN} + ${i}`);
    await Promise.all(bad.map((text) => outcome(pool.evaluate(text, S, input(0), UNMETERED))));
    expect(pool.quarantined).toBe(10);
    await new Promise((resolve) => setTimeout(resolve, 150));
    const again = bad.map((text) => outcome(pool.evaluate(text, S, input(1), UNMETERED)));
    let healthyDone = 0;
    const healthy = Array.from({ length: 20 }, (_, i) =>
      pool.evaluate("value * 2", S, input(i), LIMITS).then((out) => {
        healthyDone++;
        return out.value;
      }),
    );
    let badDone = 0;
    const badSettled = again.map((p) => p.then(() => badDone++));
    expect(await Promise.all(healthy)).toEqual(Array.from({ length: 20 }, (_, i) => i * 2));
    // Every healthy one answered before the quarantine's lane got through its ten.
    expect(healthyDone).toBe(20);
    expect(badDone).toBeLessThan(10);
    await Promise.all(badSettled);
    expect(pool.quarantineEvaluations).toBe(10);
  }, 60_000);

  it("never makes a trusted expression wait behind the first evaluations of new ones", async () => {
    pool = new TransformPool({ workers: 1, timeoutMs: 50 });
    // Evaluated within its limits once: trusted, in the healthy lane from now on.
    await expect(pool.evaluate("value * 2", S, input(1), LIMITS)).resolves.toMatchObject({ value: 2 });
    // Ten new expressions that each run to the deadline, on probation.
    let badDone = 0;
    const bad = Array.from({ length: 10 }, (_, i) =>
      outcome(pool.evaluate(`${SPIN} + ${i}`, S, input(0), UNMETERED)).then(() => badDone++),
    );
    const healthy = await Promise.all(
      Array.from({ length: 20 }, (_, i) => pool.evaluate("value * 2", S, input(i), LIMITS)),
    );
    expect(healthy.map((h) => h.value)).toEqual(Array.from({ length: 20 }, (_, i) => i * 2));
    expect(badDone).toBeLessThan(10);
    await Promise.all(bad);
    expect(pool.quarantined).toBe(10);
  }, 60_000);

  it("keeps a key named __proto__, constructor or prototype, in and out", async () => {
    pool = new TransformPool();
    const value = JSON.parse('{"__proto__": 1, "constructor": 2, "prototype": 3}');
    const got = (
      await pool.evaluate(
        "{'__proto__': value['__proto__'], 'constructor': value.constructor, 'prototype': 3}",
        S,
        input(value),
        LIMITS,
      )
    ).value as object;
    expect(Object.keys(got)).toEqual(["__proto__", "constructor", "prototype"]);
    expect(JSON.stringify(got)).toBe('{"__proto__":1,"constructor":2,"prototype":3}');
  });

  it("without keepAlive, finishes an evaluation a script awaits, then lets the process exit though never closed", () => {
    pool = new TransformPool();
    const script = [
      `import { TransformPool } from ${JSON.stringify(new URL("./pool.ts", import.meta.url).href)};`,
      "const pool = new TransformPool({ keepAlive: false });",
      "const out = await pool.evaluate(\"value + '!'\", { mode: 'Single', hasDefault: false }, { value: 'v', sources: [] }, { maxValueBytes: 100 });",
      "console.log(JSON.stringify(out.value));",
    ].join("\n");
    const child = spawnSync(process.execPath, ["--input-type=module", "-e", script], {
      encoding: "utf8",
      timeout: 30_000,
      env: { PATH: process.env.PATH ?? "" },
    });
    expect({ status: child.status, signal: child.signal, stdout: child.stdout.trim() }).toEqual({
      status: 0,
      signal: null,
      stdout: '"v!"',
    });
  });

  it("starts no worker before the first evaluation, stops its workers once idle, and starts them again for the next", async () => {
    pool = new TransformPool({ idleStopMs: 200 });
    expect(pool.workersRunning).toBe(0);
    await expect(pool.evaluate("value + 1", S, input(1), LIMITS)).resolves.toMatchObject({ value: 2 });
    expect(pool.workersRunning).toBeGreaterThan(0);
    const deadline = Date.now() + 30_000;
    while (pool.workersRunning > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    expect(pool.workersRunning).toBe(0);
    // What it learned survives the stop: the next evaluation starts a worker and is answered.
    await expect(pool.evaluate("value + 2", S, input(1), LIMITS)).resolves.toMatchObject({ value: 3 });
    expect(pool.workersRunning).toBeGreaterThan(0);
  });

  it("fails what is pending when closed, and every evaluation after", async () => {
    pool = new TransformPool({ timeoutMs: 60_000 });
    const pending = outcome(pool.evaluate(SPIN, S, input(null), UNMETERED));
    await new Promise((resolve) => setTimeout(resolve, 20));
    await pool.close();
    expect(await pending).toMatchObject({
      reason: "TransformFailed",
      message: expect.stringContaining("closed"),
    });
    expect(await outcome(pool.evaluate("1", S, input(null), LIMITS))).toMatchObject({
      reason: "TransformFailed",
    });
  });
});
