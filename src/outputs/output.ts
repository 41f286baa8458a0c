/**
 * The seam every output of a Referable's value goes through: its status (status.value), the
 * keys of ConfigMaps and Secrets (spec.export), and, later, any field of any object. An output
 * turns a desired state into writes, lets go of what it wrote, and reports what it observed;
 * it never sleeps for the write policy but says when to look again.
 *
 * A new output: a class implementing {@link Output}, a memory kept in the Referable's state
 * (src/referable/state.ts), one entry where the reconciler runs the outputs
 * (src/referable/reconciler.ts), and its writes admitted by the shared {@link WritePolicy}.
 */
import type { Referable } from "../api/referable.ts";
import type { WritePolicy } from "./write-policy.ts";

export type { WritePolicy };

/**
 * One output. `Desired` is what the Referable wants there, `Observed` what the output found
 * and did (the part of the status it reports), `Memory` what it keeps per Referable between
 * reconciles (owned by the Referable's state, dropped on a change of leader).
 */
export interface Output<Desired, Observed, Memory> {
  /**
   * Makes the output hold `desired` for `owner` (read as it is after this replica's own
   * writes), writing only what differs and only as the write policy allows. Never throws for
   * what the status can report.
   */
  write(owner: Referable, desired: Desired, memory: Memory): Promise<Observed>;
  /**
   * Lets go of everything `owner` wrote there (the Referable is being deleted). Resolves with
   * when to try again when something is left, else undefined.
   */
  release(owner: Referable, memory: Memory): Promise<number | undefined>;
}
