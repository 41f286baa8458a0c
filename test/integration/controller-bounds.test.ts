/**
 * Controller-wide bounds (issue 41, items 1 to 3): what many authors together, or an author with
 * a tenant, can make the controller do, on the real control plane.
 *
 * 1. Label keys: Referables whose selectors together name more label keys than the kind's total
 *    (--max-label-keys-per-kind, lowered here) beside a tenant's ConfigMaps carrying every one of
 *    those keys. The selectors that came last are `TooManyLabelKeys`, naming the flag; those that
 *    came first stay Available; the kind keeps no more keys than its total; and a refused selector
 *    gets its keys when one that held keys goes.
 * 2. Transforms: many Referables whose expressions run past the time limit, their source rewritten
 *    after the old 30 s cool-down, while a canary with a trivial transform follows its own source:
 *    the bad expressions are quarantined and run in a lane of their own, so the canary follows
 *    within a deadline far below what the bad ones cost the worker they run in.
 * 3. Reads: field targets read for drift on a 1 s reread interval, existing and missing, by a
 *    controller running as its ServiceAccount: the GETs the API server counts stay within the
 *    read budget (--drift-read-budget, lowered here), missing targets back off, and a missing
 *    target is read again at once when the Referable's value changes.
 *
 * On the code before the bounds, 1 had no total (every selector was Available and the kind kept
 * every key), 2's canary waited for every bad evaluation in the one worker, and 3 read every
 * target every second.
 */
import { afterAll, beforeAll, describe, expect, it, jest } from "@jest/globals";
import { isApiError, type KubeClient } from "../../src/kube/client.ts";
import { DEEP_EQUALITY } from "../fixtures/hostile-transforms.ts";
import { controllerAccount } from "../harness/controller-account.ts";
import {
  createReferable as createReferableAs,
  REFERABLES,
  startTestController,
  tearDownControllers,
  waitForReason,
  waitForView,
  type TestController,
} from "../harness/controller.ts";
import { exportedCondition } from "../harness/export.ts";
import {
  adminClient,
  createConfigMap,
  createNamespace,
  exportFieldsOptInRules,
  installTestCrd,
  uniqueName,
  waitFor,
} from "../harness/kube.ts";
import { metricValue } from "../harness/process.ts";

jest.setTimeout(180_000);

let admin: KubeClient;
const controllers: TestController[] = [];
const cleanup: string[] = [];

beforeAll(() => {
  admin = adminClient();
});

afterAll(() => tearDownControllers(admin, controllers, cleanup), 60_000);

async function setData(ns: string, name: string, data: Record<string, string>): Promise<void> {
  await admin.request("PATCH", `/api/v1/namespaces/${ns}/configmaps/${name}`, {
    body: { data },
    contentType: "application/merge-patch+json",
  });
}

describe("label keys: a total per watched kind", () => {
  /** The kind's total here: four selectors of ten keys fit, the fifth and sixth do not. */
  const TOTAL = 40;
  const KEYS_EACH = 10;
  const SELECTORS = 6;
  let ctl: TestController;
  let ns: string;

  beforeAll(async () => {
    ns = await createNamespace(admin, "bounds-labels", cleanup);
    ctl = await startTestController({
      build: { maxLabelKeysPerKind: TOTAL, maxLabelBytesPerObject: 1024 },
    });
    controllers.push(ctl);
  }, 60_000);

  const keyOf = (r: number, k: number) => `bounds.example.org/r${r}-k${k}`;
  const labelsOf = (r: number) =>
    Object.fromEntries(Array.from({ length: KEYS_EACH }, (_, k) => [keyOf(r, k), "v"]));

  it("refuses the selectors that came last with TooManyLabelKeys, keeps the others Available, and keeps no more keys than the total", async () => {
    // The tenant's ConfigMaps: every key any selector names, with 63-character values that no
    // selector matches.
    const every: Record<string, string> = {};
    for (let r = 0; r < SELECTORS; r++)
      for (let k = 0; k < KEYS_EACH; k++) every[keyOf(r, k)] = `t${r}-${k}-`.padEnd(63, "x");
    for (let i = 0; i < 20; i++) await createConfigMap(admin, ns, `tenant-${i}`, { v: "t" }, every);
    // One ConfigMap each selector matches.
    for (let r = 0; r < SELECTORS; r++)
      await createConfigMap(admin, ns, `match-${r}`, { v: `m${r}` }, labelsOf(r));
    const names: string[] = [];
    for (let r = 0; r < SELECTORS; r++) {
      const name = await createReferableAs(
        admin,
        {
          source: {
            apiVersion: "v1",
            kind: "ConfigMap",
            namespace: ns,
            selector: { matchLabels: labelsOf(r) },
            fieldPath: "data.v",
          },
        },
        { shard: ctl.shard },
      );
      names.push(name);
      // In order: a selector that came first holds its keys.
      await waitForView(
        admin,
        name,
        "to be resolved",
        (v) => v.reason !== undefined && v.reason !== "Pending",
        {
          timeoutMs: 20_000,
        },
      );
    }
    for (let r = 0; r < TOTAL / KEYS_EACH; r++)
      await waitForReason(admin, names[r]!, "Available", (v) => v.status.value === `m${r}`);
    for (let r = TOTAL / KEYS_EACH; r < SELECTORS; r++) {
      const view = await waitForReason(admin, names[r]!, "TooManyLabelKeys");
      expect(view.ready).toBe("False");
      expect(view.message).toContain("--max-label-keys-per-kind");
      expect(view.message).toContain(`at most ${TOTAL} label keys`);
      expect(view.status.value).toBeUndefined();
    }
    expect(ctl.resolver.labelKeysKept).toBeLessThanOrEqual(TOTAL);
    expect(ctl.resolver.labelKeysKept).toBe(TOTAL);

    // A selector that held keys goes: the first refused one gets its keys, and its value.
    await admin.request("DELETE", `${REFERABLES}/${names[0]}`);
    await waitForReason(
      admin,
      names[TOTAL / KEYS_EACH]!,
      "Available",
      (v) => v.status.value === `m${TOTAL / KEYS_EACH}`,
      20_000,
    );
    expect(ctl.resolver.labelKeysKept).toBeLessThanOrEqual(TOTAL);
  });
});

describe("transforms: a quarantine lane for expressions that hit their limits", () => {
  /** Bad expressions: each runs to the 50 ms deadline (and costs its worker), 60 of them a round. */
  const BAD = 60;
  /** What the canary may take to follow while the bad ones are evaluated again: far below their cost. */
  const CANARY_DEADLINE_MS = 1500;
  let ctl: TestController;
  let ns: string;

  beforeAll(async () => {
    ns = await createNamespace(admin, "bounds-transforms", cleanup);
    ctl = await startTestController({ build: { transformWorkers: 1, transformTimeoutMs: 50 } });
    controllers.push(ctl);
  }, 60_000);

  it("re-evaluates quarantined expressions apart: a healthy transform follows its source while they run", async () => {
    await createConfigMap(admin, ns, "bad", { v: "b0" });
    await createConfigMap(admin, ns, "canary", { v: "c0" });
    const source = (name: string) => ({
      apiVersion: "v1",
      kind: "ConfigMap",
      namespace: ns,
      name,
      fieldPath: "data.v",
    });
    const canary = await createReferableAs(
      admin,
      { source: source("canary"), transform: "value + '!'" },
      { shard: ctl.shard },
    );
    await waitForReason(admin, canary, "Available", (v) => v.status.value === "c0!");
    const bad: string[] = [];
    for (let i = 0; i < BAD; i++)
      bad.push(
        await createReferableAs(
          admin,
          { source: source("bad"), transform: `${DEEP_EQUALITY} ? value + '${i}' : value` },
          { shard: ctl.shard },
        ),
      );
    for (const name of bad) {
      const view = await waitForReason(admin, name, "TransformFailed", () => true, 120_000);
      expect(view.message).toMatch(/ran past its time limit of 50 ms/);
    }
    const quarantined = ctl.resolver.transformQuarantine();
    expect(quarantined.quarantined).toBe(BAD);
    // Past the 30 s the expressions were failed at once before the quarantine, and its backoff:
    // a new input is evaluated again, every one of them.
    await new Promise((resolve) => setTimeout(resolve, 31_000));
    const before = ctl.resolver.transformQuarantine().evaluations;
    for (let round = 1; round <= 3; round++) {
      await setData(ns, "bad", { v: `b${round}` });
      const started = Date.now();
      await setData(ns, "canary", { v: `c${round}` });
      await waitForReason(
        admin,
        canary,
        "Available",
        (v) => v.status.value === `c${round}!`,
        CANARY_DEADLINE_MS,
      );
      expect(Date.now() - started).toBeLessThan(CANARY_DEADLINE_MS);
    }
    // The bad ones did run again, in their lane, and are still quarantined.
    await waitFor(
      "the quarantine lane to take up the bad expressions",
      () => (ctl.resolver.transformQuarantine().evaluations - before >= BAD ? true : undefined),
      { timeoutMs: 60_000 },
    );
    expect(ctl.resolver.transformQuarantine().quarantined).toBe(BAD);
    ctl.metrics.setTransformQuarantine(ctl.resolver.transformQuarantine());
    const text = await ctl.metrics.registry.metrics();
    expect(metricValue(text, "referable_transform_quarantined")).toBe(BAD);
    expect(metricValue(text, "referable_transform_quarantine_evaluations_total")).toBeGreaterThanOrEqual(BAD);
  });
});

describe("reads: one budget for drift reads, and a backoff for missing targets", () => {
  /** Reads a second the whole controller may make on its own initiative, here. */
  const BUDGET = 5;
  let ctl: TestController;
  let src: string;
  let team: string;
  let group: string;
  let apiVersion: string;

  /** GETs of the test's Tasks as the API server counts them (its own metrics), by code. */
  async function taskGets(code?: string): Promise<number> {
    const text = await admin.request<string>("GET", "/metrics", { decode: (t) => t });
    return (
      metricValue(text, "apiserver_request_total", {
        group,
        resource: "tasks",
        verb: "GET",
        ...(code && { code }),
      }) ?? 0
    );
  }

  beforeAll(async () => {
    src = await createNamespace(admin, "bounds-reads-src");
    team = await createNamespace(admin, "bounds-reads-team");
    cleanup.push(`/api/v1/namespaces/${src}`, `/api/v1/namespaces/${team}`);
    group = `reads.${uniqueName("bounds")}.example.org`;
    apiVersion = await installTestCrd(admin, group, "Task", "Namespaced", {
      version: "v1beta1",
      spec: {
        type: "object",
        properties: { forProvider: { type: "object", properties: { arn: { type: "string" } } } },
      },
    });
    cleanup.push(`/apis/apiextensions.k8s.io/v1/customresourcedefinitions/tasks.${group}`);
    const account = await controllerAccount(admin, "bounds-ctl", cleanup);
    await account.grant(exportFieldsOptInRules(group, ["tasks"]));
    await waitFor("the controller's RBAC to apply", async () => {
      await account.client
        .request("GET", `/apis/${group}/v1beta1/namespaces/${team}/tasks/none`)
        .catch((err: unknown) => {
          if (!isApiError(err, 404)) throw err;
        });
      return true;
    });
    ctl = await startTestController({
      client: account.client,
      build: { fieldRereadMs: 1000, driftReadBudget: BUDGET },
    });
    controllers.push(ctl);
  }, 60_000);

  const taskPath = (name: string) => `/apis/${group}/v1beta1/namespaces/${team}/tasks/${name}`;
  async function createTask(name: string): Promise<void> {
    await admin.request("POST", `/apis/${group}/v1beta1/namespaces/${team}/tasks`, {
      body: { apiVersion, kind: "Task", metadata: { name }, spec: { forProvider: {} } },
    });
  }
  const target = (name: string) => ({
    apiVersion,
    kind: "Task",
    namespace: team,
    name,
    fieldPath: "spec.forProvider.arn",
  });
  /** A Referable of the ConfigMap `source`'s data.v in the source namespace, exported to the Tasks `tasks`. */
  const exportToTasks = (source: string, tasks: string[]) =>
    createReferableAs(
      admin,
      {
        source: { apiVersion: "v1", kind: "ConfigMap", namespace: src, name: source, fieldPath: "data.v" },
        export: tasks.map(target),
      },
      { shard: ctl.shard },
    );

  it("keeps drift reads of existing targets within the controller's budget, shared by every Referable", async () => {
    // 10 Referables with two Tasks each, read every second: 20 reads a second wanted, 5 allowed.
    const names: string[] = [];
    for (let r = 0; r < 10; r++) {
      await createConfigMap(admin, src, `drift-${r}`, { v: `arn-${r}` });
      const tasks = [`drift-${r}-a`, `drift-${r}-b`];
      for (const t of tasks) await createTask(t);
      names.push(await exportToTasks(`drift-${r}`, tasks));
    }
    for (const name of names)
      await waitForView(admin, name, "to be Exported", (v) => exportedCondition(v)?.reason === "Exported", {
        timeoutMs: 60_000,
      });
    const WINDOW_MS = 15_000;
    const before = await taskGets("200");
    const started = Date.now();
    await new Promise((resolve) => setTimeout(resolve, WINDOW_MS));
    const gets = (await taskGets("200")) - before;
    const seconds = (Date.now() - started) / 1000;
    // The budget over the window, its burst, and a little for the clock's edges.
    expect(gets).toBeLessThanOrEqual(BUDGET * seconds + BUDGET + 2);
    // Shared, not taken by some: every Referable is still read (its turn comes), and Exported.
    expect(gets).toBeGreaterThan(BUDGET * seconds * 0.5);
    for (const name of names)
      expect(exportedCondition(await waitForView(admin, name, "to stay Exported", () => true))?.reason).toBe(
        "Exported",
      );
    ctl.metrics.driftReadsWaiting.set(ctl.controller.readsWaiting());
    const text = await ctl.metrics.registry.metrics();
    expect(metricValue(text, "referable_drift_reads_total")).toBeGreaterThan(0);
    for (const name of names) await admin.request("DELETE", `${REFERABLES}/${name}`);
  });

  it("backs off reading missing targets, and reads one again at once when the value changes", async () => {
    const missing: string[] = [];
    const names: string[] = [];
    for (let r = 0; r < 5; r++) {
      await createConfigMap(admin, src, `missing-${r}`, { v: `arn-${r}` });
      const tasks = [0, 1, 2].map((i) => `missing-${r}-${i}`);
      missing.push(...tasks);
      names.push(await exportToTasks(`missing-${r}`, tasks));
    }
    for (const name of names)
      await waitForView(
        admin,
        name,
        "to report TargetNotFound",
        (v) => exportedCondition(v)?.reason === "TargetNotFound",
        {
          timeoutMs: 30_000,
        },
      );
    // Read after 1 s, 2, 4 and 8 s: from 12 s on, each is read at most once more before 31 s.
    await new Promise((resolve) => setTimeout(resolve, 12_000));
    const before = await taskGets("404");
    await new Promise((resolve) => setTimeout(resolve, 12_000));
    const gets = (await taskGets("404")) - before;
    // Every second (the reread interval) would be 12 reads each.
    expect(gets).toBeLessThanOrEqual(missing.length * 2);

    // The target appears; the Referable's value changes: read at once, not after its backoff.
    await createTask("missing-0-0");
    await createTask("missing-0-1");
    await createTask("missing-0-2");
    await setData(src, "missing-0", { v: "arn-new" });
    await waitForView(
      admin,
      names[0]!,
      "to be Exported after its value changed",
      (v) => exportedCondition(v)?.reason === "Exported",
      {
        timeoutMs: 5000,
      },
    );
    const task = await admin.request<{ spec: { forProvider: { arn?: string } } }>(
      "GET",
      taskPath("missing-0-0"),
    );
    expect(task.spec.forProvider.arn).toBe("arn-new");
  });
});
