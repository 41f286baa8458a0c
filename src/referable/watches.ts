/**
 * Every way an event reaches a Referable's key, in one place. Events only queue names: the
 * reconcile reads the Referable and its subscription as they are now.
 *
 * | source                                   | keys                                        |
 * | ---------------------------------------- | ------------------------------------------- |
 * | a Referable changed (not its own echo)   | its name                                    |
 * | a key's or a field's owner changed       | the other claimants of the key or field     |
 * | a cycle among Referables changed         | the Referables in it                        |
 * | a Referable starts or stops reading one  | the one read (its graph label; by slot)     |
 * | a resolver subscription pushed           | the subscriber                              |
 * | an object exported into drifted          | the Referable that exported into it         |
 * | this replica starts leading              | every Referable cached                      |
 * | a bucket taken over (sharded)            | its Referables that may have changed        |
 * | the same bucket, the rest                | its other Referables, on the low lane       |
 *
 * The echo of this replica's own write is dropped (notOwnEcho): it holds what was written, which
 * the reconcile recorded as it wrote it (state.ts's overlay). Skipping it halves the reconciles
 * of a fan-out (one source read by a thousand Referables).
 */
import type { KubeObject } from "../kube/client.ts";
import { Channel, informerSource, type ObjectEvent } from "../runtime/source.ts";
import { controller, type Controller, type ControllerOptions } from "../runtime/controller.ts";
import { enqueueKey, enqueueMapped, enqueueObject } from "../runtime/handler.ts";
import { notOwnEcho } from "../runtime/predicate.ts";
import type { Reconciler } from "../runtime/reconciler.ts";
import type { ShardGate } from "../runtime/shard-gate.ts";
import type { ReferableCache } from "./cache.ts";
import type { ReferableEdges } from "./edges.ts";
import type { BucketHandOff } from "./hand-off.ts";
import type { ReferableStates } from "./state.ts";

/** The controller's name: in its log lines and its metrics' labels. */
export const NAME = "referable";

/** The channels the controller's parts emit to; each is one watch. */
export class ReferableChannels {
  /** A resolver subscription pushed a result. */
  readonly pushed = new Channel<string>();
  /** An object exported into changed. */
  readonly drifted = new Channel<string>();
  /** This replica started leading. */
  readonly leading = new Channel<true>();
}

/** What {@link referableController} connects. */
export interface ReferableWatches {
  cache: ReferableCache;
  states: ReferableStates;
  edges: ReferableEdges;
  channels: ReferableChannels;
  /** Sharded: the hand-off of buckets, and the gate that admits only the keys of those served. */
  handOff?: BucketHandOff | undefined;
  shards?: ShardGate | undefined;
}

const nameOf = (event: ObjectEvent<KubeObject>) => event.object.metadata?.name ?? "";

/** The runtime controller for Referables, built on the watches of the module comment. */
export function referableController(
  watches: ReferableWatches,
  reconciler: Reconciler,
  settings: Omit<ControllerOptions, "name" | "reconciler" | "admit">,
): Controller {
  const { cache, states, edges, channels, handOff } = watches;
  const referables = informerSource(cache);
  const builder = controller(NAME)
    .watches(
      referables,
      enqueueObject(nameOf),
      // A bucket just taken, its list still coming in (by slot): the hand-off serves it once the
      // list is in, those that may have changed first, rather than every event queued as it comes.
      (event) => !cache.listing(nameOf(event)),
      notOwnEcho<KubeObject>({
        written: (obj) => states.get(obj.metadata?.name ?? "")?.overlay?.resourceVersion,
        // The cache shows what was written: the overlay has nothing left to add (viewOf would
        // drop it at the next reconcile, but an echo brings none), so it goes now.
        echoed: (obj) => void (states.get(obj.metadata?.name ?? "")!.overlay = undefined),
      }),
    )
    .watches(edges.handovers, enqueueKey())
    .watches(edges.cycles, enqueueKey())
    .watches(edges.readers, enqueueKey())
    .watches(channels.pushed, enqueueKey())
    .watches(channels.drifted, enqueueKey())
    // A new leader looks at everything: statuses may be stale from the previous leader's last moments.
    .watches(
      channels.leading,
      enqueueMapped(() => namesOf(cache)),
    );
  if (handOff) builder.watches(handOff.served, enqueueKey()).watches(handOff.servedLater, enqueueKey("low"));
  return builder.admit(watches.shards).with(settings).build(reconciler);
}

/** The name of every Referable cached. */
function* namesOf(cache: ReferableCache): Iterable<string> {
  for (const obj of cache.list()) yield obj.metadata?.name ?? "";
}
