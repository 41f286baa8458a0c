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
  ApiException,
  CustomObjectsApi,
  makeInformer,
  PatchStrategy,
  setHeaderOptions,
  type Informer,
  type KubeConfig,
  type KubernetesObject,
} from "@kubernetes/client-node";
import {
  isResolutionError,
  resolveReferences,
  type GenericReference,
  type Logger,
  type ReferenceReader,
  type Subscription,
  type WatchCallback,
} from "../../src/index.ts";
import { TASK_GROUP, TASK_PLURAL, TASK_VERSION } from "./task-crd.ts";

/** A Task as the API server returns it. */
export type Task = KubernetesObject & {
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
  /** Where to read Tasks and patch their status (with `@kubernetes/client-node`). */
  kubeConfig: KubeConfig;
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
  private readonly api: CustomObjectsApi;
  private readonly informer: Informer<Task>;
  private readonly resolver: TaskResolver;
  private readonly logger: Logger;
  private readonly tasks = new Map<string, Task>();
  /** One subscription per Task, with the reference it was opened for (to notice a change). */
  private readonly subs = new Map<string, { ref: string; sub: Subscription }>();
  private readonly running = new Map<string, Promise<void>>();
  private readonly again = new Set<string>();
  private readonly abort = new AbortController();

  constructor(options: TaskControllerOptions) {
    this.api = options.kubeConfig.makeApiClient(CustomObjectsApi);
    this.resolver = options.resolver;
    this.logger = options.logger ?? silent;
    const namespace = options.namespace;
    const group = TASK_GROUP;
    const version = TASK_VERSION;
    const plural = TASK_PLURAL;
    // client-node's informer: list, then watch from the list's resourceVersion, relisting on
    // 410 Gone. It keeps its own cache too; this controller keeps `tasks` to stay explicit.
    this.informer = makeInformer<Task>(
      options.kubeConfig,
      `/apis/${group}/${version}${namespace ? `/namespaces/${namespace}` : ""}/${plural}`,
      () =>
        namespace
          ? this.api.listNamespacedCustomObject({ group, version, namespace, plural })
          : this.api.listClusterCustomObject({ group, version, plural }),
    );
    this.informer.on("add", (task) => this.upsert(task));
    this.informer.on("update", (task) => this.upsert(task));
    this.informer.on("delete", (task) => this.remove(keyOf(task)));
  }

  /**
   * Lists the Tasks, then watches them in the background. Throws when the list is refused (no
   * CRD, no RBAC); retries while the server is busy (a CRD just installed answers 429 until its
   * storage is ready), so that on return every existing Task is known.
   */
  async start(): Promise<void> {
    for (;;) {
      // The informer reports a failed list or watch on "error" and stops, rather than throwing.
      let failure: unknown;
      const onFailure = (err: unknown) => void (failure ??= err);
      this.informer.on("error", onFailure);
      try {
        await this.informer.start();
      } finally {
        this.informer.off("error", onFailure);
      }
      if (failure === undefined) break;
      if (!transient(failure) || this.abort.signal.aborted) throw failure;
      this.logger.warn({ err: describe(failure) }, "could not list Tasks yet; retrying");
      await sleep(RETRY_MS, this.abort.signal);
    }
    // From now on a failure stops the informer: start it again (from its last resourceVersion)
    // after a pause, so an API server outage is not a hot loop.
    this.informer.on("error", (err: unknown) => {
      if (this.abort.signal.aborted) return;
      this.logger.warn({ err: describe(err) }, "the Task watch failed; retrying");
      void sleep(RETRY_MS, this.abort.signal).then(async () => {
        if (!this.abort.signal.aborted) await this.informer.start();
      });
    });
  }

  /** Stops watching, closes every subscription and waits for in-flight reconciles. */
  async stop(): Promise<void> {
    this.abort.abort();
    await this.informer.stop();
    for (const { sub } of this.subs.values()) sub.close();
    this.subs.clear();
    await Promise.allSettled([...this.running.values()]);
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
      await this.api.patchNamespacedCustomObjectStatus(
        {
          group: TASK_GROUP,
          version: TASK_VERSION,
          plural: TASK_PLURAL,
          namespace: task.metadata?.namespace ?? "",
          name: task.metadata?.name ?? "",
          // null removes a field in a merge patch, so a value that went away is cleared.
          body: { status: { sourceLocationArn: null, message: null, ...desired } },
        },
        setHeaderOptions("Content-Type", PatchStrategy.MergePatch),
      );
    } catch (err) {
      if (statusOf(err) === 404 || this.abort.signal.aborted) return; // deleted meanwhile, or stopping
      this.logger.warn({ task: key, err: describe(err) }, "could not update the Task status; retrying");
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

function keyOf(obj: KubernetesObject): string {
  return `${obj.metadata?.namespace}/${obj.metadata?.name}`;
}

/** The HTTP status of a client-node failure: `code` of an ApiException, `statusCode` of a watch's. */
function statusOf(err: unknown): number | undefined {
  if (err instanceof ApiException) return err.code;
  const code = (err as { statusCode?: unknown } | undefined)?.statusCode;
  return typeof code === "number" ? code : undefined;
}

/** Whether waiting can help: no answer at all, too many requests, or a server error. */
function transient(err: unknown): boolean {
  const code = statusOf(err);
  return code === undefined || code === 429 || code >= 500;
}

function describe(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

function sameStatus(have: TaskStatus | undefined, want: TaskStatus): boolean {
  const fields = ["sourceLocationArn", "ready", "reason", "message", "observedGeneration"] as const;
  return fields.every((f) => have?.[f] === want[f]);
}

/** Resolves after `ms`, or at once when `signal` aborts. */
function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return delay(ms, undefined, { signal }).catch(() => undefined);
}
