/**
 * Several informers of Referables behind one store (a shard that lists by slot, issue 39): one
 * per bucket served (whole Referables), the stray watch (Referables without a slot label, whole),
 * and the graph view (the Referables a cycle or a one-owner rule can involve, kept compact). A
 * name's object is the first of its bucket's informer, the stray watch and the view that holds
 * it; the store's listeners see one event when that changes, never one per informer.
 *
 * A Referable whose slot label was changed to a slot of another bucket is in that bucket's
 * informer, not its own: it is not in the store (its name's bucket decides who serves it), and
 * `onMisplaced` is told, so the label can be put back.
 *
 * A bucket's informer is opened when the bucket is taken and closed when it is given back. Its
 * objects leave without a DELETED of their own: a Referable the view still holds becomes its
 * compact record (MODIFIED), one it does not holds nothing here any more (DELETED: not this
 * replica's to judge; absent never means "deleted" to the reconciler, which releases only
 * through the finalizers).
 */
import type { Informer } from "../informers/informer.ts";
import { type InformerEvent, type InformerListener, type InformerState } from "../informers/informer.ts";
import type { KubeObject } from "../kube/client.ts";

/** Makes one layer's informer: its selector, whether it keeps its Referables compact, its name in logs. */
export type LayerFactory = (selector: string, compact: boolean, name: string) => Informer;

/** The layers of one shard; see the module comment. */
export class SlotLayers {
  private readonly buckets = new Map<number, Informer>();
  private readonly stray: Informer;
  private readonly view: Informer;
  private readonly listeners: InformerListener[] = [];
  private combined: InformerState = { phase: "Pending" };

  private readonly make: LayerFactory;
  private readonly bucketOf: (name: string) => number;
  private readonly bucketSelector: (bucket: number) => string;
  /** Told of a Referable a bucket's informer holds whose name is of another bucket (its slot label was changed). */
  private readonly onMisplaced: ((obj: KubeObject) => void) | undefined;

  constructor(
    make: LayerFactory,
    bucketOf: (name: string) => number,
    bucketSelector: (bucket: number) => string,
    straySelector: string,
    viewSelector: string,
    onMisplaced?: (obj: KubeObject) => void,
  ) {
    this.onMisplaced = onMisplaced;
    this.make = make;
    this.bucketOf = bucketOf;
    this.bucketSelector = bucketSelector;
    this.stray = this.layer(make(straySelector, false, "stray watch"));
    this.view = this.layer(make(viewSelector, true, "graph view"));
  }

  /** A name's object: its bucket's, else the stray watch's, else the view's. */
  get(name: string): KubeObject | undefined {
    return this.buckets.get(this.bucketOf(name))?.get(undefined, name) ?? this.top(name, undefined);
  }

  /** Every name's object, once each. */
  *list(): Iterable<KubeObject> {
    for (const bucket of this.buckets.keys()) yield* this.held(bucket);
    for (const obj of this.stray.list()) if (this.get(obj.metadata?.name ?? "") === obj) yield obj;
    for (const obj of this.view.list()) if (this.get(obj.metadata?.name ?? "") === obj) yield obj;
  }

  /** The Referables of `bucket` held whole: its informer's, and the stray watch's of that bucket. */
  *listBucket(bucket: number): Iterable<KubeObject> {
    const informer = this.buckets.get(bucket);
    yield* this.held(bucket);
    for (const obj of this.stray.list()) {
      const name = obj.metadata?.name ?? "";
      if (this.bucketOf(name) === bucket && informer?.get(undefined, name) === undefined) yield obj;
    }
  }

  /** What `bucket`'s informer holds of its own (not a Referable under a slot label of it that is not its name's). */
  private *held(bucket: number): Iterable<KubeObject> {
    for (const obj of this.buckets.get(bucket)?.list() ?? [])
      if (this.bucketOf(obj.metadata?.name ?? "") === bucket) yield obj;
  }

  /** How many names are held. */
  get size(): number {
    let n = 0;
    for (const _ of this.list()) n++;
    return n;
  }

  /** Whether `name`'s bucket is open and its first list not in yet (its hand-off serves it then). */
  listing(name: string): boolean {
    return this.buckets.get(this.bucketOf(name))?.state.phase === "Pending";
  }

  /** Synced once the stray watch and the view are (the buckets are taken after). */
  get state(): InformerState {
    return this.combined;
  }

  addListener(listener: InformerListener): void {
    this.listeners.push(listener);
  }

  /** Resolves once the stray watch's and the view's first lists are in. */
  async whenSettled(): Promise<void> {
    await Promise.all([this.stray.whenSettled(), this.view.whenSettled()]);
  }

  start(): void {
    this.stray.start();
    this.view.start();
  }

  async stop(): Promise<void> {
    const all = [this.stray, this.view, ...this.buckets.values()];
    this.buckets.clear();
    await Promise.all(all.map((informer) => informer.stop()));
  }

  /** Opens `bucket`'s informer (once); resolves when its first list is in. */
  openBucket(bucket: number): Promise<void> {
    let informer = this.buckets.get(bucket);
    if (!informer) {
      informer = this.layer(this.make(this.bucketSelector(bucket), false, `bucket ${bucket}`));
      this.buckets.set(bucket, informer);
      informer.start();
    }
    return informer.whenSettled();
  }

  /** Closes `bucket`'s informer; its objects fall back to the stray watch's or the view's, or leave. */
  async closeBucket(bucket: number): Promise<void> {
    const informer = this.buckets.get(bucket);
    if (!informer) return;
    const held = [...this.held(bucket)];
    this.buckets.delete(bucket);
    for (const obj of held) {
      const after = this.top(obj.metadata?.name ?? "", undefined);
      if (after !== obj) this.emit(obj, after);
    }
    await informer.stop();
  }

  private layer(informer: Informer): Informer {
    informer.addListener({
      onEvent: (event) => this.onEvent(informer, event),
      onState: () => this.onState(),
    });
    return informer;
  }

  /** The first of the stray watch and the view to hold `name`, with `layer`'s object as `object`. */
  private top(name: string, layer: { informer: Informer; object: KubeObject | undefined } | undefined) {
    const of = (informer: Informer) =>
      layer?.informer === informer ? layer.object : informer.get(undefined, name);
    return of(this.stray) ?? of(this.view);
  }

  private onEvent(informer: Informer, event: InformerEvent): void {
    const name = event.object.metadata?.name ?? "";
    const bucket = this.buckets.get(this.bucketOf(name));
    if (informer !== this.stray && informer !== this.view && informer !== bucket) {
      // A slot label changed to one of this bucket's: not this replica's to serve, nor in the
      // store; its own replica never sees it, so it is told. (Or a closed bucket's informer,
      // still stopping: its objects have left already.)
      if (event.type !== "DELETED" && [...this.buckets.values()].includes(informer))
        this.onMisplaced?.(event.object);
      return;
    }
    const after = this.get(name);
    const previous = event.type === "DELETED" ? (event.old ?? event.object) : event.old;
    const before =
      informer === bucket
        ? (previous ?? this.top(name, undefined))
        : (bucket?.get(undefined, name) ?? this.top(name, { informer, object: previous }));
    if (before !== after) this.emit(before, after);
  }

  private emit(before: KubeObject | undefined, after: KubeObject | undefined): void {
    const event: InformerEvent =
      after === undefined
        ? { type: "DELETED", object: before!, old: before }
        : { type: before === undefined ? "ADDED" : "MODIFIED", object: after, old: before };
    for (const listener of this.listeners) listener.onEvent(event);
  }

  private onState(): void {
    const states = [this.stray.state, this.view.state];
    const failed = states.find((s) => s.phase === "Failed");
    const next: InformerState =
      failed ?? (states.every((s) => s.phase === "Synced") ? { phase: "Synced" } : { phase: "Pending" });
    if (next.phase === this.combined.phase && next.phase !== "Failed") return;
    this.combined = next;
    for (const listener of this.listeners) listener.onState(next);
  }
}
