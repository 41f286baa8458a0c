import { createProcessLogger, formatTextLine } from "./log-format.ts";

describe("formatTextLine", () => {
  const time = Date.UTC(2026, 10, 25, 9, 49, 18, 12);
  const cases: Array<{ reason: string; record: Record<string, unknown>; want: string }> = [
    {
      reason: "time, level name, logger part, message, then key=value fields",
      record: {
        level: 30,
        time,
        pid: 1,
        hostname: "h",
        component: "c",
        identity: "i",
        part: "controller",
        msg: "controller started",
        leaderElect: false,
        concurrency: 16,
      },
      want: "2026-11-25T09:49:18.012Z  INFO   controller  controller started  leaderElect=false  concurrency=16\n",
    },
    {
      reason: "a value with spaces or quotes is quoted; objects are JSON",
      record: { level: 50, time, msg: "cannot", err: 'the "x" failed', where: { a: 1 } },
      want: '2026-11-25T09:49:18.012Z  ERROR  cannot  err="the \\"x\\" failed"  where={"a":1}\n',
    },
    {
      reason: "debug and warn by name",
      record: { level: 20, time, msg: "reconciled", referable: "db" },
      want: "2026-11-25T09:49:18.012Z  DEBUG  reconciled  referable=db\n",
    },
    {
      reason: "a string level and an ISO time, as the JSON form writes them",
      record: { level: "warn", time: "2026-11-25T09:49:18.012Z", msg: "slow", part: "resolver" },
      want: "2026-11-25T09:49:18.012Z  WARN   resolver  slow\n",
    },
  ];
  it.each(cases)("$reason", ({ record, want }) => {
    expect(formatTextLine(`${JSON.stringify(record)}\n`)).toBe(want);
  });

  it("passes a line that is not JSON through unchanged", () => {
    expect(formatTextLine("not json")).toBe("not json\n");
  });
});

describe("createProcessLogger", () => {
  const logTwice = (format: "json" | "text") => {
    const lines: string[] = [];
    const logger = createProcessLogger({
      level: "info",
      format,
      base: { component: "x" },
      write: (l) => lines.push(l),
    });
    logger.child({ part: "resolver" }).info({ kind: "ConfigMap" }, "informer started");
    logger.debug({}, "not at info");
    return lines;
  };

  it("text: one readable line per record, no JSON braces, level as a name", () => {
    const [line, ...rest] = logTwice("text");
    expect(rest).toEqual([]);
    expect(line).toMatch(
      /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z {2}INFO {3}resolver {2}informer started {2}kind=ConfigMap\n$/,
    );
  });

  it("json: one object per line, with the base fields", () => {
    const [line, ...rest] = logTwice("json");
    expect(rest).toEqual([]);
    expect(JSON.parse(line!)).toMatchObject({
      component: "x",
      part: "resolver",
      kind: "ConfigMap",
      msg: "informer started",
    });
  });

  it("json: the level as a string and the time in ISO 8601 UTC, as klog and zap write them", () => {
    const lines: string[] = [];
    const logger = createProcessLogger({
      level: "debug",
      format: "json",
      base: {},
      write: (l) => lines.push(l),
    });
    const before = Date.now();
    logger.debug({}, "d");
    logger.info({}, "i");
    logger.warn({}, "w");
    logger.error({}, "e");
    const records = lines.map((l) => JSON.parse(l) as { level: unknown; time: unknown; msg: string });
    expect(records.map((r) => [r.level, r.msg])).toEqual([
      ["debug", "d"],
      ["info", "i"],
      ["warn", "w"],
      ["error", "e"],
    ]);
    for (const { time } of records) {
      expect(time).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
      expect(Date.parse(time as string)).toBeGreaterThanOrEqual(before - 1);
    }
    expect(lines[3]).toContain('"level":"error"');
  });
});
