/**
 * The Leases of a shard set (see shards.ts): their labels and names, when one seen is valid, the
 * record a replica writes, and the create-or-update guarded by the version read.
 */
import type { KubeClient } from "../kube/client.ts";
import { LEASES, resourcePath } from "../kube/resource-path.ts";
import { fnv1a32 } from "./buckets.ts";
import { microTime, type Lease, type LeaseRecord } from "./leader-election.ts";

/** The label on every Lease of a shard set; its value is the set's name. */
export const SHARD_SET_LABEL = "referable.dev/shard-set";
/** The annotation on a member Lease: the number of buckets that replica runs with. */
export const BUCKETS_ANNOTATION = "referable.dev/buckets";

/**
 * The annotation on a member Lease: "true" while that replica is still syncing its caches (it
 * takes no bucket yet, and the others leave it its share of the free ones), "false" once it
 * serves. A member Lease without it (an older version) serves.
 */
export const SYNCING_ANNOTATION = "referable.dev/syncing";

/** The label that tells member Leases from bucket Leases. */
export const ROLE_LABEL = "referable.dev/shard-role";

/** The member Lease of `identity` in the set `name`. */
export function memberLeaseName(name: string, identity: string): string {
  return `${name}-member-${fnv1a32(identity).toString(16).padStart(8, "0")}`;
}

/** The bucket a Lease of the set `set` stands for, from its name; undefined for another Lease. */
export function parseBucket(name: string, set: string): { index: number; of: number } | undefined {
  const prefix = `${set}-bucket-`;
  if (!name.startsWith(prefix)) return undefined;
  const match = /^(\d{1,4})-of-(\d{1,4})$/.exec(name.slice(prefix.length));
  if (!match) return undefined;
  const index = Number(match[1]);
  const of = Number(match[2]);
  return index < of ? { index, of } : undefined;
}

/** One Lease as last seen, and when its record last changed (on our clock). */
export interface Seen {
  lease: Lease;
  record: LeaseRecord;
  raw: string;
  changedAt: number;
}

/** Whether a Lease seen has a holder and was renewed within its duration (on our clock). */
export function leaseValid(seen: Seen | undefined, now: number): boolean {
  if (!seen || !seen.record.holderIdentity) return false;
  return seen.changedAt + seen.record.leaseDurationSeconds * 1000 > now;
}

/** The record this replica writes: `holder`, now, keeping acquireTime while it holds it. */
export function leaseRecord(
  seen: Seen | undefined,
  holder: string,
  leaseDurationSeconds: number,
): LeaseRecord {
  const now = microTime(new Date());
  const same = seen?.record.holderIdentity === holder;
  return {
    holderIdentity: holder,
    leaseDurationSeconds: leaseDurationSeconds,
    acquireTime: (same ? seen?.record.acquireTime : undefined) ?? now,
    renewTime: now,
    leaseTransitions: seen?.record.leaseTransitions ?? 0,
  };
}

/** Creates (when `current` is undefined) or updates a Lease of the set, guarded by its version. */
export function writeLease(
  client: Pick<KubeClient, "request">,
  namespace: string,
  lease: { name: string; set: string; role: "member" | "bucket"; timeoutMs: number },
  current: Lease | undefined,
  record: LeaseRecord,
  annotations?: Record<string, string>,
): Promise<Lease> {
  const { name, set, role } = lease;
  const request = { timeoutMs: lease.timeoutMs };
  if (!current)
    return client.request<Lease>("POST", resourcePath(LEASES, { namespace }), {
      ...request,
      body: {
        apiVersion: "coordination.k8s.io/v1",
        kind: "Lease",
        metadata: {
          name,
          labels: { [SHARD_SET_LABEL]: set, [ROLE_LABEL]: role },
          ...(annotations && { annotations }),
        },
        spec: { ...record },
      },
    });
  const metadata = annotations
    ? { ...current.metadata, annotations: { ...current.metadata?.annotations, ...annotations } }
    : current.metadata;
  return client.request<Lease>("PUT", resourcePath(LEASES, { namespace, name }), {
    ...request,
    body: { ...current, metadata, spec: { ...current.spec, ...record } },
  });
}
