/**
 * A small consumer controller for the demo `Task` kind: it resolves `spec.sourceLocationArnRef`
 * with the GenericReference resolver and writes the result to the Task's status.
 *
 * The shape is the one the library is built for:
 * - one list+watch of Tasks keeps a local cache of them;
 * - each Task holds one `resolver.watch` subscription on its reference, so a change of the
 *   source is *pushed* here (the resolver shares one informer per source kind): no polling,
 *   no resync timer;
 * - every event, of a Task or of its source, only enqueues the Task's key; reconcile then reads
 *   the current state (level-based) and computes the resolved Task with `resolveReferences`,
 *   in memory, as ACK does: the spec is never written back;
 * - the status is patched only when it differs from what the API server already has.
 */
import { setTimeout as delay } from "node:timers/promises";
import {
  isApiError,
  isResolutionError,
  resolveReferences,
  type GenericReference,
  type KubeClient,
  type KubeObject,
  type Logger,
  type ReferenceReader,
  type Subscription,
  type WatchCallback,
} from "../../src/index.ts";
import { TASK_GROUP, TASK_PLURAL, TASK_VERSION } from "./task-crd.ts";

/** A Task as the API server returns it. */
export type Task = KubeObject & {
  spec?: { sourceLocationArn?: string; sourceLocationArnRef?: GenericReference };
  status?: TaskStatus;
};

/** What the controller writes to a Task's status. */
export interface TaskStatus {
  sourceLocationArn?: string;
  ready?: boolean;
  reason?: string;
  message?: string;
  observedGeneration?: number;
}

/** What the controller needs from a resolver: one-shot reads and push subscriptions. */
export interface TaskResolver extends ReferenceReader {
  watch(ref: GenericReference, callback: WatchCallback): Subscription;
}

/** Options for {@link TaskController}. */
export interface TaskControllerOptions {
  client: KubeClient;
  resolver: TaskResolver;
  /** Watch Tasks in this namespace only. @default every namespace */
  namespace?: string;
  /** @default a silent logger */
  logger?: Logger;
}

// `fooRef` fills `foo`: the ref path defaults to `${target}Ref`.
const FIELDS = [{ target: "spec.sourceLocationArn" }];
const RETRY_MS = 1000;
const noop = () => undefined;
const silent: Logger = { debug: noop, info: noop, warn: noop, error: noop };

/** Keeps every Task's status in step with the value its reference points at. */
export class TaskController {
  private readonly client: KubeClient;
  private readonly resolver: TaskResolver;
  private readonly logger: Logger;
  private readonly base: string;
  private readonly tasks = new Map<string, Task>();
  /** One subscription per Task, with the reference it was opened for (to notice a change). */
  private readonly subs = new Map<string, { ref: string; sub: Subscription }>();
  private readonly running = new Map<string, Promise<void>>();
  private readonly again = new Set<string>();
  private readonly abort = new AbortController();
  private stream: { close(): void } | undefined;
  private loop: Promise<void> | undefined;

  constructor(options: TaskControllerOptions) {
    this.client = options.client;
    this.resolver = options.resolver;
    this.logger = options.logger ?? silent;
    const ns = options.namespace ? `/namespaces/${options.namespace}` : "";
    this.base = `/apis/${TASK_GROUP}/${TASK_VERSION}${ns}/${TASK_PLURAL}`;
  }

  /**
   * Lists the Tasks, then watches them in the background. Throws when the list is refused (no
   * CRD, no RBAC); retries while the server is busy (a CRD just installed answers 429 until its
   * storage is ready), so that on return every existing Task is known.
   */
  async start(): Promise<void> {
    for (;;) {
      try {
        this.loop = this.run(await this.relist());
        return;
      } catch (err) {
        if (isApiError(err) && err.statusCode !== 429 && err.statusCode < 500) throw err;
        if (this.abort.signal.aborted) return;
        this.logger.warn({ err: (err as Error).message }, "could not list Tasks yet; retrying");
        await sleep(RETRY_MS, this.abort.signal);
      }
    }
  }

  /** Stops watching, closes every subscription and waits for in-flight reconciles. */
  async stop(): Promise<void> {
    this.abort.abort();
    this.stream?.close();
    await this.loop;
    for (const { sub } of this.subs.values()) sub.close();
    this.subs.clear();
    await Promise.allSettled([...this.running.values()]);
  }

  /** Watches from `resourceVersion`; on 410 Gone relists, on other failures retries after a pause. */
  private async run(resourceVersion: string | undefined): Promise<void> {
    let rv = resourceVersion;
    while (!this.abort.signal.aborted) {
      try {
        rv ??= await this.relist();
        rv = await this.watchFrom(rv);
      } catch (err) {
        if (this.abort.signal.aborted) return;
        if (isApiError(err, 410)) rv = undefined;
        this.logger.warn({ err: (err as Error).message }, "the Task watch failed; retrying");
        // A pause after a failure only, so an API server outage is not a hot loop.
        await sleep(RETRY_MS, this.abort.signal);
      }
    }
  }

  /** Lists every Task, replaces the cache with the list and returns its resourceVersion. */
  private async relist(): Promise<string> {
    const list = await this.client.request<{ metadata: { resourceVersion: string }; items: Task[] }>(
      "GET",
      this.base,
    );
    const seen = new Set<string>();
    for (const task of list.items) seen.add(this.upsert(task));
    for (const key of [...this.tasks.keys()]) if (!seen.has(key)) this.remove(key);
    return list.metadata.resourceVersion;
  }

  /**
   * Applies watch events until the server ends the stream; returns the version to resume from,
   * or undefined when that version has expired and a relist is needed.
   */
  private async watchFrom(resourceVersion: string): Promise<string | undefined> {
    if (this.abort.signal.aborted) return resourceVersion;
    let rv = resourceVersion;
    let failure: { code?: number; message?: string } | undefined;
    const stream = this.client.watch(this.base, { resourceVersion, allowWatchBookmarks: true }, (event) => {
      if (event.type === "ERROR") {
        failure = event.object as typeof failure;
        stream.close();
        return;
      }
      rv = event.object.metadata?.resourceVersion ?? rv;
      if (event.type === "DELETED") this.remove(keyOf(event.object));
      else if (event.type !== "BOOKMARK") this.upsert(event.object as Task);
    });
    this.stream = stream;
    await stream.done;
    // 410 Expired: our version is older than etcd keeps, so only a relist can catch up.
    if (failure?.code === 410) return undefined;
    if (failure) throw new Error(`the Task watch ended with an error: ${failure.message}`);
    return rv;
  }

  /** Caches a Task, (re)subscribes when its reference changed, and enqueues it. */
  private upsert(task: Task): string {
    const key = keyOf(task);
    this.tasks.set(key, task);
    const ref = task.spec?.sourceLocationArnRef;
    const refText = JSON.stringify(ref ?? null);
    const current = this.subs.get(key);
    if (current?.ref !== refText) {
      current?.sub.close();
      this.subs.delete(key);
      // The callback only enqueues: reconcile reads the current state, whatever was pushed.
      if (ref) this.subs.set(key, { ref: refText, sub: this.resolver.watch(ref, () => this.enqueue(key)) });
    }
    this.enqueue(key);
    return key;
  }

  private remove(key: string): void {
    this.tasks.delete(key);
    this.subs.get(key)?.sub.close();
    this.subs.delete(key);
  }

  /** Runs one reconcile per key at a time; an event during a run makes it run once more. */
  private enqueue(key: string): void {
    if (this.abort.signal.aborted) return;
    if (this.running.has(key)) {
      this.again.add(key);
      return;
    }
    const run = this.reconcile(key).finally(() => {
      this.running.delete(key);
      if (this.again.delete(key)) this.enqueue(key);
    });
    this.running.set(key, run);
  }

  private async reconcile(key: string): Promise<void> {
    const task = this.tasks.get(key);
    if (!task) return;
    try {
      const desired = await this.desiredStatus(task);
      // Compare with the status the watch last showed. Two quick pushes may both patch before
      // the first patch is echoed back; the second is then a no-op on the server, never wrong.
      if (sameStatus(task.status, desired)) return;
      const { namespace, name } = task.metadata ?? {};
      await this.client.request(
        "PATCH",
        `/apis/${TASK_GROUP}/${TASK_VERSION}/namespaces/${namespace}/${TASK_PLURAL}/${name}/status`,
        {
          // null removes a field in a merge patch, so a value that went away is cleared.
          body: { status: { sourceLocationArn: null, message: null, ...desired } },
          contentType: "application/merge-patch+json",
        },
      );
    } catch (err) {
      if (isApiError(err, 404) || this.abort.signal.aborted) return; // deleted meanwhile, or stopping
      this.logger.warn(
        { task: key, err: (err as Error).message },
        "could not update the Task status; retrying",
      );
      // Nothing else would bring this Task back (its source may never change again), so requeue.
      void sleep(RETRY_MS, this.abort.signal).then(() => this.enqueue(key));
    }
  }

  /** The status the Task should have now; a reference failure is a status, not an exception. */
  private async desiredStatus(task: Task): Promise<TaskStatus> {
    const observedGeneration = task.metadata?.generation;
    try {
      const { object, resolved } = await resolveReferences(this.resolver, task, FIELDS);
      // Nothing resolved means the user set spec.sourceLocationArn (policy IfNotPresent keeps it).
      const reason = resolved[0]?.reason ?? "Specified";
      const arn: unknown = object.spec?.sourceLocationArn;
      if (typeof arn === "string") return { sourceLocationArn: arn, ready: true, reason, observedGeneration };
      if (arn === undefined && reason === "Optional") return { ready: true, reason, observedGeneration };
      const message = `spec.sourceLocationArnRef resolves to ${arn === undefined ? "nothing" : `a ${typeof arn}`}, not a string`;
      return { ready: false, reason: "InvalidValue", message, observedGeneration };
    } catch (err) {
      if (!isResolutionError(err)) throw err;
      // Its reason is stable API (SourceNotFound, FieldNotFound, ...); the resolver pushes again
      // when waiting can change the outcome, so there is nothing to retry here.
      return { ready: false, reason: err.reason, message: err.message, observedGeneration };
    }
  }
}

function keyOf(obj: KubeObject): string {
  return `${obj.metadata?.namespace}/${obj.metadata?.name}`;
}

function sameStatus(have: TaskStatus | undefined, want: TaskStatus): boolean {
  const fields = ["sourceLocationArn", "ready", "reason", "message", "observedGeneration"] as const;
  return fields.every((f) => have?.[f] === want[f]);
}

/** Resolves after `ms`, or at once when `signal` aborts. */
function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return delay(ms, undefined, { signal }).catch(() => undefined);
}
