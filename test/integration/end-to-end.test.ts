/**
 * The flow the product exists for, end to end: a ConfigMap → a Referable (this controller) →
 * the example Task controller, whose `sourceLocationArnRef` points at the Referable with
 * `fieldPath: status.value`. A change to the source reaches the Task's status with no polling
 * anywhere in the chain: after the change, neither controller makes a single get or list.
 */
import type { KubeClient } from "../../src/kube/client.ts";
import { Resolver } from "../../src/resolver/resolver.ts";
import { TaskController, type Task } from "../../examples/task-controller/task-controller.ts";
import {
  installTaskCrd,
  TASK_GROUP,
  TASK_PLURAL,
  TASK_VERSION,
} from "../../examples/task-controller/task-crd.ts";
import {
  SHARD_LABEL,
  startTestController,
  waitForReason,
  type TestController,
} from "../harness/controller.ts";
import { KubeClient as Client } from "../../src/kube/client.ts";
import {
  adminClient,
  closeTestClients,
  createNamespace,
  observedKubeConfig,
  testKubeConfig,
  uniqueName,
  waitFor,
} from "../harness/kube.ts";

let admin: KubeClient;
let ns: string;
let referables: TestController;
/** The Task side's requests: its resolver's (when they end) and its controller's (when they start). */
const taskRequests: Array<{ by: "resolver" | "controller"; verb: string }> = [];
let taskClient: Client;
let taskResolver: Resolver;
let tasks: TaskController;

beforeAll(async () => {
  admin = adminClient();
  await installTaskCrd(admin);
  ns = await createNamespace(admin, "e2e");
  referables = await startTestController();
  // The resolver on a client of its own (internal wiring) so that its requests can be seen.
  taskClient = new Client({
    kubeConfig: testKubeConfig(),
    observe: (o) => taskRequests.push({ by: "resolver", verb: o.verb }),
  });
  taskResolver = new Resolver({ client: taskClient, informerLingerMs: 0 });
  const kubeConfig = observedKubeConfig((verb) => taskRequests.push({ by: "controller", verb }));
  tasks = new TaskController({ kubeConfig, resolver: taskResolver, namespace: ns });
  await tasks.start();
});
afterAll(async () => {
  await tasks.stop();
  await taskResolver.stop();
  await taskClient.close();
  await referables.stop();
  await closeTestClients();
});

it("a source change reaches the consumer through a Referable's status.value, pushed all the way", async () => {
  const cm = uniqueName("location");
  await admin.request("POST", `/api/v1/namespaces/${ns}/configmaps`, {
    body: { apiVersion: "v1", kind: "ConfigMap", metadata: { name: cm }, data: { arn: "arn:aws:s3:::one" } },
  });
  const rf = uniqueName("location-arn");
  await admin.request("POST", "/apis/referable.dev/v1alpha1/referables", {
    body: {
      apiVersion: "referable.dev/v1alpha1",
      kind: "Referable",
      metadata: { name: rf, labels: { [SHARD_LABEL]: referables.shard } },
      spec: {
        source: { apiVersion: "v1", kind: "ConfigMap", namespace: ns, name: cm, fieldPath: "data.arn" },
      },
    },
  });
  await waitForReason(admin, rf, "Available");

  const taskPath = `/apis/${TASK_GROUP}/${TASK_VERSION}/namespaces/${ns}/${TASK_PLURAL}`;
  const task = uniqueName("task");
  await admin.request("POST", taskPath, {
    body: {
      apiVersion: `${TASK_GROUP}/${TASK_VERSION}`,
      kind: "Task",
      metadata: { name: task },
      spec: {
        sourceLocationArnRef: {
          apiVersion: "referable.dev/v1alpha1",
          kind: "Referable",
          name: rf,
          fieldPath: "status.value",
        },
      },
    },
  });
  const arnOf = async () =>
    (await admin.request<Task>("GET", `${taskPath}/${task}`)).status?.sourceLocationArn;
  await waitFor("the Task to get the first ARN", async () => (await arnOf()) === "arn:aws:s3:::one");

  const referableRequests = (await referables.metrics.restRequests.get()).values;
  const countGets = (values: typeof referableRequests) =>
    values.filter((v) => v.labels.method === "GET").reduce((sum, v) => sum + v.value, 0);
  const referableGetsBefore = countGets(referableRequests);
  const taskFrom = taskRequests.length;

  const started = performance.now();
  await admin.request("PATCH", `/api/v1/namespaces/${ns}/configmaps/${cm}`, {
    body: { data: { arn: "arn:aws:s3:::two" } },
    contentType: "application/merge-patch+json",
  });
  await waitFor("the Task to follow to the second ARN", async () => (await arnOf()) === "arn:aws:s3:::two", {
    intervalMs: 5,
  });
  const elapsedMs = performance.now() - started;

  // No polling anywhere: after the change, the Referable controller only patched a status and
  // the Task controller only patched a status. Watches carried everything else.
  const referableGetsAfter = countGets((await referables.metrics.restRequests.get()).values);
  expect(referableGetsAfter - referableGetsBefore).toBe(0);
  // (A watch that reached its timeout and was reopened meanwhile is not a read.)
  const taskReads = taskRequests.slice(taskFrom).filter((o) => o.verb !== "watch");
  expect(new Set(taskReads.map((o) => `${o.by} ${o.verb}`))).toEqual(new Set(["controller PATCH"]));
  process.stderr.write(`end to end, ConfigMap → Referable → Task: ${elapsedMs.toFixed(0)} ms\n`);
});
