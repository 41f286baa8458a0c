/**
 * A real Prometheus for integration tests: the `prometheus` binary (Debian's package installs it
 * as /usr/bin/prometheus) on a free loopback port, with a temporary storage folder and a
 * generated scrape configuration, queried through its HTTP API like any dashboard or alert rule.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { accessSync, constants } from "node:fs";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { waitFor } from "./kube.ts";
import { freePort } from "./ports.ts";

/** The binary the tests start: REFERABLE_PROMETHEUS_BIN, else Debian's. */
export const PROMETHEUS_BIN = process.env.REFERABLE_PROMETHEUS_BIN ?? "/usr/bin/prometheus";

/** Why Prometheus cannot run here (to skip with a clear message), or undefined when it can. */
export function prometheusUnavailable(): string | undefined {
  try {
    accessSync(PROMETHEUS_BIN, constants.X_OK);
    return undefined;
  } catch {
    return `${PROMETHEUS_BIN} is not installed (Debian: apt-get install prometheus; or set REFERABLE_PROMETHEUS_BIN)`;
  }
}

/**
 * The endpoint a ServiceMonitor shipped with secure metrics must hold: HTTPS on `port`, with a
 * bearer token from the Secret `tokenSecret` (authorization, as prometheus-operator deprecates
 * bearerTokenFile) and the controller's self-signed certificate accepted.
 */
export function secureMetricsEndpoint(port: string, tokenSecret: string): Record<string, unknown> {
  return {
    port,
    path: "/metrics",
    interval: "30s",
    scheme: "https",
    authorization: { type: "Bearer", credentials: { name: tokenSecret, key: "token" } },
    tlsConfig: { insecureSkipVerify: true },
  };
}

/** One scrape job: static targets (host:port) on one metrics path. */
export interface ScrapeJob {
  job: string;
  targets: string[];
  /** @default "/metrics" */
  metricsPath?: string;
  /**
   * Scrape over HTTPS with this bearer token, skipping certificate verification, as the
   * ServiceMonitor of deploy/overlays/prometheus-operator scrapes secure metrics. @default plain HTTP
   */
  https?: { bearerToken: string };
}

/** One sample of an instant query: the series' labels and its value. */
export interface Sample {
  labels: Record<string, string>;
  value: number;
}

/** A rule as `/api/v1/rules` reports it after evaluation. */
export interface RuleState {
  name: string;
  type: "alerting" | "recording";
  /** "ok" once evaluated without error, "err" with `lastError`, "unknown" before the first evaluation. */
  health: string;
  lastError?: string;
  /** Alerting rules: "inactive", "pending" or "firing". */
  state?: string;
  /** When the rule was last evaluated (RFC 3339). */
  lastEvaluation: string;
}

/** A running Prometheus. */
export interface Prometheus {
  /** http://127.0.0.1:PORT */
  url: string;
  /** Runs an instant query (`/api/v1/query`); throws unless Prometheus answers `success` with a vector. */
  query(expr: string): Promise<Sample[]>;
  /** Every rule of the loaded rule groups, with its health and state (`/api/v1/rules`). */
  rules(): Promise<RuleState[]>;
  /** The last lines Prometheus logged, for failure messages. */
  logTail(lines?: number): string;
  /** Stops the process and removes its storage; safe to call twice. */
  stop(): Promise<void>;
}

/** Options of {@link startPrometheus}. */
export interface PrometheusOptions {
  /** Scrape and rule evaluation interval. @default 1 */
  scrapeIntervalSeconds?: number;
  /** Rule groups (the `groups` of a rules file) to load and evaluate. @default none */
  ruleGroups?: unknown[];
  /** How long to wait for `/-/ready`. @default 30000 */
  readyTimeoutMs?: number;
}

/**
 * Starts Prometheus scraping `jobs` every `scrapeIntervalSeconds`, and resolves once it reports
 * ready (`/-/ready`). Throws with its log when it exits (an invalid rule file makes it exit) or
 * does not become ready in time.
 */
export async function startPrometheus(
  jobs: ScrapeJob[],
  options: PrometheusOptions = {},
): Promise<Prometheus> {
  const { scrapeIntervalSeconds = 1, ruleGroups, readyTimeoutMs = 30_000 } = options;
  const dir = await mkdtemp(join(tmpdir(), "referable-prometheus-"));
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  // JSON is YAML: Prometheus reads it as its configuration file.
  const interval = `${scrapeIntervalSeconds}s`;
  const config = {
    global: { scrape_interval: interval, scrape_timeout: interval, evaluation_interval: interval },
    rule_files: ruleGroups ? [join(dir, "rules.yml")] : [],
    scrape_configs: jobs.map((j, i) => ({
      job_name: j.job,
      metrics_path: j.metricsPath ?? "/metrics",
      static_configs: [{ targets: j.targets }],
      ...(j.https
        ? {
            scheme: "https",
            authorization: { type: "Bearer", credentials_file: join(dir, `token-${i}`) },
            tls_config: { insecure_skip_verify: true },
          }
        : {}),
    })),
  };
  for (const [i, j] of jobs.entries())
    if (j.https) await writeFile(join(dir, `token-${i}`), j.https.bearerToken, { mode: 0o600 });
  await writeFile(join(dir, "prometheus.yml"), JSON.stringify(config, null, 2));
  if (ruleGroups) await writeFile(join(dir, "rules.yml"), JSON.stringify({ groups: ruleGroups }, null, 2));

  let log = "";
  const child: ChildProcess = spawn(
    PROMETHEUS_BIN,
    [
      `--config.file=${join(dir, "prometheus.yml")}`,
      `--storage.tsdb.path=${join(dir, "data")}`,
      `--web.listen-address=127.0.0.1:${port}`,
    ],
    { stdio: ["ignore", "pipe", "pipe"] },
  );
  const append = (d: Buffer) => (log = (log + d.toString()).slice(-20_000));
  child.stdout?.on("data", append);
  child.stderr?.on("data", append);
  child.on("error", (err) => append(Buffer.from(`spawn error: ${err.message}\n`)));
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));

  let stopped = false;
  const stop = async () => {
    if (stopped) return;
    stopped = true;
    if (child.exitCode === null && child.signalCode === null) {
      child.kill("SIGTERM");
      const timer = setTimeout(() => child.kill("SIGKILL"), 10_000);
      await exited;
      clearTimeout(timer);
    }
    await rm(dir, { recursive: true, force: true });
  };
  const logTail = (lines = 15) => log.trim().split("\n").slice(-lines).join("\n");

  try {
    await waitFor(
      "Prometheus to report ready",
      async () => {
        if (child.exitCode !== null || child.signalCode !== null) {
          throw new Error(`prometheus exited (${child.exitCode ?? child.signalCode})`);
        }
        const res = await fetch(`${url}/-/ready`, { signal: AbortSignal.timeout(2000) });
        return res.status === 200;
      },
      { timeoutMs: readyTimeoutMs, intervalMs: 100 },
    );
  } catch (err) {
    await stop();
    throw new Error(`${(err as Error).message}\nprometheus log:\n${logTail()}`);
  }

  const query = async (expr: string): Promise<Sample[]> => {
    const res = await fetch(`${url}/api/v1/query?${new URLSearchParams({ query: expr })}`, {
      signal: AbortSignal.timeout(5000),
    });
    const body = (await res.json()) as {
      status: string;
      error?: string;
      data?: {
        resultType: string;
        result: Array<{ metric: Record<string, string>; value: [number, string] }>;
      };
    };
    if (body.status !== "success" || body.data?.resultType !== "vector") {
      throw new Error(`query ${expr} failed: ${body.error ?? JSON.stringify(body).slice(0, 200)}`);
    }
    return body.data.result.map((r) => ({ labels: r.metric, value: Number(r.value[1]) }));
  };

  const rules = async (): Promise<RuleState[]> => {
    const res = await fetch(`${url}/api/v1/rules`, { signal: AbortSignal.timeout(5000) });
    const body = (await res.json()) as { status: string; data?: { groups: Array<{ rules: RuleState[] }> } };
    if (body.status !== "success" || !body.data)
      throw new Error(`/api/v1/rules failed: ${JSON.stringify(body)}`);
    return body.data.groups.flatMap((g) => g.rules);
  };

  return { url, query, rules, logTail, stop };
}
