/**
 * A published value is always one the facts allow (issue 12): on a real control plane, the
 * cases where the controller published or kept a value it should not have.
 *
 * 1. access withdrawn (its own policy, or RBAC): the value is withdrawn with it;
 * 3. a status forged by someone with `patch` on `referables/status` is put back, at a bounded rate;
 * 4. a cycle of Referables longer than any search limit is refused, every member of it;
 * 7. a status write computed from an old version is a 409, and on stop the writes in flight
 *    finish before the Lease is released.
 *
 * A control plane of its own: a ring of Referables that is not refused writes hundreds of times a
 * second, which must not load the plane other test files share.
 */
import { KubeConfig } from "@kubernetes/client-node";
import { LeaderElector } from "../../src/runtime/leader-election.ts";
import { KubeClient, type KubeObject } from "../../src/kube/client.ts";
import { Manager } from "../../src/runtime/manager.ts";
import type { PrivateControlPlane } from "../harness/control-plane.ts";
import {
  getReferable,
  SHARD_LABEL,
  waitForReason,
  type ReferableView,
  createReferable as createReferableAs,
} from "../harness/controller.ts";
import {
  clientFor,
  startPrivatePlane,
  GatedStatusClient,
  startInProcessController,
  type InProcessController,
} from "../harness/faults.ts";
import {
  cmSource,
  newShardScope,
  type ShardScope,
  serviceAccountToken,
  uniqueName,
  waitFor,
  createConfigMap as createConfigMapIn,
  createSecret,
  kubeConfigWithToken,
} from "../harness/kube.ts";
import { metricValue } from "../harness/process.ts";
import { bindRole, createRole, RBAC, serviceAccount } from "../harness/rbac.ts";

const RF = "/apis/referable.dev/v1alpha1/referables";
/** Deadline of every wait: generous, for a loaded 2-core machine. */
const WAIT_MS = 60_000;

let plane: PrivateControlPlane;
let admin: KubeClient;
const running: InProcessController[] = [];
const clients: KubeClient[] = [];

beforeAll(async () => {
  ({ plane, admin } = await startPrivatePlane("published-value"));
}, 180_000);

afterAll(async () => {
  await Promise.all(running.splice(0).map((c) => c.stop()));
  await Promise.all(clients.splice(0).map((c) => c.close()));
  await admin?.close();
  await plane?.stop();
});

type Scope = ShardScope;
const newScope = (prefix: string) => newShardScope(admin, prefix);

async function start(
  scope: Scope,
  options: {
    client?: KubeClient;
    writer?: GatedStatusClient;
    policy?: { allowSecrets: boolean; denyKinds: string[] };
  } = {},
): Promise<InProcessController> {
  const client = options.client ?? clientFor(plane.kubeconfigPath);
  if (!options.client) clients.push(client);
  const ipc = await startInProcessController({
    client,
    writer: options.writer ?? client,
    shard: scope.shard,
    ...(options.policy ? { policy: options.policy } : {}),
  });
  running.push(ipc);
  return ipc;
}

async function stop(ipc: InProcessController): Promise<void> {
  running.splice(running.indexOf(ipc), 1);
  await ipc.stop();
}

async function createReferable(
  scope: Scope,
  name: string,
  source: Record<string, unknown>,
  labels: Record<string, string> = {},
): Promise<void> {
  await createReferableAs(admin, { source }, { shard: scope.shard, name, labels });
}

const createConfigMap = (scope: Scope, name: string, data: Record<string, string>) =>
  createConfigMapIn(admin, scope.ns, name, data);

const setValue = (scope: Scope, name: string, v: string) =>
  admin.request("PATCH", `/api/v1/namespaces/${scope.ns}/configmaps/${name}`, {
    body: { data: { v } },
    contentType: "application/merge-patch+json",
  });

/** Writes `status` over a Referable's status, as a user with `patch` on `referables/status` can. */
async function forgeStatus(name: string, status: Record<string, unknown>): Promise<void> {
  await admin.request("PATCH", `${RF}/${name}/status`, {
    body: { status },
    contentType: "application/merge-patch+json",
  });
}

/** A client of the private plane that authenticates as `token`. */
function tokenClient(token: string): KubeClient {
  const planeConfig = new KubeConfig();
  planeConfig.loadFromFile(plane.kubeconfigPath);
  const client = new KubeClient({ kubeConfig: kubeConfigWithToken(token, planeConfig) });
  clients.push(client);
  return client;
}

const conditionsOf = (view: ReferableView) =>
  (view.status.conditions ?? []) as Array<{ type: string; lastTransitionTime: string; reason: string }>;

/**
 * A new scope whose ConfigMap "cm" holds `value`, and the Referable `<shard>-rf` of it (of its
 * `fieldPath`, data.v when none is given); resolves with both.
 */
async function scopeWithReferable(prefix: string, value: string, fieldPath?: string) {
  const scope = await newScope(prefix);
  await createConfigMap(scope, "cm", { v: value });
  const rf = `${scope.shard}-rf`;
  await createReferable(scope, rf, { ...cmSource(scope, "cm"), ...(fieldPath && { fieldPath }) });
  return { scope, rf };
}

describe("1. access withdrawn: the value is withdrawn with it", () => {
  it.each([
    {
      why: "--allow-secrets turned off",
      kind: "Secret",
      before: { allowSecrets: true, denyKinds: [] },
      after: { allowSecrets: false, denyKinds: [] },
      message: "--allow-secrets",
    },
    {
      why: "--deny-kinds=ConfigMap",
      kind: "ConfigMap",
      before: { allowSecrets: false, denyKinds: [] },
      after: { allowSecrets: false, denyKinds: ["ConfigMap"] },
      message: "--deny-kinds",
    },
  ])(
    "by the controller's own policy ($why): Forbidden, and no value",
    async ({ kind, before, after, message }) => {
      const scope = await newScope("policy");
      const source = uniqueName("src");
      if (kind === "Secret") {
        await createSecret(admin, scope.ns, source, { v: "s3cret" });
      } else {
        await createConfigMap(scope, source, { v: "s3cret" });
      }
      const rf = `${scope.shard}-rf`;
      await createReferable(scope, rf, {
        apiVersion: "v1",
        kind,
        namespace: scope.ns,
        name: source,
        fieldPath: "data.v",
      });
      const first = await start(scope, { policy: before });
      const available = await waitForReason(
        admin,
        rf,
        "Available",
        (v) => v.status.value !== undefined,
        WAIT_MS,
      );
      expect(available.status.sources).toHaveLength(1);
      await stop(first);

      await start(scope, { policy: after });
      const refused = await waitForReason(admin, rf, "Forbidden", () => true, WAIT_MS);
      expect(refused.message).toContain(message);
      expect(refused.status.value).toBeUndefined();
      expect(refused.status.sources).toBeUndefined();
      expect(JSON.stringify(refused.object)).not.toContain(available.status.value as string);
    },
    120_000,
  );

  it("by RBAC (the kind removed from the controller's ClusterRole): Forbidden, and no value", async () => {
    const scope = await newScope("rbac");
    const role = uniqueName("referable-test-controller");
    const rules = (withConfigMaps: boolean) => [
      { apiGroups: ["referable.dev"], resources: ["referables"], verbs: ["get", "list", "watch"] },
      { apiGroups: ["referable.dev"], resources: ["referables/status"], verbs: ["patch", "update"] },
      { apiGroups: [""], resources: ["events"], verbs: ["create"] },
      {
        apiGroups: ["apiextensions.k8s.io"],
        resources: ["customresourcedefinitions"],
        verbs: ["get", "list", "watch"],
      },
      ...(withConfigMaps
        ? [{ apiGroups: [""], resources: ["configmaps"], verbs: ["get", "list", "watch"] }]
        : []),
    ];
    await createRole(admin, role, rules(true));
    const token = await serviceAccountToken(admin, scope.ns, "controller");
    await bindRole(admin, role, role, [serviceAccount("controller", scope.ns)]);
    await createConfigMap(scope, "cm", { v: "readable" });
    const rf = `${scope.shard}-rf`;
    await createReferable(scope, rf, cmSource(scope, "cm"));
    const first = await start(scope, { client: tokenClient(token) });
    await waitForReason(admin, rf, "Available", (v) => v.status.value === "readable", WAIT_MS);
    await stop(first);

    await admin.request("PUT", `${RBAC}/clusterroles/${role}`, {
      body: {
        apiVersion: "rbac.authorization.k8s.io/v1",
        kind: "ClusterRole",
        metadata: { name: role },
        rules: rules(false),
      },
    });
    await start(scope, { client: tokenClient(token) });
    const refused = await waitForReason(admin, rf, "Forbidden", () => true, WAIT_MS);
    expect(refused.message).toContain("may not list/watch configmaps");
    expect(refused.status.value).toBeUndefined();
    expect(refused.status.sources).toBeUndefined();
  }, 120_000);
});

describe("3. the controller owns the whole status", () => {
  it("puts back a forged value, a foreign condition and a changed lastTransitionTime, on a Forbidden Referable and an Available one", async () => {
    const scope = await newScope("forged");
    await createSecret(admin, scope.ns, "creds", { v: "x" });
    await createConfigMap(scope, "cm", { v: "real" });
    const forbidden = `${scope.shard}-forbidden`;
    const available = `${scope.shard}-available`;
    await createReferable(scope, forbidden, {
      apiVersion: "v1",
      kind: "Secret",
      namespace: scope.ns,
      name: "creds",
      fieldPath: "data.v",
    });
    await createReferable(scope, available, cmSource(scope, "cm"));
    const ipc = await start(scope);
    const cases = [
      await waitForReason(admin, forbidden, "Forbidden", () => true, WAIT_MS),
      await waitForReason(admin, available, "Available", (v) => v.status.value === "real", WAIT_MS),
    ];
    for (const computed of cases) {
      const name = computed.object.metadata!.name!;
      const ready = conditionsOf(computed).find((c) => c.type === "Ready")!;
      await forgeStatus(name, {
        value: "forged",
        conditions: [
          { ...ready, lastTransitionTime: "1999-01-01T00:00:00Z" },
          {
            type: "Approved",
            status: "True",
            reason: "Forged",
            message: "",
            lastTransitionTime: "1999-01-01T00:00:00Z",
          },
        ],
      });
      const repaired = await waitFor(
        `the status of ${name} to be put back`,
        async () => {
          const view = await getReferable(admin, name);
          return JSON.stringify(view.status) === JSON.stringify(computed.status) && view;
        },
        { timeoutMs: WAIT_MS, intervalMs: 50 },
      );
      expect(repaired.status.value).toEqual(computed.status.value);
      expect(conditionsOf(repaired).map((c) => c.type)).toEqual(["Ready"]);
    }
    expect(metricValue(await ipc.metrics.registry.metrics(), "referable_status_repairs_total")).toBe(2);
  }, 120_000);

  it("against a writer that forges in a loop, repairs at a bounded, slowing rate, and puts the status back once it stops", async () => {
    const { scope, rf } = await scopeWithReferable("hostile", "real");
    const ipc = await start(scope);
    const computed = await waitForReason(admin, rf, "Available", (v) => v.status.value === "real", WAIT_MS);
    const repairs = async () =>
      metricValue(await ipc.metrics.registry.metrics(), "referable_status_repairs_total") ?? NaN;

    // Forge as fast as the API server answers, for three seconds.
    let forged = 0;
    const until = performance.now() + 3_000;
    while (performance.now() < until) {
      await forgeStatus(rf, { value: `forged-${forged++}` });
    }
    const during = await repairs();
    // Each repair within a streak waits twice the one before (100 ms, 200 ms, 400 ms, ...):
    // about five in three seconds, where a loop would have answered each of the forgeries.
    expect(forged).toBeGreaterThan(20);
    expect(during).toBeGreaterThanOrEqual(1);
    expect(during).toBeLessThanOrEqual(7);
    await waitFor(
      "the status to be put back after the forging stopped",
      async () => JSON.stringify((await getReferable(admin, rf)).status) === JSON.stringify(computed.status),
      { timeoutMs: WAIT_MS, intervalMs: 100 },
    );
    expect(await repairs()).toBeLessThanOrEqual(during + 1);
  }, 120_000);
});

describe("4. cycles of any length", () => {
  it("refuses every member of a ring of 66 (one link by selector) with the cycle, abbreviated, in its message; it writes no more; breaking the ring frees them", async () => {
    const scope = await newScope("ring");
    const n = 66;
    const name = (i: number) => `${scope.shard}-r${String(i).padStart(2, "0")}`;
    const ringLabel = { "ring.test.referable.dev/head": scope.shard };
    const ipc = await start(scope);
    for (let i = 0; i < n; i++) {
      const next = (i + 1) % n;
      const source =
        next === 0
          ? // The last reads the first by a selector: cycles are made of selectors too.
            {
              apiVersion: "referable.dev/v1alpha1",
              kind: "Referable",
              selector: { matchLabels: ringLabel },
              fieldPath: "metadata.resourceVersion",
            }
          : {
              apiVersion: "referable.dev/v1alpha1",
              kind: "Referable",
              name: name(next),
              fieldPath: "metadata.resourceVersion",
            };
      await createReferable(scope, name(i), source, i === 0 ? ringLabel : {});
    }
    const members = Array.from({ length: n }, (_, i) => name(i));
    const list = async () =>
      (
        await admin.request<{ items: KubeObject[] }>("GET", RF, {
          query: { labelSelector: `${SHARD_LABEL}=${scope.shard}` },
        })
      ).items;
    const readyOf = (o: KubeObject) =>
      (
        (o.status as { conditions?: Array<{ type: string; reason: string; message: string }> } | undefined)
          ?.conditions ?? []
      ).find((c) => c.type === "Ready");
    const refused = await waitFor(
      `all ${n} members to be InvalidSpec`,
      async () => {
        const items = await list();
        return items.length === n && items.every((o) => readyOf(o)?.reason === "InvalidSpec") && items;
      },
      { timeoutMs: WAIT_MS, intervalMs: 200 },
    );
    const message = readyOf(refused.find((o) => o.metadata?.name === name(0))!)!.message;
    expect(message).toContain(`cycle of ${n}`);
    expect(message).toContain(
      `${name(0)} → ${name(1)} → ${name(2)} → ${name(3)} → … 58 more … → ${name(62)}`,
    );
    expect(message.length).toBeLessThan(1_000);
    for (const o of refused) expect((o.status as { value?: unknown }).value).toBeUndefined();

    // No write loop: once every member is refused, the ring writes nothing more.
    const writes = async () =>
      metricValue(await ipc.metrics.registry.metrics(), "referable_status_writes_total", {
        result: "success",
      }) ?? NaN;
    const settled = await writes();
    const versions = new Map(refused.map((o) => [o.metadata!.name!, o.metadata!.resourceVersion]));
    const watchedUntil = performance.now() + 2_000;
    await waitFor("two seconds of watching for writes", () => performance.now() >= watchedUntil, {
      timeoutMs: 5_000,
    });
    expect(await writes()).toBe(settled);
    const later = await list();
    expect(
      later
        .filter((o) => versions.get(o.metadata!.name!) !== o.metadata!.resourceVersion)
        .map((o) => o.metadata!.name),
    ).toEqual([]);

    // Breaking the ring (the head loses the label the last one selects) frees every member.
    await admin.request("PATCH", `${RF}/${name(0)}`, {
      body: { metadata: { labels: { "ring.test.referable.dev/head": null } } },
      contentType: "application/merge-patch+json",
    });
    await waitFor(
      "every member but the last to leave InvalidSpec",
      async () => {
        const items = await list();
        const reasons = new Map(items.map((o) => [o.metadata!.name!, readyOf(o)?.reason]));
        return (
          members.slice(0, -1).every((m) => reasons.get(m) === "Available") &&
          reasons.get(name(n - 1)) === "SourceNotFound"
        );
      },
      { timeoutMs: WAIT_MS, intervalMs: 200 },
    );
  }, 180_000);
});

describe("7. writes and leadership", () => {
  it("a status write computed from a version someone has since changed is refused with 409, then recomputed", async () => {
    const { scope, rf } = await scopeWithReferable("precondition", "one");
    const client = clientFor(plane.kubeconfigPath);
    clients.push(client);
    const gated = new GatedStatusClient(client);
    await start(scope, { client, writer: gated });
    await waitForReason(admin, rf, "Available", (v) => v.status.value === "one", WAIT_MS);

    gated.hold(rf);
    await setValue(scope, "cm", "two");
    const held = await waitFor("the write of the new value to be in flight", () => gated.held[0], {
      timeoutMs: WAIT_MS,
    });
    // Meanwhile another writer (a standby that just took over, say) writes the status.
    await forgeStatus(rf, { value: "from-the-other-leader" });
    held.release();
    expect(await held.code).toBe(409);
    // The controller recomputes from the newer version and writes what the facts allow.
    const releaseLater = setInterval(() => gated.held.forEach((h) => h.release()), 50);
    try {
      await waitForReason(admin, rf, "Available", (v) => v.status.value === "two", WAIT_MS);
    } finally {
      clearInterval(releaseLater);
    }
  }, 120_000);

  it("on stop, a status write in flight finishes before the Lease is released", async () => {
    const { scope, rf } = await scopeWithReferable("drain", "one");
    const leasePath = `/apis/coordination.k8s.io/v1/namespaces/${scope.ns}/leases/referable`;
    const holder = async () =>
      (await admin.request<{ spec?: { holderIdentity?: string } }>("GET", leasePath)).spec?.holderIdentity ??
      "";
    const client = clientFor(plane.kubeconfigPath);
    clients.push(client);
    const holderWhenAnswered: string[] = [];
    const gated = new GatedStatusClient(client, async () => void holderWhenAnswered.push(await holder()));

    // Wired as src/process/main.ts wires it, with leader election on a Lease of the test's own.
    const ipc = await start(scope, { client, writer: gated });
    ipc.controller.setLeader(false);
    const elector = new LeaderElector({
      client,
      namespace: scope.ns,
      name: "referable",
      identity: "drain-test",
      leaseDurationMs: 3_000,
      renewDeadlineMs: 2_000,
      retryPeriodMs: 500,
      onStartedLeading: () => ipc.controller.setLeader(true),
      onStoppedLeading: () => ipc.controller.setLeader(false),
    });
    const manager = new Manager({ controller: ipc.controller, resolver: ipc.resolver, elector });
    running.splice(running.indexOf(ipc), 1); // the manager stops it
    await manager.start();
    await waitFor("the test's replica to lead", async () => (await holder()) === "drain-test", {
      timeoutMs: WAIT_MS,
    });
    await waitForReason(admin, rf, "Available", (v) => v.status.value === "one", WAIT_MS);

    gated.hold(rf);
    await setValue(scope, "cm", "two");
    const held = await waitFor("the write of the new value to be in flight", () => gated.held[0], {
      timeoutMs: WAIT_MS,
    });
    const stopped = manager.stop();
    // Released as soon as the Lease is handed back, or after three seconds if it is (rightly) not.
    const givenUpAt = performance.now() + 3_000;
    await waitFor(
      "the Lease to be released, or three seconds",
      async () => (await holder()) === "" || performance.now() > givenUpAt,
      {
        timeoutMs: WAIT_MS,
        intervalMs: 50,
      },
    );
    held.release();
    expect(await held.code).toBe(200);
    await stopped;
    // The write was answered while this replica still held the Lease; the Lease went after it.
    expect(holderWhenAnswered).toEqual(["drain-test"]);
    expect(await holder()).toBe("");
    expect((await getReferable(admin, rf)).status.value).toBe("two");
  }, 120_000);
});

describe("messages show what they hold (Also seen: U+202E)", () => {
  it("a right-to-left override in a fieldPath is escaped in the condition message and the Event", async () => {
    // A path that parses, to a key the ConfigMap does not have: the message names the path.
    const { scope, rf } = await scopeWithReferable("bidi", "x", "data.\u202eevil");
    await start(scope);
    const invalid = await waitForReason(admin, rf, "FieldNotFound", () => true, WAIT_MS);
    expect(invalid.message).toContain("\\u202e");
    expect(invalid.message).not.toContain("\u202e");
    const uid = invalid.object.metadata!.uid!;
    const event = await waitFor(
      "the FieldNotFound Event",
      async () =>
        (
          await admin.request<{ items: Array<{ message: string; involvedObject: { uid: string } }> }>(
            "GET",
            "/api/v1/namespaces/default/events",
          )
        ).items.find((e) => e.involvedObject.uid === uid),
      { timeoutMs: WAIT_MS },
    );
    expect(event.message).toContain("\\u202e");
    expect(event.message).not.toContain("\u202e");
  }, 120_000);
});
