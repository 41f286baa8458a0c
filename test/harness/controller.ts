/**
 * Runs the Referable controller in the test process, built by src/process/main.ts's constructor, but scoped
 * to Referables carrying this instance's own label so test files running side by side never
 * reconcile each other's objects.
 */
import { KubeClient, type KubeObject } from "../../src/kube/client.ts";
import type { ControllerMetrics } from "../../src/referable/metrics.ts";
import { buildController, type BuildOptions } from "../../src/referable/build.ts";
import type { ReferableController } from "../../src/referable/controller.ts";
import { createResolver, type Resolver } from "../../src/resolver/resolver.ts";
import {
  adminClient,
  closeTestClients,
  cmSource,
  createConfigMap,
  kubeConfigWithToken,
  mergePatch,
  testKubeConfig,
  uniqueName,
  waitFor,
  type ShardScope,
} from "./kube.ts";

export const SHARD_LABEL = "test.referable.dev/shard";

export interface TestController {
  controller: ReferableController;
  resolver: Resolver;
  metrics: ControllerMetrics;
  client: KubeClient;
  /** The label value of this instance: put `{ [SHARD_LABEL]: shard }` on the Referables it should own. */
  shard: string;
  stop(): Promise<void>;
}

export async function startTestController(
  options: {
    allowSecrets?: boolean;
    /** spec.export may write Secrets (--allow-secret-export). @default false */
    allowSecretExport?: boolean;
    maxValueBytes?: number;
    /** The controller's credentials. @default the test cluster's admin */
    client?: KubeClient;
    watchTimeoutSeconds?: [number, number];
    /** The shard label value, to start a controller again over the same Referables. @default a new one */
    shard?: string;
    /** Anything else for the constructor (a writer, a logger, a source policy). @default none */
    build?: Partial<BuildOptions>;
  } = {},
): Promise<TestController> {
  const client = options.client ?? adminClient({ serverMessages: false });
  const shard = options.shard ?? uniqueName("shard");
  const { controller, resolver, metrics } = buildController({
    client,
    identity: shard,
    informerLingerMs: 0,
    kindRetryMs: [200, 2000],
    maxValueBytes: options.maxValueBytes ?? 32 * 1024,
    allowSecrets: options.allowSecrets ?? false,
    allowSecretExport: options.allowSecretExport ?? false,
    referableSelector: `${SHARD_LABEL}=${shard}`,
    ...(options.watchTimeoutSeconds ? { watchTimeoutSeconds: options.watchTimeoutSeconds } : {}),
    ...options.build,
  });
  controller.start();
  controller.setLeader(true);
  await controller.whenSynced();
  return {
    controller,
    resolver,
    metrics,
    client,
    shard,
    stop: async () => {
      await controller.stop();
      await resolver.stop();
    },
  };
}

/**
 * Starts a test controller again over `shard`'s Referables, as the ServiceAccount of `token`, over
 * a client that records every request but a GET (an apply of what is stored changes no
 * resourceVersion, so only the requests tell whether one was sent). Resolves once it has
 * reconciled its Referable with its value, or written something: one reconcile as soon as it is
 * listed (the source not read yet: nothing to say), one once the source's value is pushed, which
 * reads the targets; a write, had there been one, comes with the second.
 */
export async function restartCountingWrites(
  token: string,
  shard: string,
  build?: Partial<BuildOptions>,
): Promise<{ controller: TestController; writes: string[]; stop(): Promise<void> }> {
  const writes: string[] = [];
  const counted = new KubeClient({
    kubeConfig: kubeConfigWithToken(token),
    observe: (o) => {
      if (o.method !== "GET") writes.push(`${o.method} ${o.verb}`);
    },
  });
  const controller = await startTestController({ client: counted, shard, ...(build && { build }) });
  await waitFor("the restarted controller to reconcile the Referable with its value", async () => {
    const metric = await controller.metrics.reconcileTotal.get();
    const successes = metric.values.find((v) => v.labels.result === "success")?.value ?? 0;
    return writes.length > 0 || successes >= 2;
  });
  return {
    controller,
    writes,
    stop: async () => {
      await controller.stop();
      await counted.close();
    },
  };
}

/** A started resolver over the test cluster, as the admin, that keeps no informer nobody reads. */
export async function startedResolver(): Promise<Resolver> {
  const resolver = createResolver({ kubeConfig: testKubeConfig(), informerLingerMs: 0 });
  await resolver.start();
  return resolver;
}

/** The Ready condition and value of a Referable, as read from the API server. */
export interface ReferableView {
  ready: string | undefined;
  reason: string | undefined;
  message: string | undefined;
  status: Record<string, unknown> & {
    value?: unknown;
    values?: unknown[];
    sources?: Array<Record<string, string>>;
  };
  object: KubeObject;
}

export async function getReferable(client: KubeClient, name: string): Promise<ReferableView> {
  const object = await client.request<KubeObject>("GET", `/apis/referable.dev/v1alpha1/referables/${name}`);
  const status = (object.status ?? {}) as ReferableView["status"];
  const conditions = (status.conditions ?? []) as Array<{
    type: string;
    status: string;
    reason: string;
    message: string;
  }>;
  const ready = conditions.find((c) => c.type === "Ready");
  return { ready: ready?.status, reason: ready?.reason, message: ready?.message, status, object };
}

/**
 * Waits until `done` holds of the Referable `name` as read from the API server, and returns it;
 * on timeout the error names `what` was awaited and ends with `lastSeen` of the last read.
 */
export async function waitForView(
  client: KubeClient,
  name: string,
  what: string,
  done: (view: ReferableView) => boolean,
  options: { timeoutMs?: number; lastSeen?: (view: ReferableView | undefined) => string } = {},
): Promise<ReferableView> {
  const { timeoutMs = 10_000, lastSeen = (v) => JSON.stringify(v?.status).slice(0, 600) } = options;
  let last: ReferableView | undefined;
  try {
    return await waitFor(
      `Referable ${name} ${what}`,
      async () => {
        last = await getReferable(client, name);
        return done(last) ? last : undefined;
      },
      { timeoutMs, intervalMs: 25 },
    );
  } catch (err) {
    throw new Error(`${(err as Error).message}; last seen: ${lastSeen(last)}`);
  }
}

/** Waits until a condition of the Referable `name` has `reason` (and `extra` holds), and returns it. */
export type WaitForReason = (
  client: KubeClient,
  name: string,
  reason: string,
  extra?: (view: ReferableView) => boolean,
  timeoutMs?: number,
) => Promise<ReferableView>;

/** Waits until the Referable's Ready reason is `reason` (and `extra` holds), and returns it. */
export const waitForReason: WaitForReason = (client, name, reason, extra = () => true, timeoutMs = 10_000) =>
  waitForView(client, name, `to reach ${reason}`, (v) => v.reason === reason && extra(v), {
    timeoutMs,
    lastSeen: (v) => `${v?.reason} ${JSON.stringify(v?.status).slice(0, 400)}`,
  });

/**
 * The end of a file that ran test controllers: stops them, lets go of and deletes the Referables
 * they own (an export finalizer would keep them), deletes what `cleanup` names (newest first),
 * and closes the test clients.
 */
export async function tearDownControllers(
  admin: KubeClient,
  controllers: Array<TestController | undefined>,
  cleanup: string[],
): Promise<void> {
  const started = controllers.filter((c): c is TestController => c !== undefined);
  for (const c of started) await c.stop().catch(() => undefined);
  const list = started.length
    ? await admin
        .request<{ items: KubeObject[] }>("GET", REFERABLES, {
          query: { labelSelector: `${SHARD_LABEL} in (${started.map((c) => c.shard).join(",")})` },
        })
        .catch(() => ({ items: [] }))
    : { items: [] };
  for (const rf of list.items) {
    const path = `${REFERABLES}/${rf.metadata?.name}`;
    await mergePatch(admin, path, { metadata: { finalizers: null } }).catch(() => undefined);
    await admin.request("DELETE", path).catch(() => undefined);
  }
  for (const path of cleanup.reverse()) await admin.request("DELETE", path).catch(() => undefined);
  await closeTestClients();
}

/** The Referables' collection path. */
export const REFERABLES = "/apis/referable.dev/v1alpha1/referables";

/**
 * Creates a Referable with `spec`, owned by the test controller of `shard` (its label), as
 * `client`; resolves with its name.
 */
export async function createReferable(
  client: KubeClient,
  spec: Record<string, unknown>,
  options: { shard: string; name?: string; labels?: Record<string, string> },
): Promise<string> {
  const name = options.name ?? uniqueName("rf");
  await client.request("POST", REFERABLES, {
    body: {
      apiVersion: "referable.dev/v1alpha1",
      kind: "Referable",
      metadata: { name, labels: { ...options.labels, [SHARD_LABEL]: options.shard } },
      spec,
    },
  });
  return name;
}

/**
 * Proves the controller of `scope.shard` has processed everything before now: a Referable of a
 * new ConfigMap in `scope.ns`, which it must reconcile to Available with the ConfigMap's value.
 */
export async function barrier(client: KubeClient, scope: ShardScope): Promise<void> {
  const cm = uniqueName("barrier");
  await createConfigMap(client, scope.ns, cm, { v: cm });
  const rf = await createReferable(client, { source: cmSource(scope, cm) }, { shard: scope.shard });
  await waitForReason(client, rf, "Available", (v) => v.status.value === cm);
}

/**
 * Waits for `reason` (and `extra`), then proves the Referable stopped being written: the same
 * resourceVersion after a {@link barrier}.
 */
export async function settlesAt(
  client: KubeClient,
  scope: ShardScope,
  name: string,
  reason: string,
  extra?: (view: ReferableView) => boolean,
): Promise<ReferableView> {
  const view = await waitForReason(client, name, reason, extra, 20_000);
  await barrier(client, scope);
  const later = await getReferable(client, name);
  expect(later.object.metadata?.resourceVersion).toBe(view.object.metadata?.resourceVersion);
  return view;
}
