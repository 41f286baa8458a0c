/** A watch on a run's Referables, and the time from a write to what a consumer sees through watches. */
import type { KubeObject } from "../src/kube/client.ts";
import { RF } from "./fixtures.ts";
import { log } from "./options.ts";
import type { BenchClient } from "./retry.ts";
import { reopeningWatch, type ReopeningWatch } from "./watch.ts";

/** The Ready reason of the scale floor's statuses (not Ready: the cold start after it writes every one). */
export const FLOOR_REASON = "BenchFloor";
/** Ready: a Ready condition with a reason other than Pending (or the floor's). */
export const isReady = (reason: string | undefined) =>
  !!reason && reason !== "Pending" && reason !== FLOOR_REASON;

/** A target the export benches follow: its values by name, and the listeners told of a change. */
export interface FollowedTarget {
  values: Map<string, string | undefined>;
  listeners: Set<() => void>;
  name: string;
}

/**
 * One round of the export benches: writes the source, then waits (60 s at most) until both the
 * Referable's status.value and the target hold the value; each latency from the write's ack.
 */
export async function timeStatusAndTarget(
  watch: ReferableWatch,
  referable: string,
  target: FollowedTarget,
  value: string,
  write: () => Promise<unknown>,
  round: string,
): Promise<{ status: number; target: number }> {
  let statusAt = 0;
  let targetAt = 0;
  const done = new Promise<void>((resolve) => {
    const check = () => {
      const now = performance.now();
      if (!statusAt && watch.latest.get(referable)?.value === value) statusAt = now;
      if (!targetAt && target.values.get(target.name) === value) targetAt = now;
      if (statusAt && targetAt) {
        off();
        target.listeners.delete(check);
        resolve();
      }
    };
    const off = watch.onChange(check);
    target.listeners.add(check);
  });
  await write();
  const acked = performance.now();
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([
    done,
    new Promise((_, reject) => {
      timer = setTimeout(() => reject(new Error(`${round}: not seen within 60 s`)), 60_000);
    }),
  ]).finally(() => clearTimeout(timer));
  // A watch event may be handled before the PATCH's own response: that is a latency of 0.
  return { status: Math.max(0, statusAt - acked), target: Math.max(0, targetAt - acked) };
}

/**
 * One watch on this run's Referables, remembering of each what the bench reads (its value,
 * Ready reason, uid, resourceVersion; the whole status only when asked: 100,000 of them are
 * the bench's heap) and how many are Ready, counted as events come (a poll of a count must not walk 100,000
 * entries every 50 ms).
 */
export class ReferableWatch {
  readonly latest = new Map<
    string,
    { value: unknown; values: unknown; reason: string | undefined; rv: string; uid: string; status?: unknown }
  >();
  private ready = 0;
  private stream: ReopeningWatch | undefined;
  private listeners = new Set<(name: string) => void>();
  private readonly client: BenchClient;
  private readonly selector: string;
  private readonly keepStatus: boolean;
  constructor(client: BenchClient, selector: string, keepStatus = true) {
    this.client = client;
    this.selector = selector;
    this.keepStatus = keepStatus;
  }

  /** Lists page by page (a list of 100,000 in one response takes the API server past its deadline). */
  private async list(): Promise<string> {
    let token: string | undefined;
    for (;;) {
      const page = await this.client.request<{
        metadata: { resourceVersion: string; continue?: string };
        items: KubeObject[];
      }>("GET", RF, {
        query: { labelSelector: this.selector, limit: 5000, ...(token ? { continue: token } : {}) },
        timeoutMs: 120_000,
      });
      for (const item of page.items) this.record(item);
      token = page.metadata.continue || undefined;
      if (!token) return page.metadata.resourceVersion;
    }
  }

  async start(): Promise<void> {
    const resourceVersion = await this.list();
    this.stream = reopeningWatch(
      this.client,
      RF,
      {
        resourceVersion,
        query: { labelSelector: this.selector },
        relist: () => this.list(),
        onReopen: (why) => log(`Referable watch reopened: ${why}`),
      },
      (e) => {
        if (e.type === "ADDED" || e.type === "MODIFIED") this.record(e.object);
        if (e.type === "DELETED") this.forget(e.object.metadata!.name!);
      },
    );
  }

  private record(obj: KubeObject): void {
    const status = (obj.status ?? {}) as {
      value?: unknown;
      values?: unknown;
      conditions?: Array<{ type: string; reason: string }>;
    };
    const name = obj.metadata!.name!;
    const reason = status.conditions?.find((c) => c.type === "Ready")?.reason;
    const before = this.latest.get(name);
    this.ready += Number(isReady(reason)) - Number(isReady(before?.reason));
    this.latest.set(name, {
      value: status.value,
      values: status.values,
      reason,
      rv: obj.metadata!.resourceVersion!,
      uid: obj.metadata!.uid!,
      ...(this.keepStatus && { status }),
    });
    for (const l of this.listeners) l(name);
  }

  private forget(name: string): void {
    this.ready -= Number(isReady(this.latest.get(name)?.reason));
    this.latest.delete(name);
  }

  onChange(listener: (name: string) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  readyCount(): number {
    return this.ready;
  }

  close(): void {
    this.stream?.close();
  }
}
