/**
 * The controller runtime: sources, handlers and predicates (the watch layer), a work queue, a
 * Controller built on them that runs a one-method Reconciler, a
 * Manager that owns start and stop order and leadership (leader election on a Lease), and the
 * one backoff, token bucket and abortable sleep every timing in the process is made of. It
 * knows nothing of Referables.
 * @module
 */
export { backoffDelay, jittered, KeyedBackoff, type BackoffOptions } from "./backoff.ts";
export {
  controller,
  Controller,
  ControllerBuilder,
  type ControllerObserver,
  type ControllerOptions,
  type Gate,
  type ReconcileOutcome,
} from "./controller.ts";
export { enqueueKey, enqueueMapped, enqueueObject, type Handler, type KeyQueue } from "./handler.ts";
export { notOwnEcho, type Predicate, type WrittenVersions } from "./predicate.ts";
export {
  defaultControllerRateLimiter,
  ItemExponentialFailureRateLimiter,
  type RateLimiter,
} from "./rate-limiter.ts";
export { Channel, informerSource, type ObjectEvent, type Source } from "./source.ts";
export { runWorkers, settle } from "./workers.ts";
export { JITTER_FACTOR, LeaderElector, type LeaderElectionOptions } from "./leader-election.ts";
export { Manager, type ManagedController, type ManagedElector, type ManagerOptions } from "./manager.ts";
export { classifyError, DONE, sooner, TerminalError, type Reconciler, type Result } from "./reconciler.ts";
export { bucketOf, fairShare, planBuckets, type BucketPlan, type BucketView } from "./buckets.ts";
export { MAX_BUCKETS, ShardGate, type ShardListener } from "./shard-gate.ts";
export {
  ShardCoordinator,
  type Handover,
  type ShardCoordinatorOptions,
  type ShardObserver,
} from "./shards.ts";
export { sleep } from "./sleep.ts";
export { TokenBucket } from "./token-bucket.ts";
export { WorkQueue, type WorkQueueObserver } from "./workqueue.ts";
