import { IdleStop, type IdleTimers } from "./idle-stop.ts";

/** Timers a test moves by hand. */
class FakeTimers implements IdleTimers {
  now = 0;
  private next = 1;
  private readonly due = new Map<number, { at: number; run: () => void }>();
  set(run: () => void, ms: number): unknown {
    const id = this.next++;
    this.due.set(id, { at: this.now + ms, run });
    return id;
  }
  clear(handle: unknown): void {
    this.due.delete(handle as number);
  }
  get pending(): number {
    return this.due.size;
  }
  advance(ms: number): void {
    this.now += ms;
    for (const [id, t] of [...this.due]) {
      if (t.at > this.now) continue;
      this.due.delete(id);
      t.run();
    }
  }
}

describe("IdleStop", () => {
  const make = (afterMs: number) => {
    const timers = new FakeTimers();
    let stops = 0;
    const idle = new IdleStop(afterMs, () => stops++, timers);
    return { timers, idle, stops: () => stops };
  };

  it("stops once the pool has held no work for afterMs, not before", () => {
    const { timers, idle, stops } = make(60_000);
    idle.idle();
    timers.advance(59_999);
    expect(stops()).toBe(0);
    timers.advance(1);
    expect(stops()).toBe(1);
  });

  it("never stops while the pool holds work, and waits afterMs again from the next idle", () => {
    const { timers, idle, stops } = make(60_000);
    idle.idle();
    timers.advance(30_000);
    idle.busy();
    timers.advance(120_000);
    expect(stops()).toBe(0);
    idle.idle();
    timers.advance(59_999);
    expect(stops()).toBe(0);
    timers.advance(1);
    expect(stops()).toBe(1);
  });

  it("keeps one timer however often it is told idle (the first idle counts)", () => {
    const { timers, idle, stops } = make(1000);
    idle.idle();
    timers.advance(600);
    idle.idle();
    idle.idle();
    expect(timers.pending).toBe(1);
    timers.advance(400);
    expect(stops()).toBe(1);
  });

  it("stops again after a second idle spell (workers started again in between)", () => {
    const { timers, idle, stops } = make(1000);
    idle.idle();
    timers.advance(1000);
    idle.busy();
    idle.idle();
    timers.advance(1000);
    expect(stops()).toBe(2);
  });

  it("with afterMs 0, never stops", () => {
    const { timers, idle, stops } = make(0);
    idle.idle();
    timers.advance(1e9);
    expect(stops()).toBe(0);
    expect(timers.pending).toBe(0);
  });
});
