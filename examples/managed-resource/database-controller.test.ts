/**
 * The managed-resource example against the real API server: a Database's networkIdRef waits for
 * its Network to be Ready (requireConditions), is late-initialized into spec.forProvider and then
 * kept (IfNotPresent); a subnetIdSelector with policy Always follows its matches by push with no
 * get or list; a failure is Synced=False with the resolver's reason and recovers by itself; the
 * embedded schemas refuse malformed references at admission.
 *
 * The resolver and the controller are made as a consumer makes them, from a kubeconfig through
 * the public entry; each one's kubeconfig points at a proxy of its own that reports every request
 * it makes, so the test sees them all without reaching into either.
 */
import {
  createResolver,
  type GenericReference,
  type GenericSelector,
  type Resolver,
} from "../../src/index.ts";
import {
  adminClient,
  closeTestClients,
  createNamespace,
  testKubeConfig,
  uniqueName,
  waitFor,
} from "../../test/harness/kube.ts";
import { observingProxy, type ObservingProxy } from "../../test/harness/observing-proxy.ts";
import { API_VERSION, installCrds } from "./crds.ts";
import {
  DatabaseController,
  type Condition,
  type Database,
  type DatabaseParameters,
} from "./database-controller.ts";

/** One request, by whom and what (`watch`, `get/list`, `PATCH`, ...). */
type Observation = { by: "resolver" | "controller"; verb: string };

let admin: ReturnType<typeof adminClient>;
let ns: string;
let proxies: ObservingProxy[] = [];
let resolver: Resolver;
let controller: DatabaseController;
/** Every request the controller and its resolver made, in the order they started. */
const observed: Observation[] = [];

beforeAll(async () => {
  admin = adminClient();
  await installCrds(testKubeConfig());
  ns = await createNamespace(admin, "managed-resource");
  const seen = (by: Observation["by"]) => observingProxy(({ verb }) => observed.push({ by, verb }));
  proxies = [await seen("resolver"), await seen("controller")];
  resolver = createResolver({ kubeConfig: proxies[0]!.kubeConfig, informerLingerMs: 0 });
  await resolver.start();
  controller = new DatabaseController({ kubeConfig: proxies[1]!.kubeConfig, resolver, namespace: ns });
  await controller.start();
}, 60_000);
afterAll(async () => {
  await controller?.stop();
  await resolver?.stop();
  await Promise.all(proxies.map((p) => p.close()));
  await closeTestClients();
});

const path = (plural: string, name = "") =>
  `/apis/${API_VERSION}/namespaces/${ns}/${plural}${name ? `/${name}` : ""}`;

async function mergePatch(p: string, body: unknown): Promise<void> {
  await admin.request("PATCH", p, { body, contentType: "application/merge-patch+json" });
}

/** Sets a Network's or Subnet's status as its provider would: its cloud ID, and Ready or not. */
async function report(plural: string, name: string, id: string, ready: boolean): Promise<void> {
  const condition = {
    type: "Ready",
    status: ready ? "True" : "False",
    reason: ready ? "Available" : "Creating",
  };
  await mergePatch(`${path(plural, name)}/status`, {
    status: { atProvider: { id }, conditions: [condition] },
  });
}

/** Creates a Network or Subnet and reports its status. */
async function createSource(
  kind: "Network" | "Subnet",
  name: string,
  id: string,
  { ready = true, labels }: { ready?: boolean; labels?: Record<string, string> } = {},
): Promise<void> {
  const plural = `${kind.toLowerCase()}s`;
  await admin.request("POST", path(plural), {
    body: { apiVersion: API_VERSION, kind, metadata: { name, labels }, spec: {} },
  });
  await report(plural, name, id, ready);
}

const READY = [{ type: "Ready", status: "True" }];

function refTo(
  kind: "Network" | "Subnet",
  name: string,
  extra: Partial<GenericReference> = {},
): GenericReference {
  return {
    apiVersion: API_VERSION,
    kind,
    namespace: ns,
    name,
    fieldPath: "status.atProvider.id",
    requireConditions: READY,
    ...extra,
  } as GenericReference;
}

function selectorOf(
  kind: "Network" | "Subnet",
  labels: Record<string, string>,
  extra: Partial<GenericSelector> = {},
) {
  return {
    apiVersion: API_VERSION,
    kind,
    namespace: ns,
    matchLabels: labels,
    fieldPath: "status.atProvider.id",
    requireConditions: READY,
    ...extra,
  } as GenericSelector;
}

async function createDatabase(name: string, forProvider: DatabaseParameters): Promise<void> {
  await admin.request("POST", path("databases"), {
    body: { apiVersion: API_VERSION, kind: "Database", metadata: { name }, spec: { forProvider } },
  });
}

const condition = (db: Database, type: Condition["type"]) =>
  db.status?.conditions?.find((c) => c.type === type);

/** Waits, with a deadline, for the Database to satisfy `pred`, and returns it. */
function databaseWhen(name: string, what: string, pred: (db: Database) => boolean): Promise<Database> {
  return waitFor(
    `Database ${name} ${what}`,
    async () => {
      const db = await admin.request<Database>("GET", path("databases", name));
      return pred(db) ? db : undefined;
    },
    { timeoutMs: 15_000 },
  );
}

it("waits for the Network to be Ready, late-initializes networkId and subnetIds, then keeps them (IfNotPresent)", async () => {
  const network = uniqueName("net");
  await createSource("Network", network, "net-1", { ready: false });
  const [s1, s2] = [uniqueName("subnet"), uniqueName("subnet")];
  await createSource("Subnet", s1!, "subnet-b");
  await createSource("Subnet", s2!, "subnet-a");
  const name = uniqueName("db");
  await createDatabase(name, {
    region: "us-east-2",
    networkIdRef: refTo("Network", network),
    subnetIdRefs: [refTo("Subnet", s1!), refTo("Subnet", s2!)],
  });

  const waiting = await databaseWhen(
    name,
    "to wait for its Network",
    (db) => condition(db, "Synced")?.status === "False",
  );
  expect(condition(waiting, "Synced")).toMatchObject({
    reason: "SourceNotReady",
    message: expect.stringContaining("spec.forProvider.networkIdRef"),
  });
  expect(condition(waiting, "Ready")).toMatchObject({ status: "False", reason: "Creating" });
  expect(waiting.spec?.forProvider?.networkId).toBeUndefined();

  // The Ready condition's arrival is pushed: no one touches the Database.
  await report("networks", network, "net-1", true);
  const done = await databaseWhen(name, "to be Ready", (db) => condition(db, "Ready")?.status === "True");
  expect(done.spec?.forProvider).toMatchObject({ networkId: "net-1", subnetIds: ["subnet-b", "subnet-a"] });
  expect(done.status?.atProvider).toEqual({ networkId: "net-1", subnetIds: ["subnet-b", "subnet-a"] });
  expect(condition(done, "Synced")).toMatchObject({ status: "True", reason: "ReconcileSuccess" });
  // Late initialization bumped the generation; the status is for the spec as written.
  expect(condition(done, "Ready")?.observedGeneration).toBe(done.metadata?.generation);
  // Every field is settled (IfNotPresent and filled): nothing left to watch.
  await waitFor("no subscription for a settled Database", () => controller.subscriptionsOf(ns, name) === 0);

  // The Network's ID changes; the Database keeps the ID it was initialized with, even through a
  // reconcile that runs after the change (a new generation of the Database).
  await report("networks", network, "net-2", true);
  await mergePatch(path("databases", name), { spec: { forProvider: { region: "eu-west-1" } } });
  const after = await databaseWhen(
    name,
    "to reconcile its new generation",
    (db) =>
      condition(db, "Synced")?.observedGeneration === db.metadata?.generation &&
      db.spec?.forProvider?.region === "eu-west-1",
  );
  expect(after.spec?.forProvider?.networkId).toBe("net-1");
  expect(after.status?.atProvider?.networkId).toBe("net-1");
}, 30_000);

it("a subnetIdSelector with policy Always follows its matches by push, with no get or list", async () => {
  const tag = uniqueName("t");
  await createSource("Network", uniqueName("net"), "net-x", { labels: { net: tag } });
  await createSource("Subnet", `${tag}-1`, "subnet-1", { labels: { db: tag } });
  const name = uniqueName("db");
  await createDatabase(name, {
    networkIdSelector: selectorOf("Network", { net: tag }),
    subnetIdSelector: selectorOf("Subnet", { db: tag }, { policy: { resolve: "Always" } }),
  });
  await databaseWhen(
    name,
    "to resolve both selectors",
    (db) =>
      db.spec?.forProvider?.networkId === "net-x" && db.status?.atProvider?.subnetIds?.join() === "subnet-1",
  );
  // Always keeps the selector watched; the settled networkIdSelector is not.
  await waitFor("one subscription: the Always selector", () => controller.subscriptionsOf(ns, name) === 1);

  const from = observed.length;
  await createSource("Subnet", `${tag}-2`, "subnet-2", { labels: { db: tag } });
  await databaseWhen(
    name,
    "to add subnet-2",
    (db) => db.status?.atProvider?.subnetIds?.join() === "subnet-1,subnet-2",
  );
  expect(
    (await admin.request<Database>("GET", path("databases", name))).spec?.forProvider?.subnetIds,
  ).toEqual(["subnet-1", "subnet-2"]);
  // A Subnet that is not Ready is not taken (requireConditions), and one unlabelled leaves.
  await createSource("Subnet", `${tag}-0`, "subnet-0", { labels: { db: tag }, ready: false });
  await mergePatch(path("subnets", `${tag}-1`), { metadata: { labels: { db: null } } });
  const now = await databaseWhen(
    name,
    "to drop subnet-1",
    (db) => db.status?.atProvider?.subnetIds?.join() === "subnet-2",
  );
  // In mode Multiple a match that is not Ready is left out, not an error.
  expect(condition(now, "Synced")).toMatchObject({ status: "True" });
  const last = observed.length;
  await report("subnets", `${tag}-0`, "subnet-0", true);
  await databaseWhen(
    name,
    "to take subnet-0 once Ready",
    (db) => db.status?.atProvider?.subnetIds?.join() === "subnet-0,subnet-2",
  );
  // The proxies report a request when it starts: the status read above shows the last change's
  // status patch done, so its spec patch, before it, was made too.
  const patches = observed.slice(last).filter((o) => `${o.by} ${o.verb}` === "controller PATCH");
  expect(patches.length).toBeGreaterThanOrEqual(2);
  // The controller's own writes (spec, then status) are the only requests: the changes of the
  // Subnets were pushed to it and to the resolver, not polled. Neither read the API server in the
  // window (a watch that reached its timeout and was reopened meanwhile is not a read).
  const reads = observed.slice(from).filter((o) => o.verb !== "watch");
  expect(new Set(reads.map((o) => `${o.by} ${o.verb}`))).toEqual(new Set(["controller PATCH"]));

  await admin.request("DELETE", path("databases", name));
  await waitFor(
    "the deleted Database's subscriptions to close",
    () => controller.subscriptionsOf(ns, name) === 0,
  );
}, 30_000);

it("a missing source is Synced=False with the resolver's reason, and resolves once it exists", async () => {
  const network = uniqueName("later");
  const name = uniqueName("db");
  await createDatabase(name, { networkIdRef: refTo("Network", network) });
  const missing = await databaseWhen(
    name,
    "to miss its Network",
    (db) => condition(db, "Synced")?.reason === "SourceNotFound",
  );
  expect(condition(missing, "Synced")?.message).toContain(network);
  expect(condition(missing, "Ready")).toMatchObject({ status: "False" });

  await createSource("Network", network, "net-late");
  const ready = await databaseWhen(name, "to be Ready", (db) => condition(db, "Ready")?.status === "True");
  expect(ready.spec?.forProvider?.networkId).toBe("net-late");
  expect(condition(ready, "Synced")).toMatchObject({ status: "True" });
}, 30_000);

it("keeps a networkId the user set and refuses malformed references at admission", async () => {
  const name = uniqueName("db");
  await createDatabase(name, { networkId: "net-manual", networkIdRef: refTo("Network", uniqueName("none")) });
  const db = await databaseWhen(name, "to be Ready", (d) => condition(d, "Ready")?.status === "True");
  expect(db.spec?.forProvider?.networkId).toBe("net-manual");
  expect(condition(db, "Synced")).toMatchObject({ status: "True" });

  // genericReferenceSchema: exactly one of name and external.
  const both = { ...refTo("Network", "x"), external: "net-literal" } as unknown as GenericReference;
  await expect(createDatabase(uniqueName("bad"), { networkIdRef: both })).rejects.toMatchObject({
    statusCode: 422,
  });
  // The Database's own rule: a reference or a selector, not both.
  await expect(
    createDatabase(uniqueName("bad"), {
      networkIdRef: refTo("Network", "x"),
      networkIdSelector: selectorOf("Network", { a: "b" }),
    }),
  ).rejects.toMatchObject({ statusCode: 422 });
});
