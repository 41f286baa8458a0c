/**
 * The controller's configuration: every option with its default, parsed once from flags and
 * environment variables (flags win) into a frozen object. Nothing else reads process.env.
 */
import { hostname } from "node:os";
import { randomBytes } from "node:crypto";
import { JITTER_FACTOR } from "../runtime/leader-election.ts";
import { MAX_BUCKETS } from "../runtime/shard-gate.ts";
import { parseServiceAccount } from "../api/service-account.ts";
import { formatHelp, parseCommandLine, type CommandSpec, type FlagSpec } from "./cli.ts";
import { parseBindAddress } from "../webhook/bind-address.ts";

import { DATA_PATH_OPTIONS, GROUPS, type Config, type OptionSpec } from "./config-options.ts";
import { EDGE_OPTIONS } from "./edge-options.ts";

export type { Config } from "./config-options.ts";

/** Every option of the controller; `--help` shows them by group, in GROUPS' order. */
const OPTIONS: readonly OptionSpec[] = [...EDGE_OPTIONS, ...DATA_PATH_OPTIONS];

/** A configuration error: the message says which option and what is wrong. */
export class ConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ConfigError";
  }
}

/** The controller's command line, as the shared parser (./cli.ts) reads it and `--help` shows it. */
export const COMMAND: CommandSpec = {
  usage: "referable-controller [options]",
  description:
    "Projects fields of Kubernetes objects into Referables' status (docs/api.md). Flags win over environment variables.",
  groups: GROUPS,
  version: true,
  flags: Object.fromEntries(
    OPTIONS.map((o): [string, FlagSpec] => [
      o.flag,
      {
        type: o.kind === "bool" ? "boolean" : "string",
        help: o.help,
        group: o.group,
        env: o.env,
        default: o.default,
      },
    ]),
  ),
};

/** The `--help` text: every option by group, its environment variable and its default. */
export function helpText(): string {
  return formatHelp(COMMAND);
}

/** Parses a Go-style duration ("1m30s", "500ms", "2s", "0") into milliseconds. */
export function parseDuration(text: string): number {
  const unit: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };
  let total = 0;
  let rest = text.trim();
  if (!rest) throw new ConfigError("empty duration");
  // Go's time.ParseDuration takes a bare "0" (and only 0) without a unit.
  if (rest === "0") return 0;
  while (rest) {
    const m = /^(\d+(?:\.\d+)?)(ms|s|m|h)/.exec(rest);
    if (!m) throw new ConfigError(`${JSON.stringify(text)} is not a duration like 500ms, 15s or 1m30s`);
    total += Number(m[1]) * unit[m[2]!]!;
    rest = rest.slice(m[0].length);
  }
  return total;
}

/** What the process knows about where it runs, for the defaults that depend on it. */
export interface Environment {
  /** Whether standard output is a terminal (the log format's default). @default false */
  terminal?: boolean;
}

/**
 * Parses argv and env into a frozen Config, or throws ConfigError. Returns "help" for --help
 * and "version" for --version.
 */
export function parseConfig(
  argv: readonly string[],
  env: Readonly<Record<string, string | undefined>>,
  where: Environment = {},
): Config | "help" | "version" {
  let parsed: ReturnType<typeof parseCommandLine>;
  try {
    parsed = parseCommandLine(argv, COMMAND);
  } catch (err) {
    throw new ConfigError((err as Error).message);
  }
  if (parsed === "help" || parsed === "version") return parsed;
  const flags = new Map<string, string>();
  for (const [name, value] of Object.entries(parsed)) {
    if (value !== undefined) flags.set(name, String(value));
  }
  const out: Record<string, unknown> = {};
  for (const o of OPTIONS) {
    // An empty environment variable counts as unset (a downward-API field can be empty); an
    // empty flag is taken as given, and refused where the option needs a value.
    const fromEnv = env[o.env] === "" ? undefined : env[o.env];
    const raw = flags.get(o.flag) ?? fromEnv ?? o.default;
    try {
      out[o.key] = convert(o, raw);
    } catch (err) {
      throw new ConfigError(`--${o.flag} (env ${o.env}): ${(err as Error).message}`);
    }
  }
  if (!out.logFormat) out.logFormat = where.terminal ? "text" : "json";
  if (!out.identity) out.identity = `${hostname()}_${randomBytes(4).toString("hex")}`;
  const config = out as unknown as Config;
  if (config.concurrency < 1) throw new ConfigError("--concurrency must be at least 1");
  if (config.driftReadBudget < 0) throw new ConfigError("--drift-read-budget must not be negative");
  if (config.maxLabelKeysPerKind < 0) throw new ConfigError("--max-label-keys-per-kind must not be negative");
  if (config.maxLabelBytesPerObject < 0)
    throw new ConfigError("--max-label-bytes-per-object must not be negative");
  if (config.statusWriteRate < 1) throw new ConfigError("--status-write-rate must be at least 1");
  if (config.statusWriteBurst < 1) throw new ConfigError("--status-write-burst must be at least 1");
  if (config.statusWriteBudget > 0 && config.statusWriteBudgetBurst < 1)
    throw new ConfigError("--status-write-budget-burst must be at least 1");
  if (config.defaultServiceAccount !== undefined) {
    try {
      parseServiceAccount(config.defaultServiceAccount);
    } catch (err) {
      throw new ConfigError(`--default-service-account: ${(err as Error).message}`);
    }
  }
  if (config.shards > MAX_BUCKETS) throw new ConfigError(`--shards must be at most ${MAX_BUCKETS}`);
  // The set's name is a label value on every shard Lease: at most 63 characters.
  if (config.shards > 0 && config.leaderElectionId.length > 40)
    throw new ConfigError("--leader-election-id must be at most 40 characters with --shards");
  if (config.leaderElect || config.shards > 0) validateLeaderElection(config);
  if (config.webhookCertSecret !== undefined) {
    if (config.webhookService === undefined)
      throw new ConfigError(
        "--webhook-cert-secret needs --webhook-service: the Service the API server calls, whose DNS names the certificate is for",
      );
    if (config.webhookConfiguration === undefined)
      throw new ConfigError(
        "--webhook-cert-secret needs --webhook-configuration: the ValidatingWebhookConfiguration whose caBundle must hold the CA",
      );
  }
  return Object.freeze(out) as unknown as Config;
}

/** The constraints LeaderElector (like client-go) enforces, checked here so they exit 2 naming the flags. */
function validateLeaderElection(config: Config): void {
  const { leaseDurationMs: lease, renewDeadlineMs: renew, retryPeriodMs: retry } = config;
  if (!(retry > 0)) throw new ConfigError("--leader-election-retry-period must be greater than 0");
  if (!(lease > renew))
    throw new ConfigError(
      `--leader-election-lease-duration (${lease} ms) must be greater than --leader-election-renew-deadline (${renew} ms)`,
    );
  if (!(renew > JITTER_FACTOR * retry))
    throw new ConfigError(
      `--leader-election-renew-deadline (${renew} ms) must be greater than ${JITTER_FACTOR} times --leader-election-retry-period (${retry} ms)`,
    );
}

function convert(spec: OptionSpec, raw: string): unknown {
  switch (spec.kind) {
    case "string":
      if (raw !== "") return raw;
      // Options with a default need a value: the Config type promises a string for them.
      if (spec.default !== "") throw new ConfigError("must not be empty");
      return undefined;
    case "address":
      parseBindAddress(raw);
      return raw;
    case "bool":
      if (raw === "true" || raw === "1") return true;
      if (raw === "false" || raw === "0") return false;
      throw new ConfigError(`${JSON.stringify(raw)} is not true or false`);
    case "int":
      // Not Number(raw) alone: it takes "" as 0, and "1e3" or "0x10" as numbers.
      if (!/^\d+$/.test(raw)) throw new ConfigError(`${JSON.stringify(raw)} is not a whole number`);
      return Number(raw);
    case "duration":
      return parseDuration(raw);
    case "list":
      return Object.freeze(
        raw
          .split(",")
          .map((s) => s.trim())
          .filter(Boolean),
      );
    case "format":
      if (!["", "json", "text"].includes(raw))
        throw new ConfigError(`${JSON.stringify(raw)} is not json or text`);
      return raw || undefined;
    case "level":
      if (!["debug", "info", "warn", "error"].includes(raw))
        throw new ConfigError(`${JSON.stringify(raw)} is not debug, info, warn or error`);
      return raw;
  }
}
