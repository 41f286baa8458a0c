/**
 * What the export outputs (the key output, the field output) share: the step they hand the
 * reconcile, and a base that holds their client options, logger and pacing, and knows when a
 * Referable being deleted waits for their finalizer.
 */
import type { Referable, ServiceAccountRef } from "../api/referable.ts";
import type { KubeClient } from "../kube/client.ts";
import { actingAs } from "../kube/impersonation.ts";
import { silentLogger, type Logger } from "../api/log.ts";
import type { ExportState } from "./export-state.ts";
import { hasFinalizer } from "./keys/finalizer.ts";
import { OutputPacing, type PacingOptions } from "./pacing.ts";

/** What an export output asks of the reconcile after a write or a release. */
export interface ExportStep {
  /** The export part of the status to write (null: none; undefined: as it is). */
  state: ExportState | null | undefined;
  /** When to look again: a failure's backoff, or a write waiting for the write policy. */
  retryAfterMs: number | undefined;
  /** The Referable's metadata after the finalizer patch this step made: the reconcile goes on from it. */
  metadata?: { resourceVersion: string | undefined; finalizers: string[] };
  /** The Referable changed since it was read: look again (on the backoff) from the newer version. */
  requeue?: boolean;
  /** Another step follows once the status records this one (the finalizer let go of): look again then. */
  thenRequeue?: boolean;
}

/** The options every export output takes. */
export interface ExportOutputOptions extends PacingOptions {
  /** The controller's client: its finalizers are patched with it, and its targets through it. */
  client: Pick<KubeClient, "request">;
  logger?: Logger;
  /**
   * The ServiceAccount a Referable writes as (spec.serviceAccountRef, else the default): every
   * request on its targets (reads, applies, deletes, releases) impersonates it. A string says why
   * it cannot be known: nothing is written then (InvalidSpec). @default none: the controller's rights
   */
  actAs?: (obj: Referable) => ServiceAccountRef | string | undefined;
}

/** Whom a Referable's target requests go as: the client to use and the account (for messages). */
export interface TargetWriter {
  client: Pick<KubeClient, "request">;
  serviceAccount: ServiceAccountRef | undefined;
}

/** The base of an export output: its options, logger and pacing, and its finalizer. */
export abstract class ExportOutput<Options extends ExportOutputOptions> {
  protected readonly options: Options;
  protected readonly logger: Logger;
  protected readonly pacing: OutputPacing;
  /** The finalizer that keeps a Referable until this output let go of what it wrote. */
  private readonly finalizer: string;

  constructor(options: Options, finalizer: string) {
    this.options = options;
    this.logger = options.logger ?? silentLogger;
    this.pacing = new OutputPacing(options);
    this.finalizer = finalizer;
  }

  /** The client `obj`'s target requests go through (impersonating its account), or why there is none. */
  protected writerFor(obj: Referable): TargetWriter | string {
    const account = this.options.actAs?.(obj);
    if (typeof account === "string") return account;
    return { client: actingAs(this.options.client, account), serviceAccount: account };
  }

  /** Whether the Referable holds this output's finalizer while being deleted: `release` must run. */
  finalizing(obj: Referable): boolean {
    return obj.metadata.deletionTimestamp !== undefined && hasFinalizer(obj, this.finalizer);
  }
}
