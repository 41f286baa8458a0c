import { exportText, fieldManagerFor, legacyFieldManagerFor, parseTarget, storedText } from "./target.ts";

describe("exportText", () => {
  const cases: Array<{ reason: string; value: unknown; want: string }> = [
    { reason: "a string is written as it is, not quoted", value: "db.internal", want: "db.internal" },
    { reason: "a string that looks like JSON stays a string", value: '{"a":1}', want: '{"a":1}' },
    { reason: "a number is its JSON text", value: 5432, want: "5432" },
    { reason: "a boolean is its JSON text", value: false, want: "false" },
    {
      reason: "an object is its JSON text",
      value: { host: "db", port: 5432 },
      want: '{"host":"db","port":5432}',
    },
    { reason: "a list is its JSON text", value: ["a", 1], want: '["a",1]' },
    { reason: "an empty string is an empty key, not absent", value: "", want: "" },
  ];
  it.each(cases)("$reason", ({ value, want }) => expect(exportText(value)).toBe(want));
});

describe("storedText", () => {
  it("base64-encodes the UTF-8 bytes for a Secret and leaves a ConfigMap's text alone", () => {
    expect(storedText("Secret", "pässword")).toBe(Buffer.from("pässword", "utf8").toString("base64"));
    expect(storedText("ConfigMap", "pässword")).toBe("pässword");
  });
});

describe("fieldManagerFor", () => {
  // The collision of issue 22: a 114-character name equal to a 200-character name's legacy manager.
  const long = `${"n".repeat(150)}-${"m".repeat(49)}`;
  const crafted = legacyFieldManagerFor(long)!.slice("referable.dev/".length);
  const cases: Array<{ reason: string; name: string; want: string | RegExp }> = [
    { reason: "a name that fits keeps its plain manager", name: "db-host", want: "referable.dev/db-host" },
    {
      reason: "114 characters is the longest name that fits",
      name: "x".repeat(114),
      want: `referable.dev/${"x".repeat(114)}`,
    },
    {
      reason: "115 characters is hashed whole",
      name: "x".repeat(115),
      want: /^referable\.dev\/h-[0-9a-f]{64}$/,
    },
    {
      reason: "the longest name is hashed whole",
      name: "x".repeat(253),
      want: /^referable\.dev\/h-[0-9a-f]{64}$/,
    },
  ];
  it.each(cases)("$reason", ({ name, want }) => {
    const got = fieldManagerFor(name);
    expect(got.length).toBeLessThanOrEqual(128);
    if (typeof want === "string") expect(got).toBe(want);
    else expect(got).toMatch(want);
  });
  it("is stable: the same name gives the same manager", () => {
    expect(fieldManagerFor("y".repeat(200))).toBe(fieldManagerFor("y".repeat(200)));
  });
  it("keeps apart long names that share their first 97 characters", () => {
    expect(fieldManagerFor(`${"a".repeat(200)}-one`)).not.toBe(fieldManagerFor(`${"a".repeat(200)}-two`));
  });
  it("keeps apart a 114-character name equal to a 200-character name's legacy manager", () => {
    expect(crafted).toHaveLength(114);
    expect(long).toHaveLength(200);
    expect(`referable.dev/${crafted}`).toBe(legacyFieldManagerFor(long));
    expect(fieldManagerFor(crafted)).not.toBe(fieldManagerFor(long));
  });
});

describe("legacyFieldManagerFor", () => {
  it("is undefined for a name that fits, and the old cut-and-hash form for a long one", () => {
    expect(legacyFieldManagerFor("x".repeat(114))).toBeUndefined();
    const legacy = legacyFieldManagerFor("x".repeat(200))!;
    expect(legacy).toMatch(/^referable\.dev\/x{97}-[0-9a-f]{16}$/);
    expect(legacy).toHaveLength(128);
  });
});

describe("parseTarget", () => {
  const ok = { kind: "ConfigMap", namespace: "team-b", name: "app-settings", key: "DB_HOST" };
  const cases: Array<{ reason: string; raw: unknown; want: string | RegExp }> = [
    {
      reason: "a kind that is not written",
      raw: { ...ok, kind: "Deployment" },
      want: /kind must be ConfigMap or Secret/,
    },
    {
      reason: "a namespace that is not a DNS label",
      raw: { ...ok, namespace: "Team_B" },
      want: /namespace must be/,
    },
    { reason: "a name that is not a DNS subdomain", raw: { ...ok, name: "App" }, want: /name must be/ },
    { reason: "a key with a space", raw: { ...ok, key: "DB HOST" }, want: /key must be/ },
    { reason: "a key of '..'", raw: { ...ok, key: ".." }, want: /must not be '\.' or '\.\.'/ },
    { reason: "a key too long", raw: { ...ok, key: "k".repeat(254) }, want: /key must be 1 to 253/ },
    { reason: "not an object", raw: "ConfigMap", want: /must be an object/ },
  ];
  it.each(cases)("refuses $reason, naming the field", ({ raw, want }) => {
    const got = parseTarget(raw, "spec.export[2]");
    expect(typeof got).toBe("string");
    expect(got).toMatch(want);
    expect(got).toMatch(/^spec\.export\[2\]/);
  });
  it("takes a valid target, and only its four fields", () => {
    expect(parseTarget({ ...ok, extra: 1 }, "t")).toEqual(ok);
  });
});
