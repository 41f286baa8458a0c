/**
 * The process's logger: pino, writing JSON lines as klog and zap write them (the level as a
 * string, `"level":"error"`, and the time in ISO 8601 UTC, `"time":"2026-11-25T09:49:18.012Z"`),
 * so log pipelines parse them without a mapping of pino's numbers; or, with `--log-format=text`,
 * one readable line per record as controller-runtime's `--zap-devel` does:
 *
 *     2026-11-25T09:49:18.012Z  INFO  controller  controller started  leaderElect=false concurrency=16
 *
 * The text form is made from the JSON pino writes, so both carry exactly the same fields: it
 * renders what components log (names, reasons, counts), and adds nothing.
 */
import { pino, type Logger as PinoLogger } from "pino";

/** Options for {@link createProcessLogger}. */
export interface ProcessLoggerOptions {
  level: "debug" | "info" | "warn" | "error";
  format: "json" | "text";
  /** Fields on every JSON line (the text form leaves out `component` and `identity`). */
  base: Record<string, unknown>;
  /** Where lines go. @default standard output */
  write?: (line: string) => void;
}

// pino's numbers, for lines written before the levels were strings (old logs fed to the text form).
const LEVEL_NAMES: Record<number, string> = {
  10: "TRACE",
  20: "DEBUG",
  30: "INFO",
  40: "WARN",
  50: "ERROR",
  60: "FATAL",
};

function levelName(level: unknown): string {
  if (typeof level === "string") return level.toUpperCase();
  return LEVEL_NAMES[level as number] ?? String(level ?? "");
}

function timeText(time: unknown): string {
  if (typeof time === "string") return time;
  return typeof time === "number" ? new Date(time).toISOString() : "";
}

// Fields every line carries in JSON that a reader at a terminal does not need on each line.
const OMITTED = new Set(["level", "time", "msg", "pid", "hostname", "component", "identity", "part"]);

/** One pino JSON line as one text line; a line that is not JSON is passed on as it is. */
export function formatTextLine(json: string): string {
  let record: Record<string, unknown>;
  try {
    record = JSON.parse(json) as Record<string, unknown>;
  } catch {
    return json.endsWith("\n") ? json : `${json}\n`;
  }
  const time = timeText(record.time);
  const level = levelName(record.level);
  const part = typeof record.part === "string" ? record.part : "";
  const fields = Object.entries(record)
    .filter(([key]) => !OMITTED.has(key))
    .map(([key, value]) => `${key}=${formatValue(value)}`);
  const columns = [time, level.padEnd(5), part, String(record.msg ?? "")].filter(Boolean);
  return `${[...columns, ...fields].join("  ")}\n`;
}

function formatValue(value: unknown): string {
  if (typeof value === "string") return /^[^\s"=]+$/.test(value) ? value : JSON.stringify(value);
  if (typeof value === "number" || typeof value === "boolean" || value === null) return String(value);
  try {
    return JSON.stringify(value) ?? String(value);
  } catch {
    return "[unprintable]";
  }
}

/** A pino logger writing JSON lines, or text lines made from them. */
export function createProcessLogger(options: ProcessLoggerOptions): PinoLogger {
  const write = options.write ?? ((line: string) => void process.stdout.write(line));
  const pinoOptions = {
    level: options.level,
    base: options.base,
    // "level":"info" rather than pino's 30, and "time":"...Z" rather than epoch milliseconds.
    formatters: { level: (label: string) => ({ level: label }) },
    timestamp: pino.stdTimeFunctions.isoTime,
  };
  if (options.format === "json" && !options.write) return pino(pinoOptions);
  // pino writes each record whole, one `write` call per line.
  const destination = {
    write: options.format === "json" ? write : (line: string) => write(formatTextLine(line)),
  };
  return pino(pinoOptions, destination);
}
