/** A watch on a run's Referables, and the time from a write to what a consumer sees through watches. */
import type { KubeObject } from "../src/kube/client.ts";
import type { ControlPlane } from "../test/harness/control-plane.ts";
import { type Controller, startController } from "./controller.ts";
import { RF } from "./fixtures.ts";
import { log } from "./options.ts";
import { withDeadline } from "./stats.ts";
import type { BenchClient } from "./retry.ts";
import { reopeningWatch, type ReopeningWatch } from "./watch.ts";

/** The Ready reason of the scale floor's statuses (not Ready: the cold start after it writes every one). */
export const FLOOR_REASON = "BenchFloor";
/** Ready: a Ready condition with a reason other than Pending (or the floor's). */
const isReady = (reason: string | undefined) => !!reason && reason !== "Pending" && reason !== FLOOR_REASON;

/** Objects a scenario follows through a watch of their own: a value of each by name, and who is told of a change. */
export interface FollowedTargets {
  values: Map<string, string | undefined>;
  listeners: Set<() => void>;
  close(): void;
}

/** Follows the objects at `path` (from a list, then a watch that reopens itself), keeping `valueOf` each. */
export async function followTargets(
  client: BenchClient,
  path: string,
  valueOf: (object: KubeObject) => string | undefined,
  what: string,
): Promise<FollowedTargets> {
  const values = new Map<string, string | undefined>();
  const listeners = new Set<() => void>();
  const list = await client.request<{ metadata: { resourceVersion: string } }>("GET", path);
  const stream = reopeningWatch(
    client,
    path,
    {
      resourceVersion: list.metadata.resourceVersion,
      onReopen: (why) => log(`${what} watch reopened: ${why}`),
    },
    (e) => {
      if (e.type !== "ADDED" && e.type !== "MODIFIED") return;
      values.set(e.object.metadata!.name!, valueOf(e.object));
      for (const l of listeners) l();
    },
  );
  return { values, listeners, close: () => stream.close() };
}

/**
 * One round of the export benches: writes the source, then waits (60 s at most) until both the
 * Referable's status.value and the target `name` hold the value; each latency from the write's ack.
 */
export async function timeStatusAndTarget(
  watch: ReferableWatch,
  referable: string,
  targets: Pick<FollowedTargets, "values" | "listeners">,
  name: string,
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
      if (!targetAt && targets.values.get(name) === value) targetAt = now;
      if (statusAt && targetAt) {
        off();
        targets.listeners.delete(check);
        resolve();
      }
    };
    const off = watch.onChange(check);
    targets.listeners.add(check);
  });
  await write();
  const acked = performance.now();
  await withDeadline(done, 60_000, `${round}: not seen within 60 s`);
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

/**
 * A started watch on the Referables labelled `bench-set=<label>`, then a controller selecting
 * them: the scenario's pair, each to be closed and stopped by the scenario.
 */
export async function watchAndStart(
  client: BenchClient,
  plane: ControlPlane,
  label: string,
): Promise<{ watch: ReferableWatch; c: Controller }> {
  const watch = new ReferableWatch(client, `bench-set=${label}`);
  await watch.start();
  return { watch, c: await startController(plane.kubeconfigPath, `bench-set=${label}`) };
}
