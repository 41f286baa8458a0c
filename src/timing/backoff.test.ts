import { jest } from "@jest/globals";
import { backoffDelay, jitter, jittered, KeyedBackoff } from "./backoff.ts";

describe("backoffDelay", () => {
  const options = { baseMs: 100, maxMs: 1_000 };
  it.each([
    { reason: "the first attempt waits the base", attempt: 0, want: 100 },
    { reason: "each attempt doubles the wait", attempt: 3, want: 800 },
    { reason: "the cap holds however many attempts", attempt: 4, want: 1_000 },
    { reason: "a huge attempt count stays finite, at the cap", attempt: 10_000, want: 1_000 },
    { reason: "a negative attempt counts as the first", attempt: -5, want: 100 },
  ])("$reason", ({ attempt, want }) => {
    expect(backoffDelay(attempt, options)).toBe(want);
  });
});

describe("jitter", () => {
  it.each([
    { reason: "the lowest draw waits the period itself", ms: 2_000, factor: 1.2, random: 0, want: 2_000 },
    { reason: "a draw adds its share of the factor", ms: 2_000, factor: 1.2, random: 0.5, want: 3_200 },
    {
      reason: "a factor of a tenth adds at most a tenth",
      ms: 1_000,
      factor: 0.1,
      random: 0.999,
      want: 1_099.9,
    },
  ])("$reason", ({ ms, factor, random, want }) => {
    expect(jitter(ms, factor, random)).toBeCloseTo(want, 6);
  });

  it("spreads a wait over [ms/2, ms] for jittered", () => {
    expect([0, 0.5, 0.999].map((r) => jittered(1_000, r))).toEqual([500, 750, 999.5]);
  });

  it("draws from Math.random when no draw is given", () => {
    const spy = jest.spyOn(Math, "random").mockReturnValue(0.25);
    try {
      expect(jitter(1_000, 2)).toBe(1_500);
      expect(jittered(1_000)).toBe(625);
    } finally {
      spy.mockRestore();
    }
  });
});

describe("KeyedBackoff", () => {
  it("grows each key's wait on its own failures, and starts again once forgotten", () => {
    const b = new KeyedBackoff({ baseMs: 10, maxMs: 25 });
    expect([b.next("a"), b.next("a"), b.next("b"), b.next("a")]).toEqual([10, 20, 10, 25]);
    expect(b.failures("a")).toBe(3);
    b.forget("a");
    expect([b.failures("a"), b.next("a"), b.failures("b")]).toEqual([0, 10, 1]);
    b.clear();
    expect(b.failures("b")).toBe(0);
  });
});
