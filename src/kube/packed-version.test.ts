import { packVersion, unpackVersion } from "./packed-version.ts";

describe("packVersion", () => {
  it.each([
    { rv: "1", range: "smi", packed: 1 },
    { rv: "999999999", range: "smi", packed: 999_999_999 },
    { rv: "1000000000", range: "smi", packed: "1000000000" },
    { rv: "1000000000", range: "safe", packed: 1_000_000_000 },
    { rv: "999999999999999", range: "safe", packed: 999_999_999_999_999 },
    { rv: "1000000000000000", range: "safe", packed: "1000000000000000" },
    { rv: "0", range: "safe", packed: "0" },
    { rv: "007", range: "smi", packed: "007" },
    { rv: "12a", range: "safe", packed: "12a" },
    { rv: "", range: "smi", packed: "" },
    { rv: undefined, range: "smi", packed: undefined },
  ] as const)("packs $rv ($range) as $packed and reads it back the same", ({ rv, range, packed }) => {
    expect(packVersion(rv, range)).toBe(packed);
    expect(unpackVersion(packVersion(rv, range))).toBe(rv);
  });
});
