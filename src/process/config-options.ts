/**
 * The controller's options, as data: every option's flag, environment variable, kind, default
 * and help text, read by config.ts (parsing) and by `--help`. This file holds the Config, the
 * shape of an option, and the options that tune the data path (sources, transforms,
 * reconciling and status writes, export); the options of the process edge (connection,
 * leadership, webhook, metrics, logs) are in ./edge-options.ts.
 */
import { MAX_LABEL_BYTES_PER_OBJECT, MAX_LABEL_KEYS_PER_KIND } from "../informers/label-keys.ts";
import { READ_BUDGET_DEFAULTS } from "../outputs/read-budget.ts";
import { WRITE_POLICY_DEFAULTS } from "../outputs/write-policy.ts";

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
  /** Buckets of Referables shared out among the replicas (one Lease each); 0: one leader does all. */
  readonly shards: number;
  readonly identity: string;
  readonly concurrency: number;
  readonly statusWriteRate: number;
  readonly statusWriteBurst: number;
  readonly statusWriteBudget: number;
  readonly statusWriteBudgetBurst: number;
  readonly maxValueBytes: number;
  readonly maxLabelKeysPerKind: number;
  readonly driftReadBudget: number;
  readonly maxLabelBytesPerObject: number;
  readonly transformWorkers: number;
  readonly transformTimeoutMs: number;
  readonly transformMaxHeapMiB: number;
  readonly allowSecrets: boolean;
  readonly allowSecretExport: boolean;
  /** NAMESPACE/NAME: the ServiceAccount a Referable that names none acts as (reads checked, writes impersonated). */
  readonly defaultServiceAccount: string | undefined;
  readonly denyKinds: readonly string[];
  readonly watchdogMs: number;
  readonly informerLingerMs: number;
  readonly logLevel: "debug" | "info" | "warn" | "error";
  readonly shutdownTimeoutMs: number;
  readonly referableSelector: string | undefined;
  readonly webhookBindAddress: string;
  readonly webhookCertDir: string;
  /**
   * The Secret (in {@link Config.webhookCertNamespace}) where the controller keeps the webhook's
   * CA and serving certificate, made and rotated by itself; undefined: read them from
   * {@link Config.webhookCertDir} (cert-manager).
   */
  readonly webhookCertSecret: string | undefined;
  /** The namespace of the webhook's Service and of the certificate Secret. */
  readonly webhookCertNamespace: string;
  /** The webhook's Service: the serving certificate's DNS names. */
  readonly webhookService: string | undefined;
  /** The ValidatingWebhookConfiguration whose caBundle the controller keeps current. */
  readonly webhookConfiguration: string | undefined;
  /** text: one readable line per record; json: one JSON object per line (pino's). */
  readonly logFormat: "json" | "text";
  /** Serve /metrics over HTTPS, to callers a TokenReview and a SubjectAccessReview allow. */
  readonly metricsSecure: boolean;
  /** Folder with tls.crt and tls.key for secure metrics; a self-signed pair is made at start when unset. */
  readonly metricsCertDir: string | undefined;
}

export type Kind = "string" | "address" | "bool" | "int" | "duration" | "list" | "level" | "format";

/** The groups of `--help`, in order. */
export const GROUPS = [
  "Cluster connection",
  "Sources",
  "Transforms",
  "Reconciling and status writes",
  "Export",
  "Leader election",
  "Admission webhook",
  "Metrics and probes",
  "Logging",
  "Process",
  "General",
] as const;

/** One option: its key in Config, its flag, group, environment variable, kind, default and help. */
export interface OptionSpec {
  key: keyof Config;
  flag: string;
  group: (typeof GROUPS)[number];
  env: string;
  kind: Kind;
  default: string;
  help: string;
}

/** Every option of the controller, in the order of `--help`. */
/** The options that tune the data path: sources, transforms, reconciling and status writes, export. */
export const DATA_PATH_OPTIONS: OptionSpec[] = [
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
    key: "maxLabelKeysPerKind",
    flag: "max-label-keys-per-kind",
    group: "Sources",
    env: "REFERABLE_MAX_LABEL_KEYS_PER_KIND",
    kind: "int",
    default: String(MAX_LABEL_KEYS_PER_KIND),
    help: "most label keys the cached objects of one watched kind keep, over every selector on it; a Referable whose selector names keys new to the kind that do not fit is TooManyLabelKeys, the others are unaffected",
  },
  {
    key: "maxLabelBytesPerObject",
    flag: "max-label-bytes-per-object",
    group: "Sources",
    env: "REFERABLE_MAX_LABEL_BYTES_PER_OBJECT",
    kind: "int",
    default: String(MAX_LABEL_BYTES_PER_OBJECT),
    help: "most bytes of labels (keys and values) one cached object keeps; the values past it match Exists and NotIn but no In or matchLabels value",
  },
  {
    key: "transformWorkers",
    group: "Transforms",
    flag: "transform-workers",
    env: "REFERABLE_TRANSFORM_WORKERS",
    kind: "int",
    default: "1",
    help: "worker threads that evaluate transforms, off the event loop that serves probes, the webhook and every other Referable",
  },
  {
    key: "transformTimeoutMs",
    group: "Transforms",
    flag: "transform-timeout",
    env: "REFERABLE_TRANSFORM_TIMEOUT",
    kind: "duration",
    default: "50ms",
    help: "deadline of one transform evaluation (CPU time of its worker; at most 10 times this in wall-clock time): past it the worker is replaced and the Referable is TransformFailed",
  },
  {
    key: "transformMaxHeapMiB",
    group: "Transforms",
    flag: "transform-max-heap",
    env: "REFERABLE_TRANSFORM_MAX_HEAP",
    kind: "int",
    default: "64",
    help: "heap ceiling of each transform worker, in MiB: an evaluation that reaches it is TransformFailed and its worker replaced",
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
    key: "driftReadBudget",
    flag: "drift-read-budget",
    group: "Export",
    env: "REFERABLE_DRIFT_READ_BUDGET",
    kind: "int",
    default: String(READ_BUDGET_DEFAULTS.rate),
    help: "reads a second the whole controller makes on its own initiative (drift reads of the objects fields are exported into, missing ones read again), shared fairly between Referables, each waiting its turn as a requeue; 0 for no budget",
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
    key: "defaultServiceAccount",
    flag: "default-service-account",
    group: "Sources",
    env: "REFERABLE_DEFAULT_SERVICE_ACCOUNT",
    kind: "string",
    default: "",
    help: "NAMESPACE/NAME of a ServiceAccount a Referable without spec.serviceAccountRef acts as: it reads only what the account may get or list, and exports impersonate it (multi-tenant lockdown); empty: such a Referable uses the controller's own rights",
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
    key: "referableSelector",
    flag: "referable-selector",
    group: "Reconciling and status writes",
    env: "REFERABLE_SELECTOR",
    kind: "string",
    default: "",
    help: "only reconcile Referables matching this label selector (e.g. shard=a); every Referable when empty",
  },
];
