/**
 * The demo `Task` CustomResourceDefinition, built in code so that `spec.sourceLocationArnRef`
 * embeds the library's own `genericReferenceSchema`: the API server then refuses a malformed
 * reference (both `name` and `external`, no `fieldPath`, a bad apiVersion) when it is written,
 * and `kubectl explain task.spec.sourceLocationArnRef` documents every field.
 */
import { genericReferenceSchema, type JSONSchemaProps } from "../../src/index.ts";
import { namespacedCrd } from "../example-host.ts";

/** The Task's API group. */
export const TASK_GROUP = "demo.referable.dev";
/** The Task's API version. */
export const TASK_VERSION = "v1alpha1";
/** The Task's plural resource name. */
export const TASK_PLURAL = "tasks";

const spec: JSONSchemaProps = {
  type: "object",
  description: "What the task needs: the ARN of its source location, given directly or by reference.",
  properties: {
    sourceLocationArn: {
      type: "string",
      description:
        "ARN of the source location. When set, it wins over sourceLocationArnRef (policy IfNotPresent); " +
        "when empty, the controller resolves the reference into status.sourceLocationArn.",
    },
    // Embedded as it is: the schema is structural, with its own descriptions and CEL rules.
    sourceLocationArnRef: genericReferenceSchema,
  },
  "x-kubernetes-validations": [
    {
      rule: "has(self.sourceLocationArn) || has(self.sourceLocationArnRef)",
      message: "set sourceLocationArn or sourceLocationArnRef",
    },
  ],
};

const status: JSONSchemaProps = {
  type: "object",
  description: "What the controller observed.",
  properties: {
    sourceLocationArn: { type: "string", description: "The ARN in use, resolved or as given." },
    ready: { type: "boolean", description: "Whether sourceLocationArn is known." },
    reason: {
      type: "string",
      description:
        "Why: a resolver reason (Available, SourceNotFound, ...), or Specified when spec.sourceLocationArn is set.",
    },
    message: { type: "string", description: "What to do when not ready." },
    observedGeneration: {
      type: "integer",
      format: "int64",
      description: "The generation this status is for.",
    },
  },
};

/** Returns the Task CRD (`tasks.demo.referable.dev`): namespaced, with the status subresource. */
export function taskCustomResourceDefinition(): Record<string, unknown> {
  return namespacedCrd({
    group: TASK_GROUP,
    version: TASK_VERSION,
    kind: "Task",
    plural: TASK_PLURAL,
    spec,
    status,
    columns: [
      { name: "Ready", type: "boolean", jsonPath: ".status.ready" },
      { name: "Reason", type: "string", jsonPath: ".status.reason" },
      { name: "ARN", type: "string", jsonPath: ".status.sourceLocationArn", priority: 1 },
    ],
  });
}

/**
 * Creates the Task CRD (an existing one is kept) and waits until it is Established, with a
 * deadline; a newly installed CRD serves nothing before that.
 */
export async function installTaskCrd(
  client: { request: <T>(method: string, path: string, options?: { body?: unknown }) => Promise<T> },
  timeoutMs = 30_000,
): Promise<void> {
  const name = `${TASK_PLURAL}.${TASK_GROUP}`;
  try {
    await client.request("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", {
      body: taskCustomResourceDefinition(),
    });
  } catch (err) {
    if ((err as { statusCode?: number }).statusCode !== 409) throw err; // already installed
  }
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const crd = await client.request<{ status?: { conditions?: Array<{ type: string; status: string }> } }>(
      "GET",
      `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${name}`,
    );
    if (crd.status?.conditions?.some((c) => c.type === "Established" && c.status === "True")) return;
    if (Date.now() > deadline) throw new Error(`CRD ${name} was not Established within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}
