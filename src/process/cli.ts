/**
 * The one command-line parser of the controller, the benchmarks and the scripts: `node:util`'s
 * `parseArgs` in strict mode (unknown flags and stray arguments are refused, with a "did you
 * mean" when a known flag is close), Go-style booleans (`--flag`, `--flag=true|false`), and a
 * `--help` grouped by topic with every default.
 */
import { parseArgs } from "node:util";

/** One flag of a command. */
export interface FlagSpec {
  /** A boolean is set by `--flag` or `--flag=true|false`; a string takes `--flag=V` or `--flag V`. */
  type: "string" | "boolean";
  /** One line (or a few sentences) saying what it does. */
  help: string;
  /** The heading it is listed under in `--help`. @default "Options" */
  group?: string;
  /** The default as `--help` shows it; not applied by the parser (the caller owns defaults). */
  default?: string;
  /** The environment variable that sets it too, shown in `--help`. */
  env?: string;
  /** The value's placeholder in `--help`. @default "VALUE" */
  valueName?: string;
}

/** A command's flags and how `--help` presents them. */
export interface CommandSpec {
  /** `Usage: <usage>` */
  usage: string;
  /** A paragraph under the usage line. */
  description?: string;
  /** Flags by name (without the leading dashes). `help` (and `version` when given) are added. */
  flags: Readonly<Record<string, FlagSpec>>;
  /** The order of the groups in `--help`; groups not listed follow in order of appearance. */
  groups?: readonly string[];
  /** When set, `--version` is accepted and {@link parseCommandLine} returns "version". */
  version?: boolean;
}

/** Parsed flags: strings for string flags, booleans for boolean flags; absent when not given. */
export type FlagValues = Record<string, string | boolean | undefined>;

/** A command line that cannot be parsed; the message says what to fix. */
export class UsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "UsageError";
  }
}

const HELP: FlagSpec = { type: "boolean", help: "print this help and exit", group: "General" };
const VERSION: FlagSpec = { type: "boolean", help: "print the version and exit", group: "General" };

function allFlags(spec: CommandSpec): Record<string, FlagSpec> {
  return { ...spec.flags, help: HELP, ...(spec.version ? { version: VERSION } : {}) };
}

/**
 * Parses `argv` against `spec`. Returns "help" for `--help`/`-h`, "version" for `--version`
 * (when the command has one), else the flags given. Throws {@link UsageError} on an unknown
 * flag (suggesting the nearest known one), a missing value, a boolean given something other
 * than true/false, or an argument that is not a flag.
 */
export function parseCommandLine(
  argv: readonly string[],
  spec: CommandSpec,
): FlagValues | "help" | "version" {
  const flags = allFlags(spec);
  // Help wins over everything else on the line, even a typo elsewhere: it is how one finds the typo.
  if (argv.includes("--help") || argv.includes("-h")) return "help";
  if (spec.version && argv.includes("--version")) return "version";
  const args: string[] = [];
  for (const arg of argv) {
    // parseArgs would read `-concurrency=2` as the short flags -c -o -n ...: name the long flag instead.
    if (/^-[^-]./.test(arg)) throw unknown(arg, flags);
    // parseArgs refuses `--bool=false`; Go's flag package (and so every Kubernetes controller's
    // manifest) uses it. `--no-` is this parser's own spelling of false, not offered to users.
    const m = /^--([^=]+)=(.*)$/s.exec(arg);
    const flag = m && flags[m[1]!];
    if (m && flag?.type === "boolean") {
      if (m[2] === "true" || m[2] === "1") args.push(`--${m[1]}`);
      else if (m[2] === "false" || m[2] === "0") args.push(`--no-${m[1]}`);
      else throw new UsageError(`--${m[1]}: ${JSON.stringify(m[2])} is not true or false`);
    } else if (/^--no-/.test(arg)) {
      throw unknown(arg, flags);
    } else args.push(arg);
  }
  const options: Record<string, { type: "string" | "boolean"; short?: string }> = {};
  for (const [name, f] of Object.entries(flags)) options[name] = { type: f.type };
  try {
    const { values } = parseArgs({
      args,
      options,
      strict: true,
      allowPositionals: false,
      allowNegative: true,
    });
    const out: FlagValues = {};
    for (const [name, value] of Object.entries(values)) {
      if (Array.isArray(value)) continue; // no flag is declared `multiple`
      out[name] = value;
    }
    return out;
  } catch (err) {
    const e = err as Error & { code?: string };
    if (e.code === "ERR_PARSE_ARGS_UNKNOWN_OPTION") {
      const bad = /'([^']+)'/.exec(e.message)?.[1] ?? "";
      throw unknown(bad, flags);
    }
    if (e.code === "ERR_PARSE_ARGS_UNEXPECTED_POSITIONAL") {
      const bad = /'([^']+)'/.exec(e.message)?.[1] ?? "";
      throw new UsageError(
        `unexpected argument ${JSON.stringify(bad)}: every option is a --flag (a boolean takes --flag=false, not --flag false); see --help`,
      );
    }
    if (e.code === "ERR_PARSE_ARGS_INVALID_OPTION_VALUE") {
      const name = /--([a-z0-9-]+)/i.exec(e.message)?.[1] ?? "";
      if (flags[name]?.type === "string") throw new UsageError(`--${name} needs a value, as --${name}=VALUE`);
      throw new UsageError(`--${name} takes no separate value: write --${name}=true or --${name}=false`);
    }
    throw new UsageError(`${e.message}; see --help`);
  }
}

function unknown(arg: string, flags: Record<string, FlagSpec>): UsageError {
  const name = arg.replace(/^-+/, "").replace(/^no-/, "").split("=")[0]!;
  const near = suggest(name, Object.keys(flags));
  return new UsageError(
    `unknown option ${JSON.stringify(arg)}${near ? `: did you mean --${near}?` : ""} (see --help)`,
  );
}

/** The known name nearest to `name` (edit distance, or a unique prefix), if one is close enough. */
export function suggest(name: string, known: readonly string[]): string | undefined {
  const prefixed = known.filter((k) => k.startsWith(name));
  if (name.length >= 3 && prefixed.length === 1) return prefixed[0];
  let best: string | undefined;
  let bestDistance = Infinity;
  for (const k of known) {
    const d = editDistance(name, k);
    if (d < bestDistance) [best, bestDistance] = [k, d];
  }
  // Close enough to be a typo, not a different word: at most a third of the name, and 1 for short ones.
  return bestDistance <= Math.max(1, Math.floor(name.length / 3)) ? best : undefined;
}

/** Levenshtein distance, with a transposition costing 1 (optimal string alignment); names are short. */
function editDistance(a: string, b: string): number {
  const d: number[][] = Array.from({ length: a.length + 1 }, (_, i) =>
    Array.from({ length: b.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)),
  );
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let v = Math.min(d[i - 1]![j]! + 1, d[i]![j - 1]! + 1, d[i - 1]![j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1])
        v = Math.min(v, d[i - 2]![j - 2]! + 1);
      d[i]![j] = v;
    }
  }
  return d[a.length]![b.length]!;
}

/** The `--help` text: the usage line, the description, then the flags by group with their defaults. */
export function formatHelp(spec: CommandSpec): string {
  const flags = allFlags(spec);
  const byGroup = new Map<string, Array<[string, FlagSpec]>>();
  for (const group of spec.groups ?? []) byGroup.set(group, []);
  for (const entry of Object.entries(flags)) {
    const group = entry[1].group ?? "Options";
    if (!byGroup.has(group)) byGroup.set(group, []);
    byGroup.get(group)!.push(entry);
  }
  const lines = [`Usage: ${spec.usage}`];
  if (spec.description) lines.push("", spec.description);
  for (const [group, entries] of byGroup) {
    if (entries.length === 0) continue;
    lines.push("", `${group}:`);
    for (const [name, f] of entries) {
      // A boolean setting (one with a default) can be turned off too: --flag=false.
      const syntax =
        f.type === "string" ? `=${f.valueName ?? "VALUE"}` : f.default !== undefined ? "[=true|false]" : "";
      lines.push(`  --${name}${syntax}`);
      const notes = [
        f.env ? `env ${f.env}` : "",
        f.default !== undefined ? `default ${f.default === "" ? '""' : f.default}` : "",
      ].filter(Boolean);
      lines.push(`      ${f.help}${notes.length ? ` (${notes.join("; ")})` : ""}`);
    }
  }
  return lines.join("\n");
}

/**
 * For scripts and benchmarks: parses `argv` (default: this process's), prints the help and exits 0
 * on `--help`, prints the error and exits 2 on a bad command line; otherwise returns the flags.
 */
export function parseOrExit(spec: CommandSpec, argv: readonly string[] = process.argv.slice(2)): FlagValues {
  try {
    const parsed = parseCommandLine(argv, spec);
    if (parsed === "help" || parsed === "version") {
      process.stdout.write(`${formatHelp(spec)}\n`);
      process.exit(0);
    }
    return parsed;
  } catch (err) {
    process.stderr.write(`${(err as Error).message}\n`);
    process.exit(2);
  }
}

/** A whole number from a string flag, or `fallback` when absent; exits 2 naming the flag when it is not one. */
export function numberFlag(values: FlagValues, name: string, fallback: number): number {
  const raw = values[name];
  if (raw === undefined) return fallback;
  const n = Number(raw);
  if (typeof raw !== "string" || raw.trim() === "" || !Number.isFinite(n)) {
    process.stderr.write(`--${name}: ${JSON.stringify(raw)} is not a number\n`);
    process.exit(2);
  }
  return n;
}
