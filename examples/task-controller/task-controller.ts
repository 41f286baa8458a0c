/**
 * A small consumer controller for the demo `Task` kind: it resolves `spec.sourceLocationArnRef`
 * with the GenericReference resolver and writes the result to the Task's status.
 *
 * The plumbing (list and watch Tasks, one `resolver.watch` subscription per Task on its
 * reference, a queue that runs one reconcile per Task at a time, retries with backoff) is the
 * library's `createReferenceController`; what is left here is the Task's own logic:
 * `resolveReferences` computes the resolved Task in memory, as ACK does (the spec is never
 * written back), and the status is patched only when it differs from what the watch last showed.
 */
import { ApiException, type KubernetesObject } from "@kubernetes/client-node";
import {
  type HostControllerOptions,
  isResolutionError,
  resolveReferences,
  type GenericReference,
  type ReferenceReader,
  type ReferenceWatcher,
} from "../../src/index.ts";
import { HostController } from "../example-host.ts";
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
export type TaskResolver = ReferenceReader & ReferenceWatcher;

/** Options for {@link TaskController}: where Tasks are, the resolver, a namespace and a logger. */
export type TaskControllerOptions = HostControllerOptions<TaskResolver>;

// `fooRef` fills `foo`: the ref path defaults to `${target}Ref`.
const FIELDS = [{ target: "spec.sourceLocationArn" }];

/** Keeps every Task's status in step with the value its reference points at. */
export class TaskController extends HostController<Task, TaskResolver> {
  constructor(options: TaskControllerOptions) {
    super(options, {
      group: TASK_GROUP,
      version: TASK_VERSION,
      plural: TASK_PLURAL,
      referencesOf: (task) => (task.spec?.sourceLocationArnRef ? [task.spec.sourceLocationArnRef] : []),
    });
  }

  protected async reconcile(task: Task): Promise<void> {
    const desired = await this.desiredStatus(task);
    // Compare with the status the watch last showed. Two quick pushes may both patch before
    // the first patch is echoed back; the second is then a no-op on the server, never wrong.
    if (sameStatus(task.status, desired)) return;
    try {
      // null removes a field in a merge patch, so a value that went away is cleared.
      await this.mergePatch(
        task,
        { status: { sourceLocationArn: null, message: null, ...desired } },
        "status",
      );
    } catch (err) {
      if (err instanceof ApiException && err.code === 404) return; // deleted meanwhile
      throw err; // retried with backoff by the loop
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

function sameStatus(have: TaskStatus | undefined, want: TaskStatus): boolean {
  const fields = ["sourceLocationArn", "ready", "reason", "message", "observedGeneration"] as const;
  return fields.every((f) => have?.[f] === want[f]);
}
