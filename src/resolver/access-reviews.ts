/**
 * Whether a ServiceAccount may read a source, asked of the API server with a SubjectAccessReview
 * (authorization.k8s.io/v1) made as the account (its user and groups), so RBAC, webhooks and
 * every other authorizer decide, and cached so that the steady state costs next to nothing:
 *
 * - one answer per (account, verb, group, resource, namespace, name), shared by every
 *   subscription that asks the same; concurrent identical checks are one request;
 * - the namespace first: `get` (or `list`) on the resource in the whole namespace, without a
 *   name; only when that is refused is the named object asked about, so Referables sharing an
 *   account that reads a namespace cost one review, not one each;
 * - an answer is used for at most `ttlMs` (60 s): an answer some subscription still holds is
 *   asked again when it expires (one review per key and minute at rest, never one per
 *   subscription), and one nobody holds is dropped;
 * - every answer is dropped at once when an RBAC object changes (Roles, RoleBindings,
 *   ClusterRoles, ClusterRoleBindings are watched, metadata only, from the first check on), and
 *   the holders are told to ask again;
 * - a review that cannot be made is no yes: the holder is refused (and told why) until a review
 *   answers, asked again after `errorRetryMs`.
 *
 * Bounded where it is made: past `maxEntries` answers (names are an author's to choose), those
 * nobody holds are dropped; the ones held are two at most per subscription.
 */
import { describeServiceAccount, serviceAccountGroups, serviceAccountUser } from "../api/service-account.ts";
import type { ServiceAccountRef } from "../api/referable.ts";
import { stableStringify } from "../api/stable-json.ts";
import { asError } from "../api/errors.ts";
import { Informer } from "../informers/informer.ts";
import { subjectAccessReview } from "../kube/access-review.ts";
import type { KubeClient, KubeObject } from "../kube/client.ts";
import type { ResourceInfo } from "../kube/discovery.ts";
import { silentLogger, type Logger } from "../api/log.ts";

/** What an account is asked about: a verb on a resource, in a namespace ("" cluster-wide), on one object or all. */
export interface AccessAttributes {
  verb: "get" | "list";
  /** API group, "" for the core group. */
  group: string;
  /** The plural resource, as discovery serves it. */
  resource: string;
  /** "" for a cluster-scoped resource. */
  namespace: string;
  /** One object (only asked after the whole namespace was refused). */
  name?: string;
}

/** One cached answer. */
export interface AccessEntry {
  readonly key: string;
  readonly account: ServiceAccountRef;
  readonly attributes: AccessAttributes;
  /** true/false: the answer; an Error: the review could not be made; undefined: not answered yet. */
  answer: boolean | Error | undefined;
  /** When the answer came (the options' clock). */
  answeredAt: number;
  /** The review under way, if any. */
  pending: Promise<void> | undefined;
  /** Who waits for the answer under way. */
  waiters: Array<() => void> | undefined;
  /** How many holders use this answer now. */
  users: number;
  /** Dropped from the cache (an RBAC change): its holders ask again. */
  dropped: boolean;
}

/** Whoever holds answers (a subscription): what it holds now. */
export interface AccessHolder {
  accessHeld: AccessEntry[] | undefined;
}

/** What {@link AccessReviews.check} found. */
export type AccessVerdict =
  | { allowed: true }
  | { allowed: false; message: string }
  /** Not known yet: `wake` is called once it is. */
  | undefined;

/** Options for {@link AccessReviews}. */
export interface AccessReviewsOptions {
  /** Makes the reviews, and watches RBAC objects (list and watch on them cluster-wide). */
  client: Pick<KubeClient, "request" | "watch">;
  logger?: Logger;
  /** Longest use of one answer. @default 60000 */
  ttlMs?: number;
  /** How soon a review that failed is made again. @default 5000 */
  errorRetryMs?: number;
  /** Answers kept before those nobody holds are dropped. @default 10000 */
  maxEntries?: number;
  /** Watch RBAC objects and drop every answer when one changes. @default true */
  watchRbac?: boolean;
  /** Told of every review made, for metrics. Must not throw. */
  onReview?: (result: "allowed" | "denied" | "error") => void;
  /** Milliseconds, monotonic. @default performance.now */
  clock?: () => number;
}

/** Waits this long after an RBAC change before the holders ask again: a burst of changes (a chart's install) is one round. */
const RBAC_SETTLE_MS = 100;

const RBAC_RESOURCES: ResourceInfo[] = [
  ["Role", "roles", true],
  ["RoleBinding", "rolebindings", true],
  ["ClusterRole", "clusterroles", false],
  ["ClusterRoleBinding", "clusterrolebindings", false],
].map(([kind, resource, namespaced]) => ({
  group: "rbac.authorization.k8s.io",
  version: "v1",
  resource: resource as string,
  kind: kind as string,
  namespaced: namespaced as boolean,
  verbs: ["list", "watch"],
}));

/** The cache of access answers; see the module comment. */
export class AccessReviews {
  private readonly options: AccessReviewsOptions;
  private readonly logger: Logger;
  private readonly ttlMs: number;
  private readonly errorRetryMs: number;
  private readonly maxEntries: number;
  private readonly clock: () => number;
  /** In the order answers came: the oldest first (an answer is moved to the end when it comes). */
  private entries = new Map<string, AccessEntry>();
  private readonly listeners = new Set<(entries: ReadonlySet<AccessEntry> | "all") => void>();
  private timer: NodeJS.Timeout | undefined;
  private timerAt = Infinity;
  private rbac: Informer<KubeObject>[] | undefined;
  private settleTimer: NodeJS.Timeout | undefined;
  private stopped = false;

  constructor(options: AccessReviewsOptions) {
    this.options = options;
    this.logger = options.logger ?? silentLogger;
    this.ttlMs = options.ttlMs ?? 60_000;
    this.errorRetryMs = options.errorRetryMs ?? 5000;
    this.maxEntries = options.maxEntries ?? 10_000;
    this.clock = options.clock ?? (() => performance.now());
  }

  /**
   * Whether `account` may do `attributes` (the whole namespace first; the named object only
   * when that is refused), from the cache when the answer is fresh. Not known yet: a review is
   * made (one for all who ask the same) and `wake` called when it answers. `holder` holds what
   * was consulted from now on, in place of what it held.
   */
  check(
    account: ServiceAccountRef,
    attributes: AccessAttributes,
    holder: AccessHolder,
    wake: () => void,
  ): AccessVerdict {
    this.startRbacWatch();
    const { name, ...whole } = attributes;
    const wide = this.entry(account, whole);
    const held = [wide];
    let answer = this.answerOf(wide, wake);
    let asked = wide;
    if (answer === false && name !== undefined) {
      asked = this.entry(account, attributes);
      held.push(asked);
      answer = this.answerOf(asked, wake);
    }
    this.hold(holder, held);
    if (answer === undefined) return undefined;
    if (answer === true) return { allowed: true };
    const what = describeAttributes(asked.attributes);
    if (answer instanceof Error)
      return {
        allowed: false,
        message: `could not check whether ${describeServiceAccount(account)} may ${what} (a SubjectAccessReview failed: ${answer.message.slice(0, 200)}); checking again`,
      };
    return {
      allowed: false,
      message: `${describeServiceAccount(account)} may not ${what}: grant it that (a Role and a RoleBinding), or act as another ServiceAccount`,
    };
  }

  /** Lets go of what `holder` holds (a subscription closed). */
  release(holder: AccessHolder): void {
    this.hold(holder, undefined);
  }

  /**
   * Calls `listener` when answers changed: a re-check that answered otherwise (the entries), or
   * every answer dropped ("all", an RBAC change). Holders of those should check again.
   */
  onChange(listener: (entries: ReadonlySet<AccessEntry> | "all") => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Drops every answer and tells the listeners (an RBAC object changed). */
  dropAll(): void {
    for (const e of this.entries.values()) e.dropped = true;
    this.entries = new Map();
    if (this.settleTimer || this.stopped) return;
    this.settleTimer = setTimeout(() => {
      this.settleTimer = undefined;
      this.tell("all");
    }, RBAC_SETTLE_MS);
    this.settleTimer.unref?.();
  }

  /** How many answers are kept. */
  get size(): number {
    return this.entries.size;
  }

  /** Stops the RBAC watch and the timers. */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    if (this.settleTimer) clearTimeout(this.settleTimer);
    this.timer = this.settleTimer = undefined;
    const rbac = this.rbac ?? [];
    this.rbac = undefined;
    await Promise.all(rbac.map((i) => i.stop()));
  }

  private tell(entries: ReadonlySet<AccessEntry> | "all"): void {
    for (const l of this.listeners) l(entries);
  }

  private hold(holder: AccessHolder, entries: AccessEntry[] | undefined): void {
    const before = holder.accessHeld;
    if (entries) for (const e of entries) e.users++;
    if (before) for (const e of before) e.users--;
    holder.accessHeld = entries;
  }

  private entry(account: ServiceAccountRef, attributes: AccessAttributes): AccessEntry {
    const a = attributes;
    const key = stableStringify([
      account.namespace,
      account.name,
      a.verb,
      a.group,
      a.resource,
      a.namespace,
      a.name ?? null,
    ]);
    const found = this.entries.get(key);
    if (found) return found;
    if (this.entries.size >= this.maxEntries) this.evict();
    const entry: AccessEntry = {
      key,
      account: { namespace: account.namespace, name: account.name },
      attributes: { verb: a.verb, group: a.group, resource: a.resource, namespace: a.namespace },
      answer: undefined,
      answeredAt: 0,
      pending: undefined,
      waiters: undefined,
      users: 0,
      dropped: false,
    };
    if (a.name !== undefined) entry.attributes.name = a.name;
    this.entries.set(key, entry);
    return entry;
  }

  /**
   * Drops the answers nobody holds. Those held stay: two at most per holder (the namespace and
   * the name), so they are bounded by the subscriptions; dropping one a holder still uses would
   * only have it asked again, and make room by dropping another's.
   */
  private evict(): void {
    for (const [k, e] of this.entries) if (e.users <= 0 && !e.pending) this.entries.delete(k);
  }

  /** The fresh answer of `entry`; else undefined, with a review made (or joined) that wakes `wake`. */
  private answerOf(entry: AccessEntry, wake: () => void): boolean | Error | undefined {
    if (entry.answer !== undefined && !this.expired(entry)) return entry.answer;
    (entry.waiters ??= []).push(wake);
    this.review(entry);
    return undefined;
  }

  private expired(entry: AccessEntry): boolean {
    return this.clock() - entry.answeredAt >= this.lifeOf(entry);
  }

  private lifeOf(entry: AccessEntry): number {
    return entry.answer instanceof Error ? this.errorRetryMs : this.ttlMs;
  }

  /** Makes the review of `entry`, unless one is under way. */
  private review(entry: AccessEntry): void {
    if (entry.pending || this.stopped) return;
    entry.pending = (async () => {
      const before = entry.answer;
      let answer: boolean | Error;
      try {
        answer = await this.ask(entry);
        this.options.onReview?.(answer ? "allowed" : "denied");
      } catch (err) {
        answer = asError(err);
        this.options.onReview?.("error");
        this.logger.warn(
          {
            account: describeServiceAccount(entry.account),
            access: describeAttributes(entry.attributes),
            err: answer.message.slice(0, 300),
          },
          "a SubjectAccessReview failed; the account is refused until one answers",
        );
      }
      entry.pending = undefined;
      entry.answer = answer;
      entry.answeredAt = this.clock();
      if (!entry.dropped) {
        // The newest answer last: the expiry timer walks from the oldest.
        this.entries.delete(entry.key);
        this.entries.set(entry.key, entry);
        this.arm();
      }
      const waiters = entry.waiters ?? [];
      entry.waiters = undefined;
      for (const w of waiters) w();
      // A re-check (nobody waited) that answers otherwise: its holders look again.
      const changed =
        before !== undefined && (before instanceof Error ? !(answer instanceof Error) : before !== answer);
      if (changed && !entry.dropped) this.tell(new Set([entry]));
    })();
  }

  private async ask(entry: AccessEntry): Promise<boolean> {
    const subject = {
      username: serviceAccountUser(entry.account),
      groups: serviceAccountGroups(entry.account),
    };
    return (await subjectAccessReview(this.options.client, subject, entry.attributes)).allowed;
  }

  /** Arms the expiry timer for the oldest answer. */
  private arm(): void {
    if (this.stopped) return;
    const first = this.entries.values().next().value;
    if (!first) return;
    const at = first.answeredAt + this.lifeOf(first);
    if (this.timer && at >= this.timerAt) return;
    if (this.timer) clearTimeout(this.timer);
    this.timerAt = at;
    this.timer = setTimeout(() => this.expire(), Math.max(0, at - this.clock()));
    this.timer.unref?.();
  }

  /** Answers past their life: asked again when held, dropped when not. */
  private expire(): void {
    this.timer = undefined;
    this.timerAt = Infinity;
    const now = this.clock();
    for (const entry of [...this.entries.values()]) {
      if (entry.pending) continue;
      if (now - entry.answeredAt < this.lifeOf(entry)) break;
      if (entry.users > 0) {
        // Moved to the end while its review runs: the walk goes on to the next one.
        this.entries.delete(entry.key);
        this.entries.set(entry.key, entry);
        this.review(entry);
      } else this.entries.delete(entry.key);
    }
    this.arm();
  }

  /** Watches RBAC objects (once, from the first check): any change drops every answer. */
  private startRbacWatch(): void {
    if (this.rbac || this.stopped || this.options.watchRbac === false) return;
    this.rbac = RBAC_RESOURCES.map((resource) => {
      const informer = new Informer<KubeObject>({
        client: this.options.client,
        resource,
        logger: this.logger,
        // Identity only: what changed does not matter, only that something did.
        decode: (obj) => ({
          metadata: {
            name: obj.metadata?.name,
            namespace: obj.metadata?.namespace,
            resourceVersion: obj.metadata?.resourceVersion,
          },
        }),
      });
      let synced = false;
      let warned = false;
      informer.addListener({
        onEvent: () => {
          if (synced) this.dropAll();
        },
        onState: (state) => {
          if (state.phase === "Synced") {
            // A relist after a gap may have missed changes: drop what was answered meanwhile.
            if (synced) this.dropAll();
            synced = true;
          } else if (state.phase === "Failed" && !warned) {
            warned = true;
            this.logger.warn(
              { resource: resource.resource, reason: state.reason },
              "cannot watch RBAC objects (list and watch on them cluster-wide): access answers are asked again only when they expire",
            );
          }
        },
      });
      informer.start();
      return informer;
    });
  }
}

/** `get configmaps "db" in namespace "team-a"`, `list widgets.example.com cluster-wide`. */
export function describeAttributes(a: AccessAttributes): string {
  const what = a.group ? `${a.resource}.${a.group}` : a.resource;
  const name = a.name !== undefined ? ` ${JSON.stringify(a.name)}` : "";
  const where = a.namespace ? ` in namespace ${JSON.stringify(a.namespace)}` : " cluster-wide";
  return `${a.verb} ${what}${name}${where}`;
}
