/** The public types of an `Informer`: its state, events, listeners and options. */
import type { KubeClient, KubeObject, WatchEvent } from "../kube/client.ts";
import type { ResourceInfo } from "../kube/discovery.ts";
import type { ListItemFilter } from "../kube/list-stream.ts";
import type { Logger } from "../api/log.ts";
import type { Cached } from "./object-store.ts";
import type { InformerSignal, RestartReason } from "./restart-reason.ts";

/** What an informer knows of its resource. */
export type InformerState =
  | { phase: "Pending" }
  | { phase: "Synced" }
  /** The list was refused or the resource is gone; retried on the backoff. */
  | { phase: "Failed"; reason: "Forbidden" | "KindNotFound"; message: string };

/** A change to one object; `old` is the cached object it replaces, if any. */
export interface InformerEvent<T extends Cached = KubeObject> {
  type: "ADDED" | "MODIFIED" | "DELETED";
  object: T;
  old: T | undefined;
}

/** Receives what an informer learns. Must not throw (what it throws is logged and dropped). */
export interface InformerListener<T extends Cached = KubeObject> {
  onEvent(event: InformerEvent<T>): void;
  onState(state: InformerState): void;
}

/** Options for `Informer`. */
export interface InformerOptions<T extends Cached = KubeObject> {
  client: Pick<KubeClient, "request" | "watch">;
  resource: ResourceInfo;
  /** Only this namespace; all namespaces (or a cluster-scoped kind) when undefined. */
  namespace?: string;
  logger?: Logger;
  /** A watch silent this long is closed and re-opened. @default 90000 */
  watchdogMs?: number;
  /** First backoff after an error. @default 250 */
  minBackoffMs?: number;
  /** Longest backoff. @default 30000 */
  maxBackoffMs?: number;
  /**
   * Most objects per list page (`pageBytes` bounds it lower for large objects): large, as the API
   * server's cost of a paged list grows with the number of pages (see DEFAULT_PAGE_SIZE).
   * @default 5000
   */
  pageSize?: number;
  /**
   * About how many bytes of JSON one list page may hold: the page size adapts to the objects
   * seen so far (the first page has at most 10 objects, so a page of unknown objects stays small).
   * @default 4194304
   */
  pageBytes?: number;
  /**
   * What to keep of an object: called on each object decoded from a list page, a watch event or a
   * refresh, which is dropped afterwards. @default the object without metadata.managedFields
   */
  decode?: (obj: KubeObject) => T;
  /**
   * What a listed object loses before it is parsed, as its bytes arrive: labels `decode` does
   * not keep, managedFields. @default managedFields dropped, with the default `decode`
   */
  itemFilter?: ListItemFilter;
  /**
   * Reads a watch event from its line of JSON in place of `JSON.parse`, for a `decode` that keeps
   * part of each object: the parts it does not keep need never be parsed. Undefined for a line
   * parses it whole. @default every line parsed whole
   */
  parseEvent?: (line: string) => WatchEvent | undefined;
  /**
   * Whether a relisted object tells listeners nothing new. @default equal resourceVersions
   */
  same?: (a: T, b: T) => boolean;
  /** Only objects with these labels (a label selector in its string form, sent to the server). */
  labelSelector?: string;
  /**
   * Which of several informers of one resource this is, in its log lines (e.g. `bucket 3`):
   * their paths are alike, and a selector can be kilobytes long. @default none
   */
  name?: string;
  /**
   * Asked when a list or watch answers 404: true confirms the resource is gone (state
   * `KindNotFound`); false makes the 404 a transient error (retried on the backoff, nothing
   * cleared). Custom resources answer 404 for a moment after an API server restart.
   * @default every 404 means gone
   */
  confirmGone?: () => Promise<boolean>;
  /**
   * The lifetime the server gives each watch, in seconds, as [least, most] (a random value in
   * between, so watches do not end together). Reopening a watch is re-authorised, so this bounds
   * how long a watch outlives the controller's access to its resource.
   * @default [30, 50]
   */
  watchTimeoutSeconds?: [number, number];
  /**
   * Called on every restart, for metrics: its signal (relist, watchdog, error, expired) and why,
   * one of the fixed set {@link RestartReason} (a relist carries the reason of the restart it
   * follows). A failed refresh read counts as an error too.
   */
  onSignal?: (signal: InformerSignal, reason: RestartReason) => void;
}
