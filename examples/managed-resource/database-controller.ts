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
import { ApiException, type KubernetesObject } from "@kubernetes/client-node";
import {
  type HostControllerOptions,
  isResolutionError,
  resolveReferences,
  type GenericReference,
  type GenericSelector,
  type ReferenceReader,
  type ReferenceWatcher,
} from "../../src/index.ts";
import { HostController } from "../example-host.ts";
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
export type DatabaseResolver = ReferenceReader & ReferenceWatcher;

/** Options for {@link DatabaseController}: where Databases are, the resolver, a namespace and a logger. */
export type DatabaseControllerOptions = HostControllerOptions<DatabaseResolver>;

const P = "spec.forProvider";
/** The reference fields, as `resolveReferences` takes them (Crossplane's names, not the defaults). */
const FIELDS = [
  // networkIdRef or networkIdSelector (resolved in mode Single) fills networkId.
  { target: `${P}.networkId` },
  // subnetIdRefs (in order) or subnetIdSelector (mode Multiple) fills subnetIds; IDs are unique.
  { target: `${P}.subnetIds`, refs: `${P}.subnetIdRefs`, selector: `${P}.subnetIdSelector`, unique: true },
];

/** Keeps every Database's spec resolved and its status current. */
export class DatabaseController extends HostController<Database, DatabaseResolver> {
  constructor(options: DatabaseControllerOptions) {
    super(options, { group: GROUP, version: VERSION, plural: DATABASE_PLURAL, referencesOf: openReferences });
  }

  /** How many subscriptions the controller holds for one Database (for tests and metrics). */
  subscriptionsOf(namespace: string, name: string): number {
    return this.loop.subscriptionsOf(namespace, name);
  }

  protected async reconcile(db: Database): Promise<void> {
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
      // Deleted meanwhile, or a newer Database is on its way through the watch; anything else
      // is retried with backoff by the loop.
      if (err instanceof ApiException && (err.code === 404 || err.code === 409)) return;
      throw err;
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
    await this.mergePatch(db, {
      metadata: { resourceVersion },
      spec: { forProvider: { networkId: now.networkId ?? null, subnetIds: now.subnetIds ?? null } },
    });
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
    // A merge patch replaces lists whole; null clears an atProvider field that went away.
    await this.mergePatch(
      db,
      { status: { atProvider: { networkId: null, subnetIds: null, ...next.atProvider }, conditions } },
      "status",
    );
  }
}

/**
 * The references that can still change the spec, each as resolveReferences reads it: a field that
 * is empty, or whose policy is Always. A settled IfNotPresent field needs no subscription
 * (Crossplane never re-resolves it either), so a fully resolved Database costs the resolver nothing.
 */
function openReferences(db: Database): Array<GenericReference | GenericSelector> {
  const p = db.spec?.forProvider ?? {};
  const open = (value: unknown, policy: GenericReference["policy"]) =>
    policy?.resolve === "Always" ||
    value === undefined ||
    value === "" ||
    (Array.isArray(value) && value.length === 0);
  const refs: Array<GenericReference | GenericSelector> = [];
  const network = p.networkIdRef ?? p.networkIdSelector;
  if (network && open(p.networkId, network.policy))
    refs.push(p.networkIdRef ?? { ...p.networkIdSelector!, mode: "Single" });
  if (open(p.subnetIds, p.subnetIdRefs?.[0]?.policy ?? p.subnetIdSelector?.policy)) {
    refs.push(...(p.subnetIdRefs ?? []));
    if (p.subnetIdSelector) refs.push({ ...p.subnetIdSelector, mode: "Multiple" });
  }
  return refs;
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
