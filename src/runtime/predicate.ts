/**
 * Which events reach a handler (controller-runtime's `predicate`). A predicate filters work, it
 * never decides progress: a reconcile that needs another pass asks for it in its result, so an
 * event dropped here is one with nothing to do.
 */
import type { ObjectEvent } from "./source.ts";

/** Whether an event goes on to its handler. */
export type Predicate<E> = (event: E) => boolean;

/** What {@link notOwnEcho} needs: the version this controller's last write of an object made. */
export interface WrittenVersions<T> {
  /** The resourceVersion this controller's own last write of the event's object made, if known. */
  written(object: T): string | undefined;
  /** Told of an echo dropped: the cache now shows that write. */
  echoed?(object: T): void;
}

/**
 * Drops the echo of the controller's own write: a MODIFIED whose version is the one that write
 * made holds what was written, which the reconcile already accounts for (it recorded the write
 * as it made it).
 */
export function notOwnEcho<T extends { metadata?: { resourceVersion?: string | undefined } }>(
  writes: WrittenVersions<T>,
): Predicate<ObjectEvent<T>> {
  return (event) => {
    if (event.type !== "MODIFIED") return true;
    const version = writes.written(event.object);
    if (version === undefined || version !== event.object.metadata?.resourceVersion) return true;
    writes.echoed?.(event.object);
    return false;
  };
}
