/**
 * The controllers' logs in a bench run: each controller process writes its standard output (the
 * JSON log lines, at `--log-level=warn`) and standard error into a file of its own under
 * `bench/logs/<run>/`, and a phase ends with the warn and error lines counted by message.
 *
 * Only the `msg` of a line and its level are counted: never its fields, which may carry names.
 * A line that is not JSON (Node's own warnings, a fatal exit) counts as `(not a JSON line)`.
 */
import { closeSync, mkdirSync, openSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { join } from "node:path";

/** How many lines of one level said one message. */
export interface LogCount {
  level: "warn" | "error" | "fatal" | "other";
  message: string;
  count: number;
}

// The controller writes levels as strings, as klog and zap do ("level":"error").
const LEVELS: Record<string, LogCount["level"]> = { warn: "warn", error: "error", fatal: "fatal" };

/** Where one run's controller logs go: `bench/logs/<run>/controller-<k>.log`, k counting from 1. */
export class ControllerLogs {
  readonly dir: string;
  private made = 0;

  constructor(benchDir: string, run: string) {
    this.dir = join(benchDir, "logs", run);
  }

  /** A new file for the next controller, opened for appending: its fd goes to spawn's stdio. */
  open(): { path: string; fd: number; close(): void } {
    mkdirSync(this.dir, { recursive: true });
    const path = join(this.dir, `controller-${++this.made}.log`);
    const fd = openSync(path, "a");
    return { path, fd, close: () => closeSync(fd) };
  }
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
  for (const path of paths) {
    const text = await readFile(path, "utf8").catch(() => "");
    for (const line of text.split("\n")) {
      if (!line.trim()) continue;
      let record: { level?: unknown; msg?: unknown };
      try {
        record = JSON.parse(line) as typeof record;
      } catch {
        add("other", "(not a JSON line)");
        continue;
      }
      const level = typeof record.level === "string" ? LEVELS[record.level] : undefined;
      if (level) add(level, typeof record.msg === "string" ? record.msg : "(no message)");
    }
  }
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
