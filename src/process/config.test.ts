import { hostname } from "node:os";
import { ConfigError, helpText, parseConfig, parseDuration, type Config } from "./config.ts";
import { parserCases } from "../../test/harness/parser-cases.ts";

type Env = Record<string, string | undefined>;

/** parseConfig for a case that must succeed. */
function parse(argv: string[], env: Env = {}): Config {
  const config = parseConfig(argv, env);
  if (config === "help" || config === "version") throw new Error(`unexpected ${config}`);
  return config;
}

describe("parseConfig", () => {
  it("defaults every option when given nothing", () => {
    const config = parse([]);
    const { identity, ...rest } = config;
    expect(rest).toEqual({
      kubeconfig: undefined,
      context: undefined,
      metricsBindAddress: ":8080",
      healthProbeBindAddress: ":8081",
      leaderElect: false,
      leaderElectionNamespace: "referable-system",
      leaderElectionId: "referable-controller",
      leaseDurationMs: 15_000,
      renewDeadlineMs: 10_000,
      retryPeriodMs: 2_000,
      shards: 0,
      concurrency: 16,
      statusWriteRate: 25,
      statusWriteBurst: 5,
      statusWriteBudget: 500,
      statusWriteBudgetBurst: 1000,
      maxValueBytes: 32_768,
      maxLabelKeysPerKind: 256,
      maxLabelBytesPerObject: 4096,
      driftReadBudget: 10,
      transformWorkers: 1,
      transformTimeoutMs: 50,
      transformMaxHeapMiB: 64,
      allowSecrets: false,
      allowSecretExport: false,
      defaultServiceAccount: undefined,
      denyKinds: [],
      watchdogMs: 90_000,
      webhookBindAddress: "0",
      webhookCertDir: "/tmp/k8s-webhook-server/serving-certs",
      webhookCertSecret: undefined,
      webhookCertNamespace: "referable-system",
      webhookService: undefined,
      webhookConfiguration: undefined,
      informerLingerMs: 10_000,
      logLevel: "info",
      shutdownTimeoutMs: 20_000,
      referableSelector: undefined,
      logFormat: "json",
      metricsSecure: false,
      metricsCertDir: undefined,
    });
    expect(identity).toMatch(
      new RegExp(`^${hostname().replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}_[0-9a-f]{8}$`),
    );
  });

  it("gives each replica its own default identity", () => {
    expect(parse([]).identity).not.toBe(parse([]).identity);
  });

  const cases: Array<{ reason: string; argv: string[]; env?: Env; want: Partial<Config> }> = [
    {
      reason: "--default-service-account takes NAMESPACE/NAME, as flag or environment variable",
      argv: [],
      env: { REFERABLE_DEFAULT_SERVICE_ACCOUNT: "tenants/nobody" },
      want: { defaultServiceAccount: "tenants/nobody" },
    },
    {
      reason: "a flag wins over its environment variable",
      argv: ["--concurrency", "3"],
      env: { REFERABLE_CONCURRENCY: "5" },
      want: { concurrency: 3 },
    },
    {
      reason: "the environment variable is used when the flag is absent",
      argv: [],
      env: { REFERABLE_CONCURRENCY: "5", POD_NAMESPACE: "ops", POD_NAME: "referable-0" },
      want: {
        concurrency: 5,
        leaderElectionNamespace: "ops",
        webhookCertNamespace: "ops",
        identity: "referable-0",
      },
    },
    {
      reason: "an empty environment variable counts as unset",
      argv: [],
      env: { POD_NAMESPACE: "", REFERABLE_LEADER_ELECT: "", REFERABLE_CONCURRENCY: "" },
      want: { leaderElectionNamespace: "referable-system", leaderElect: false, concurrency: 16 },
    },
    {
      reason: "--flag=value and --flag value are the same",
      argv: ["--leader-election-id=a", "--log-level", "debug"],
      want: { leaderElectionId: "a", logLevel: "debug" },
    },
    {
      reason: "the last of a repeated flag wins",
      argv: ["--concurrency=2", "--concurrency=4"],
      want: { concurrency: 4 },
    },
    {
      reason: "a bare bool flag means true",
      argv: ["--allow-secrets"],
      want: { allowSecrets: true },
    },
    {
      reason: "writing Secrets is a flag of its own, apart from reading them",
      argv: ["--allow-secret-export"],
      want: { allowSecrets: false, allowSecretExport: true },
    },
    {
      reason: "bool flags take true/false and 1/0",
      argv: ["--leader-elect=true", "--allow-secrets=1"],
      want: { leaderElect: true, allowSecrets: true },
    },
    {
      reason: "bool flags take 0 as false (and a flag wins over its environment variable)",
      argv: ["--leader-elect=0"],
      env: { REFERABLE_LEADER_ELECT: "true" },
      want: { leaderElect: false },
    },
    {
      reason: "bool environment variables take the same forms",
      argv: [],
      env: { REFERABLE_LEADER_ELECT: "1", REFERABLE_ALLOW_SECRETS: "true" },
      want: { leaderElect: true, allowSecrets: true },
    },
    {
      reason: "durations are Go durations, in milliseconds",
      argv: [
        "--leader-election-lease-duration=1m30s",
        "--leader-election-renew-deadline=1m",
        "--leader-election-retry-period=500ms",
        "--watch-watchdog=1h",
        "--informer-linger=0",
        "--shutdown-timeout=1.5s",
      ],
      want: {
        leaseDurationMs: 90_000,
        renewDeadlineMs: 60_000,
        retryPeriodMs: 500,
        watchdogMs: 3_600_000,
        informerLingerMs: 0,
        shutdownTimeoutMs: 1_500,
      },
    },
    {
      reason: "lists split on commas, trimmed, empty items dropped",
      argv: ["--deny-kinds", " Secret, Token.auth.example.com,,"],
      want: { denyKinds: ["Secret", "Token.auth.example.com"] },
    },
    {
      reason: "lists come from the environment too",
      argv: [],
      env: { REFERABLE_DENY_KINDS: "Secret" },
      want: { denyKinds: ["Secret"] },
    },
    {
      reason: "an empty list flag clears the list",
      argv: ["--deny-kinds="],
      env: { REFERABLE_DENY_KINDS: "Secret" },
      want: { denyKinds: [] },
    },
    {
      reason: "optional strings: KUBECONFIG and a selector",
      argv: ["--referable-selector", "shard=a"],
      env: { KUBECONFIG: "/tmp/kc" },
      want: { kubeconfig: "/tmp/kc", referableSelector: "shard=a" },
    },
    {
      reason: "a KUBECONFIG list is kept whole (merged when loaded), and --context picks a context",
      argv: ["--context", "staging"],
      env: { KUBECONFIG: "/a/config:/b/config" },
      want: { kubeconfig: "/a/config:/b/config", context: "staging" },
    },
    {
      reason: "an empty optional string flag is unset, even over the environment",
      argv: ["--referable-selector="],
      env: { REFERABLE_SELECTOR: "shard=b" },
      want: { referableSelector: undefined },
    },
    {
      reason: "bind addresses: host and port, bracketed IPv6, or 0 for off",
      argv: ["--metrics-bind-address=[::1]:9090", "--health-probe-bind-address", "0"],
      want: { metricsBindAddress: "[::1]:9090", healthProbeBindAddress: "0" },
    },
    {
      reason: "leader-election timing is not checked when leader election is off",
      argv: ["--leader-elect=false", "--leader-election-renew-deadline=1m"],
      want: { leaderElect: false, renewDeadlineMs: 60_000 },
    },
    {
      reason: "the smallest valid leader-election timing",
      argv: [
        "--leader-elect",
        "--leader-election-lease-duration=3s",
        "--leader-election-renew-deadline=2s",
        "--leader-election-retry-period=1s",
      ],
      want: { leaderElect: true, leaseDurationMs: 3_000, renewDeadlineMs: 2_000, retryPeriodMs: 1_000 },
    },
    {
      reason: "sharding: a number of buckets, from the flag or the environment",
      argv: ["--shards=16"],
      want: { shards: 16 },
    },
    {
      reason: "sharding from the environment",
      argv: [],
      env: { REFERABLE_SHARDS: "1024" },
      want: { shards: 1024 },
    },
  ];
  it.each(cases)("$reason", ({ argv, env, want }) => {
    expect(parse(argv, env)).toMatchObject(want);
  });

  const errors: Array<{ reason: string; argv: string[]; env?: Env; want: string }> = [
    { reason: "an unknown flag is named", argv: ["--bogus=1"], want: 'unknown option "--bogus"' },
    { reason: "a positional argument is refused", argv: ["extra"], want: 'unexpected argument "extra"' },
    { reason: "a single-dash long flag is refused", argv: ["-concurrency=2"], want: "unknown option" },
    {
      reason: "a flag that needs a value, last on the line",
      argv: ["--concurrency"],
      want: "--concurrency needs a value",
    },
    {
      reason: "a bad duration names the flag, its variable and the value",
      argv: ["--leader-election-lease-duration", "10x"],
      want: '--leader-election-lease-duration (env REFERABLE_LEASE_DURATION): "10x" is not a duration',
    },
    {
      reason: "a bad duration from the environment names the flag too",
      argv: [],
      env: { REFERABLE_WATCH_WATCHDOG: "soon" },
      want: '--watch-watchdog (env REFERABLE_WATCH_WATCHDOG): "soon" is not a duration',
    },
    {
      reason: "a duration without a unit",
      argv: ["--shutdown-timeout=30"],
      want: '--shutdown-timeout (env REFERABLE_SHUTDOWN_TIMEOUT): "30" is not a duration',
    },
    {
      reason: "a bool that is not true/false/1/0",
      argv: ["--leader-elect=yes"],
      want: '--leader-elect: "yes" is not true or false',
    },
    {
      reason: "an empty bool flag",
      argv: ["--allow-secrets="],
      want: '--allow-secrets: "" is not true or false',
    },
    {
      reason: "a bool from the environment that is not true/false/1/0",
      argv: [],
      env: { REFERABLE_METRICS_SECURE: "yes" },
      want: '--metrics-secure (env REFERABLE_METRICS_SECURE): "yes" is not true or false',
    },
    {
      reason: "a typo'd flag gets the nearest known one",
      argv: ["--concurency=2"],
      want: 'unknown option "--concurency": did you mean --concurrency?',
    },
    {
      reason: "a single-dash long flag is named with its fix",
      argv: ["-leader-elect"],
      want: "did you mean --leader-elect?",
    },
    {
      reason: "a boolean followed by a separate value",
      argv: ["--leader-elect", "false"],
      want: 'unexpected argument "false"',
    },
    {
      reason: "an unknown log format",
      argv: ["--log-format=pretty"],
      want: '--log-format (env REFERABLE_LOG_FORMAT): "pretty" is not json or text',
    },
    {
      reason: "a default ServiceAccount without its namespace",
      argv: ["--default-service-account=nobody"],
      want: '--default-service-account: "nobody" is not NAMESPACE/NAME',
    },
    {
      reason: "a default ServiceAccount whose name is not a DNS name",
      argv: ["--default-service-account=tenants/No_Body"],
      want: '--default-service-account: "tenants/No_Body": the ServiceAccount.name must be a ServiceAccount\'s name',
    },
    {
      reason: "an int that is not a number",
      argv: ["--concurrency=abc"],
      want: '--concurrency (env REFERABLE_CONCURRENCY): "abc" is not a whole number',
    },
    {
      reason: "an empty int flag is not 0",
      argv: ["--max-value-bytes="],
      want: '--max-value-bytes (env REFERABLE_MAX_VALUE_BYTES): "" is not a whole number',
    },
    {
      reason: "an int in exponent notation",
      argv: ["--max-value-bytes=1e3"],
      want: '--max-value-bytes (env REFERABLE_MAX_VALUE_BYTES): "1e3" is not a whole number',
    },
    {
      reason: "a negative int",
      argv: ["--concurrency=-1"],
      want: '--concurrency (env REFERABLE_CONCURRENCY): "-1" is not a whole number',
    },
    { reason: "zero workers", argv: ["--concurrency=0"], want: "--concurrency must be at least 1" },
    {
      reason: "no status writes",
      argv: ["--status-write-rate=0"],
      want: "--status-write-rate must be at least 1",
    },
    {
      reason: "no burst of status writes",
      argv: ["--status-write-burst=0"],
      want: "--status-write-burst must be at least 1",
    },
    {
      reason: "a budget with no burst",
      argv: ["--status-write-budget-burst=0"],
      want: "--status-write-budget-burst must be at least 1",
    },
    {
      reason: "a managed webhook certificate without the Service it is for",
      argv: ["--webhook-cert-secret=s", "--webhook-configuration=v"],
      want: "--webhook-cert-secret needs --webhook-service: the Service the API server calls, whose DNS names the certificate is for",
    },
    {
      reason: "a managed webhook certificate without the configuration whose caBundle holds its CA",
      argv: ["--webhook-cert-secret=s", "--webhook-service=svc"],
      want: "--webhook-cert-secret needs --webhook-configuration: the ValidatingWebhookConfiguration whose caBundle must hold the CA",
    },
    {
      reason: "an unknown log level",
      argv: ["--log-level=trace"],
      want: '--log-level (env REFERABLE_LOG_LEVEL): "trace" is not debug, info, warn or error',
    },
    {
      reason: "a bind address without a colon",
      argv: ["--metrics-bind-address=8080"],
      want: '--metrics-bind-address (env REFERABLE_METRICS_BIND_ADDRESS): bind address "8080" is not of the form [host]:port',
    },
    {
      reason: "a bind address with a port out of range",
      argv: ["--health-probe-bind-address=:65536"],
      want: '--health-probe-bind-address (env REFERABLE_HEALTH_PROBE_BIND_ADDRESS): bind address ":65536"',
    },
    {
      reason: "an empty value for an option that needs one",
      argv: ["--leader-election-namespace="],
      want: "--leader-election-namespace (env POD_NAMESPACE): must not be empty",
    },
    {
      reason: "an empty bind address is not 'off' (0 is)",
      argv: ["--metrics-bind-address="],
      want: '--metrics-bind-address (env REFERABLE_METRICS_BIND_ADDRESS): bind address ""',
    },
    {
      reason: "the lease must outlast the renew deadline",
      argv: ["--leader-elect", "--leader-election-lease-duration=10s"],
      want: "--leader-election-lease-duration (10000 ms) must be greater than --leader-election-renew-deadline (10000 ms)",
    },
    {
      reason: "the renew deadline must exceed the jittered retry period (as client-go requires)",
      argv: [
        "--leader-elect",
        "--leader-election-renew-deadline=2s",
        "--leader-election-retry-period=1800ms",
      ],
      want: "--leader-election-renew-deadline (2000 ms) must be greater than 1.2 times --leader-election-retry-period (1800 ms)",
    },
    {
      reason: "a zero retry period",
      argv: ["--leader-elect", "--leader-election-retry-period=0s"],
      want: "--leader-election-retry-period must be greater than 0",
    },
    {
      reason: "leader-election timing from the environment is checked too",
      argv: [],
      env: { REFERABLE_LEADER_ELECT: "true", REFERABLE_RENEW_DEADLINE: "20s" },
      want: "--leader-election-lease-duration (15000 ms) must be greater than --leader-election-renew-deadline (20000 ms)",
    },
    {
      reason: "more buckets than the bound (each is a Lease and a metric label)",
      argv: ["--shards=1025"],
      want: "--shards must be at most 1024",
    },
    {
      reason: "sharding checks the lease timing even with leader election off",
      argv: ["--shards=4", "--leader-election-renew-deadline=20s"],
      want: "--leader-election-lease-duration (15000 ms) must be greater than --leader-election-renew-deadline (20000 ms)",
    },
    {
      reason: "a shard set name too long for the label on its Leases",
      argv: ["--shards=4", `--leader-election-id=${"x".repeat(41)}`],
      want: "--leader-election-id must be at most 40 characters with --shards",
    },
  ];
  it.each(errors)("refuses: $reason", ({ argv, env, want }) => {
    let got: unknown;
    try {
      parseConfig(argv, env ?? {});
    } catch (err) {
      got = err;
    }
    expect(got).toBeInstanceOf(ConfigError);
    expect((got as Error).message).toContain(want);
  });

  const helps: Array<{ reason: string; argv: string[] }> = [
    { reason: "--help alone", argv: ["--help"] },
    { reason: "-h", argv: ["-h"] },
    { reason: "--help after valid flags", argv: ["--concurrency=2", "--help"] },
    { reason: "--help before a flag that would be refused", argv: ["--help", "--bogus"] },
  ];
  it.each(helps)("returns help, whatever the environment holds: $reason", ({ argv }) => {
    expect(parseConfig(argv, { REFERABLE_CONCURRENCY: "many" })).toBe("help");
  });

  it("returns version for --version, before reading anything else", () => {
    expect(parseConfig(["--version", "--concurrency=2"], { REFERABLE_CONCURRENCY: "many" })).toBe("version");
  });

  const formats: Array<{ reason: string; argv: string[]; env?: Env; terminal: boolean; want: string }> = [
    { reason: "text on a terminal by default", argv: [], terminal: true, want: "text" },
    { reason: "json when not on a terminal (a pod, a pipe)", argv: [], terminal: false, want: "json" },
    { reason: "the flag wins over the terminal", argv: ["--log-format=json"], terminal: true, want: "json" },
    { reason: "text asked for in a pipe", argv: ["--log-format=text"], terminal: false, want: "text" },
    {
      reason: "the environment variable sets it",
      argv: [],
      env: { REFERABLE_LOG_FORMAT: "text" },
      terminal: false,
      want: "text",
    },
  ];
  it.each(formats)("log format: $reason", ({ argv, env, terminal, want }) => {
    const config = parseConfig(argv, env ?? {}, { terminal });
    expect(config).toMatchObject({ logFormat: want });
  });

  it("returns a frozen object, lists included", () => {
    const config = parse(["--deny-kinds=Secret"]);
    expect(Object.isFrozen(config)).toBe(true);
    expect(Object.isFrozen(config.denyKinds)).toBe(true);
    expect(() => {
      (config as unknown as Record<string, unknown>).concurrency = 1;
    }).toThrow(TypeError);
    expect(() => (config.denyKinds as string[]).push("ConfigMap")).toThrow(TypeError);
  });
});

describe("helpText", () => {
  const text = helpText();
  const flags = [...text.matchAll(/^ {2}--([a-z-]+)/gm)].map((m) => m[1]!);

  it("lists every option once, plus --help and --version", () => {
    expect(flags).toHaveLength(Object.keys(parse([])).length + 2);
    expect(new Set(flags).size).toBe(flags.length);
    expect(flags).toContain("help");
    expect(flags).toContain("version");
  });

  it("lists only options parseConfig knows", () => {
    for (const flag of flags.filter((f) => f !== "help" && f !== "version")) {
      let got: unknown;
      try {
        parseConfig([`--${flag}=`], {});
      } catch (err) {
        got = err;
      }
      expect(String(got)).not.toContain("unknown option");
    }
  });

  const documented: Array<{ reason: string; flag: string; want: string }> = [
    { reason: "metrics default", flag: "--metrics-bind-address=VALUE", want: "default :8080" },
    { reason: "label-key total", flag: "--max-label-keys-per-kind=VALUE", want: "default 256" },
    { reason: "read budget", flag: "--drift-read-budget=VALUE", want: "default 10" },
    { reason: "probe default", flag: "--health-probe-bind-address=VALUE", want: "default :8081" },
    { reason: "bool syntax and default", flag: "--leader-elect[=true|false]", want: "default false" },
    { reason: "duration default", flag: "--leader-election-lease-duration=VALUE", want: "default 15s" },
    { reason: "env var named", flag: "--concurrency=VALUE", want: "env REFERABLE_CONCURRENCY; default 16" },
    { reason: "empty default shown as quotes", flag: "--referable-selector=VALUE", want: 'default ""' },
    {
      reason: "secure metrics off in the binary",
      flag: "--metrics-secure[=true|false]",
      want: "default false",
    },
  ];
  // What the binary's --help was checked for (test/integration/process.test.ts: it prints this text).
  const shown: Array<[flag: string, want: string]> = [
    ["--kubeconfig=VALUE", 'env KUBECONFIG; default ""'],
    ["--context=VALUE", 'env REFERABLE_CONTEXT; default ""'],
    ["--leader-election-renew-deadline=VALUE", "default 10s"],
    ["--leader-election-retry-period=VALUE", "default 2s"],
    ["--shards=VALUE", "env REFERABLE_SHARDS; default 0"],
    ["--concurrency=VALUE", "default 16"],
    ["--status-write-rate=VALUE", "default 25"],
    ["--status-write-burst=VALUE", "default 5"],
    ["--status-write-budget=VALUE", "default 500"],
    ["--status-write-budget-burst=VALUE", "default 1000"],
    ["--allow-secret-export[=true|false]", "default false"],
    ["--metrics-secure[=true|false]", "env REFERABLE_METRICS_SECURE; default false"],
    ["--metrics-cert-dir=VALUE", 'default ""'],
    ["--log-format=VALUE", "text (one readable line per record"],
    ["--version", "print the version and exit"],
  ];
  it.each(shown)("shows %s with %s", (flag, want) => {
    const lines = text.split("\n");
    expect(lines[lines.indexOf(`  ${flag}`) + 1]).toContain(want);
    expect(lines).toContain(`  ${flag}`);
  });
  it("groups the options under headings, in order", () => {
    const headings = text.split("\n").filter((l) => /^[A-Z][a-z ]+:$/.test(l));
    expect(headings).toEqual([
      "Cluster connection:",
      "Sources:",
      "Transforms:",
      "Reconciling and status writes:",
      "Export:",
      "Leader election:",
      "Admission webhook:",
      "Metrics and probes:",
      "Logging:",
      "Process:",
      "General:",
    ]);
    const section = (heading: string) => {
      const lines = text.split("\n");
      const from = lines.indexOf(heading);
      const to = lines.findIndex((l, i) => i > from && /^[A-Z]/.test(l));
      return lines.slice(from, to < 0 ? undefined : to).join("\n");
    };
    expect(section("Logging:")).toContain("--log-format=VALUE");
    expect(section("Metrics and probes:")).toContain("--metrics-secure");
    expect(section("General:")).toContain("--version");
    // 42 options, --help and --version, each on two lines, under headings.
    expect(text.split("\n").filter((l) => /^ {2}--/.test(l))).toHaveLength(44);
  });
  it.each(documented)("documents $flag: $reason", ({ flag, want }) => {
    const lines = text.split("\n");
    const at = lines.indexOf(`  ${flag}`);
    expect(at).toBeGreaterThanOrEqual(0);
    expect(lines[at + 1]).toContain(want);
  });
});

describe("parseDuration", () => {
  parserCases(
    parseDuration,
    [
      { reason: "milliseconds", text: "500ms", want: 500 },
      { reason: "seconds", text: "2s", want: 2_000 },
      { reason: "minutes and seconds", text: "1m30s", want: 90_000 },
      { reason: "hours", text: "1h", want: 3_600_000 },
      { reason: "every unit at once", text: "1h2m3s4ms", want: 3_723_004 },
      { reason: "a fraction", text: "1.5s", want: 1_500 },
      { reason: "a bare zero, as Go allows", text: "0", want: 0 },
      { reason: "zero with a unit", text: "0s", want: 0 },
      { reason: "surrounding blanks", text: " 15s ", want: 15_000 },
    ],
    [
      { reason: "empty", text: "" },
      { reason: "blank", text: "  " },
      { reason: "a number without a unit", text: "10" },
      { reason: "an unknown unit", text: "5d" },
      { reason: "a wrong unit", text: "10x" },
      { reason: "negative", text: "-1s" },
      { reason: "a trailing number without a unit", text: "1m30" },
      { reason: "a unit without a number", text: "s" },
      { reason: "a dangling decimal point", text: "1.s" },
      { reason: "two decimal points", text: "1.5.5s" },
      { reason: "a blank inside", text: "1 s" },
    ],
    () => ConfigError,
  );
});
