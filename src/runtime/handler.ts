/**
 * What an event means for the queue (controller-runtime's `handler`): enqueue the key of the
 * object the event is about ({@link enqueueObject}), or the keys an event maps to
 * ({@link enqueueMapped}, `EnqueueRequestsFromMapFunc`). Handlers only queue keys: the reconcile
 * reads the current state, never the event.
 */
import type { Priority } from "./workqueue.ts";

/** Where a handler puts keys: the controller's queue, behind its admission. */
export interface KeyQueue {
  add(key: string, priority?: Priority): void;
}

/** Turns one event into keys on the queue. */
export type Handler<E> = (event: E, queue: KeyQueue) => void;

/** Queues the key of the event's own object (`keyOf` undefined: nothing). */
export function enqueueObject<E>(keyOf: (event: E) => string | undefined, priority?: Priority): Handler<E> {
  return (event, queue) => {
    const key = keyOf(event);
    if (key !== undefined) queue.add(key, priority);
  };
}

/** Queues every key `map` makes of the event: other objects the change concerns. */
export function enqueueMapped<E>(map: (event: E) => Iterable<string>, priority?: Priority): Handler<E> {
  return (event, queue) => {
    for (const key of map(event)) queue.add(key, priority);
  };
}

/** A channel's events are keys: queued as they are. */
export function enqueueKey(priority?: Priority): Handler<string> {
  return (key, queue) => queue.add(key, priority);
}
