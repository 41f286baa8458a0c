/**
 * Who may read /metrics when it is served securely, decided as kubebuilder's scaffold decides
 * it (controller-runtime's `filters.WithAuthenticationAndAuthorization`): the caller's bearer
 * token is authenticated with a TokenReview, and the user it names is authorized with a
 * SubjectAccessReview for `get` on the non-resource URL `/metrics` (the `metrics-reader`
 * ClusterRole of deploy/ grants exactly that). The controller needs `create` on tokenreviews
 * and subjectaccessreviews.
 *
 * Answers are cached by a hash of the token (the token itself is never kept or logged): a
 * scrape every 15 s costs two reviews a minute, not eight. The cache holds at most
 * `maxCachedTokens` entries (least recently used go first), so a flood of made-up tokens costs
 * API calls, bounded by the callers' own rate, never memory.
 */
import { digest } from "../api/digest.ts";
import type { Server } from "node:http";
import { join } from "node:path";
import type { Server as TlsServer } from "node:tls";
import { LRUCache } from "lru-cache";
import { selfSignedCertificate } from "../webhook/self-signed.ts";
import type { MetricsDecision, SecureMetrics } from "./server.ts";
// The webhook's certificate follower serves any cert-manager-style folder; it has no webhook in it.
import { ServingCertificate } from "../webhook/serving-certificate.ts";
import type { KubeClient } from "../kube/client.ts";
import { asError } from "../api/errors.ts";
import { silentLogger, type Logger } from "../api/log.ts";

/** Options for {@link MetricsAuthorizer}. */
export interface MetricsAuthorizerOptions {
  client: Pick<KubeClient, "request">;
  logger?: Logger;
  /** How long an allowed token is trusted without asking again. @default 60000 */
  allowTtlMs?: number;
  /** How long a refused token (401 or 403) is refused without asking again. @default 10000 */
  denyTtlMs?: number;
  /** Most tokens remembered. @default 256 */
  maxCachedTokens?: number;
  /** Time allowed for each review. @default 10000 */
  reviewTimeoutMs?: number;
}

/** The path and verb the SubjectAccessReview asks about (kubebuilder's metrics-reader role). */
export const METRICS_PATH = "/metrics";

/** A promise, so that concurrent scrapes with one token share one review; expired entries are asked again. */
interface CacheEntry {
  expiresAt: number;
  decision: Promise<MetricsDecision>;
}

interface ReviewedUser {
  username?: string;
  uid?: string;
  groups?: string[];
  extra?: Record<string, string[]>;
}

/** Authenticates and authorizes /metrics callers through the API server, with a small bounded cache. */
export class MetricsAuthorizer {
  private readonly client: Pick<KubeClient, "request">;
  private readonly logger: Logger;
  private readonly allowTtlMs: number;
  private readonly denyTtlMs: number;
  private readonly reviewTimeoutMs: number;
  private readonly cache: LRUCache<string, CacheEntry>;
  /** Reviews made (for tests and benchmarks: the cache's effect). */
  reviews = 0;

  constructor(options: MetricsAuthorizerOptions) {
    this.client = options.client;
    this.logger = options.logger ?? silentLogger;
    this.allowTtlMs = options.allowTtlMs ?? 60_000;
    this.denyTtlMs = options.denyTtlMs ?? 10_000;
    this.reviewTimeoutMs = options.reviewTimeoutMs ?? 10_000;
    this.cache = new LRUCache({ max: options.maxCachedTokens ?? 256 });
  }

  /** Decides on a request's `Authorization` header. Never throws. */
  async decide(authorization: string | undefined): Promise<MetricsDecision> {
    const m = /^Bearer\s+(\S+)\s*$/i.exec(authorization ?? "");
    if (!m) return { status: 401, message: "Unauthorized: a bearer token is required" };
    const token = m[1]!;
    const key = digest(token, 64, "hex");
    const cached = this.cache.get(key);
    if (cached && cached.expiresAt > performance.now()) return cached.decision;
    const entry: CacheEntry = {
      // Until the answer comes: long enough for the review, which has its own deadline.
      expiresAt: performance.now() + this.reviewTimeoutMs,
      decision: this.review(token).then(
        (decision) => {
          // The TTL the answer earns (an allowed token is trusted longer), from when it came.
          entry.expiresAt = performance.now() + (decision.status === 200 ? this.allowTtlMs : this.denyTtlMs);
          return decision;
        },
        (err: unknown): MetricsDecision => {
          // A check that cannot run is not a yes; and not remembered, so the next scrape asks again.
          if (this.cache.get(key) === entry) this.cache.delete(key);
          this.logger.warn({ err: asError(err).message }, "cannot review a /metrics caller's token");
          return { status: 503, message: "cannot check the caller's access now; try again" };
        },
      ),
    };
    this.cache.set(key, entry);
    return entry.decision;
  }

  private async review(token: string): Promise<MetricsDecision> {
    const signal = AbortSignal.timeout(this.reviewTimeoutMs);
    this.reviews++;
    const tokenReview = await this.client.request<{
      status?: { authenticated?: boolean; user?: ReviewedUser; error?: string };
    }>("POST", "/apis/authentication.k8s.io/v1/tokenreviews", {
      body: { apiVersion: "authentication.k8s.io/v1", kind: "TokenReview", spec: { token } },
      signal,
    });
    const user = tokenReview?.status?.user;
    if (tokenReview?.status?.authenticated !== true || !user?.username)
      return { status: 401, message: "Unauthorized: the token is not valid" };
    this.reviews++;
    const spec: Record<string, unknown> = {
      nonResourceAttributes: { path: METRICS_PATH, verb: "get" },
      user: user.username,
    };
    if (user.uid) spec.uid = user.uid;
    if (user.groups?.length) spec.groups = user.groups;
    if (user.extra && Object.keys(user.extra).length) spec.extra = user.extra;
    const access = await this.client.request<{ status?: { allowed?: boolean } }>(
      "POST",
      "/apis/authorization.k8s.io/v1/subjectaccessreviews",
      { body: { apiVersion: "authorization.k8s.io/v1", kind: "SubjectAccessReview", spec }, signal },
    );
    if (access?.status?.allowed === true) return { status: 200, message: "" };
    this.logger.info(
      { user: user.username },
      "refused a /metrics caller: no get on the non-resource URL /metrics",
    );
    return {
      status: 403,
      message: `Forbidden: user ${JSON.stringify(user.username)} may not get ${METRICS_PATH}: bind it to the referable-metrics-reader ClusterRole (deploy/), or another granting get on the non-resource URL ${METRICS_PATH}`,
    };
  }
}

/** Options for {@link openSecureMetrics}. */
export interface OpenSecureMetricsOptions {
  client: Pick<KubeClient, "request">;
  /** Folder with tls.crt and tls.key (reloaded when they change); a self-signed pair when unset. */
  certDir: string | undefined;
  /** DNS names of a self-signed certificate. @default ["localhost"] */
  dnsNames?: readonly string[];
  logger?: Logger;
}

/**
 * The TLS identity and the authorizer of secure metrics. Rejects, naming the files, when the
 * certificate folder does not hold a usable pair. `close()` stops following the files.
 */
export async function openSecureMetrics(
  options: OpenSecureMetricsOptions,
): Promise<SecureMetrics & { close(): void }> {
  const logger = options.logger ?? silentLogger;
  const authorizer = new MetricsAuthorizer({ client: options.client, logger });
  const authorize = (authorization: string | undefined) => authorizer.decide(authorization);
  if (!options.certDir) {
    const tls = selfSignedCertificate({ dnsNames: options.dnsNames ?? ["localhost"] });
    logger.info(
      {},
      "serving metrics with a self-signed certificate made at start (--metrics-cert-dir unset)",
    );
    return { tls, authorize, close: () => undefined };
  }
  const target: { server?: Server } = {};
  const certificate = await ServingCertificate.open({
    certFile: join(options.certDir, "tls.crt"),
    keyFile: join(options.certDir, "tls.key"),
    logger,
    // New connections get the new pair; open ones keep theirs until they close.
    onChange: (pair) => (target.server as unknown as TlsServer | undefined)?.setSecureContext(pair),
  });
  return {
    tls: certificate.current,
    authorize,
    onServer: (server) => (target.server = server),
    close: () => certificate.close(),
  };
}
