/**
 * The resolver's options: what a library user passes to createResolver, what the controller's
 * wiring adds (a shared client, discovery, cache), and the options of one call.
 */
import type { KubeConfig } from "@kubernetes/client-node";
import { serviceAccountProblem } from "../api/service-account.ts";
import type { ServiceAccountRef } from "../api/referable.ts";
import type { AccessReviews } from "./access-reviews.ts";
import type { SourceCache } from "../informers/source-cache.ts";
import type { InformerSignal, RestartReason } from "../informers/restart-reason.ts";
import type { KubeClient } from "../kube/client.ts";
import type { KindResolver, ResourceInfo } from "../kube/discovery.ts";
import type { Logger } from "../api/log.ts";
import type { TransformPoolOptions } from "../transform/pool.ts";
import type { TransformRunner } from "./transform.ts";
import { ResolutionError } from "../api/errors.ts";
import { checkKeys, everyKey } from "./strict.ts";

/** Options for {@link createResolver}; every one has a default but the connection. */
export interface ResolverOptions {
  /**
   * The context of `kubeConfig` to connect with, instead of its current context (kubectl's
   * `--context`); the KubeConfig itself is not changed. @default the kubeConfig's current context
   */
  context?: string;
  /**
   * Where to connect, with whose credentials: a `KubeConfig` of `@kubernetes/client-node` (2.x),
   * for example one that `loadFromDefault()` filled. The resolver makes its own connection from
   * it and closes it on {@link Resolver.stop}.
   */
  kubeConfig: KubeConfig;
  /** Structured logger (pino-compatible). @default a silent logger */
  logger?: Logger;
  /** Largest value, in bytes of JSON; larger gives `ValueTooLarge`. @default 32768 */
  maxValueBytes?: number;
  /** Most values of a `Multiple` selector; more gives `ValueTooLarge`. @default 4096 */
  maxValues?: number;
  /**
   * `Cluster`: one informer per source kind across all namespaces (needs cluster-wide list and
   * watch). `Namespace`: one per kind and namespace (works with namespaced RBAC).
   * @default "Cluster"
   */
  informerScope?: "Cluster" | "Namespace";
  /** How long an informer no subscription uses is kept before it is closed. @default 10000 */
  informerLingerMs?: number;
  /**
   * The most label keys the objects of one watched kind keep, over every selector on it: a
   * selector whose keys new to the kind do not fit resolves to `TooManyLabelKeys` (the others are
   * unaffected), until a selector of the kind goes. @default 256
   */
  maxLabelKeysPerKind?: number;
  /**
   * The most bytes of labels (keys and values) one cached object keeps; the values past it match
   * `Exists` and `NotIn` but no `In` or `matchLabels` value. @default 4096
   */
  maxLabelBytesPerObject?: number;
  /** A watch silent this long is reopened. @default 90000 */
  watchdogMs?: number;
  /**
   * The lifetime the API server gives each source watch, in seconds, as [least, most]. Reopening
   * is re-authorised, so this bounds how long a watch outlives the access it was opened with
   * (RBAC revoked mid-watch keeps delivering until the watch ends). @default [30, 50]
   */
  watchTimeoutSeconds?: [number, number];
  /** How long {@link Resolver.resolve} waits for a kind's first list. @default 30000 */
  resolveTimeoutMs?: number;
  /**
   * Refuses some sources: returns a message for a resource the resolver must not read, which
   * then resolves to `Forbidden` with that message. @default every resource is allowed
   */
  sourcePolicy?: (
    resource: ResourceInfo,
    source: { namespace?: string; name?: string },
  ) => string | undefined;
  /**
   * Watch CustomResourceDefinitions while some reference waits for a kind that is not served,
   * so it resolves as soon as its CRD is established (a backoff retry covers the rest).
   * @default true
   */
  watchCustomResourceDefinitions?: boolean;
  /** First and longest retry of a reference whose kind is not found. @default [1000, 60000] */
  kindRetryMs?: [number, number];
  /** Counts informer restarts by signal and reason, for metrics (see `InformerOptions.onSignal`). */
  onInformerSignal?: (signal: InformerSignal, reason: RestartReason) => void;
  /**
   * The worker threads transforms run in, off the event loop, and their limits: each evaluation
   * has a deadline (`timeoutMs`, CPU time of its worker) and each worker a heap ceiling
   * (`maxHeapMiB`); an evaluation past either is `TransformFailed`. The pool starts with the
   * first transform, stops its workers after a minute with none (`idleStopMs`), never keeps the
   * process alive, and closes on {@link Resolver.stop}.
   * @default \{ workers: 1, timeoutMs: 50, maxHeapMiB: 64, idleStopMs: 60000 \}
   */
  transformPool?: TransformPoolOptions;
  /**
   * Read as this ServiceAccount: a value is used only while the account may `get` its source
   * (`list` for a selector) in the source's namespace, as a SubjectAccessReview made as the
   * account answers (its user `system:serviceaccount:NS:NAME` and groups); otherwise the result
   * is `Forbidden`, naming the account, the verb and the resource. Answers are cached for at most
   * 60 s and dropped when an RBAC object changes (the resolver's credentials then need `create` on
   * subjectaccessreviews, and `list` and `watch` on Roles, RoleBindings, ClusterRoles and
   * ClusterRoleBindings; without the watch, answers are asked again when they expire). The
   * informers still read with the resolver's own credentials and stay shared.
   * {@link WatchOptions.serviceAccount} sets it for one watch.
   * @default undefined: the resolver's own credentials decide alone
   */
  serviceAccount?: ServiceAccountRef;
}

/**
 * How the controller and the tests wire a resolver to parts they share (a client with its
 * request metrics, discovery, a source cache, or fakes of the last two): not part of the package's
 * API, which takes a `kubeConfig` only.
 * @internal
 */
export interface ResolverWiring extends Omit<ResolverOptions, "kubeConfig"> {
  /** Where to connect; give this or `client` (or both `cache` and `discovery`). */
  kubeConfig?: KubeConfig;
  /** A client to share (it is not closed by {@link Resolver.stop}); give this or `kubeConfig`. */
  client?: KubeClient;
  /** Discovery to share; one over the client is made when absent. */
  discovery?: KindResolver;
  /**
   * The source cache to read from (shared with other resolvers; not stopped by
   * {@link Resolver.stop}); one over the client is made when absent.
   */
  cache?: SourceCache;
  /** What evaluates transforms (not closed by {@link Resolver.stop}); a pool of its own when absent. */
  transformRunner?: TransformRunner;
  /** The access answers to use (e.g. one counted in metrics; stopped by {@link Resolver.stop}); one of its own when first needed. */
  accessReviews?: AccessReviews;
}

/** Options of one {@link Resolver.watch}. */
export interface WatchOptions {
  /** Prefix of field names in InvalidSpec messages, e.g. "spec.source". @default "" */
  fieldPrefix?: string;
  /**
   * Read as this ServiceAccount, for this watch (see {@link ResolverOptions.serviceAccount}).
   * @default the resolver's `serviceAccount`
   */
  serviceAccount?: ServiceAccountRef;
}

/** Options of one {@link Resolver.resolve} or {@link Resolver.resolveSelector}. */
export interface ResolveOptions {
  /**
   * Answer from the API server rather than from the cache: the source is read with one `list`
   * request (no resourceVersion, so a quorum read), and the answer is at least as new as the
   * moment of the call: a write that completed before the call is seen, an object deleted or
   * unlabelled before it is not. Costs one request per call (and a discovery lookup the first
   * time a kind is met); the cache is neither used nor changed, and no informer is started.
   * Without it, the answer comes from the shared cache, which trails the API server by the
   * watch's delay (see docs/library.md, "How fresh an answer is").
   * @default false
   */
  consistent?: boolean;
}

/**
 * The options of the client a resolver makes for itself.
 * @internal
 */
export function clientOptions(options: ResolverWiring): ConstructorParameters<typeof KubeClient>[0] {
  const out: ConstructorParameters<typeof KubeClient>[0] = { kubeConfig: options.kubeConfig! };
  if (options.context !== undefined) out.context = options.context;
  return out;
}

/** Every key of {@link ResolverOptions}: any other is refused (see strict.ts). */
export const RESOLVER_OPTION_KEYS = everyKey<ResolverOptions>()([
  "context",
  "kubeConfig",
  "logger",
  "maxValueBytes",
  "maxValues",
  "informerScope",
  "informerLingerMs",
  "maxLabelKeysPerKind",
  "maxLabelBytesPerObject",
  "watchdogMs",
  "watchTimeoutSeconds",
  "resolveTimeoutMs",
  "sourcePolicy",
  "watchCustomResourceDefinitions",
  "kindRetryMs",
  "onInformerSignal",
  "transformPool",
  "serviceAccount",
]);
const TRANSFORM_POOL_KEYS = everyKey<TransformPoolOptions>()([
  "workers",
  "timeoutMs",
  "maxHeapMiB",
  "quarantineBackoffMs",
  "keepAlive",
  "idleStopMs",
]);
/** Every key of {@link ResolveOptions}. */
export const RESOLVE_OPTION_KEYS = everyKey<ResolveOptions>()(["consistent"]);
/** Every key of {@link WatchOptions}. */
export const WATCH_OPTION_KEYS = everyKey<WatchOptions>()(["fieldPrefix", "serviceAccount"]);

/** Refuses what createResolver cannot take: no options object, or a key it does not know. */
export function checkResolverOptions(options: unknown): void {
  if (typeof options !== "object" || options === null)
    throw new ResolutionError("InvalidSpec", "createResolver takes an options object with a kubeConfig");
  checkKeys(options, RESOLVER_OPTION_KEYS, "the options of createResolver");
  const pool = (options as ResolverOptions).transformPool;
  if (typeof pool === "object" && pool !== null)
    checkKeys(pool, TRANSFORM_POOL_KEYS, "the transformPool option of createResolver");
  const account = (options as ResolverOptions).serviceAccount;
  const problem =
    account === undefined
      ? undefined
      : serviceAccountProblem(account, "the serviceAccount option of createResolver");
  if (problem) throw new ResolutionError("InvalidSpec", problem);
}
