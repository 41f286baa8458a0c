import { formatHelp, parseCommandLine, suggest, UsageError, type CommandSpec } from "./cli.ts";

const SPEC: CommandSpec = {
  usage: "npm run bench -- [options]",
  description: "Measures things.",
  groups: ["Scenarios", "Output"],
  flags: {
    quick: { type: "boolean", help: "small sizes", group: "Scenarios" },
    scenarios: {
      type: "string",
      help: "which scenarios",
      group: "Scenarios",
      default: "all",
      valueName: "LIST",
    },
    out: { type: "string", help: "where results go", group: "Output" },
    "leader-elect": { type: "boolean", help: "elect", default: "false" },
  },
};

describe("parseCommandLine", () => {
  const ok: Array<{ reason: string; argv: string[]; want: Record<string, unknown> }> = [
    { reason: "nothing given: nothing set (the caller owns defaults)", argv: [], want: {} },
    { reason: "a boolean alone is true", argv: ["--quick"], want: { quick: true } },
    { reason: "a string with =", argv: ["--scenarios=hot,idle"], want: { scenarios: "hot,idle" } },
    { reason: "a string as the next argument", argv: ["--out", "r.json"], want: { out: "r.json" } },
    { reason: "Go's --bool=false", argv: ["--leader-elect=false"], want: { "leader-elect": false } },
    { reason: "Go's --bool=true", argv: ["--leader-elect=true"], want: { "leader-elect": true } },
    { reason: "--bool=0 and =1 as Go takes them", argv: ["--quick=0"], want: { quick: false } },
    { reason: "the last of a repeated flag wins", argv: ["--out=a", "--out=b"], want: { out: "b" } },
    { reason: "a value with = in it", argv: ["--scenarios=a=b"], want: { scenarios: "a=b" } },
  ];
  it.each(ok)("$reason", ({ argv, want }) => {
    expect(parseCommandLine(argv, SPEC)).toEqual(want);
  });

  const refused: Array<{ reason: string; argv: string[]; want: string }> = [
    {
      reason: "a typo gets the nearest flag",
      argv: ["--scenario=hot"],
      want: 'unknown option "--scenario": did you mean --scenarios?',
    },
    { reason: "a transposition is a typo too", argv: ["--qucik"], want: "did you mean --quick?" },
    {
      reason: "a word far from every flag gets no guess",
      argv: ["--verbose"],
      want: 'unknown option "--verbose" (see',
    },
    {
      reason: "--no- is not a spelling users get",
      argv: ["--no-quick"],
      want: 'unknown option "--no-quick"',
    },
    {
      reason: "a single-dash long flag",
      argv: ["-quick"],
      want: 'unknown option "-quick": did you mean --quick?',
    },
    { reason: "a stray argument", argv: ["hot"], want: 'unexpected argument "hot"' },
    { reason: "a string flag with no value", argv: ["--out"], want: "--out needs a value" },
    {
      reason: "a boolean with another value",
      argv: ["--quick=yes"],
      want: '--quick: "yes" is not true or false',
    },
    {
      reason: "--version where the command has none",
      argv: ["--version"],
      want: 'unknown option "--version"',
    },
  ];
  it.each(refused)("refuses $reason", ({ argv, want }) => {
    let got: unknown;
    try {
      parseCommandLine(argv, SPEC);
    } catch (err) {
      got = err;
    }
    expect(got).toBeInstanceOf(UsageError);
    expect((got as Error).message).toContain(want);
  });

  it("answers help for --help or -h, wherever they are, even beside a typo", () => {
    for (const argv of [["--help"], ["-h"], ["--quick", "--help"], ["--bogus", "--help"]])
      expect(parseCommandLine(argv, SPEC)).toBe("help");
  });

  it("answers version for --version when the command has one", () => {
    expect(parseCommandLine(["--version"], { ...SPEC, version: true })).toBe("version");
  });
});

describe("suggest", () => {
  const cases: Array<{ reason: string; name: string; want: string | undefined }> = [
    { reason: "one letter missing", name: "concurency", want: "concurrency" },
    { reason: "a unique prefix", name: "metrics-sec", want: "metrics-secure" },
    { reason: "an ambiguous prefix and no close word", name: "metrics", want: undefined },
    { reason: "a short unrelated word", name: "x", want: undefined },
  ];
  it.each(cases)("$reason: $name", ({ name, want }) => {
    expect(suggest(name, ["concurrency", "metrics-secure", "metrics-cert-dir", "log-format"])).toBe(want);
  });
});

describe("formatHelp", () => {
  const text = formatHelp(SPEC);
  it("prints the usage, the description, and the groups in order with General last", () => {
    const headings = text.split("\n").filter((l) => /^[A-Z][A-Za-z ]*:$/.test(l));
    expect(text.startsWith("Usage: npm run bench -- [options]\n\nMeasures things.")).toBe(true);
    expect(headings).toEqual(["Scenarios:", "Output:", "Options:", "General:"]);
  });
  it("shows each flag's syntax and default", () => {
    const lines = text.split("\n");
    const after = (flag: string) => lines[lines.indexOf(`  ${flag}`) + 1];
    expect(after("--scenarios=LIST")).toContain("which scenarios (default all)");
    expect(after("--quick")).toContain("small sizes");
    expect(after("--leader-elect[=true|false]")).toContain("default false");
    expect(after("--help")).toContain("print this help and exit");
  });
});
