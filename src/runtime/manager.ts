/**
 * The one owner of start and stop order, as controller-runtime's Manager runs its Runnables.
 *
 * Start: the caches (the Referable informer) first, then the queue and its writers, then
 * leadership, so a new leader writes from a synced cache. Stop, in reverse: stop writing, let
 * the writers drain (a status write in flight completes or fails), and only then release the
 * Lease, so a standby never takes over while this replica still has a write on the wire; then
 * close the caches and the source informers.
 *
 * Leadership is the manager's too: given `leaderElection`, it campaigns for the Lease and tells
 * the controller when it leads and when it stops, the one place a change of leader enters.
 */
import { asError } from "../api/errors.ts";
import { silentLogger, type Logger } from "../api/log.ts";
import { LeaderElector, type LeaderElectionOptions } from "./leader-election.ts";

/** What the manager needs of the controller. */
export interface ManagedController {
  /** Starts the caches; nothing is reconciled yet. */
  startCache(): void;
  /** Resolves once the caches have completed their first list (or failed). */
  whenSynced(): Promise<void>;
  /** Starts the queue's workers. */
  startWorkers(): void;
  /** Makes the replica write (true) or not (false). */
  setLeader(leader: boolean): void;
  /** Stops writing and resolves once no reconcile (nor its write) is running. */
  drain(): Promise<void>;
  /** Closes the caches and subscriptions (after drain). */
  stop(): Promise<void>;
}

/** What the manager needs of a leader elector: it campaigns in run() and releases in stop(). */
export interface ManagedElector {
  /** Campaigns and leads until stopped; never rejects. */
  run(): Promise<void>;
  /** Stops campaigning or leading, releasing the Lease if held. */
  stop(): Promise<void>;
  /**
   * Called as the caches start, before they have synced, when given: the elector may make
   * itself known meanwhile (sharding: the others leave this replica its share). @default none
   */
  announce?(): void;
}

/** Options for {@link Manager}. */
export interface ManagerOptions {
  controller: ManagedController;
  /** Closed last: the source informers. */
  resolver: { stop(): Promise<void> };
  /** Leader election; without one, the replica leads as soon as its workers run. @default none */
  elector?: ManagedElector;
  /**
   * Leader election on a Lease, when no `elector` is given: the manager makes the elector and
   * calls `onLost` when leadership ends other than by {@link Manager.stop}. @default none
   */
  leaderElection?: Omit<LeaderElectionOptions, "onStartedLeading" | "onStoppedLeading"> & {
    onLost?: () => void;
  };
  /** @default silentLogger */
  logger?: Logger;
}

/** Starts and stops the controller's parts in order; see the module comment. */
export class Manager {
  private readonly options: ManagerOptions;
  private readonly logger: Logger;
  private readonly elector: ManagedElector | undefined;
  private starting: Promise<void> | undefined;
  private stopping: Promise<void> | undefined;

  constructor(options: ManagerOptions) {
    this.options = options;
    this.logger = options.logger ?? silentLogger;
    this.elector = options.elector ?? (options.leaderElection && this.makeElector(options.leaderElection));
  }

  private makeElector(options: NonNullable<ManagerOptions["leaderElection"]>): LeaderElector {
    const { onLost, ...election } = options;
    const controller = this.options.controller;
    return new LeaderElector({
      ...election,
      onStartedLeading: () => controller.setLeader(true),
      onStoppedLeading: () => {
        controller.setLeader(false);
        if (!this.stopping) onLost?.();
      },
    });
  }

  /**
   * Starts the caches, then (once they have synced) the workers, then leadership. Resolves once
   * leadership is being campaigned for (or, without an elector, held); never rejects. A stop()
   * meanwhile ends the sequence where it is.
   */
  start(): Promise<void> {
    this.starting ??= this.startInOrder().catch((err: unknown) => {
      this.logger.error({ err: asError(err).message }, "starting the controller failed");
    });
    return this.starting;
  }

  /** Stops in reverse order; the writers drain before the Lease is released. Idempotent. */
  stop(): Promise<void> {
    this.stopping ??= this.stopInOrder();
    return this.stopping;
  }

  private async startInOrder(): Promise<void> {
    const { controller } = this.options;
    const elector = this.elector;
    controller.startCache();
    elector?.announce?.();
    await controller.whenSynced();
    if (this.stopping) return;
    controller.startWorkers();
    if (elector) void elector.run();
    else controller.setLeader(true);
  }

  private async stopInOrder(): Promise<void> {
    const { controller, resolver } = this.options;
    const elector = this.elector;
    await controller.drain();
    this.logger.info({}, "writers drained");
    await elector?.stop();
    await controller.stop();
    await resolver.stop();
  }
}
