import { exportText, fieldManagerFor, parseTarget, storedText } from "./target.ts";

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
  it("is referable.dev/<name> for a name that fits", () => {
    expect(fieldManagerFor("db-host")).toBe("referable.dev/db-host");
  });
  it("fits 128 characters for the longest name, and two long names that share a start stay apart", () => {
    const a = `${"a".repeat(200)}-one`;
    const b = `${"a".repeat(200)}-two`;
    expect(fieldManagerFor(a).length).toBeLessThanOrEqual(128);
    expect(fieldManagerFor("x".repeat(253)).length).toBeLessThanOrEqual(128);
    expect(fieldManagerFor(a)).not.toBe(fieldManagerFor(b));
    expect(fieldManagerFor(a)).toMatch(/^referable\.dev\/a+-[0-9a-f]{16}$/);
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
