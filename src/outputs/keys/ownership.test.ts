import { describe, expect, it } from "@jest/globals";
import { KeyOwnership } from "./ownership.ts";
import type { ExportTarget } from "./target.ts";

const key = (k: string, name = "app"): ExportTarget => ({
  kind: "ConfigMap",
  namespace: "team-b",
  name,
  key: k,
});
const T1 = "2026-01-01T00:00:00Z";
const T2 = "2026-01-02T00:00:00Z";

describe("KeyOwnership", () => {
  const cases: Array<{
    reason: string;
    claims: Array<[name: string, created: string]>;
    owner: string;
  }> = [
    { reason: "a key named once is its namer's", claims: [["a", T1]], owner: "a" },
    {
      reason: "the one created first owns the key",
      claims: [
        ["late", T2],
        ["early", T1],
      ],
      owner: "early",
    },
    {
      reason: "created in the same second: the name decides",
      claims: [
        ["b", T1],
        ["a", T1],
      ],
      owner: "a",
    },
  ];
  it.each(cases)("$reason", ({ claims, owner }) => {
    const o = new KeyOwnership();
    for (const [name, created] of claims) o.set(name, created, [key("K")]);
    expect(o.ownerOf(key("K"))).toBe(owner);
  });

  it("a second namer changes no owner and asks no one to look again", () => {
    const o = new KeyOwnership();
    expect([...o.set("a", T1, [key("K")])]).toEqual([]);
    expect([...o.set("b", T2, [key("K")])]).toEqual([]);
    expect(o.ownerOf(key("K"))).toBe("a");
  });

  it("an older namer takes the key: every other claimant looks again", () => {
    const o = new KeyOwnership();
    o.set("b", T2, [key("K")]);
    expect([...o.set("a", T1, [key("K")])]).toEqual(["b"]);
    expect(o.ownerOf(key("K"))).toBe("a");
  });

  it("when the owner goes, or drops the key, the next in line takes it and is told", () => {
    const o = new KeyOwnership();
    o.set("a", T1, [key("K"), key("L")]);
    o.set("b", T2, [key("K")]);
    o.set("c", T2, [key("K")]);
    expect([...o.set("a", T1, [key("L")])].sort()).toEqual(["b", "c"]);
    expect(o.ownerOf(key("K"))).toBe("b");
    expect([...o.delete("b")]).toEqual(["c"]);
    expect(o.ownerOf(key("K"))).toBe("c");
    expect([...o.delete("c")]).toEqual([]);
    expect(o.ownerOf(key("K"))).toBeUndefined();
  });

  it("re-setting the same spec is a no-op", () => {
    const o = new KeyOwnership();
    o.set("a", T1, [key("K")]);
    o.set("b", T2, [key("K")]);
    expect([...o.set("a", T1, [key("K")])]).toEqual([]);
  });

  it("says who owns what in an object, and which keys of it are named", () => {
    const o = new KeyOwnership();
    o.set("a", T1, [key("K"), key("X", "other")]);
    o.set("b", T2, [key("K"), key("M")]);
    expect(o.ownersIn(key("K"))).toEqual(
      new Map([
        ["a", ["K"]],
        ["b", ["M"]],
      ]),
    );
    expect([...o.keysIn(key("K"))].sort()).toEqual(["K", "M"]);
    expect(
      o
        .objectsIn("ConfigMap", "team-b")
        .map((x) => x.name)
        .sort(),
    ).toEqual(["app", "other"]);
  });

  it("tells its listener of the first object named in a namespace and of the last one going", () => {
    const o = new KeyOwnership();
    const seen: string[] = [];
    o.listen({ first: (k, ns) => seen.push(`+${k}/${ns}`), last: (k, ns) => seen.push(`-${k}/${ns}`) });
    o.set("a", T1, [key("K")]);
    o.set("b", T2, [key("K"), key("L", "other")]);
    o.delete("a");
    expect(seen).toEqual(["+ConfigMap/team-b"]);
    o.delete("b");
    expect(seen).toEqual(["+ConfigMap/team-b", "-ConfigMap/team-b"]);
  });
});
