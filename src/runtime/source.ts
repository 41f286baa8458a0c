/**
 * Where a controller's events come from (controller-runtime's `source`): a {@link Source} is
 * started with the function it emits to, and says when it has delivered what existed when it
 * started. Two kinds serve every watch here: an informer's events ({@link informerSource}), and
 * a {@link Channel} that the controller's other parts emit to (a resolver push, a drift, a bucket
 * taken over, leadership gained).
 */

/** A change to one object, as an informer tells it; `old` is the object it replaces, if any. */
export interface ObjectEvent<T> {
  type: "ADDED" | "MODIFIED" | "DELETED";
  object: T;
  old: T | undefined;
}

/** Where events come from. */
export interface Source<E> {
  /**
   * Connects the source to `emit`: from now on every event it has goes there. Called once, when
   * the controller is built; it starts nothing that reads the API server (the owner of the
   * cache starts that, in the Manager's order).
   */
  start(emit: (event: E) => void): void;
  /** Resolves once the source has delivered what existed when it started (or gave up). */
  synced(): Promise<void>;
}

/** What {@link informerSource} needs of an informer: its listener, and its first list. */
export interface ListenedInformer<T> {
  addListener(listener: { onEvent(event: ObjectEvent<T>): void; onState(state: unknown): void }): void;
  whenSettled(): Promise<void>;
}

/** The events of an informer (the informer itself is started by whoever owns the cache). */
export function informerSource<T>(informer: ListenedInformer<T>): Source<ObjectEvent<T>> {
  return {
    start: (emit) => informer.addListener({ onEvent: emit, onState: () => undefined }),
    synced: () => informer.whenSettled(),
  };
}

/**
 * A source others emit to (controller-runtime's `source.Channel`); several watches may share
 * it. An event emitted before a controller connected it is dropped: nothing a controller not
 * yet built could do with it.
 */
export class Channel<E> implements Source<E> {
  private readonly sinks: Array<(event: E) => void> = [];

  start(emit: (event: E) => void): void {
    this.sinks.push(emit);
  }

  synced(): Promise<void> {
    return Promise.resolve();
  }

  /** Hands `event` to every watch of this channel. */
  emit(event: E): void {
    for (const sink of this.sinks) sink(event);
  }
}
