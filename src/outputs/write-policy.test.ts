import fc from "fast-check";
import { TokenBucket, WritePolicy, type WritePolicyOptions } from "./write-policy.ts";

/**
 * The controller's use of the policy, on fake time: a source change queues its Referable at once;
 * a reconcile writes the latest value if the policy admits it, else looks again when told; a write
 * takes `writeMs`, and a change during it queues one more reconcile after it (the work queue's
 * dirty set). Only the policy decides when writes happen, so what the simulation sees is what
 * the policy promises.
 */
class Simulation {
  now = 0;
  private readonly timers: Array<{ at: number; seq: number; run: () => void }> = [];
  private seq = 0;
  readonly policy: WritePolicy;
  readonly writes: Array<{ at: number; referable: number; value: number }> = [];
  private readonly refs: Array<{
    bucket: ReturnType<WritePolicy["bucket"]> | undefined;
    latest: number;
    written: number;
    busy: boolean;
    queued: boolean;
    dirty: boolean;
  }> = [];
  private readonly writeMs: number;

  constructor(referables: number, options: WritePolicyOptions, writeMs = 5) {
    this.policy = new WritePolicy(options, () => this.now);
    this.writeMs = writeMs;
    for (let i = 0; i < referables; i++)
      this.refs.push({
        bucket: undefined,
        latest: -1,
        written: -1,
        busy: false,
        queued: false,
        dirty: false,
      });
  }

  at(time: number, run: () => void): void {
    this.timers.push({ at: time, seq: this.seq++, run });
  }

  /** The source of `referable` takes `value` at `time`. */
  change(time: number, referable: number, value: number): void {
    this.at(time, () => {
      this.refs[referable]!.latest = value;
      this.enqueue(referable, 0);
    });
  }

  run(until = Infinity): void {
    for (;;) {
      this.timers.sort((a, b) => a.at - b.at || a.seq - b.seq);
      const next = this.timers[0];
      if (!next || next.at > until) return;
      this.timers.shift();
      this.now = Math.max(this.now, next.at);
      next.run();
    }
  }

  lastWritten(referable: number): number {
    return this.refs[referable]!.written;
  }

  private enqueue(referable: number, delay: number): void {
    const r = this.refs[referable]!;
    if (r.busy) {
      r.dirty = true;
      return;
    }
    if (delay === 0 && r.queued) return;
    if (delay === 0) r.queued = true;
    this.at(this.now + delay, () => {
      if (delay === 0) r.queued = false;
      this.reconcile(referable, false);
    });
  }

  private reconcile(referable: number, reserved: boolean): void {
    const r = this.refs[referable]!;
    if (r.busy) {
      r.dirty = true;
      return;
    }
    if (r.written === r.latest) return;
    if (!reserved) {
      const admission = this.policy.admit((r.bucket ??= this.policy.bucket()));
      if (admission.write === false) return this.enqueue(referable, admission.retryAfterMs);
      if (admission.write === "after") {
        r.busy = true; // the worker waits, holding the Referable, as the controller's does
        this.at(this.now + admission.waitMs, () => {
          r.busy = false;
          this.reconcile(referable, true);
        });
        return;
      }
    }
    r.busy = true;
    const value = r.latest;
    this.writes.push({ at: this.now, referable, value });
    this.at(this.now + this.writeMs, () => {
      r.busy = false;
      r.written = value;
      if (r.dirty) {
        r.dirty = false;
        this.enqueue(referable, 0);
      }
    });
  }
}

/** Most writes in any window of `windowMs` (by `filter`). */
function mostInWindow(times: number[], windowMs: number): number {
  const sorted = [...times].sort((a, b) => a - b);
  let most = 0;
  let lo = 0;
  for (let hi = 0; hi < sorted.length; hi++) {
    while (sorted[hi]! - sorted[lo]! >= windowMs) lo++;
    most = Math.max(most, hi - lo + 1);
  }
  return most;
}

describe("TokenBucket", () => {
  it("starts full, refills at its rate, and keeps at most its burst", () => {
    const b = new TokenBucket(10, 3, 0);
    expect([b.tryTake(0), b.tryTake(0), b.tryTake(0)]).toEqual([0, 0, 0]);
    expect(b.tryTake(0)).toBeCloseTo(100); // the next token in 1/10 s; nothing taken
    expect(b.tryTake(50)).toBeCloseTo(50);
    expect(b.tryTake(100)).toBe(0);
    expect(b.full(10_000)).toBe(true);
    expect([0, 0, 0, 0].map(() => b.tryTake(10_000))).toEqual([0, 0, 0, 100]);
  });

  it("reserves tokens not there yet, each later than the one before", () => {
    const b = new TokenBucket(100, 1, 0);
    expect(b.reserve(0)).toBe(0);
    expect(b.reserve(0)).toBeCloseTo(10);
    expect(b.reserve(0)).toBeCloseTo(20);
    expect(b.reserve(5)).toBeCloseTo(25);
  });

  it("refuses settings that would stop every write", () => {
    expect(() => new TokenBucket(0, 1, 0)).toThrow(/rate/);
    expect(() => new TokenBucket(1, 0, 0)).toThrow(/burst/);
    expect(() => new WritePolicy({ rate: 0 })).toThrow(/rate/);
    expect(() => new WritePolicy({ burst: 0 })).toThrow(/burst/);
    expect(() => new WritePolicy({ budget: -1 })).toThrow(/budget/);
  });
});

describe("the write policy", () => {
  it("holds back no value of a source changing up to 20 times a second, with jitter", () => {
    // The defaults, and a source changing every 50 ms ± 20 ms (and, at times, twice in 30 ms).
    const sim = new Simulation(1, {});
    let t = 0;
    const changes: number[] = [];
    for (let i = 0; i < 400; i++) {
      t += 50 + (i % 2 ? 20 : -20);
      changes.push(t);
      sim.change(t, 0, i);
    }
    sim.run();
    expect(sim.writes.map((w) => w.value)).toEqual(changes.map((_, i) => i));
    // Each value is written the moment it arrives: the policy added no delay.
    expect(sim.writes.map((w) => w.at)).toEqual(changes);
  });

  it("holds back no value at exactly its rate", () => {
    const sim = new Simulation(1, { rate: 25, burst: 1 });
    for (let i = 0; i < 250; i++) sim.change(i * 40, 0, i);
    sim.run();
    expect(sim.writes.map((w) => [w.at, w.value])).toEqual(
      Array.from({ length: 250 }, (_, i) => [i * 40, i]),
    );
  });

  it("coalesces a storm, and always writes its last value, within one token's time", () => {
    const sim = new Simulation(1, { rate: 25, burst: 5 });
    // 1,000 changes a second for 2 s.
    for (let i = 0; i < 2000; i++) sim.change(i, 0, i);
    sim.run();
    expect(sim.lastWritten(0)).toBe(1999);
    const last = sim.writes[sim.writes.length - 1]!;
    expect(last.value).toBe(1999);
    expect(last.at - 1999).toBeLessThanOrEqual(1000 / 25);
    // burst + rate × time, and no more.
    expect(sim.writes.length).toBeLessThanOrEqual(5 + 25 * 2 + 1);
    expect(sim.writes.length).toBeGreaterThanOrEqual(25 * 2);
  });

  it("keeps the whole controller within its budget, and writes every Referable's last value", () => {
    const sim = new Simulation(1000, { budget: 100, budgetBurst: 50 });
    for (let r = 0; r < 1000; r++) sim.change(0, r, 1);
    // A second wave while the first is still queued behind the budget.
    for (let r = 0; r < 1000; r += 2) sim.change(3000, r, 2);
    sim.run();
    const times = sim.writes.map((w) => w.at);
    expect(mostInWindow(times, 1000)).toBeLessThanOrEqual(100 + 50);
    for (let r = 0; r < 1000; r++) expect(sim.lastWritten(r)).toBe(r % 2 ? 1 : 2);
    // The budget is used, not wasted: 1,500 writes at 100 a second after a burst of 50.
    expect(Math.max(...times)).toBeLessThanOrEqual(((1500 - 50) / 100) * 1000 + 10);
  });

  it("keeps every promise for any schedule of changes (property)", () => {
    const options = { rate: 20, burst: 3, budget: 60, budgetBurst: 10 };
    fc.assert(
      fc.property(
        fc.array(
          fc.record({ at: fc.integer({ min: 0, max: 3000 }), referable: fc.integer({ min: 0, max: 5 }) }),
          { minLength: 1, maxLength: 400 },
        ),
        (changes) => {
          const sim = new Simulation(6, options);
          const latest = new Map<number, { at: number; value: number }>();
          changes
            .sort((a, b) => a.at - b.at)
            .forEach((c, value) => {
              sim.change(c.at, c.referable, value);
              latest.set(c.referable, { at: c.at, value });
            });
          sim.run();
          // The last value of every source is written.
          for (const [r, { value }] of latest) expect(sim.lastWritten(r)).toBe(value);
          // No Referable over its rate, the controller not over its budget, in any window.
          for (const windowMs of [100, 1000]) {
            for (let r = 0; r < 6; r++) {
              const mine = sim.writes.filter((w) => w.referable === r).map((w) => w.at);
              expect(mostInWindow(mine, windowMs)).toBeLessThanOrEqual(
                options.burst + Math.ceil((options.rate * windowMs) / 1000),
              );
            }
            expect(
              mostInWindow(
                sim.writes.map((w) => w.at),
                windowMs,
              ),
            ).toBeLessThanOrEqual(options.budgetBurst + Math.ceil((options.budget * windowMs) / 1000));
          }
          // A write is never made for a value already written.
          const perRef = new Map<number, number>();
          for (const w of sim.writes) {
            expect(perRef.get(w.referable)).not.toBe(w.value);
            perRef.set(w.referable, w.value);
          }
        },
      ),
      { numRuns: 200 },
    );
  });
});
