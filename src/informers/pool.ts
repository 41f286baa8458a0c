/**
 * Shared informers: one per resource and scope, started on first use, reference-counted, and
 * stopped when the last user releases it (after a short linger, so a user that comes straight
 * back does not pay for a relist).
 */
import type { KubeClient } from "../kube/client.ts";
import type { ResourceInfo } from "../kube/discovery.ts";
import { childLogger, silentLogger, type Logger } from "../api/log.ts";
import { Informer, type Cached, type InformerOptions } from "./informer.ts";
import type { KubeObject } from "../kube/client.ts";

/** A claim on a shared informer; release it exactly once. */
export interface InformerLease<T extends Cached = KubeObject> {
  readonly informer: Informer<T>;
  release(): void;
}

/** Options for {@link InformerPool}. */
export interface InformerPoolOptions<T extends Cached = KubeObject> {
  client: Pick<KubeClient, "request" | "watch">;
  logger?: Logger;
  /** How long an informer nobody holds is kept before it is stopped. @default 10000 */
  lingerMs?: number;
  /** Passed to every informer. */
  informer?: Pick<
    InformerOptions,
    "watchdogMs" | "minBackoffMs" | "maxBackoffMs" | "pageSize" | "pageBytes" | "onSignal"
  >;
  /** Options of the informer of one pool key: what it keeps of each object, how it confirms a 404. */
  perInformer?: (
    key: string,
    resource: ResourceInfo,
  ) => Pick<InformerOptions<T>, "decode" | "same" | "confirmGone" | "itemFilter">;
}

interface Entry<T extends Cached> {
  informer: Informer<T>;
  holders: number;
  lingerTimer: NodeJS.Timeout | undefined;
}

/** The pool key of a resource and scope. */
export function informerKey(resource: ResourceInfo, namespace: string | undefined): string {
  const scope = resource.namespaced && namespace ? namespace : "*";
  return `${resource.group}/${resource.version}/${resource.resource}@${scope}`;
}

/** Shared, reference-counted informers; see the module comment. */
export class InformerPool<T extends Cached = KubeObject> {
  private readonly entries = new Map<string, Entry<T>>();
  /** Informers closed for want of users whose stop() has not resolved yet. */
  private readonly closing = new Set<Promise<void>>();
  private readonly options: InformerPoolOptions<T>;
  private readonly logger: Logger;
  private stopped = false;

  constructor(options: InformerPoolOptions<T>) {
    this.options = options;
    this.logger = options.logger ?? silentLogger;
  }

  /** Takes a claim on the informer of `resource` in `namespace` (all namespaces when undefined). */
  acquire(resource: ResourceInfo, namespace?: string): InformerLease<T> {
    if (this.stopped) throw new Error("the informer pool is stopped");
    const key = informerKey(resource, namespace);
    let entry = this.entries.get(key);
    if (!entry) {
      const informer = new Informer<T>({
        ...this.options.informer,
        ...this.options.perInformer?.(key, resource),
        client: this.options.client,
        resource,
        namespace,
        logger: childLogger(this.logger, { informer: key }),
      });
      entry = { informer, holders: 0, lingerTimer: undefined };
      this.entries.set(key, entry);
      informer.start();
      this.logger.debug({ informer: key }, "informer started");
    }
    clearTimeout(entry.lingerTimer);
    entry.lingerTimer = undefined;
    entry.holders++;
    const held = entry;
    let released = false;
    return {
      informer: held.informer,
      release: () => {
        if (released) return;
        released = true;
        this.release(key, held);
      },
    };
  }

  /** How many informers run now (lingering ones included). */
  get size(): number {
    return this.entries.size;
  }

  /** The running informers' keys, for diagnostics. */
  keys(): string[] {
    return [...this.entries.keys()];
  }

  /** Stops every informer, and resolves once those closed earlier have stopped too. */
  async stop(): Promise<void> {
    this.stopped = true;
    const entries = [...this.entries.values()];
    this.entries.clear();
    await Promise.all([
      ...entries.map((e) => {
        clearTimeout(e.lingerTimer);
        return e.informer.stop();
      }),
      ...this.closing,
    ]);
  }

  private release(key: string, entry: Entry<T>): void {
    entry.holders--;
    if (entry.holders > 0 || this.entries.get(key) !== entry) return;
    const lingerMs = this.options.lingerMs ?? 10_000;
    const close = () => {
      if (entry.holders > 0 || this.entries.get(key) !== entry) return;
      this.entries.delete(key);
      // Kept until stopped, so that stop() does not resolve while a watch is still closing.
      const stopping = entry.informer.stop().finally(() => this.closing.delete(stopping));
      this.closing.add(stopping);
      this.logger.debug({ informer: key }, "informer stopped: no more users");
    };
    if (lingerMs <= 0) close();
    else {
      entry.lingerTimer = setTimeout(close, lingerMs);
      entry.lingerTimer.unref?.();
    }
  }
}
