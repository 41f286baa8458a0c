/**
 * What the sharding tests share: a namespace of their own (sources, Leases), a label on their
 * Referables that only their controller processes select, replicas of one shard set started as
 * processes, and the Referables' values read back by name.
 */
import type { KubeClient, KubeObject } from "../../src/kube/client.ts";
import { SHARD_LABEL } from "./controller.ts";
import { adminClient, closeTestClients, createNamespace, uniqueName } from "./kube.ts";
import {
  killAllProcesses,
  leaseTimingArgs,
  scopeArgs,
  startControllerProcess,
  type ControllerProcess,
} from "./process.ts";

export const REFERABLES_PATH = "/apis/referable.dev/v1alpha1/referables";

export interface ShardSet {
  admin: KubeClient;
  /** The namespace of the sources and of the set's Leases. */
  ns: string;
  /** The value of SHARD_LABEL on the set's Referables. */
  label: string;
  /** Starts replica `identity` of the set, with `buckets` buckets and the tests' lease timing. */
  startReplica(identity: string, buckets: number): Promise<ControllerProcess>;
  /** The status.value of each of the set's Referables, by name. */
  values(): Promise<Map<string | undefined, unknown>>;
  /** Kills every controller process, deletes the set's Referables, and closes the clients. */
  close(): Promise<void>;
}

/** A new namespace and label, both named after `prefix`. */
export async function openShardSet(prefix: string): Promise<ShardSet> {
  const admin = adminClient();
  const ns = await createNamespace(admin, prefix);
  const label = uniqueName(prefix);
  const selector = { labelSelector: `${SHARD_LABEL}=${label}` };
  return {
    admin,
    ns,
    label,
    startReplica: (identity, buckets) =>
      startControllerProcess([
        ...scopeArgs({ ns, shard: label }, identity),
        `--shards=${buckets}`,
        ...leaseTimingArgs(),
      ]),
    async values() {
      const list = await admin.request<{ items: KubeObject[] }>("GET", REFERABLES_PATH, { query: selector });
      return new Map(
        list.items.map((item) => [item.metadata?.name, (item.status as { value?: unknown })?.value]),
      );
    },
    async close() {
      await killAllProcesses();
      await admin.request("DELETE", REFERABLES_PATH, { query: selector }).catch(() => undefined);
      await closeTestClients();
    },
  };
}
