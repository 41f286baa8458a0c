/**
 * Discovery: apiVersion + kind → the resource the API server serves it as. Never guesses a
 * plural. Group versions are cached; a kind missing from the cache refreshes its group version,
 * at most once per backoff period, so a CRD installed later resolves without a restart and a
 * kind that never comes does not turn every lookup into a request.
 */
import { LRUCache } from "lru-cache";
import { ResolutionError } from "../api/errors.ts";
import { backoffDelay } from "../timing/backoff.ts";
import { isApiError, type KubeClient } from "./client.ts";
import { groupVersionPath } from "./resource-path.ts";

/** How a kind is served. */
export interface ResourceInfo {
  /** API group, "" for the core group. */
  group: string;
  /** API version within the group (`v1`, `v1beta1`). */
  version: string;
  /** The plural resource name, as served. */
  resource: string;
  /** The kind, as served (`ConfigMap`). */
  kind: string;
  /** Whether objects of the kind live in a namespace. */
  namespaced: boolean;
  /** The verbs the API server serves for the resource (`list`, `watch`, ...). */
  verbs: readonly string[];
}

/** Looks up how a kind is served; the resolver's only need from discovery. */
export interface KindResolver {
  /**
   * Returns the resource serving `kind` in `apiVersion`. Throws a ResolutionError:
   * `InvalidSpec` for an apiVersion that cannot be one, `KindNotFound` when the API server
   * serves no such kind (retryable: a CRD may come), `Forbidden` when discovery is refused.
   */
  lookup(apiVersion: string, kind: string): Promise<ResourceInfo>;
  /** The cached resource of a kind, without any request; undefined when not cached. */
  peek?(apiVersion: string, kind: string): ResourceInfo | undefined;
  /** Forgets what is cached for a group version (e.g. a CRD of that group changed). */
  invalidate(apiVersion?: string): void;
  /**
   * Asks the API server afresh how `kind` is served: its resource, "Absent" when the server
   * answered that it does not serve it, or "Unknown" when it could not tell (a network error, a
   * 5xx): only a definite answer may withdraw anything.
   */
  recheck?(apiVersion: string, kind: string): Promise<ResourceInfo | "Absent" | "Unknown">;
}

/** Options for {@link Discovery}. */
export interface DiscoveryOptions {
  client: Pick<KubeClient, "request">;
  /** First wait before a group version is asked again after a miss. @default 500 */
  minRefreshMs?: number;
  /** Longest wait between two refreshes of a group version that keeps missing. @default 30000 */
  maxRefreshMs?: number;
  /** Group versions kept. @default 500 */
  maxGroupVersions?: number;
  /** Clock, for tests. @default Date.now */
  now?: () => number;
}

interface GroupVersionEntry {
  /** kind → resource; undefined when the group version is not served. */
  kinds: Map<string, ResourceInfo> | undefined;
  fetchedAt: number;
  /** Reads of the group version since it was first cached (0: the first). */
  refreshes: number;
  /** Wait before the next refresh is allowed; doubles on each refresh that still misses. */
  backoffMs: number;
  /** Why the group version could not be read, for messages. */
  failure?: string;
  /** The failure is the server's answer that it does not serve the group version (404). */
  absent?: boolean;
}

// RFC 1123 subdomain for the group; DNS label-ish for the version.
const GROUP = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const VERSION = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const KIND = /^[A-Za-z][A-Za-z0-9]*$/;

/** Splits an apiVersion into group and version; throws `InvalidSpec` when it cannot be one. */
export function parseApiVersion(apiVersion: string): { group: string; version: string } {
  const parts = apiVersion.split("/");
  const [group, version] =
    parts.length === 1 ? ["", parts[0]!] : parts.length === 2 ? [parts[0]!, parts[1]!] : ["", ""];
  if (
    !VERSION.test(version) ||
    (group !== "" && (!GROUP.test(group) || group.length > 253)) ||
    version.length > 63
  ) {
    throw new ResolutionError(
      "InvalidSpec",
      `apiVersion ${JSON.stringify(apiVersion.slice(0, 300))} is not of the form "v1" or "group/version" (e.g. "apps/v1")`,
    );
  }
  return { group, version };
}

/** Whether `a` becomes `b` by at most one insertion, deletion or substitution. */
function withinOneEdit(a: string, b: string): boolean {
  if (Math.abs(a.length - b.length) > 1) return false;
  let i = 0;
  while (i < a.length && i < b.length && a[i] === b[i]) i++;
  // After the first difference the rest must match with the one edit applied.
  return a.slice(i + 1) === b.slice(i + 1) || a.slice(i) === b.slice(i + 1) || a.slice(i + 1) === b.slice(i);
}

/**
 * The served kinds a user probably meant by `kind`: those equal to it but for case, else those
 * one edit away ignoring case (a plural, a typo). Kinds are case-sensitive, so "configmap" and
 * "ConfigMaps" are otherwise a puzzling KindNotFound.
 */
export function similarKinds(kind: string, served: Iterable<string>): string[] {
  const wanted = kind.toLowerCase();
  const all = [...served].filter((k) => k !== kind);
  const sameButCase = all.filter((k) => k.toLowerCase() === wanted);
  if (sameButCase.length) return sameButCase.sort();
  return all.filter((k) => withinOneEdit(k.toLowerCase(), wanted)).sort();
}

/** Cached discovery over a {@link KubeClient}. */
export class Discovery implements KindResolver {
  private readonly client: Pick<KubeClient, "request">;
  private readonly cache: LRUCache<string, GroupVersionEntry>;
  private readonly inflight = new Map<string, Promise<GroupVersionEntry>>();
  private readonly minRefreshMs: number;
  private readonly maxRefreshMs: number;
  private readonly now: () => number;

  constructor(options: DiscoveryOptions) {
    this.client = options.client;
    this.minRefreshMs = options.minRefreshMs ?? 500;
    this.maxRefreshMs = options.maxRefreshMs ?? 30_000;
    this.now = options.now ?? Date.now;
    this.cache = new LRUCache({ max: options.maxGroupVersions ?? 500 });
  }

  async lookup(apiVersion: string, kind: string): Promise<ResourceInfo> {
    const { group, version } = parseApiVersion(apiVersion);
    if (!KIND.test(kind) || kind.length > 63) {
      throw new ResolutionError(
        "InvalidSpec",
        `kind ${JSON.stringify(kind.slice(0, 100))} is not a Kubernetes kind name (e.g. "ConfigMap")`,
      );
    }
    const gv = group ? `${group}/${version}` : version;
    let entry = this.cache.get(gv);
    if (!entry?.kinds?.has(kind)) {
      const stale = entry === undefined || this.now() - entry.fetchedAt >= entry.backoffMs;
      if (stale) entry = await this.refresh(gv, group, version, entry);
    }
    const info = entry?.kinds?.get(kind);
    if (info) return info;
    const why = entry?.failure ?? `the API server serves ${gv} but no kind ${kind} in it`;
    const near = entry?.kinds ? similarKinds(kind, entry.kinds.keys()) : [];
    const hint = near.length ? `; did you mean ${near.map((k) => JSON.stringify(k)).join(" or ")}?` : "";
    throw new ResolutionError(
      "KindNotFound",
      `no kind ${kind} in ${gv}: ${why}${hint}; install its CRD or fix spec.source.apiVersion/kind`,
    );
  }

  async recheck(apiVersion: string, kind: string): Promise<ResourceInfo | "Absent" | "Unknown"> {
    const { group, version } = parseApiVersion(apiVersion);
    const gv = group ? `${group}/${version}` : version;
    const previous = this.cache.get(gv);
    this.cache.delete(gv);
    const entry = await this.refresh(gv, group, version, undefined).catch(() => undefined);
    if (!entry || (entry.failure !== undefined && !entry.absent)) {
      // Could not tell: keep what was known, so a transient error withdraws nothing.
      if (previous) this.cache.set(gv, previous);
      else this.cache.delete(gv);
      return "Unknown";
    }
    return entry.kinds?.get(kind) ?? "Absent";
  }

  peek(apiVersion: string, kind: string): ResourceInfo | undefined {
    return this.cache.get(apiVersion)?.kinds?.get(kind);
  }

  invalidate(apiVersion?: string): void {
    if (apiVersion === undefined) this.cache.clear();
    else this.cache.delete(apiVersion);
  }

  private refresh(
    gv: string,
    group: string,
    version: string,
    previous: GroupVersionEntry | undefined,
  ): Promise<GroupVersionEntry> {
    let pending = this.inflight.get(gv);
    if (!pending) {
      pending = this.fetch(gv, group, version, previous).finally(() => this.inflight.delete(gv));
      this.inflight.set(gv, pending);
    }
    return pending;
  }

  private async fetch(
    gv: string,
    group: string,
    version: string,
    previous: GroupVersionEntry | undefined,
  ): Promise<GroupVersionEntry> {
    const path = groupVersionPath(group, version);
    const refreshes = previous ? previous.refreshes + 1 : 0;
    const backoffMs = backoffDelay(refreshes, { baseMs: this.minRefreshMs, maxMs: this.maxRefreshMs });
    let entry: GroupVersionEntry;
    try {
      const list = await this.client.request<{
        resources?: Array<{ name: string; kind: string; namespaced: boolean; verbs?: string[] }>;
      }>("GET", path);
      const kinds = new Map<string, ResourceInfo>();
      for (const r of list.resources ?? []) {
        if (r.name.includes("/")) continue; // a subresource, e.g. deployments/status
        kinds.set(r.kind, {
          group,
          version,
          resource: r.name,
          kind: r.kind,
          namespaced: r.namespaced,
          verbs: r.verbs ?? [],
        });
      }
      entry = { kinds, fetchedAt: this.now(), refreshes, backoffMs };
    } catch (err) {
      if (isApiError(err, 403) || isApiError(err, 401)) {
        throw new ResolutionError(
          "Forbidden",
          `the controller may not read the discovery document of ${gv}`,
          {
            cause: err,
          },
        );
      }
      // 404: no such group version. 503: an aggregated API whose backend is down. Either way
      // the kind is not served now; remember the failure and retry on the backoff.
      const detail = isApiError(err)
        ? `${err.statusCode}${err.statusReason ? ` ${err.statusReason}` : ""}`
        : (err as Error).message;
      entry = {
        kinds: previous?.kinds,
        fetchedAt: this.now(),
        refreshes,
        backoffMs,
        failure: isApiError(err, 404)
          ? `the API server does not serve ${gv}`
          : `discovery of ${gv} failed (${detail})`,
        absent: isApiError(err, 404),
      };
    }
    this.cache.set(gv, entry);
    return entry;
  }
}
