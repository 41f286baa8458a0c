/**
 * Tools for fault tests against a private control plane: a TCP proxy that can make the
 * controller's connections go silent, etcd compaction through etcd's JSON gateway, the API
 * server's audit log of status writes, a recorder of every Referable status the API server
 * shows, and an in-process controller whose status writes fail to a plan.
 *
 * None of these may touch the shared control plane of the Jest global setup: they take the
 * private plane's kubeconfig, URLs and files explicitly.
 */
import { readFile, writeFile } from "node:fs/promises";
import { createServer, connect, type Server, type Socket } from "node:net";
import { dirname, join } from "node:path";
import { KubeConfig } from "@kubernetes/client-node";
import type { ReferableController } from "../../src/referable/controller.ts";
import {
  ApiError,
  isApiError,
  KubeClient,
  type KubeObject,
  type RequestOptions,
} from "../../src/kube/client.ts";
import type { Logger } from "../../src/api/log.ts";
import type { ControllerMetrics } from "../../src/referable/metrics.ts";
import type { Resolver } from "../../src/resolver/resolver.ts";
import { startControlPlane, type PrivateControlPlane, type StartOptions } from "./control-plane.ts";
import { SHARD_LABEL, startTestController } from "./controller.ts";

// ---------------------------------------------------------------------------------------------
// A TCP proxy that can go silent

/** What the proxy knows of one connection. */
export interface ProxiedConnection {
  readonly id: number;
  /** performance.now() when the client connected. */
  readonly openedAt: number;
  /** performance.now() when the server last sent bytes on it (0 when never). */
  readonly lastServerDataAt: number;
  /**
   * For how long the server has been sending since the client last sent anything: a response
   * that keeps streaming (a watch with events) grows it; a request answered at once leaves it ~0.
   */
  readonly streamingForMs: number;
  /** Whether it is frozen now. */
  readonly frozen: boolean;
  /** Bytes that arrived while frozen and were never forwarded, both directions. */
  readonly withheldBytes: number;
}

interface Pipe {
  id: number;
  client: Socket;
  upstream: Socket;
  openedAt: number;
  lastServerDataAt: number;
  /** When the server first sent after the client's last bytes (0: not since). */
  serverSinceClientAt: number;
  frozen: boolean;
  withheldBytes: number;
}

/**
 * A TCP proxy on 127.0.0.1 in front of one host:port. TLS passes through untouched (the API
 * server's certificate names 127.0.0.1, so a proxy there is a valid server for the client).
 * {@link freeze} makes connections silent: nothing is forwarded either way and nothing is
 * closed, as when a NAT entry or a load balancer drops a flow without a reset.
 */
export class TcpProxy {
  private readonly server: Server;
  private readonly pipes = new Map<number, Pipe>();
  private listeningPort = 0;
  private nextId = 1;
  private freezeNew = false;
  private withheld = 0;

  private constructor(host: string, port: number) {
    this.server = createServer((client) => this.accept(client, host, port));
  }

  /** Starts a proxy to `target` (an http(s) URL or host:port). */
  static async start(target: string): Promise<TcpProxy> {
    const url = new URL(target.includes("://") ? target : `tcp://${target}`);
    const proxy = new TcpProxy(url.hostname, Number(url.port));
    await new Promise<void>((resolve, reject) => {
      proxy.server.once("error", reject);
      proxy.server.listen(0, "127.0.0.1", () => resolve());
    });
    const address = proxy.server.address();
    if (typeof address !== "object" || !address) throw new Error("the proxy has no address");
    proxy.listeningPort = address.port;
    return proxy;
  }

  /** The port it listens on, on 127.0.0.1. */
  get port(): number {
    return this.listeningPort;
  }

  /** https://127.0.0.1:PORT */
  get url(): string {
    return `https://127.0.0.1:${this.port}`;
  }

  /** The open connections, oldest first. */
  get connections(): ProxiedConnection[] {
    return [...this.pipes.values()].map(view);
  }

  /** Bytes withheld so far by frozen connections (those destroyed since included). */
  get withheldBytes(): number {
    return this.withheld;
  }

  /**
   * Freezes the open connections that `filter` picks (all when absent), and with
   * `newConnections` every connection accepted from now on too (a total blackout). Returns how
   * many open connections were frozen.
   */
  freeze(options: { filter?: (c: ProxiedConnection) => boolean; newConnections?: boolean } = {}): number {
    let frozen = 0;
    for (const pipe of this.pipes.values()) {
      if (pipe.frozen) continue;
      if (options.filter && !options.filter(view(pipe))) continue;
      pipe.frozen = true;
      frozen++;
    }
    if (options.newConnections) this.freezeNew = true;
    return frozen;
  }

  /**
   * Ends the freeze for new connections. With `destroyFrozen` (the default) the frozen ones are
   * destroyed (what a client finds when it writes to a flow the network dropped long ago);
   * without, they stay silent until their client gives up on them, so a client that only
   * notices silence (a watchdog) sees nothing but silence. Returns how many were destroyed.
   */
  thaw({ destroyFrozen = true }: { destroyFrozen?: boolean } = {}): number {
    this.freezeNew = false;
    if (!destroyFrozen) return 0;
    let destroyed = 0;
    for (const pipe of [...this.pipes.values()]) {
      if (!pipe.frozen) continue;
      this.drop(pipe);
      destroyed++;
    }
    return destroyed;
  }

  /** Destroys every connection (both sides), frozen or not. */
  reset(): void {
    for (const pipe of [...this.pipes.values()]) this.drop(pipe);
  }

  /** Stops listening and destroys every connection. */
  async close(): Promise<void> {
    this.reset();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private accept(client: Socket, host: string, port: number): void {
    const upstream = connect({ host, port });
    const pipe: Pipe = {
      id: this.nextId++,
      client,
      upstream,
      openedAt: performance.now(),
      lastServerDataAt: 0,
      serverSinceClientAt: 0,
      frozen: this.freezeNew,
      withheldBytes: 0,
    };
    this.pipes.set(pipe.id, pipe);
    client.setNoDelay(true);
    upstream.setNoDelay(true);
    // Frozen data is read and dropped rather than left in the kernel: the peers' writes still
    // succeed (nothing tells them the flow is dead) and the bytes can be counted.
    client.on("data", (chunk: Buffer) => {
      pipe.serverSinceClientAt = 0;
      if (pipe.frozen) this.withhold(pipe, chunk.length);
      else upstream.write(chunk);
    });
    upstream.on("data", (chunk: Buffer) => {
      pipe.lastServerDataAt = performance.now();
      if (!pipe.serverSinceClientAt) pipe.serverSinceClientAt = pipe.lastServerDataAt;
      if (pipe.frozen) this.withhold(pipe, chunk.length);
      else client.write(chunk);
    });
    // A frozen flow hides the other side's end too; the client's own close is always honoured
    // (it is local to the client), and then the upstream half is of no use to anyone.
    client.on("end", () => {
      if (!pipe.frozen) upstream.end();
    });
    upstream.on("end", () => {
      if (!pipe.frozen) client.end();
    });
    client.on("close", () => this.drop(pipe));
    upstream.on("close", () => {
      if (!pipe.frozen) this.drop(pipe);
    });
    client.on("error", () => undefined);
    upstream.on("error", () => undefined);
  }

  private withhold(pipe: Pipe, bytes: number): void {
    pipe.withheldBytes += bytes;
    this.withheld += bytes;
  }

  private drop(pipe: Pipe): void {
    if (!this.pipes.delete(pipe.id)) return;
    pipe.client.destroy();
    pipe.upstream.destroy();
  }
}

function view(p: Pipe): ProxiedConnection {
  return {
    id: p.id,
    openedAt: p.openedAt,
    lastServerDataAt: p.lastServerDataAt,
    streamingForMs: p.serverSinceClientAt ? p.lastServerDataAt - p.serverSinceClientAt : 0,
    frozen: p.frozen,
    withheldBytes: p.withheldBytes,
  };
}

/** Writes a copy of the (JSON) kubeconfig at `kubeconfigPath` whose server is `server`; returns its path. */
export async function kubeconfigVia(kubeconfigPath: string, server: string, tag: string): Promise<string> {
  const config = JSON.parse(await readFile(kubeconfigPath, "utf8")) as {
    clusters: Array<{ cluster: { server: string } }>;
  };
  for (const c of config.clusters) c.cluster.server = server;
  // Beside the original, so it goes when the control plane's folder is removed.
  const path = join(dirname(kubeconfigPath), `kubeconfig-${tag}`);
  await writeFile(path, JSON.stringify(config, null, 2));
  return path;
}

/**
 * An admin client of the control plane whose kubeconfig is at `kubeconfigPath`. `serverMessages`
 * keeps the API server's own words in its errors (a test reading a refusal); off, as the
 * controller runs, by default (KubeClientOptions.serverMessages).
 */
export function clientFor(kubeconfigPath: string, serverMessages = false): KubeClient {
  const kc = new KubeConfig();
  kc.loadFromFile(kubeconfigPath);
  return new KubeClient({ kubeConfig: kc, serverMessages });
}

/**
 * A private control plane for the test file `name` (its log lines marked `[name control-plane]`)
 * and an admin client of it; the caller closes the client and stops the plane.
 */
export async function startPrivatePlane(
  name: string,
  options: Omit<StartOptions, "private" | "log"> = {},
): Promise<{ plane: PrivateControlPlane; admin: KubeClient }> {
  const plane = await startControlPlane({
    ...options,
    private: true,
    log: (line) => process.stderr.write(`[${name} control-plane] ${line}\n`),
  });
  return { plane, admin: clientFor(plane.kubeconfigPath, true) };
}

// ---------------------------------------------------------------------------------------------
// etcd

async function etcdPost<T>(etcdUrl: string, path: string, body: unknown): Promise<T> {
  const res = await fetch(`${etcdUrl}${path}`, {
    method: "POST",
    body: JSON.stringify(body),
    headers: { "Content-Type": "application/json" },
    signal: AbortSignal.timeout(10_000),
  });
  const text = await res.text();
  if (!res.ok) throw new Error(`etcd ${path} answered ${res.status}: ${text.slice(0, 300)}`);
  return JSON.parse(text) as T;
}

/** etcd's current revision (what kube-apiserver calls the resourceVersion of the whole store). */
export async function etcdRevision(etcdUrl: string): Promise<number> {
  const answer = await etcdPost<{ header?: { revision?: string } }>(etcdUrl, "/v3/kv/range", {
    key: Buffer.from("\0").toString("base64"),
    limit: 1,
  });
  const revision = Number(answer.header?.revision);
  if (!Number.isSafeInteger(revision) || revision <= 0)
    throw new Error(`etcd gave no revision: ${JSON.stringify(answer)}`);
  return revision;
}

/** Compacts etcd's history up to `revision` (physically); every older revision is then Gone. */
export async function compactEtcd(etcdUrl: string, revision: number): Promise<void> {
  await etcdPost(etcdUrl, "/v3/kv/compaction", { revision: String(revision), physical: true });
}

// ---------------------------------------------------------------------------------------------
// The audit log of status writes

/** An audit policy that records every write of a Referable's status, with its request body. */
export const STATUS_WRITE_AUDIT_POLICY: Record<string, unknown> = {
  apiVersion: "audit.k8s.io/v1",
  kind: "Policy",
  omitStages: ["RequestReceived"],
  rules: [
    {
      level: "Request",
      verbs: ["patch", "update"],
      resources: [{ group: "referable.dev", resources: ["referables/status"] }],
    },
    { level: "None" },
  ],
};

/** One write of a Referable's status, as the API server's audit log recorded it. */
export interface StatusWrite {
  referable: string;
  /** HTTP status of the answer. */
  code: number;
  /** When the API server received it (ms since the epoch). */
  receivedAt: number;
  /** The status the request wrote (the value of the JSON patch's `add /status`), if it parsed. */
  status: Record<string, unknown> | undefined;
}

/** Every status write in the audit log at `path` (only those completed: stage ResponseComplete). */
export async function readStatusWrites(path: string): Promise<StatusWrite[]> {
  const text = await readFile(path, "utf8").catch(() => "");
  const writes: StatusWrite[] = [];
  for (const line of text.split("\n")) {
    if (!line.trim()) continue;
    const event = JSON.parse(line) as {
      stage?: string;
      objectRef?: { resource?: string; subresource?: string; name?: string };
      responseStatus?: { code?: number };
      requestReceivedTimestamp?: string;
      requestObject?: unknown;
    };
    if (event.stage !== "ResponseComplete") continue;
    if (event.objectRef?.resource !== "referables" || event.objectRef.subresource !== "status") continue;
    let status: Record<string, unknown> | undefined;
    if (Array.isArray(event.requestObject)) {
      const add = (event.requestObject as Array<{ op?: string; path?: string; value?: unknown }>).find(
        (op) => op.path === "/status",
      );
      status = add?.value as Record<string, unknown> | undefined;
    }
    writes.push({
      referable: event.objectRef.name ?? "",
      code: event.responseStatus?.code ?? 0,
      receivedAt: Date.parse(event.requestReceivedTimestamp ?? ""),
      status,
    });
  }
  return writes;
}

// ---------------------------------------------------------------------------------------------
// A recorder of every Referable status the API server shows

/** One version of a Referable as a watch (or list) showed it. */
export interface SeenReferable {
  name: string;
  resourceVersion: string;
  status: Record<string, unknown> & { value?: unknown; values?: unknown[] };
  reason: string | undefined;
  /** Date.now() when seen. */
  at: number;
}

const RF = "/apis/referable.dev/v1alpha1/referables";

/**
 * Watches the Referables of a shard and records every version it is shown, reconnecting with
 * backoff across API server outages (and relisting on 410). A version written and overwritten
 * while it was disconnected can be missed; what it records was really stored.
 */
export class ReferableRecorder {
  readonly seen: SeenReferable[] = [];
  private readonly client: KubeClient;
  private readonly labelSelector: string;
  private running = false;
  private loop: Promise<void> | undefined;
  private stream: { close(): void } | undefined;
  private wake: (() => void) | undefined;
  /** How many times the watch was re-established. */
  reconnects = 0;

  constructor(client: KubeClient, shard: string) {
    this.client = client;
    this.labelSelector = `${SHARD_LABEL}=${shard}`;
  }

  /** Starts recording; resolves after the first list. */
  async start(): Promise<void> {
    this.running = true;
    const rv = await this.list();
    this.loop = this.run(rv);
  }

  async stop(): Promise<void> {
    this.running = false;
    this.stream?.close();
    this.wake?.();
    await this.loop;
  }

  private record(obj: KubeObject): void {
    const status = (obj.status ?? {}) as SeenReferable["status"];
    const conditions = (status.conditions ?? []) as Array<{ type?: string; reason?: string }>;
    this.seen.push({
      name: obj.metadata?.name ?? "",
      resourceVersion: obj.metadata?.resourceVersion ?? "",
      status,
      reason: conditions.find((c) => c.type === "Ready")?.reason,
      at: Date.now(),
    });
  }

  private async list(): Promise<string> {
    const list = await this.client.request<{ metadata: { resourceVersion: string }; items: KubeObject[] }>(
      "GET",
      RF,
      { query: { labelSelector: this.labelSelector }, timeoutMs: 5_000 },
    );
    for (const item of list.items) this.record(item);
    return list.metadata.resourceVersion;
  }

  private async run(startRv: string): Promise<void> {
    let rv: string | undefined = startRv;
    let failures = 0;
    while (this.running) {
      try {
        rv ??= await this.list();
        let gone = false;
        const stream = this.client.watch(
          RF,
          { labelSelector: this.labelSelector, resourceVersion: rv, allowWatchBookmarks: true },
          (event) => {
            if (event.type === "ERROR") {
              gone = true;
              stream.close();
              return;
            }
            rv = event.object.metadata?.resourceVersion ?? rv;
            if (event.type === "ADDED" || event.type === "MODIFIED") this.record(event.object);
          },
        );
        this.stream = stream;
        await stream.done;
        if (gone) rv = undefined;
        failures = 0;
      } catch (err) {
        if (isApiError(err, 410)) rv = undefined;
        failures++;
      }
      if (!this.running) break;
      this.reconnects++;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, Math.min(2_000, 50 * 2 ** Math.min(failures, 6)));
        this.wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Status writes that fail to a plan

/** How one status write fails. */
export type WriteFault =
  /** 409 Conflict from the API server. */
  | "conflict"
  /** 500 Internal Server Error. */
  | "internal"
  /** 503 Service Unavailable (an API server shutting down, or etcd unavailable). */
  | "unavailable"
  /** The connection was reset before the request reached the server. */
  | "reset"
  /** The server applied the write, but the connection was reset before the answer came back. */
  | "reset-after-apply";

/** One attempt of a status write, as {@link FlakyStatusClient} saw it. */
export interface WriteAttempt {
  /** performance.now() when the attempt was made. */
  at: number;
  /** The fault injected, or "ok" when the write was passed through. */
  outcome: WriteFault | "ok";
}

const STATUS_PATH = /^\/apis\/referable\.dev\/v1alpha1\/referables\/([^/]+)\/status$/;

/** A status write as `request` received it. */
interface InterceptedWrite {
  method: string;
  path: string;
  options: RequestOptions;
}

/** Our client's `watch`, passed through, and its `request`, through {@link intercept}. */
abstract class InterceptingClient {
  protected readonly inner: KubeClient;

  constructor(inner: KubeClient) {
    this.inner = inner;
  }

  readonly watch: KubeClient["watch"] = (path, query, onEvent) => this.inner.watch(path, query, onEvent);

  readonly request = <T = KubeObject>(
    method: string,
    path: string,
    options: RequestOptions = {},
  ): Promise<T> => this.intercept<T>(method, path, options);

  protected abstract intercept<T>(method: string, path: string, options: RequestOptions): Promise<T>;
}

/**
 * Our client's `request` and `watch`, passed through, except each status write of a Referable,
 * which goes to `statusWrite` with the Referable's name.
 */
abstract class StatusWriteInterceptor extends InterceptingClient {
  protected intercept<T>(method: string, path: string, options: RequestOptions): Promise<T> {
    const name = method === "PATCH" ? STATUS_PATH.exec(path)?.[1] : undefined;
    if (name === undefined) return this.inner.request<T>(method, path, options);
    return this.statusWrite<T>(name, { method, path, options });
  }

  protected abstract statusWrite<T>(name: string, write: InterceptedWrite): Promise<T>;
}

/**
 * Our client's `request` and `watch`, passed through, except that the status writes of the
 * Referables in `plan` fail as planned, in order, before they pass. Records every attempt.
 */
export class FlakyStatusClient extends StatusWriteInterceptor {
  readonly attempts = new Map<string, WriteAttempt[]>();
  private readonly plan: Map<string, WriteFault[]>;

  constructor(inner: KubeClient, plan: Record<string, WriteFault[]>) {
    super(inner);
    this.plan = new Map(Object.entries(plan).map(([name, faults]) => [name, [...faults]]));
  }

  protected async statusWrite<T>(name: string, { method, path, options }: InterceptedWrite): Promise<T> {
    const fault = this.plan.get(name)?.shift();
    const attempts = this.attempts.get(name) ?? [];
    this.attempts.set(name, attempts);
    attempts.push({ at: performance.now(), outcome: fault ?? "ok" });
    switch (fault) {
      case undefined:
        return this.inner.request<T>(method, path, options);
      case "conflict":
        throw new ApiError(method, path, 409, "Conflict", "the object has been modified; please try again");
      case "internal":
        throw new ApiError(method, path, 500, "InternalError", "an error on the server has prevented it");
      case "unavailable":
        throw new ApiError(
          method,
          path,
          503,
          "ServiceUnavailable",
          "the server is currently unable to handle it",
        );
      case "reset":
        throw connectionReset();
      case "reset-after-apply":
        await this.inner.request<T>(method, path, options);
        throw connectionReset();
    }
  }

  /** Faults planned but not injected yet. */
  remaining(name: string): number {
    return this.plan.get(name)?.length ?? 0;
  }
}

/** One status write held by {@link GatedStatusClient}, and how it ended. */
export interface HeldWrite {
  name: string;
  /** The HTTP status of the answer once released (0: a failure without an answer). */
  readonly code: Promise<number>;
  /** Sends it on. */
  release(): void;
}

/**
 * Our client's `request` and `watch`, passed through, except that while a Referable is held
 * its status writes wait (as on a slow network) until the test releases them. `afterWrite` runs
 * when a released write has been answered, before the controller sees the answer.
 */
export class GatedStatusClient extends StatusWriteInterceptor {
  readonly held: HeldWrite[] = [];
  private readonly holding = new Set<string>();
  private readonly afterWrite: ((name: string, code: number) => Promise<void>) | undefined;

  constructor(inner: KubeClient, afterWrite?: (name: string, code: number) => Promise<void>) {
    super(inner);
    this.afterWrite = afterWrite;
  }

  /** Holds the status writes of `name` from now on. */
  hold(name: string): void {
    this.holding.add(name);
  }

  protected async statusWrite<T>(name: string, { method, path, options }: InterceptedWrite): Promise<T> {
    if (!this.holding.has(name)) return this.inner.request<T>(method, path, options);
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    let answered!: (code: number) => void;
    const code = new Promise<number>((resolve) => (answered = resolve));
    this.held.push({ name, code, release });
    await released;
    let status = 0;
    try {
      const answer = await this.inner.request<T>(method, path, options);
      status = 200;
      return answer;
    } catch (err) {
      status = isApiError(err) ? err.statusCode : 0;
      throw err;
    } finally {
      await this.afterWrite?.(name, status);
      answered(status);
    }
  }
}

/**
 * Our client's `request` and `watch`, passed through, recording the method and path of every
 * request that is not a GET, until the process "dies": once a request for which `severAfter`
 * says so has been answered, every request after it fails as a reset connection does, so
 * nothing more of this client reaches the API server, as after a SIGKILL right after that
 * request (the answer is lost with the process). Deterministic: the window between two writes
 * is chosen by the request, not by a clock.
 */
export class SeverableClient extends InterceptingClient {
  readonly writes: string[] = [];
  /** Resolves once severed. */
  readonly severed: Promise<void>;
  private cut = false;
  private onSevered!: () => void;
  private readonly severAfter: ((method: string, path: string) => boolean) | undefined;

  constructor(inner: KubeClient, severAfter?: (method: string, path: string) => boolean) {
    super(inner);
    this.severAfter = severAfter;
    this.severed = new Promise<void>((resolve) => (this.onSevered = resolve));
  }

  protected async intercept<T>(method: string, path: string, options: RequestOptions): Promise<T> {
    if (this.cut) throw connectionReset();
    const answer = await this.inner.request<T>(method, path, options);
    if (method !== "GET") this.writes.push(`${method} ${path}`);
    if (!this.cut && this.severAfter?.(method, path)) {
      this.cut = true;
      this.onSevered();
      throw connectionReset();
    }
    return answer;
  }
}

/** What undici's fetch throws when the peer resets the connection. */
function connectionReset(): Error {
  const cause = Object.assign(new Error("read ECONNRESET"), {
    code: "ECONNRESET",
    errno: -104,
    syscall: "read",
  });
  return new TypeError("fetch failed", { cause });
}

/** A logger that keeps every line, for assertions. */
export interface MemoryLogger extends Logger {
  readonly lines: Array<{ level: string; fields: Record<string, unknown>; message: string }>;
}

export function memoryLogger(): MemoryLogger {
  const lines: MemoryLogger["lines"] = [];
  const at =
    (level: string) =>
    (fields: Record<string, unknown>, message: string): void => {
      lines.push({ level, fields, message });
    };
  const logger: MemoryLogger = {
    lines,
    debug: at("debug"),
    info: at("info"),
    warn: at("warn"),
    error: at("error"),
    child: () => logger,
  };
  return logger;
}

/** An in-process controller (wired as src/process/main.ts wires it) over a given status-writing client. */
export interface InProcessController {
  controller: ReferableController;
  resolver: Resolver;
  metrics: ControllerMetrics;
  logger: MemoryLogger;
  stop(): Promise<void>;
}

/**
 * Starts the controller in this process, scoped to `shard`, reading through `client` (a real
 * one, also used by the resolver) and writing statuses through `writer` (e.g. a
 * {@link FlakyStatusClient} over `client`).
 */
export async function startInProcessController(options: {
  client: KubeClient;
  writer: Pick<KubeClient, "request" | "watch">;
  shard: string;
  /** The controller's own source policy. @default neither Secrets nor a denied kind */
  policy?: { allowSecrets: boolean; denyKinds: string[] };
}): Promise<InProcessController> {
  const logger = memoryLogger();
  const policy = options.policy ?? { allowSecrets: false, denyKinds: [] };
  const started = await startTestController({
    client: options.client,
    shard: options.shard,
    build: {
      writer: options.writer,
      logger,
      allowSecrets: policy.allowSecrets,
      denyKinds: policy.denyKinds,
      // The resolver's own default: these tests time what a production controller does.
      kindRetryMs: [1000, 60_000],
    },
  });
  return { ...started, logger };
}
