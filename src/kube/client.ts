/**
 * A small raw-JSON client for the Kubernetes API.
 *
 * Why not the generated typed clients of `@kubernetes/client-node`: they turn built-in objects
 * into typed models that drop unknown fields and turn timestamps into `Date`, and field
 * extraction must see exactly what the API server stored. They also build a new connection
 * pool for every request; this client keeps one per instance.
 */
import { createSecureContext } from "node:tls";
import type { KubeConfig } from "@kubernetes/client-node";
import type { Dispatcher } from "undici";
import { asError } from "../api/errors.ts";
import { sleep } from "../timing/sleep.ts";
import { Deadline } from "./deadline.ts";
import { RequestUrls } from "./request-url.ts";
import { verbOf } from "./request-verb.ts";
import { accessFromKubeConfig, type ClusterAccess } from "./access.ts";
import { ListStreamParser, MAX_LIST_ITEM_BYTES, type ListItemFilter } from "./list-stream.ts";
import { Agent, request as undiciRequest, type RequestOptions as UndiciRequestOptions } from "./undici.ts";
import { headerReader, retryAfter, toApiError } from "./api-error.ts";

export { ApiError, isApiError, retryAfter } from "./api-error.ts";

/** A JSON object as the API server returns it. */
export type KubeObject = Record<string, unknown> & {
  apiVersion?: string;
  kind?: string;
  metadata?: ObjectMeta;
};

/** The parts of ObjectMeta this project reads. */
export interface ObjectMeta {
  name?: string;
  namespace?: string;
  uid?: string;
  resourceVersion?: string;
  generation?: number;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  [key: string]: unknown;
}

/** One request as seen by an observer (metrics, benchmarks). */
export interface RequestObservation {
  /** HTTP method, upper case. */
  method: string;
  /** Kubernetes verb when known: get, list, watch, create, update, patch, delete. */
  verb: string;
  /** HTTP status code, or 0 when no response arrived. */
  code: number;
  durationSeconds: number;
}

/** Options for {@link KubeClient}. */
export interface KubeClientOptions {
  /** Where to connect and how to authenticate: a client-node KubeConfig (its current context)... */
  kubeConfig?: KubeConfig;
  /**
   * The context of `kubeConfig` to connect with, instead of its current context (kubectl's
   * `--context`); the KubeConfig itself is not changed. @default the current context
   */
  context?: string;
  /** ...or a {@link ClusterAccess}, e.g. from `loadClusterAccess` (no client-node at run time). */
  access?: ClusterAccess;
  /**
   * Time allowed for a non-watch request, from sending to the end of the body.
   * @default 30000
   */
  requestTimeoutMs?: number;
  /** Called once for every request that ends, for metrics. Must not throw. */
  observe?: (observation: RequestObservation) => void;
  /**
   * Whether an {@link ApiError}'s message quotes the API server's own message. Off by default:
   * that text can quote the object refused (a CRD rule's `messageExpression` may print another
   * of its fields), and the controller's errors become conditions, Events and logs. On for a
   * person reading the errors at a terminal (tests, scripts). The status, the reason code and
   * the field paths of the causes are always there.
   * @default false
   */
  serverMessages?: boolean;
  /**
   * Offer HTTP/2 to the API server. Off by default: over HTTP/1.1 each watch and each request
   * in flight has a connection of its own, which costs far less memory than HTTP/2 streams.
   * @default false
   */
  http2?: boolean;
  /**
   * How long authentication headers are reused before the kubeconfig is asked again (tokens
   * read from a file rotate; exec plugins are slow).
   * @default 10000
   */
  authCacheMs?: number;
  /**
   * How many times a request the API server turned away with 429 Too Many Requests (API
   * Priority and Fairness, a max-inflight limit) is sent again after the `Retry-After` it gave,
   * as client-go does; a 5xx that carries `Retry-After` too. Within the request's own timeout.
   * @default 10
   */
  maxRetries?: number;
}

/**
 * How long a connection may stay idle before it is closed: client-go keeps idle connections
 * 90 s, the API server closes them after 90 s. undici's default of 4 s closed and opened a
 * connection (a TLS handshake on both sides) for about every 30 status writes of a cold start,
 * where the writes in flight rise and fall.
 */
const IDLE_CONNECTION_MS = 30_000;

/** The longest watch event, in characters of JSON (as the longest list item). */
const MAX_WATCH_LINE = MAX_LIST_ITEM_BYTES;

/** Options of one request. */
export interface RequestOptions {
  query?: Record<string, string | number | boolean | undefined>;
  body?: unknown;
  /** Content-Type of the body. @default "application/json" */
  contentType?: string;
  signal?: AbortSignal;
  /** Overrides the client's request timeout for this request. */
  timeoutMs?: number;
  /** Told the size of the response body in UTF-16 code units (about bytes for JSON), e.g. to size list pages. */
  onBodyLength?: (length: number) => void;
  /**
   * For a list: called with each item of a successful answer as soon as its bytes are in, and
   * the answer then resolves to the list without them (`items` empty). The page is never held
   * whole, so it costs one item at a time whatever the server put in it (see list-stream.ts).
   * An item larger than 16 MiB of JSON fails the request (etcd keeps at most 1.5 MiB an object).
   */
  onItem?: (item: KubeObject) => void;
  /** With `onItem`: what each item loses before it is parsed (see list-stream.ts). */
  itemFilter?: ListItemFilter;
  /**
   * Makes the answer of a successful request from its (non-empty) text, instead of `JSON.parse`:
   * for a caller that keeps one field of a large answer (see json-peek.ts).
   */
  decode?: (text: string) => unknown;
  /**
   * Send the request as this user (impersonation headers), so the API server's authorization
   * and admission judge it as theirs: the client's own credentials must be allowed to
   * `impersonate` the user and each group.
   */
  impersonate?: Impersonation;
}

/** A user to act as, with its groups (the `Impersonate-User` and `Impersonate-Group` headers). */
export interface Impersonation {
  user: string;
  groups: readonly string[];
}

/** A watch event as sent on the wire. */
export interface WatchEvent {
  type: "ADDED" | "MODIFIED" | "DELETED" | "BOOKMARK" | "ERROR";
  object: KubeObject;
}

/** Handle of an open watch stream. */
export interface WatchStream {
  /** Settles when the stream ends: resolves on a clean close, rejects on an error. */
  readonly done: Promise<void>;
  /** Closes the stream; `done` then resolves. */
  close(): void;
}

interface AuthState {
  headers: Record<string, string>;
  dispatcher: Dispatcher;
  expires: number;
}

/** A raw-JSON Kubernetes API client with one connection pool. */
export class KubeClient {
  readonly server: string;
  private readonly access: ClusterAccess;
  private readonly requestTimeoutMs: number;
  private readonly authCacheMs: number;
  private readonly observe: ((o: RequestObservation) => void) | undefined;
  private readonly http2: boolean;
  private readonly maxRetries: number;
  private readonly serverMessages: boolean;
  private auth: AuthState | undefined;
  private authPending: Promise<AuthState> | undefined;
  private dispatcher: Dispatcher | undefined;
  private openWatches = 0;
  private readonly urls: RequestUrls;

  constructor(options: KubeClientOptions) {
    const access =
      options.access ??
      (options.kubeConfig ? accessFromKubeConfig(options.kubeConfig, options.context) : undefined);
    if (!access) throw new Error("a KubeClient needs a kubeConfig or an access");
    if (options.context !== undefined && !options.kubeConfig)
      throw new Error("a KubeClient's context chooses a context of its kubeConfig: give a kubeConfig");
    this.access = access;
    this.server = access.server.replace(/\/+$/, "");
    this.urls = new RequestUrls(this.server);
    this.requestTimeoutMs = options.requestTimeoutMs ?? 30_000;
    this.authCacheMs = options.authCacheMs ?? 10_000;
    this.observe = options.observe;
    this.http2 = options.http2 ?? false;
    this.maxRetries = options.maxRetries ?? 10;
    this.serverMessages = options.serverMessages ?? false;
  }

  /** Sends one request and returns the parsed JSON body; throws {@link ApiError} on a non-2xx. */
  async request<T = KubeObject>(method: string, path: string, options: RequestOptions = {}): Promise<T> {
    const started = performance.now();
    const deadline = new Deadline(
      Math.max(1, Math.ceil(options.timeoutMs ?? this.requestTimeoutMs)),
      options.signal,
    );
    const signal = deadline.signal;
    let code = 0;
    try {
      const { headers, dispatcher } = await this.authenticate();
      // undici's request(), not fetch(): a third of fetch's CPU per request (no WHATWG streams,
      // Headers or Response objects), which is most of an idle controller's work (Lease
      // renewals) and bounds a busy one's status writes.
      const init: UndiciRequestOptions = {
        method: method as Dispatcher.HttpMethod,
        headers: { ...headers, accept: "application/json" },
        signal,
      };
      if (options.impersonate) {
        const sent = init.headers as Record<string, string | string[]>;
        sent["impersonate-user"] = options.impersonate.user;
        if (options.impersonate.groups.length > 0)
          sent["impersonate-group"] = [...options.impersonate.groups];
      }
      if (options.body !== undefined) {
        init.body = typeof options.body === "string" ? options.body : JSON.stringify(options.body);
        (init.headers as Record<string, string>)["content-type"] = options.contentType ?? "application/json";
      }
      const url = this.urls.of(path, options.query);
      for (let attempt = 0; ; attempt++) {
        const response = await undiciRequest(dispatcher, url.origin, url.path, init);
        code = response.statusCode;
        if (options.onItem && code >= 200 && code < 300) return (await readList(response, options)) as T;
        const text = await response.body.text();
        options.onBodyLength?.(text.length);
        if (code >= 200 && code < 300)
          return (text ? (options.decode ? options.decode(text) : JSON.parse(text)) : undefined) as T;
        const retryAfterMs =
          attempt < this.maxRetries ? retryAfter(code, headerReader(response.headers)) : undefined;
        if (retryAfterMs === undefined) throw toApiError(method, path, code, text, this.serverMessages);
        // The server did not act on the request (a 429 is sent before any work): sending it
        // again is safe whatever the verb. The wait ends early if the request is cancelled.
        await sleep(retryAfterMs, signal);
        if (signal.aborted) throw toApiError(method, path, code, text, this.serverMessages);
      }
    } finally {
      deadline.end();
      this.observe?.({
        method,
        verb: verbOf(method, path, options.query),
        code,
        durationSeconds: (performance.now() - started) / 1000,
      });
    }
  }

  /**
   * Opens a watch (`?watch=true`) and calls `onEvent` for each event, in order. The stream has
   * no timeout of its own: callers supervise it (see the informers' watchdog). `parseLine`, when
   * given, reads an event from its line of JSON in place of `JSON.parse` (for a caller that keeps
   * part of each object); its undefined means the line is parsed whole.
   */
  watch(
    path: string,
    query: RequestOptions["query"],
    onEvent: (event: WatchEvent) => void,
    parseLine?: (line: string) => WatchEvent | undefined,
  ): WatchStream {
    const controller = new AbortController();
    let closed = false;
    this.openWatches++;
    const done = (async () => {
      const started = performance.now();
      let code = 0;
      try {
        const { headers, dispatcher } = await this.authenticate();
        const init: UndiciRequestOptions = {
          method: "GET",
          headers: { ...headers, accept: "application/json" },
          signal: controller.signal,
        };
        const url = this.urls.of(path, { ...query, watch: true });
        const response = await undiciRequest(dispatcher, url.origin, url.path, init);
        code = response.statusCode;
        if (code < 200 || code >= 300)
          throw toApiError("GET", path, code, await response.body.text(), this.serverMessages);
        const decoder = new TextDecoder();
        // Pieces of the line being received: a 1.5 MiB object arrives in many chunks, and
        // searching or re-joining the whole buffer on each one would copy it over and over.
        let pieces: string[] = [];
        let pending = 0;
        for await (const chunk of response.body) {
          let text = decoder.decode(chunk as Uint8Array, { stream: true });
          let newline: number;
          while ((newline = text.indexOf("\n")) >= 0) {
            pieces.push(text.slice(0, newline));
            text = text.slice(newline + 1);
            const line = (pieces.length === 1 ? pieces[0]! : pieces.join("")).trim();
            pieces = [];
            pending = 0;
            if (!line) continue;
            let event: WatchEvent | undefined;
            try {
              event = parseLine?.(line) ?? (JSON.parse(line) as WatchEvent);
            } catch (err) {
              throw new Error(`watch ${path}: the server sent a line that is not JSON`, { cause: err });
            }
            onEvent(event);
            if (closed) return;
          }
          if (text) {
            pieces.push(text);
            pending += text.length;
            // One event is one object (etcd keeps at most 1.5 MiB of one): a line without end
            // is a broken or hostile server, never a reason to hold more.
            if (pending > MAX_WATCH_LINE)
              throw new Error(`watch ${path}: an event is longer than ${MAX_WATCH_LINE} characters`);
          }
        }
      } catch (err) {
        if (closed) return;
        throw asError(err);
      } finally {
        this.openWatches--;
        this.observe?.({
          method: "GET",
          verb: "watch",
          code,
          durationSeconds: (performance.now() - started) / 1000,
        });
      }
    })();
    // The caller may attach its handler later; never leave a rejection unhandled meanwhile.
    done.catch(() => undefined);
    return {
      done,
      close: () => {
        closed = true;
        controller.abort();
      },
    };
  }

  /** How many watch streams this client holds open now. */
  get activeWatches(): number {
    return this.openWatches;
  }

  /** Closes the connection pool. Requests after this fail. */
  async close(): Promise<void> {
    const dispatcher = this.dispatcher;
    this.dispatcher = undefined;
    this.auth = undefined;
    await dispatcher?.close().catch(() => undefined);
  }

  private async authenticate(): Promise<AuthState> {
    if (this.auth && this.auth.expires > Date.now()) return this.auth;
    this.authPending ??= this.loadAuth().finally(() => {
      this.authPending = undefined;
    });
    return this.authPending;
  }

  private async loadAuth(): Promise<AuthState> {
    const headers = await this.access.headers();
    // One pool for the life of the client: a new pool per refresh would drop every connection.
    const dispatcher = (this.dispatcher ??=
      (await this.access.dispatcher?.()) ?? (await this.ownDispatcher()));
    this.auth = { headers, dispatcher, expires: Date.now() + this.authCacheMs };
    return this.auth;
  }

  /**
   * An undici Agent with the access's TLS settings, over HTTP/1.1 unless `http2` is set: undici
   * offers HTTP/2 by default and the API server takes it; then every watch is an nghttp2 stream
   * with buffers of its own, and an aborted stream can still raise an error after the pool is
   * closed.
   *
   * No undici headers or body timeouts: every request has its own deadline (an AbortSignal), and
   * a watch has the informer's watchdog. undici keeps those timeouts on a shared timer that ticks
   * twice a second while any is armed, and an open watch always arms one: an idle controller
   * woke 120 times a minute for nothing.
   */
  private async ownDispatcher(): Promise<Dispatcher> {
    const tls = this.server.startsWith("https:") ? await this.access.tls() : {};
    const { ca, cert, key, ...rest } = tls;
    // One secure context for every connection: given the CA, certificate and key, tls.connect
    // parses them again for each socket (a fifth of a cold start's connection cost).
    const secureContext =
      ca !== undefined || cert !== undefined || key !== undefined
        ? createSecureContext({ ca, cert, key })
        : undefined;
    const connect = {
      keepAlive: true,
      keepAliveInitialDelay: 30_000,
      ...rest,
      ...(secureContext && { secureContext }),
    };
    return new Agent({
      allowH2: this.http2,
      connect,
      headersTimeout: 0,
      bodyTimeout: 0,
      keepAliveTimeout: IDLE_CONNECTION_MS,
    });
  }
}

/**
 * Reads a list answer item by item (options.onItem), then returns the list without its items.
 * A failure half-way (a broken stream, an item over the bound, what onItem throws) ends the
 * response, so the connection never carries the rest of the page for nothing.
 */
async function readList(response: Dispatcher.ResponseData, options: RequestOptions): Promise<unknown> {
  const parser = new ListStreamParser(options.onItem as (item: unknown) => void, options.itemFilter);
  try {
    for await (const chunk of response.body) parser.push(chunk as Buffer);
  } catch (err) {
    response.body.destroy();
    throw asError(err);
  }
  options.onBodyLength?.(parser.length);
  return parser.end();
}
