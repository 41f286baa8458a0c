/**
 * The options of the shard coordinator (shards.ts), and the observer it tells of hand-overs and
 * live replicas (for metrics).
 */
import type { KubeClient } from "../kube/client.ts";
import type { Logger } from "../api/log.ts";
import type { ShardGate } from "./shard-gate.ts";

/** How a bucket changed hands, for the hand-overs counter. */
export type Handover = "acquired" | "released" | "lost";

/** Receives the coordinator's measurements. Must not throw. */
export interface ShardObserver {
  /** A bucket changed hands. */
  onHandover?(kind: Handover): void;
  /** The live replicas seen in the last round, this one included. */
  onMembers?(live: number): void;
  /**
   * A bucket was taken over from a replica that stopped renewing it (a kill, a lost node), this
   * many seconds after the last renewal of it this replica saw: at least the lease duration.
   */
  onTakeover?(seconds: number): void;
}

/** Options for {@link ShardCoordinator}. */
export interface ShardCoordinatorOptions {
  /** Needs list, get, create, update and delete on leases in `namespace`. */
  client: Pick<KubeClient, "request">;
  namespace: string;
  /** The set's name: the prefix of its Lease names and the value of {@link SHARD_SET_LABEL}. */
  name: string;
  /** This replica's identity, unique among replicas (e.g. the pod name). */
  identity: string;
  /** Which buckets are served; the number of buckets is its. */
  gate: ShardGate;
  /** How long a Lease not renewed stays valid. @default 15000 */
  leaseDurationMs?: number;
  /** How long a holder keeps trying to renew a bucket before it stops serving it. @default 10000 */
  renewDeadlineMs?: number;
  /** Time between rounds (jittered by up to 1.2 times more). @default 2000 */
  retryPeriodMs?: number;
  /**
   * Starts as a replica whose caches are still syncing (see ShardCoordinator.announce): it
   * announces itself and takes no bucket until `synced()` or `run()`. @default false
   */
  syncing?: boolean;
  observer?: ShardObserver;
  /** @default silentLogger */
  logger?: Logger;
  /** The monotonic clock, in ms. @default performance.now */
  now?: () => number;
}
