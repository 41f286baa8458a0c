/**
 * A consumer controller shaped like a Crossplane provider's, for the demo `Database` managed
 * resource, resolving its references with the GenericReference library:
 *
 * - `spec.forProvider.networkIdRef` / `networkIdSelector` fill `networkId`, and
 *   `subnetIdRefs` / `subnetIdSelector` fill `subnetIds`, with `resolveReferences` (one call for
 *   every field, each with its `policy`);
 * - **late initialization**, as Crossplane persists resolved references: a value resolved into an
 *   empty field is written into `spec.forProvider` (guarded by the resourceVersion read). With
 *   `policy.resolve: IfNotPresent` (the default) it is then kept, whatever the source does later;
 *   with `Always` it is re-resolved on every reconcile and written again when it changed;
 * - **push, not poll**: every reference that can still change the spec (its field is empty, or its
 *   policy is `Always`) has a `resolver.watch` subscription whose callback only enqueues the
 *   Database; a reference whose value is settled (`IfNotPresent` and filled) is not watched;
 * - `requireConditions` on a reference (`[{ type: Ready, status: "True" }]`) makes it wait until
 *   the Network or Subnet reports Ready: until then the Database is `Synced=False` with reason
 *   `SourceNotReady`, and the Ready condition's arrival is pushed here;
 * - status the Crossplane way: `Synced` (did the last reconcile resolve everything; its reason is
 *   the resolver's on failure) and `Ready` (a network ID is in use), each written only when it
 *   changes (`lastTransitionTime` kept otherwise), with `atProvider` showing what is in use.
 *
 * It uses the library only through its public entry, as any consumer does, and reads, watches
 * and patches Databases with `@kubernetes/client-node`.
 */
import { setTimeout as delay } from "node:timers/promises";
import {
  ApiException,
  CustomObjectsApi,
  makeInformer,
  PatchStrategy,
  setHeaderOptions,
  type Informer,
  type KubeConfig,
  type KubernetesObject,
} from "@kubernetes/client-node";
import {
  isResolutionError,
  resolveReferences,
  type GenericReference,
  type GenericSelector,
  type Logger,
  type ReferenceReader,
  type Subscription,
  type WatchCallback,
} from "../../src/index.ts";
import { DATABASE_PLURAL, GROUP, VERSION } from "./crds.ts";

/** A Database's parameters: each reference field beside the field it fills. */
export interface DatabaseParameters {
  region?: string;
  networkId?: string;
  networkIdRef?: GenericReference;
  networkIdSelector?: GenericSelector;
  subnetIds?: string[];
  subnetIdRefs?: GenericReference[];
  subnetIdSelector?: GenericSelector;
}

/** A status condition, Crossplane's way. */
export interface Condition {
  type: "Synced" | "Ready";
  status: "True" | "False";
  reason: string;
  message?: string;
  lastTransitionTime?: string;
  observedGeneration?: number;
}

/** What the controller writes to a Database's status. */
export interface DatabaseStatus {
  atProvider?: { networkId?: string; subnetIds?: string[] };
  conditions?: Condition[];
}

/** A Database as the API server returns it. */
export type Database = KubernetesObject & {
  spec?: { forProvider?: DatabaseParameters };
  status?: DatabaseStatus;
};

/** What the controller needs of a resolver: one-shot reads and push subscriptions. */
export interface DatabaseResolver extends ReferenceReader {
  watch(ref: GenericReference | GenericSelector, callback: WatchCallback): Subscription;
}

/** Options for {@link DatabaseController}. */
export interface DatabaseControllerOptions {
  /** Where to read, watch and patch Databases (with `@kubernetes/client-node`). */
  kubeConfig: KubeConfig;
  resolver: DatabaseResolver;
  /** Watch Databases in this namespace only. @default every namespace */
  namespace?: string;
  /** @default a silent logger */
  logger?: Logger;
}

const P = "spec.forProvider";
/** The reference fields, as `resolveReferences` takes them (Crossplane's names, not the defaults). */
const FIELDS = [
  // networkIdRef or networkIdSelector (resolved in mode Single) fills networkId.
  { target: `${P}.networkId` },
  // subnetIdRefs (in order) or subnetIdSelector (mode Multiple) fills subnetIds; IDs are unique.
  { target: `${P}.subnetIds`, refs: `${P}.subnetIdRefs`, selector: `${P}.subnetIdSelector`, unique: true },
];
const RETRY_MS = 1000;
const noop = () => undefined;
const silent: Logger = { debug: noop, info: noop, warn: noop, error: noop };

/** Keeps every Database's spec resolved and its status current. */
export class DatabaseController {
  private readonly api: CustomObjectsApi;
  private readonly informer: Informer<Database>;
  private readonly resolver: DatabaseResolver;
  private readonly logger: Logger;
  private readonly databases = new Map<string, Database>();
  /** Per Database, its open subscriptions by the JSON of what they watch. */
  private readonly subs = new Map<string, Map<string, Subscription>>();
  private readonly running = new Map<string, Promise<void>>();
  private readonly again = new Set<string>();
  private readonly abort = new AbortController();

  constructor(options: DatabaseControllerOptions) {
    this.api = options.kubeConfig.makeApiClient(CustomObjectsApi);
    this.resolver = options.resolver;
    this.logger = options.logger ?? silent;
    const namespace = options.namespace;
    const [group, version, plural] = [GROUP, VERSION, DATABASE_PLURAL];
    // client-node's informer: list, then watch from the list's resourceVersion (reopened from the
    // last one it saw when the server ends the watch), relisting on 410 Gone. It keeps its own
    // cache too; this controller keeps `databases` to stay explicit.
    this.informer = makeInformer<Database>(
      options.kubeConfig,
      `/apis/${group}/${version}${namespace ? `/namespaces/${namespace}` : ""}/${plural}`,
      () =>
        namespace
          ? this.api.listNamespacedCustomObject({ group, version, namespace, plural })
          : this.api.listClusterCustomObject({ group, version, plural }),
    );
    this.informer.on("add", (db) => this.upsert(db));
    this.informer.on("update", (db) => this.upsert(db));
    this.informer.on("delete", (db) => this.remove(keyOf(db)));
  }

  /** How many subscriptions the controller holds for one Database (for tests and metrics). */
  subscriptionsOf(namespace: string, name: string): number {
    return this.subs.get(`${namespace}/${name}`)?.size ?? 0;
  }

  /**
   * Lists the Databases, then watches them in the background. Throws when the list is refused
   * (no CRD, no RBAC); retries while the server is busy (a CRD just installed answers 429 until
   * its storage is ready), so every Database is known on return.
   */
  async start(): Promise<void> {
    for (;;) {
      // The informer reports a failed list or watch on "error" and stops, rather than throwing.
      let failure: unknown;
      const onFailure = (err: unknown) => void (failure ??= err);
      this.informer.on("error", onFailure);
      try {
        await this.informer.start();
      } finally {
        this.informer.off("error", onFailure);
      }
      if (failure === undefined) break;
      if (!transient(failure) || this.abort.signal.aborted) throw failure;
      this.logger.warn({ err: describe(failure) }, "could not list Databases yet; retrying");
      await sleep(RETRY_MS, this.abort.signal);
    }
    // From now on a failure stops the informer: start it again (from its last resourceVersion)
    // after a pause, so an API server outage is not a hot loop.
    this.informer.on("error", (err: unknown) => {
      if (this.abort.signal.aborted) return;
      this.logger.warn({ err: describe(err) }, "the Database watch failed; retrying");
      void sleep(RETRY_MS, this.abort.signal).then(async () => {
        if (!this.abort.signal.aborted) await this.informer.start();
      });
    });
  }

  /** Stops watching, closes every subscription and waits for in-flight reconciles. */
  async stop(): Promise<void> {
    this.abort.abort();
    await this.informer.stop();
    for (const key of [...this.subs.keys()]) this.closeSubs(key);
    await Promise.allSettled([...this.running.values()]);
  }

  private upsert(db: Database): string {
    const key = keyOf(db);
    this.databases.set(key, db);
    this.syncSubs(key, db);
    this.enqueue(key);
    return key;
  }

  private remove(key: string): void {
    this.databases.delete(key);
    this.closeSubs(key);
  }

  /**
   * Watches exactly the references that can still change the spec: a field that is empty, or
   * whose policy is Always. A settled IfNotPresent field needs no subscription (Crossplane never
   * re-resolves it either), so a Database that is fully resolved costs the resolver nothing.
   */
  private syncSubs(key: string, db: Database): void {
    const p = db.spec?.forProvider ?? {};
    const wanted = new Map<string, GenericReference | GenericSelector>();
    const want = (ref: GenericReference | GenericSelector) => wanted.set(JSON.stringify(ref), ref);
    const open = (value: unknown, policy: GenericReference["policy"]) =>
      policy?.resolve === "Always" ||
      value === undefined ||
      value === "" ||
      (Array.isArray(value) && value.length === 0);
    const network = p.networkIdRef ?? p.networkIdSelector;
    if (network && open(p.networkId, network.policy)) {
      // Watched as resolveReferences reads it: a selector for a single field in mode Single.
      want(p.networkIdRef ?? { ...p.networkIdSelector!, mode: "Single" });
    }
    const subnetPolicy = p.subnetIdRefs?.[0]?.policy ?? p.subnetIdSelector?.policy;
    if (open(p.subnetIds, subnetPolicy)) {
      for (const ref of p.subnetIdRefs ?? []) want(ref);
      if (p.subnetIdSelector) want({ ...p.subnetIdSelector, mode: "Multiple" });
    }
    let have = this.subs.get(key);
    for (const [text, sub] of have ?? []) {
      if (wanted.has(text)) continue;
      sub.close();
      have!.delete(text);
    }
    for (const [text, ref] of wanted) {
      if (have?.has(text)) continue;
      if (!have) this.subs.set(key, (have = new Map()));
      // The callback only enqueues: reconcile reads the current state, whatever was pushed.
      have.set(
        text,
        this.resolver.watch(ref, () => this.enqueue(key)),
      );
    }
    if (have?.size === 0) this.subs.delete(key);
  }

  private closeSubs(key: string): void {
    for (const sub of this.subs.get(key)?.values() ?? []) sub.close();
    this.subs.delete(key);
  }

  /** One reconcile per key at a time; an event during a run makes it run once more. */
  private enqueue(key: string): void {
    if (this.abort.signal.aborted) return;
    if (this.running.has(key)) {
      this.again.add(key);
      return;
    }
    const run = this.reconcile(key).finally(() => {
      this.running.delete(key);
      if (this.again.delete(key)) this.enqueue(key);
    });
    this.running.set(key, run);
  }

  private async reconcile(key: string): Promise<void> {
    const db = this.databases.get(key);
    if (!db) return;
    try {
      let resolved: Database;
      let failure: { reason: string; message: string } | undefined;
      try {
        const result = await resolveReferences(this.resolver, db, FIELDS);
        if (result.changed) {
          await this.lateInitialize(db, result.object);
          return; // the watch brings our own write back, and that reconciles the status
        }
        resolved = result.object;
      } catch (err) {
        if (!isResolutionError(err)) throw err;
        // The resolver pushes again when waiting can change the outcome: no retry of our own.
        failure = { reason: err.reason, message: `cannot resolve references: ${err.message}` };
        resolved = db;
      }
      await this.writeStatus(db, desiredStatus(resolved, failure));
    } catch (err) {
      if (this.abort.signal.aborted || statusOf(err) === 404) return; // stopping, or deleted meanwhile
      if (statusOf(err) === 409) return; // a newer Database is on its way through the watch
      this.logger.warn({ database: key, err: describe(err) }, "could not reconcile; retrying");
      void sleep(RETRY_MS, this.abort.signal).then(() => this.enqueue(key));
    }
  }

  /**
   * Persists the resolved values into spec.forProvider, as Crossplane does: only the filled
   * fields, and only if the Database is still the version they were resolved from (a merge patch
   * with its resourceVersion fails with 409 Conflict otherwise).
   */
  private async lateInitialize(db: Database, resolved: Database): Promise<void> {
    const { resourceVersion } = db.metadata ?? {};
    const now = resolved.spec?.forProvider ?? {};
    await this.api.patchNamespacedCustomObject(
      {
        ...this.coordinates(db),
        body: {
          metadata: { resourceVersion },
          spec: { forProvider: { networkId: now.networkId ?? null, subnetIds: now.subnetIds ?? null } },
        },
      },
      setHeaderOptions("Content-Type", PatchStrategy.MergePatch),
    );
  }

  /** Patches the status when it differs from what the Database already has. */
  private async writeStatus(db: Database, desired: DatabaseStatus): Promise<void> {
    const have = db.status ?? {};
    const conditions = desired.conditions!.map((c) => {
      const old = have.conditions?.find((o) => o.type === c.type);
      // Idempotent: the same status keeps its lastTransitionTime.
      const lastTransitionTime =
        old?.status === c.status && old.lastTransitionTime
          ? old.lastTransitionTime
          : new Date().toISOString();
      return { ...c, lastTransitionTime };
    });
    const next: DatabaseStatus = { atProvider: desired.atProvider ?? {}, conditions };
    if (JSON.stringify(comparable(have)) === JSON.stringify(comparable(next))) return;
    await this.api.patchNamespacedCustomObjectStatus(
      {
        ...this.coordinates(db),
        // A merge patch replaces lists whole; null clears an atProvider field that went away.
        body: {
          status: { atProvider: { networkId: null, subnetIds: null, ...next.atProvider }, conditions },
        },
      },
      setHeaderOptions("Content-Type", PatchStrategy.MergePatch),
    );
  }

  /** Where a Database is, as CustomObjectsApi takes it. */
  private coordinates(db: Database) {
    return {
      group: GROUP,
      version: VERSION,
      plural: DATABASE_PLURAL,
      namespace: db.metadata?.namespace ?? "",
      name: db.metadata?.name ?? "",
    };
  }
}

/** The status a Database should have, from its (resolved) spec and the failure, if any. */
export function desiredStatus(
  db: Database,
  failure: { reason: string; message: string } | undefined,
): DatabaseStatus {
  const generation = db.metadata?.generation;
  const p = db.spec?.forProvider ?? {};
  const atProvider: NonNullable<DatabaseStatus["atProvider"]> = {};
  if (p.networkId) atProvider.networkId = p.networkId;
  if (p.subnetIds?.length) atProvider.subnetIds = p.subnetIds;
  const synced: Condition = failure
    ? { type: "Synced", status: "False", reason: failure.reason, message: failure.message }
    : { type: "Synced", status: "True", reason: "ReconcileSuccess" };
  // Ready follows what is in use: a network settled once stays in use while a later reference
  // fails (Synced says so), as a created cloud resource would.
  const ready: Condition = p.networkId
    ? { type: "Ready", status: "True", reason: "Available" }
    : {
        type: "Ready",
        status: "False",
        reason: "Creating",
        message: "waiting for spec.forProvider.networkId",
      };
  return {
    atProvider,
    conditions: [synced, ready].map((c) =>
      generation === undefined ? c : { ...c, observedGeneration: generation },
    ),
  };
}

/** A status without the times that a rewrite would not change. */
function comparable(s: DatabaseStatus): unknown {
  const conditions = [...(s.conditions ?? [])]
    .map(({ type, status, reason, message, observedGeneration }) => ({
      type,
      status,
      reason,
      message,
      observedGeneration,
    }))
    .sort((a, b) => a.type.localeCompare(b.type));
  return {
    atProvider: { networkId: s.atProvider?.networkId, subnetIds: s.atProvider?.subnetIds },
    conditions,
  };
}

function keyOf(obj: KubernetesObject): string {
  return `${obj.metadata?.namespace}/${obj.metadata?.name}`;
}

/** The HTTP status of a client-node failure: `code` of an ApiException, `statusCode` of a watch's. */
function statusOf(err: unknown): number | undefined {
  if (err instanceof ApiException) return err.code;
  const code = (err as { statusCode?: unknown } | undefined)?.statusCode;
  return typeof code === "number" ? code : undefined;
}

/** Whether waiting can help: no answer at all, too many requests, or a server error. */
function transient(err: unknown): boolean {
  const code = statusOf(err);
  return code === undefined || code === 429 || code >= 500;
}

function describe(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** Resolves after `ms`, or at once when `signal` aborts. */
function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return delay(ms, undefined, { signal }).catch(() => undefined);
}
