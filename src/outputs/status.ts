/**
 * The status output: a Referable's status written through the status subresource, as a JSON
 * patch that replaces it whole, with the uid and the resourceVersion it was computed from as
 * preconditions (see {@link statusPatch}). Admitted by the write policy like
 * every output: a wait comes back as `deferred`, never as a sleep.
 */
import { REFERABLE_RESOURCE, type Referable, type ReferableStatus } from "../api/referable.ts";
import { isApiError, type KubeClient } from "../kube/client.ts";
import { peekMetadataString, UNREADABLE } from "../kube/json-peek.ts";
import { resourcePath } from "../kube/resource-path.ts";
import { silentLogger, type Logger } from "../api/log.ts";
import { TerminalError } from "../runtime/reconciler.ts";
import type { Output } from "./output.ts";
import { pass, type WriteGate, type WritePolicy } from "./write-policy.ts";

/**
 * A JSON patch (RFC 6902) that replaces the whole status of the object with `uid`. Not a merge
 * patch: merging would keep keys that an object-valued `value` has lost. Two preconditions: the
 * `test` of the uid, so a status is never written onto a re-created object of the same name
 * (422); and the resourceVersion the status was computed from, so a write computed from a state
 * someone has since changed (another leader's write, a newer spec) fails with 409 Conflict
 * instead of overtaking it.
 */
export function statusPatch(
  uid: string | undefined,
  next: ReferableStatus,
  resourceVersion?: string,
): unknown[] {
  const ops: unknown[] = [];
  if (uid) ops.push({ op: "test", path: "/metadata/uid", value: uid });
  if (resourceVersion) ops.push({ op: "replace", path: "/metadata/resourceVersion", value: resourceVersion });
  ops.push({ op: "add", path: "/status", value: next });
  return ops;
}

/** The status a Referable should have, and the version of it that status was computed from. */
export interface DesiredStatus {
  status: ReferableStatus;
  /** The resourceVersion precondition: the version the status was computed from. */
  baseVersion: string | undefined;
}

/** What writing a status did. */
export type StatusOutcome =
  | { result: "written"; resourceVersion: string | undefined }
  /** The write policy holds it back: look again after this many ms. */
  | { result: "deferred"; retryAfterMs: number }
  /** Gone (404): nothing to write. (A 422, refused in a way retrying cannot mend, throws a TerminalError.) */
  | { result: "dropped" }
  /** The Referable changed since the version the status was computed from (409): compute again. */
  | { result: "conflict" };

/**
 * The status output's memory per Referable: its share of the write policy. The gate is kept only
 * while it knows more than the last write: a write admitted from a full gate holding no place in
 * the budget leaves the gate a bucket full until then would be after taking a token at
 * `admittedAt`, so it goes, and is made again from that time when next needed. Most Referables
 * write once in a while: one replica kept some 150 bytes of gate for each of them.
 */
export interface StatusMemory {
  gate: WriteGate | undefined;
  /** When (the policy's clock, whole ms, rounded up) the write that let the gate go was admitted. */
  admittedAt: number | undefined;
}

/** Options for {@link StatusOutput}. */
export interface StatusOutputOptions {
  client: Pick<KubeClient, "request">;
  policy: WritePolicy;
  logger?: Logger;
  /** Told of every write and its result, for metrics. Must not throw. */
  onWrite?: (result: "success" | "error" | "conflict") => void;
  /** Told of every write the policy held back, by why. Must not throw. */
  onDeferred?: (reason: "rate" | "budget") => void;
}

/** What the controller keeps of a status write's answer (the whole Referable). */
interface Written {
  metadata?: { resourceVersion?: string | undefined };
}

/**
 * The answer's resourceVersion, read without parsing the rest of the Referable (its
 * managedFields, spec and status): a parse per write was a noticeable part of a cold start.
 */
function writtenVersion(text: string): Written {
  const resourceVersion = peekMetadataString(text, "resourceVersion");
  return resourceVersion === UNREADABLE ? (JSON.parse(text) as Written) : { metadata: { resourceVersion } };
}

/**
 * Writes statuses; see the module comment. Only the write half of an {@link Output}: a status
 * goes with its Referable, so there is nothing to let go of.
 */
export class StatusOutput implements Pick<Output<DesiredStatus, StatusOutcome, StatusMemory>, "write"> {
  private readonly options: StatusOutputOptions;
  private readonly logger: Logger;

  constructor(options: StatusOutputOptions) {
    this.options = options;
    this.logger = options.logger ?? silentLogger;
  }

  /** A new Referable's memory. */
  memory(): StatusMemory {
    return { gate: undefined, admittedAt: undefined };
  }

  async write(owner: Referable, desired: DesiredStatus, memory: StatusMemory): Promise<StatusOutcome> {
    const policy = this.options.policy;
    const gate = (memory.gate ??= policy.gateAfter(memory.admittedAt));
    const full = gate.reservedUntil === undefined && gate.bucket?.full(policy.clock()) === true;
    const admission = pass(policy, gate);
    if (admission.write && full) {
      // Read after the token was taken, rounded up: the gate made again is never more generous.
      memory.admittedAt = Math.ceil(policy.clock());
      memory.gate = undefined;
    }
    if (!admission.write) {
      // Over the Referable's rate: coalesced, the look after the wait computes from the latest
      // result. Over the budget: a place is reserved; the look after the wait writes in it.
      if (admission.reason !== "reserved") this.options.onDeferred?.(admission.reason);
      return { result: "deferred", retryAfterMs: admission.retryAfterMs };
    }
    const name = owner.metadata.name;
    try {
      const path = resourcePath(REFERABLE_RESOURCE, { name, subresource: "status" });
      const updated = await this.options.client.request<Written>("PATCH", path, {
        body: statusPatch(owner.metadata.uid, desired.status, desired.baseVersion),
        contentType: "application/json-patch+json",
        decode: writtenVersion,
      });
      this.options.onWrite?.("success");
      return { result: "written", resourceVersion: updated.metadata?.resourceVersion };
    } catch (err) {
      if (isApiError(err, 404)) return { result: "dropped" }; // deleted meanwhile: nothing to write
      if (isApiError(err, 422)) {
        // The uid precondition failed (the object was re-created: its own events follow), or the
        // API server's schema refused the status. Retrying the same write cannot help; a new
        // result will bring a new write.
        this.options.onWrite?.("error");
        throw new TerminalError(
          `the API server refused the status: ${(err as Error).message.slice(0, 300)}`,
          {
            cause: err,
          },
        );
      }
      if (isApiError(err, 409)) {
        // Changed since (another leader's write, a spec edit): recompute from the newer version.
        this.options.onWrite?.("conflict");
        return { result: "conflict" };
      }
      this.options.onWrite?.("error");
      throw err;
    }
  }
}
