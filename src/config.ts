/**
 * The controller's configuration: every option with its default, parsed once from flags and
 * environment variables (flags win) into a frozen object. Nothing else reads process.env.
 */
import { hostname } from "node:os";
import { randomBytes } from "node:crypto";
import { JITTER_FACTOR } from "./controller/leader-election.ts";
import { WRITE_POLICY_DEFAULTS } from "./controller/write-policy.ts";
import { formatHelp, parseCommandLine, type CommandSpec, type FlagSpec } from "./cli.ts";
import { parseBindAddress } from "./server.ts";

/** The parsed configuration. */
export interface Config {
  readonly kubeconfig: string | undefined;
  readonly context: string | undefined;
  readonly metricsBindAddress: string;
  readonly healthProbeBindAddress: string;
  readonly leaderElect: boolean;
  readonly leaderElectionNamespace: string;
  readonly leaderElectionId: string;
  readonly leaseDurationMs: number;
  readonly renewDeadlineMs: number;
  readonly retryPeriodMs: number;
  readonly identity: string;
  readonly concurrency: number;
  readonly statusWriteRate: number;
  readonly statusWriteBurst: number;
  readonly statusWriteBudget: number;
  readonly statusWriteBudgetBurst: number;
  readonly maxValueBytes: number;
  readonly allowSecrets: boolean;
  readonly allowSecretExport: boolean;
  readonly denyKinds: readonly string[];
  readonly watchdogMs: number;
  readonly informerLingerMs: number;
  readonly logLevel: "debug" | "info" | "warn" | "error";
  readonly shutdownTimeoutMs: number;
  readonly referableSelector: string | undefined;
  readonly webhookBindAddress: string;
  readonly webhookCertDir: string;
  /** text: one readable line per record; json: one JSON object per line (pino's). */
  readonly logFormat: "json" | "text";
  /** Serve /metrics over HTTPS, to callers a TokenReview and a SubjectAccessReview allow. */
  readonly metricsSecure: boolean;
  /** Folder with tls.crt and tls.key for secure metrics; a self-signed pair is made at start when unset. */
  readonly metricsCertDir: string | undefined;
}

type Kind = "string" | "address" | "bool" | "int" | "duration" | "list" | "level" | "format";

/** The groups of `--help`, in order. */
const GROUPS = [
  "Cluster connection",
  "Sources",
  "Reconciling and status writes",
  "Export",
  "Leader election",
  "Admission webhook",
  "Metrics and probes",
  "Logging",
  "Process",
  "General",
] as const;

interface OptionSpec {
  key: keyof Config;
  flag: string;
  group: (typeof GROUPS)[number];
  env: string;
  kind: Kind;
  default: string;
  help: string;
}

const OPTIONS: OptionSpec[] = [
  {
    key: "kubeconfig",
    flag: "kubeconfig",
    group: "Cluster connection",
    env: "KUBECONFIG",
    kind: "string",
    default: "",
    help: "kubeconfig files, a list separated by ':' (';' on Windows) merged as kubectl merges KUBECONFIG; in-cluster config when empty and running in a pod, else ~/.kube/config",
  },
  {
    key: "context",
    flag: "context",
    group: "Cluster connection",
    env: "REFERABLE_CONTEXT",
    kind: "string",
    default: "",
    help: "the kubeconfig context to use instead of its current-context, as kubectl's --context",
  },
  {
    key: "metricsBindAddress",
    flag: "metrics-bind-address",
    group: "Metrics and probes",
    env: "REFERABLE_METRICS_BIND_ADDRESS",
    kind: "address",
    default: ":8080",
    help: "address of the Prometheus /metrics endpoint; 0 turns it off",
  },
  {
    key: "metricsSecure",
    flag: "metrics-secure",
    group: "Metrics and probes",
    env: "REFERABLE_METRICS_SECURE",
    kind: "bool",
    // Off in the binary, as `npm start` on a laptop has no ServiceAccount to scrape with; deploy/
    // and the Helm chart turn it on (kubebuilder's scaffold does the same with its kustomize patch).
    default: "false",
    help: "serve /metrics over HTTPS, only to callers whose bearer token a TokenReview authenticates and a SubjectAccessReview allows (get on the non-resource URL /metrics: the metrics-reader ClusterRole); the controller needs create on tokenreviews and subjectaccessreviews",
  },
  {
    key: "metricsCertDir",
    flag: "metrics-cert-dir",
    group: "Metrics and probes",
    env: "REFERABLE_METRICS_CERT_DIR",
    kind: "string",
    default: "",
    help: "folder with tls.crt and tls.key for --metrics-secure, reloaded when they change; a self-signed certificate is made at start when empty",
  },
  {
    key: "healthProbeBindAddress",
    flag: "health-probe-bind-address",
    group: "Metrics and probes",
    env: "REFERABLE_HEALTH_PROBE_BIND_ADDRESS",
    kind: "address",
    default: ":8081",
    help: "address of /healthz and /readyz; 0 turns it off",
  },
  {
    key: "leaderElect",
    flag: "leader-elect",
    group: "Leader election",
    env: "REFERABLE_LEADER_ELECT",
    kind: "bool",
    // Off by default, as in kubebuilder's controllers: `npm start` against any cluster works
    // without a namespace for the Lease. The Deployment (deploy/, the Helm chart) turns it on.
    default: "false",
    help: "elect a leader on a Lease so only one replica writes (the Deployment turns it on)",
  },
  {
    key: "leaderElectionNamespace",
    flag: "leader-election-namespace",
    group: "Leader election",
    env: "POD_NAMESPACE",
    kind: "string",
    default: "referable-system",
    help: "namespace of the leader-election Lease",
  },
  {
    key: "leaderElectionId",
    flag: "leader-election-id",
    group: "Leader election",
    env: "REFERABLE_LEADER_ELECTION_ID",
    kind: "string",
    default: "referable-controller",
    help: "name of the leader-election Lease",
  },
  {
    key: "leaseDurationMs",
    flag: "leader-election-lease-duration",
    group: "Leader election",
    env: "REFERABLE_LEASE_DURATION",
    kind: "duration",
    default: "15s",
    help: "how long a standby waits before taking over a lease that is not renewed",
  },
  {
    key: "renewDeadlineMs",
    flag: "leader-election-renew-deadline",
    group: "Leader election",
    env: "REFERABLE_RENEW_DEADLINE",
    kind: "duration",
    default: "10s",
    help: "how long the leader keeps trying to renew before it steps down",
  },
  {
    key: "retryPeriodMs",
    flag: "leader-election-retry-period",
    group: "Leader election",
    env: "REFERABLE_RETRY_PERIOD",
    kind: "duration",
    default: "2s",
    help: "how often leader election acts",
  },
  {
    key: "identity",
    flag: "identity",
    group: "Leader election",
    env: "POD_NAME",
    kind: "string",
    default: "",
    help: "this replica's identity in the Lease; hostname plus a random suffix when empty",
  },
  {
    key: "concurrency",
    flag: "concurrency",
    group: "Reconciling and status writes",
    env: "REFERABLE_CONCURRENCY",
    kind: "int",
    default: "16",
    help: "Referables reconciled at once",
  },
  {
    key: "statusWriteRate",
    flag: "status-write-rate",
    group: "Reconciling and status writes",
    env: "REFERABLE_STATUS_WRITE_RATE",
    kind: "int",
    default: String(WRITE_POLICY_DEFAULTS.rate),
    help: "status writes a second one Referable may make, sustained; a source changing faster is coalesced, and its last value always written",
  },
  {
    key: "statusWriteBurst",
    flag: "status-write-burst",
    group: "Reconciling and status writes",
    env: "REFERABLE_STATUS_WRITE_BURST",
    kind: "int",
    default: String(WRITE_POLICY_DEFAULTS.burst),
    help: "status writes one Referable may make at once after a quiet spell",
  },
  {
    key: "statusWriteBudget",
    flag: "status-write-budget",
    group: "Reconciling and status writes",
    env: "REFERABLE_STATUS_WRITE_BUDGET",
    kind: "int",
    default: String(WRITE_POLICY_DEFAULTS.budget),
    help: "status writes a second for the whole controller, sustained (the API server is shared); 0 for no budget",
  },
  {
    key: "statusWriteBudgetBurst",
    flag: "status-write-budget-burst",
    group: "Reconciling and status writes",
    env: "REFERABLE_STATUS_WRITE_BUDGET_BURST",
    kind: "int",
    default: String(WRITE_POLICY_DEFAULTS.budgetBurst),
    help: "status writes the whole controller may make at once after a quiet spell",
  },
  {
    key: "maxValueBytes",
    flag: "max-value-bytes",
    group: "Sources",
    env: "REFERABLE_MAX_VALUE_BYTES",
    kind: "int",
    default: "32768",
    help: "largest value (bytes of JSON) projected; larger gives ValueTooLarge",
  },
  {
    key: "allowSecrets",
    flag: "allow-secrets",
    group: "Sources",
    env: "REFERABLE_ALLOW_SECRETS",
    kind: "bool",
    default: "false",
    help: "allow Secret sources (RBAC must allow them too)",
  },
  {
    key: "allowSecretExport",
    flag: "allow-secret-export",
    group: "Export",
    env: "REFERABLE_ALLOW_SECRET_EXPORT",
    kind: "bool",
    default: "false",
    help: "allow spec.export into Secrets (a RoleBinding must allow it in each namespace too)",
  },
  {
    key: "denyKinds",
    flag: "deny-kinds",
    group: "Sources",
    env: "REFERABLE_DENY_KINDS",
    kind: "list",
    default: "",
    help: "comma-separated kinds never read, as Kind.group (e.g. Secret, Token.auth.example.com)",
  },
  {
    key: "watchdogMs",
    flag: "watch-watchdog",
    group: "Sources",
    env: "REFERABLE_WATCH_WATCHDOG",
    kind: "duration",
    default: "90s",
    help: "a watch silent this long is reopened",
  },
  {
    key: "informerLingerMs",
    flag: "informer-linger",
    group: "Sources",
    env: "REFERABLE_INFORMER_LINGER",
    kind: "duration",
    default: "10s",
    help: "how long a source informer nobody uses is kept",
  },
  {
    key: "logLevel",
    flag: "log-level",
    group: "Logging",
    env: "REFERABLE_LOG_LEVEL",
    kind: "level",
    default: "info",
    help: "debug, info, warn or error",
  },
  {
    key: "logFormat",
    flag: "log-format",
    group: "Logging",
    env: "REFERABLE_LOG_FORMAT",
    kind: "format",
    default: "",
    help: "text (one readable line per record: time, level, message, key=value fields) or json (one JSON object per line); empty: text when standard output is a terminal, else json",
  },
  {
    key: "webhookBindAddress",
    flag: "webhook-bind-address",
    group: "Admission webhook",
    env: "REFERABLE_WEBHOOK_BIND_ADDRESS",
    kind: "address",
    default: "0",
    help: "address of the admission webhook (HTTPS: /validate-referable, /healthz), served by every replica; 0 (off) unless a ValidatingWebhookConfiguration points at it, e.g. :9443 (deploy/webhook)",
  },
  {
    key: "webhookCertDir",
    flag: "webhook-cert-dir",
    group: "Admission webhook",
    env: "REFERABLE_WEBHOOK_CERT_DIR",
    kind: "string",
    default: "/tmp/k8s-webhook-server/serving-certs",
    help: "folder with the webhook's tls.crt and tls.key, reloaded when they change (cert-manager rotation)",
  },
  {
    key: "referableSelector",
    flag: "referable-selector",
    group: "Reconciling and status writes",
    env: "REFERABLE_SELECTOR",
    kind: "string",
    default: "",
    help: "only reconcile Referables matching this label selector (e.g. shard=a); every Referable when empty",
  },
  {
    key: "shutdownTimeoutMs",
    flag: "shutdown-timeout",
    group: "Process",
    env: "REFERABLE_SHUTDOWN_TIMEOUT",
    kind: "duration",
    default: "20s",
    help: "longest graceful shutdown after SIGTERM",
  },
];

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
  if (config.statusWriteRate < 1) throw new ConfigError("--status-write-rate must be at least 1");
  if (config.statusWriteBurst < 1) throw new ConfigError("--status-write-burst must be at least 1");
  if (config.statusWriteBudget > 0 && config.statusWriteBudgetBurst < 1)
    throw new ConfigError("--status-write-budget-burst must be at least 1");
  if (config.leaderElect) validateLeaderElection(config);
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
