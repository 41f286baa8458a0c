import { jest } from "@jest/globals";
import { sleep } from "./sleep.ts";

describe("sleep", () => {
  beforeEach(() => jest.useFakeTimers());
  afterEach(() => jest.useRealTimers());

  /** Whether `p` has settled once the microtasks queued so far ran. */
  async function settled(p: Promise<void>): Promise<boolean> {
    let done = false;
    void p.then(() => (done = true));
    await Promise.resolve();
    await Promise.resolve();
    return done;
  }

  it("resolves after the time given, not before", async () => {
    const p = sleep(1_000);
    jest.advanceTimersByTime(999);
    expect(await settled(p)).toBe(false);
    jest.advanceTimersByTime(1);
    expect(await settled(p)).toBe(true);
  });

  it("resolves at once when the signal aborts, and leaves no timer behind", async () => {
    const stop = new AbortController();
    const p = sleep(60_000, stop.signal);
    expect(jest.getTimerCount()).toBe(1);
    stop.abort();
    expect(await settled(p)).toBe(true);
    expect(jest.getTimerCount()).toBe(0);
  });

  it("waits no time with a signal aborted already, or a negative time", async () => {
    expect(await settled(sleep(60_000, AbortSignal.abort()))).toBe(true);
    expect(jest.getTimerCount()).toBe(0);
    const p = sleep(-5);
    jest.advanceTimersByTime(0);
    expect(await settled(p)).toBe(true);
  });
});
