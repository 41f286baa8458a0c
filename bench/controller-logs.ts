/**
 * The controllers' logs in a bench run: each controller process writes its standard output (the
 * JSON log lines, at `--log-level=warn`) and standard error into a file of its own under
 * `bench/logs/<run>/`. A scale phase ends with the warn and error lines counted by message, and
 * results.json keeps each process's warn and error lines themselves, capped: the controller never
 * logs a value, so its lines are safe to keep.
 *
 * A line that is not JSON (Node's own warnings, a fatal exit's stack) counts as `other`
 * (`(not a JSON line)` by message).
 */
import { closeSync, mkdirSync, openSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { join, relative } from "node:path";

/** How many lines of one level said one message. */
export interface LogCount {
  level: "warn" | "error" | "fatal" | "other";
  message: string;
  count: number;
}

// The controller writes levels as strings, as klog and zap do ("level":"error").
const LEVELS: Record<string, LogCount["level"]> = { warn: "warn", error: "error", fatal: "fatal" };

/** Lines kept of one process, and the characters kept of each line. */
export const KEPT_LINES = 100;
export const KEPT_LINE_LENGTH = 1000;

/** One controller process's warn and error lines, as results.json keeps them. */
export interface ControllerLogLines {
  /** Its log file, from the repository's root (`bench/logs/<run>/controller-<k>.log`). */
  file: string;
  /** The scenario that started it (`baseline`: the idle controller measured before them). */
  scenario: string;
  /** Its lines at each level: warn, error, fatal, and lines that are not JSON (`other`). */
  counts: Record<LogCount["level"], number>;
  /** The first {@link KEPT_LINES} of them as written, each cut at {@link KEPT_LINE_LENGTH} characters. */
  lines: string[];
  /** Of them, how many were not kept (past {@link KEPT_LINES}). */
  dropped: number;
}

/** Where one run's controller logs go: `bench/logs/<run>/controller-<k>.log`, k counting from 1. */
export class ControllerLogs {
  readonly dir: string;
  /** The scenario the next controllers belong to (the bench sets it as each scenario starts). */
  scenario = "";
  private readonly root: string;
  private readonly files: Array<{ path: string; scenario: string; kept?: Promise<ControllerLogLines> }> = [];

  /** `root`: the repository, which the files in results.json are named from. */
  constructor(root: string, run: string) {
    this.root = root;
    this.dir = join(root, "bench", "logs", run);
  }

  /** A new file for the next controller, opened for appending: its fd goes to spawn's stdio. */
  open(): { path: string; fd: number; close(): void } {
    mkdirSync(this.dir, { recursive: true });
    const path = join(this.dir, `controller-${this.files.length + 1}.log`);
    const fd = openSync(path, "a");
    this.files.push({ path, scenario: this.scenario });
    return { path, fd, close: () => closeSync(fd) };
  }

  /** The process writing `path` has exited: its lines are read once, now that the file is whole. */
  exited(path: string): void {
    const file = this.files.find((f) => f.path === path);
    if (file) file.kept ??= this.read(file);
  }

  /** Every controller's warn and error lines so far (a running one's as its file stands now). */
  kept(): Promise<ControllerLogLines[]> {
    return Promise.all(this.files.map((f) => f.kept ?? this.read(f)));
  }

  private async read(file: { path: string; scenario: string }): Promise<ControllerLogLines> {
    const kept: ControllerLogLines = {
      file: relative(this.root, file.path),
      scenario: file.scenario,
      counts: { warn: 0, error: 0, fatal: 0, other: 0 },
      lines: [],
      dropped: 0,
    };
    for (const line of await warnAndErrorLines([file.path])) {
      kept.counts[line.level]++;
      if (kept.lines.length < KEPT_LINES) kept.lines.push(line.text.slice(0, KEPT_LINE_LENGTH));
      else kept.dropped++;
    }
    return kept;
  }
}

/** The warn, error and fatal lines of `paths`, and those that are not JSON, in order: level, `msg`, the line. */
async function warnAndErrorLines(
  paths: readonly string[],
): Promise<Array<{ level: LogCount["level"]; message: string; text: string }>> {
  const found: Array<{ level: LogCount["level"]; message: string; text: string }> = [];
  for (const path of paths) {
    const text = await readFile(path, "utf8").catch(() => "");
    for (const line of text.split("\n")) {
      if (!line.trim()) continue;
      let record: { level?: unknown; msg?: unknown };
      try {
        record = JSON.parse(line) as typeof record;
      } catch {
        found.push({ level: "other", message: "(not a JSON line)", text: line });
        continue;
      }
      const level = typeof record.level === "string" ? LEVELS[record.level] : undefined;
      if (level)
        found.push({
          level,
          message: typeof record.msg === "string" ? record.msg : "(no message)",
          text: line,
        });
    }
  }
  return found;
}

/** The warn, error and fatal lines of `paths` counted by level and message, most frequent first. */
export async function countLogLines(paths: readonly string[]): Promise<LogCount[]> {
  const counts = new Map<string, LogCount>();
  const add = (level: LogCount["level"], message: string) => {
    const key = `${level}\u0000${message}`;
    const entry = counts.get(key);
    if (entry) entry.count++;
    else counts.set(key, { level, message, count: 1 });
  };
  for (const { level, message } of await warnAndErrorLines(paths)) add(level, message);
  return [...counts.values()].sort((a, b) => b.count - a.count || a.message.localeCompare(b.message));
}

/** The counts as lines to print, one per message. */
export function formatLogCounts(who: string, counts: readonly LogCount[]): string[] {
  if (counts.length === 0) return [`${who}: no warn or error lines in the controllers' logs`];
  return [
    `${who}: the controllers' warn/error lines, by message:`,
    ...counts.map((c) => `  ${String(c.count).padStart(7)} ${c.level.padEnd(5)} ${c.message}`),
  ];
}

/** The run's summary line: how many warn and error lines its controllers wrote, and where they are kept. */
export function summarizeLogLines(logs: readonly ControllerLogLines[]): string {
  const sum = (level: LogCount["level"]) => logs.reduce((total, l) => total + l.counts[level], 0);
  const dropped = logs.reduce((total, l) => total + l.dropped, 0);
  const noisy = logs.filter((l) => l.lines.length > 0).length;
  return `controller logs: ${sum("warn")} warn, ${sum("error")} error, ${sum("fatal")} fatal and ${sum("other")} other (not JSON) lines from ${logs.length} controller process(es), ${noisy} of them with any; kept in results.json (controllerLogs${dropped ? `, ${dropped} past ${KEPT_LINES} a process left out` : ""})`;
}
