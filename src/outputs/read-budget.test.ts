import { describe, expect, it } from "@jest/globals";
import { ReadBudget, type ReadGate } from "./read-budget.ts";

const gate = (): ReadGate => ({ readUntil: undefined });

describe("ReadBudget", () => {
  it("lets a burst of reads through, then makes each Referable wait its turn, one place each", () => {
    let now = 0;
    let reads = 0;
    const budget = new ReadBudget(2, () => now, { onRead: () => reads++ });
    const a = gate();
    const b = gate();
    const c = gate();
    expect(budget.admit(a)).toBe(0);
    expect(budget.admit(a)).toBe(0);
    // Spent: a takes the next place (500 ms), and asking again keeps that one place.
    expect(budget.admit(a)).toBe(500);
    expect(budget.admit(a)).toBe(500);
    // b and c come after a, each with one place: the line is a, b, c.
    expect(budget.admit(b)).toBe(1000);
    expect(budget.admit(c)).toBe(1500);
    expect(budget.waiting).toBe(3);
    now = 500;
    expect(budget.admit(a)).toBe(0);
    expect(budget.admit(b)).toBe(500);
    now = 1500;
    expect(budget.admit(b)).toBe(0);
    expect(budget.admit(c)).toBe(0);
    expect(budget.waiting).toBe(0);
    expect(reads).toBe(5);
  });

  it("never lets more than the rate through over time, however many ask", () => {
    let now = 0;
    let reads = 0;
    const budget = new ReadBudget(10, () => now, { onRead: () => reads++ });
    const gates = Array.from({ length: 100 }, gate);
    for (; now <= 10_000; now += 10) for (const g of gates) budget.admit(g);
    // 10 a second for 10 s, and the first burst of 10.
    expect(reads).toBeLessThanOrEqual(10 * 10 + 10 + 1);
    expect(reads).toBeGreaterThanOrEqual(10 * 10);
  });

  it("has no limit at 0, and forgets a place given back", () => {
    let now = 0;
    const open = new ReadBudget(0, () => now);
    for (let i = 0; i < 1000; i++) expect(open.admit(gate())).toBe(0);
    const budget = new ReadBudget(1, () => now);
    const a = gate();
    budget.admit(a);
    expect(budget.admit(a)).toBe(1000);
    budget.release(a);
    expect(budget.waiting).toBe(0);
    now = 70_000;
    expect(budget.waiting).toBe(0);
  });
});
