/**
 * The example Task controller against the real API server: a Task's status follows the
 * annotation of a LocationS3-like source by push (no get or list between the source change and
 * the status patch), reference failures become status reasons, a changed or deleted Task closes
 * its subscription, and the embedded `genericReferenceSchema` refuses bad references at admission.
 */
import type { GenericReference } from "../../src/index.ts";
// Internal, for the test only: the resolver's own client, so the test sees every request the
// resolver makes. The example itself uses the package's public API alone.
import { KubeClient, type RequestObservation } from "../../src/kube/client.ts";
import { Resolver } from "../../src/resolver/resolver.ts";
import {
  adminClient,
  closeTestClients,
  createNamespace,
  installTestCrd,
  observedKubeConfig,
  testKubeConfig,
  uniqueName,
  waitFor,
} from "../../test/harness/kube.ts";
import { TaskController, type Task, type TaskStatus } from "./task-controller.ts";
import { installTaskCrd, TASK_GROUP, TASK_PLURAL, TASK_VERSION } from "./task-crd.ts";

/** One request, by whom and what. */
type Observation = { by: "resolver" | "controller"; verb: string };

const ANNOTATION = "crossplane.io/external-name";
const arn = (id: string) => `arn:aws:datasync:us-east-2:111222333444:location/${id}`;

let admin: KubeClient;
let ns: string;
let locationApiVersion: string;
let locations: string;
let tasks: string;
let client: KubeClient;
let resolver: Resolver;
let controller: TaskController;
/** Every request of the resolver (when it ended) and of the controller (when it started). */
const observed: Observation[] = [];

beforeAll(async () => {
  admin = adminClient();
  await installTaskCrd(admin);
  const group = `${uniqueName("datasync")}.test.referable.dev`;
  locationApiVersion = await installTestCrd(admin, group, "LocationS3");
  ns = await createNamespace(admin, "task-controller");
  locations = `/apis/${group}/v1/namespaces/${ns}/locations3s`;
  tasks = `/apis/${TASK_GROUP}/${TASK_VERSION}/namespaces/${ns}/${TASK_PLURAL}`;
  client = new KubeClient({
    kubeConfig: testKubeConfig(),
    observe: (o: RequestObservation) => observed.push({ by: "resolver", verb: o.verb }),
  });
  resolver = new Resolver({ client, informerLingerMs: 0 });
  await resolver.start();
  const kubeConfig = observedKubeConfig((verb) => observed.push({ by: "controller", verb }));
  controller = new TaskController({ kubeConfig, resolver, namespace: ns });
  await controller.start();
});
afterAll(async () => {
  await controller.stop();
  await resolver.stop();
  await client.close();
  await closeTestClients();
});

async function createLocation(name: string, externalName: string): Promise<void> {
  await admin.request("POST", locations, {
    body: {
      apiVersion: locationApiVersion,
      kind: "LocationS3",
      metadata: { name, annotations: { [ANNOTATION]: externalName } },
      spec: {},
    },
  });
}

function refTo(name: string) {
  return {
    apiVersion: locationApiVersion,
    kind: "LocationS3",
    namespace: ns,
    name,
    fieldPath: `metadata.annotations[${ANNOTATION}]`,
  };
}

async function createTask(name: string, spec: Task["spec"]): Promise<void> {
  await admin.request("POST", tasks, {
    body: { apiVersion: `${TASK_GROUP}/${TASK_VERSION}`, kind: "Task", metadata: { name }, spec },
  });
}

async function mergePatch(path: string, body: unknown): Promise<void> {
  await admin.request("PATCH", path, { body, contentType: "application/merge-patch+json" });
}

/** Waits, with a deadline, for the Task's status to satisfy `pred`, and returns it. */
function statusOf(name: string, what: string, pred: (s: TaskStatus) => boolean): Promise<TaskStatus> {
  return waitFor(`Task ${name} ${what}`, async () => {
    const task = await admin.request<Task>("GET", `${tasks}/${name}`);
    return task.status && pred(task.status) ? task.status : undefined;
  });
}

it("writes the source's annotation to the Task status and follows a change by push, with no get or list", async () => {
  const location = uniqueName("loc");
  await createLocation(location, arn("loc-1"));
  const task = uniqueName("task");
  await createTask(task, { sourceLocationArnRef: refTo(location) });
  expect(await statusOf(task, "to have loc-1", (s) => s.sourceLocationArn === arn("loc-1"))).toEqual({
    sourceLocationArn: arn("loc-1"),
    ready: true,
    reason: "Available",
    observedGeneration: 1,
  });

  const from = observed.length;
  await mergePatch(`${locations}/${location}`, { metadata: { annotations: { [ANNOTATION]: arn("loc-2") } } });
  await statusOf(task, "to follow to loc-2", (s) => s.sourceLocationArn === arn("loc-2"));
  // Pushed, not polled: neither the controller nor the resolver read the API server to learn
  // of the change; the only request in the window is the controller's status patch (a watch
  // that reached its timeout and was reopened meanwhile is not a read).
  const reads = observed.slice(from).filter((o) => o.verb !== "watch");
  expect(new Set(reads.map((o) => `${o.by} ${o.verb}`))).toEqual(new Set(["controller PATCH"]));
});

it("reports a missing source as a status reason, recovers when it appears, and closes subscriptions it no longer needs", async () => {
  const before = resolver.subscriptionCount;
  const later = uniqueName("later");
  const task = uniqueName("task");
  await createTask(task, { sourceLocationArnRef: refTo(later) });
  const missing = await statusOf(task, "to be SourceNotFound", (s) => s.reason === "SourceNotFound");
  expect(missing).toMatchObject({ ready: false, message: expect.stringContaining(later) });
  expect(missing.sourceLocationArn).toBeUndefined();

  await createLocation(later, arn("later"));
  await statusOf(task, "to be Available once the source exists", (s) => s.sourceLocationArn === arn("later"));

  // A changed reference closes the old subscription and opens one for the new source.
  const other = uniqueName("other");
  await createLocation(other, arn("other"));
  await mergePatch(`${tasks}/${task}`, { spec: { sourceLocationArnRef: { name: other } } });
  expect(
    await statusOf(task, "to follow the new reference", (s) => s.sourceLocationArn === arn("other")),
  ).toMatchObject({ ready: true, reason: "Available", observedGeneration: 2 });
  await waitFor("one subscription for the Task", () => resolver.subscriptionCount === before + 1);

  await admin.request("DELETE", `${tasks}/${task}`);
  await waitFor("the deleted Task's subscription to close", () => resolver.subscriptionCount === before);
});

it("keeps an ARN the user set (policy IfNotPresent) and refuses malformed references at admission", async () => {
  const task = uniqueName("task");
  await createTask(task, {
    sourceLocationArn: arn("manual"),
    sourceLocationArnRef: refTo(uniqueName("none")),
  });
  expect(await statusOf(task, "to use the user's ARN", (s) => s.ready === true)).toMatchObject({
    sourceLocationArn: arn("manual"),
    reason: "Specified",
  });

  // The embedded genericReferenceSchema: exactly one of name and external.
  const both = { ...refTo("x"), external: "arn:literal" } as unknown as GenericReference;
  await expect(createTask(uniqueName("bad"), { sourceLocationArnRef: both })).rejects.toMatchObject({
    statusCode: 422,
  });
  // The Task's own rule: an ARN or a reference.
  await expect(createTask(uniqueName("empty"), {})).rejects.toMatchObject({ statusCode: 422 });
});
