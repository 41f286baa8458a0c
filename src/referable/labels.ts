/**
 * The two labels a shard that lists by slot keeps on the Referables it serves (runtime/slots.ts):
 *
 * - `referable.dev/slot`, the slot of its name: what the bucket informers select. Written once
 *   in the life of a Referable (the name never changes), and put back if someone changes it.
 * - `referable.dev/graph: "true"` on the only Referables a cycle or a one-owner rule can
 *   involve: (a) it exports (keys or fields), (b) it reads a Referable (by name or selector), or
 *   (c) a Referable reads it. Every replica watches these whole (the graph view), so the
 *   reference graph and the key and field ownership of every replica see every edge that can
 *   close a cycle and every claim. Each member of a cycle is in the set: each is reached from the
 *   member before it, which either reads it (so it is (c)) or reads what it exports into (so it
 *   is (a)). The serving replica decides (a) and (b) from the spec it holds whole, and (c) from
 *   the readers of (b), which every replica sees.
 *
 * An exporter writes nothing into its targets until its graph label is on the version it
 * reads: the other replicas receive the claim in the same delivery (the label's echo queues it
 * again). Written with one merge patch that carries the version read, through the controller's
 * write budget.
 */
import { REFERABLE_RESOURCE, type Referable } from "../api/referable.ts";
import { asError } from "../api/errors.ts";
import type { Logger } from "../api/log.ts";
import { isApiError, type KubeClient } from "../kube/client.ts";
import { resourcePath } from "../kube/resource-path.ts";
import { pass, WriteGate, type WritePolicy } from "../outputs/write-policy.ts";
import { DONE, type Result } from "../runtime/reconciler.ts";
import { GRAPH_LABEL, SLOT_LABEL, slotOf, SLOTS } from "../runtime/slots.ts";
import { readsOf } from "./spec.ts";

/**
 * How long an exporter whose graph label is on its way waits before it looks again, should the
 * label's echo not queue it (someone removed the label meanwhile).
 */
const LABEL_ECHO_WAIT_MS = 30_000;

/** What {@link ReferableLabels.reconcile} tells the reconcile; see there. */
export interface LabelStep {
  result?: Result;
  resourceVersion?: string | undefined;
}

/** What a label patch sets (a string) or removes (null). */
export type LabelPatch = Record<string, string | null>;

/** Options for {@link ReferableLabels}. */
export interface ReferableLabelsOptions {
  client: Pick<KubeClient, "request">;
  policy: WritePolicy;
  /** Whether another Referable reads `name` (the reference graph). */
  readBy(name: string): boolean;
  logger: Logger;
}

/** One merge patch of `obj`'s labels, at the version read; resolves to the version it made. */
async function patchLabels(
  client: Pick<KubeClient, "request">,
  obj: Referable,
  labels: LabelPatch,
): Promise<string | undefined> {
  const patched = await client.request<Partial<Referable> | undefined>(
    "PATCH",
    resourcePath(REFERABLE_RESOURCE, { name: obj.metadata.name }),
    {
      body: { metadata: { resourceVersion: obj.metadata.resourceVersion, labels } },
      contentType: "application/merge-patch+json",
    },
  );
  return patched?.metadata?.resourceVersion;
}

/** Whether `obj` must be in the graph view; see the module comment. */
export function isGraphMember(obj: Referable, readBy: (name: string) => boolean): boolean {
  const exports = obj.spec?.export;
  if (Array.isArray(exports) && exports.length > 0) return true;
  const reads = readsOf(obj);
  return reads?.name !== undefined || reads?.selector !== undefined || readBy(obj.metadata.name);
}

/** The labels `obj` lacks or has wrong, as a merge patch; undefined when they are right. */
export function labelPatch(obj: Referable, member: boolean): LabelPatch | undefined {
  const labels = (obj.metadata.labels ?? {}) as Record<string, string | undefined>;
  const patch: LabelPatch = {};
  let changes = false;
  const slot = slotOf(obj.metadata.name);
  if (labels[SLOT_LABEL] !== slot) {
    patch[SLOT_LABEL] = slot;
    changes = true;
  }
  if (member && labels[GRAPH_LABEL] !== "true") {
    patch[GRAPH_LABEL] = "true";
    changes = true;
  } else if (!member && labels[GRAPH_LABEL] !== undefined) {
    patch[GRAPH_LABEL] = null;
    changes = true;
  }
  return changes ? patch : undefined;
}

/**
 * Puts back the slot label of a Referable that another replica serves but whose label (set by
 * someone else) names a slot of a bucket this replica lists: its own replica never sees it (it is
 * in no bucket of its own, and a slot is no stray), so the replica that does sees to it, once per
 * version seen, with one merge patch of the label alone (nothing else of the Referable is its to
 * write).
 */
export class SlotRepair {
  private readonly pending = new Set<string>();
  private readonly client: Pick<KubeClient, "request">;
  private readonly logger: Logger;

  constructor(client: Pick<KubeClient, "request">, logger: Logger) {
    this.client = client;
    this.logger = logger;
  }

  /** Looks at a Referable this replica holds but does not serve. */
  check(obj: Referable): void {
    const name = obj.metadata?.name;
    const slot = (obj.metadata?.labels as Record<string, string> | undefined)?.[SLOT_LABEL];
    // No slot at all, or one that is no slot: the stray watch's, which its own replica sees.
    if (!name || slot === undefined || !/^\d{1,4}$/.test(slot) || Number(slot) >= SLOTS) return;
    if (slot === slotOf(name) || this.pending.has(name)) return;
    this.pending.add(name);
    patchLabels(this.client, obj, { [SLOT_LABEL]: slotOf(name) })
      .catch((err: unknown) => {
        // Changed or gone meanwhile: the next version is looked at when it comes.
        if (isApiError(err, 404) || isApiError(err, 409)) return;
        this.logger.warn(
          { referable: name, err: asError(err).message.slice(0, 300) },
          "could not put back a Referable's slot label another replica serves",
        );
      })
      .finally(() => this.pending.delete(name));
  }
}

/** The labels of the Referables a shard serves; see the module comment. */
export class ReferableLabels {
  /** Writers holding a place in the budget, by Referable (deleted once they wrote). */
  private readonly gates = new Map<string, WriteGate>();

  private readonly options: ReferableLabelsOptions;

  constructor(options: ReferableLabelsOptions) {
    this.options = options;
  }

  /**
   * Puts `obj`'s labels right (leading). `result`: the reconcile stops here (the write waits for
   * its place, or conflicted; or an exporter waits for its graph label's echo, which queues it
   * again). `resourceVersion`: the version the write made, which the pass goes on from.
   */
  async reconcile(obj: Referable, leading: boolean): Promise<LabelStep> {
    if (!leading) return {};
    const member = isGraphMember(obj, (name) => this.options.readBy(name));
    const patch = labelPatch(obj, member);
    const exports = obj.spec?.export;
    // An exporter's claim is seen by the other replicas once its graph label is: until then it
    // writes into no target.
    const waits =
      Array.isArray(exports) &&
      exports.length > 0 &&
      (obj.metadata.labels as Record<string, string> | undefined)?.[GRAPH_LABEL] !== "true";
    if (!patch) return waits ? { result: { requeueAfterMs: LABEL_ECHO_WAIT_MS } } : {};
    const written = await this.write(obj, patch);
    if ("result" in written || waits) return { result: written.result ?? DONE };
    return written;
  }

  private async write(obj: Referable, patch: LabelPatch): Promise<LabelStep> {
    const name = obj.metadata.name;
    let gate = this.gates.get(name);
    if (!gate) this.gates.set(name, (gate = new WriteGate(undefined)));
    const admission = pass(this.options.policy, gate);
    if (!admission.write) return { result: { requeueAfterMs: admission.retryAfterMs } };
    this.gates.delete(name);
    try {
      return { resourceVersion: await patchLabels(this.options.client, obj, patch) };
    } catch (err) {
      // Changed or gone since it was read: the event of that change queues it again.
      if (isApiError(err, 404) || isApiError(err, 409)) return { result: DONE };
      this.options.logger.warn(
        { referable: name, err: asError(err).message.slice(0, 300) },
        "could not write a Referable's shard labels; retrying with backoff",
      );
      throw err;
    }
  }
}
