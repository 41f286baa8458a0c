/**
 * What the bench keeps of each controller's log (issue 39): the warn, error and fatal lines and
 * the lines that are not JSON, in order, capped in count and length, with the scenario that
 * started the process; info and debug lines are left out.
 */
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  ControllerLogs,
  KEPT_LINE_LENGTH,
  KEPT_LINES,
  summarizeLogLines,
} from "../../bench/controller-logs.ts";

let root: string;
beforeEach(async () => {
  root = await mkdtemp(join(tmpdir(), "referable-bench-logs-"));
});
afterEach(async () => {
  await rm(root, { recursive: true, force: true });
});

/** A controller's log file as `open()` makes it, with `lines` written to it. */
async function controllerWrote(logs: ControllerLogs, lines: string[]): Promise<string> {
  const file = logs.open();
  file.close();
  await writeFile(file.path, lines.map((l) => `${l}\n`).join(""));
  return file.path;
}

const line = (level: string, msg: string) =>
  JSON.stringify({ level, time: "t", msg, controller: "referable" });

describe("ControllerLogs.kept", () => {
  it("keeps each process's warn, error and fatal lines and non-JSON lines in order, with its scenario", async () => {
    const logs = new ControllerLogs(root, "r1");
    logs.scenario = "sizes";
    const path = await controllerWrote(logs, [
      line("info", "started"),
      line("warn", "a watch was reopened"),
      line("debug", "reconciled"),
      line("error", "a status write failed"),
      "(node:1) Warning: something from Node itself",
      line("fatal", "the process ends"),
    ]);
    logs.exited(path);
    logs.scenario = "idle";
    await controllerWrote(logs, [line("info", "quiet")]);

    const kept = await logs.kept();

    expect(kept).toEqual([
      {
        file: join("bench", "logs", "r1", "controller-1.log"),
        scenario: "sizes",
        counts: { warn: 1, error: 1, fatal: 1, other: 1 },
        lines: [
          line("warn", "a watch was reopened"),
          line("error", "a status write failed"),
          "(node:1) Warning: something from Node itself",
          line("fatal", "the process ends"),
        ],
        dropped: 0,
      },
      {
        file: join("bench", "logs", "r1", "controller-2.log"),
        scenario: "idle",
        counts: { warn: 0, error: 0, fatal: 0, other: 0 },
        lines: [],
        dropped: 0,
      },
    ]);
  });

  it("caps the lines kept of a process and the length of each, and counts what it left out", async () => {
    const logs = new ControllerLogs(root, "r2");
    const long = "x".repeat(KEPT_LINE_LENGTH * 2);
    const path = await controllerWrote(
      logs,
      Array.from({ length: KEPT_LINES + 7 }, (_, i) => line("warn", `${i} ${long}`)),
    );
    logs.exited(path);

    const [kept] = await logs.kept();

    expect(kept!.counts.warn).toBe(KEPT_LINES + 7);
    expect(kept!.lines).toHaveLength(KEPT_LINES);
    expect(kept!.dropped).toBe(7);
    expect(Math.max(...kept!.lines.map((l) => l.length))).toBe(KEPT_LINE_LENGTH);
    expect(summarizeLogLines([kept!])).toBe(
      `controller logs: ${KEPT_LINES + 7} warn, 0 error, 0 fatal and 0 other (not JSON) lines from 1 controller process(es), 1 of them with any; kept in results.json (controllerLogs, 7 past ${KEPT_LINES} a process left out)`,
    );
  });
});
