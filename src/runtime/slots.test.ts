import { bucketOf } from "./buckets.ts";
import { andSelector, bucketSelector, listsBySlot, slotOf, SLOTS, STRAY_SELECTOR } from "./slots.ts";

const names = Array.from({ length: 500 }, (_, i) => `referable-${i}`);

describe("slots", () => {
  it.each([1, 2, 4, 16, 64, 1024])("a name's slot falls in its bucket of %i", (buckets) => {
    for (const name of names) expect(Number(slotOf(name)) % buckets).toBe(bucketOf(name, buckets));
  });

  it("lists by slot only for a number of buckets that divides 1024", () => {
    expect([1, 2, 4, 8, 16, 512, 1024].every(listsBySlot)).toBe(true);
    expect([3, 5, 12, 1000, 0, 2048].some(listsBySlot)).toBe(false);
  });

  it("selects a bucket's slots, and refuses a number of buckets that does not divide 1024", () => {
    expect(bucketSelector(3, 256)).toBe("referable.dev/slot in (3,259,515,771)");
    expect(bucketSelector(0, 1)).toContain(",1023)");
    expect(() => bucketSelector(0, 3)).toThrow("3 buckets do not divide 1024 slots");
  });

  it("the stray selector names every slot, and the user's selector is ANDed", () => {
    expect(STRAY_SELECTOR.startsWith("referable.dev/slot notin (0,1,2,")).toBe(true);
    expect(STRAY_SELECTOR.split(",")).toHaveLength(SLOTS);
    expect(andSelector("a=b", "team=x")).toBe("a=b,team=x");
    expect(andSelector("a=b", undefined)).toBe("a=b");
  });
});
