/**
 * Issue 21's hostile transforms against the controller as the Deployment runs it: its own
 * process, with the NODE_OPTIONS deploy/base ships (the heap cap). While each hostile Referable
 * is evaluated (and its source rewritten, so it is evaluated again and again), the controller
 * must stay up, answer /healthz within a second every time it is asked, and keep a canary
 * Referable following its source; the hostile Referable ends InvalidSpec (its estimated cost
 * is over the budget: what the webhook refuses at admission, last test) or TransformFailed;
 * and the process's peak RSS stays well under the Deployment's 512 Mi limit.
 *
 * On the code before the worker pool, the meter that charges work and the result sizing, case
 * 2 blocked the event loop for most of a minute (/healthz timed out), cases 1 and 4 ran the
 * heap out (the process died), and case 5 lost its key.
 */
import { afterAll, beforeAll, describe, expect, it, jest } from "@jest/globals";
import { readFileSync } from "node:fs";
import type { KubeClient, KubeObject } from "../../src/kube/client.ts";
import * as transforms from "../fixtures/hostile-transforms.ts";
import { getReferable, SHARD_LABEL, waitForReason } from "../harness/controller.ts";
import {
  adminClient,
  closeTestClients,
  createNamespace,
  deployBaseNodeOptions,
  uniqueName,
  waitFor,
} from "../harness/kube.ts";
import { killAllProcesses, startControllerProcess, type ControllerProcess } from "../harness/process.ts";
import { startTestWebhook, type TestWebhook } from "../harness/webhook.ts";

jest.setTimeout(120_000);

const RF = "/apis/referable.dev/v1alpha1/referables";
/** Well under the Deployment's memory limit of 512 Mi. */
const PEAK_RSS_LIMIT_MIB = 300;

let admin: KubeClient;
let ns: string;
let shard: string;
let ctl: ControllerProcess;

async function createConfigMap(name: string, data: Record<string, string>): Promise<void> {
  await admin.request("POST", `/api/v1/namespaces/${ns}/configmaps`, {
    body: { apiVersion: "v1", kind: "ConfigMap", metadata: { name }, data },
  });
}

async function setData(name: string, data: Record<string, string>): Promise<void> {
  await admin.request("PATCH", `/api/v1/namespaces/${ns}/configmaps/${name}`, {
    body: { data },
    contentType: "application/merge-patch+json",
  });
}

function referable(name: string, source: string, transform: string, labels: Record<string, string> = {}) {
  return {
    apiVersion: "referable.dev/v1alpha1",
    kind: "Referable",
    metadata: { name, labels: { [SHARD_LABEL]: shard, ...labels } },
    spec: {
      source: { apiVersion: "v1", kind: "ConfigMap", namespace: ns, name: source, fieldPath: "data.v" },
      transform,
    },
  };
}

async function createReferable(source: string, transform: string): Promise<string> {
  const name = uniqueName("rf");
  await admin.request("POST", RF, { body: referable(name, source, transform) });
  return name;
}

/** The process's peak resident set (VmHWM), in MiB. */
function peakRssMiB(pid: number): number {
  const m = /VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  if (!m) throw new Error(`no VmHWM in /proc/${pid}/status`);
  return Number(m[1]) / 1024;
}

/**
 * Asks /healthz every 100 ms until stopped; resolves with the slowest answer, in ms, and every
 * failure (an answer other than 200, or none within a second).
 */
function watchHealth(p: ControllerProcess): { stop(): Promise<{ slowestMs: number; failures: string[] }> } {
  let running = true;
  let slowestMs = 0;
  const failures: string[] = [];
  const loop = (async () => {
    while (running) {
      const started = Date.now();
      const answer = await Promise.race([
        p.healthy().then(
          (code) => String(code),
          (err: Error) => `error ${err.message}`,
        ),
        new Promise<string>((resolve) => setTimeout(() => resolve("no answer within 1 s"), 1000).unref()),
      ]);
      const took = Date.now() - started;
      slowestMs = Math.max(slowestMs, took);
      if (answer !== "200") failures.push(`${answer} after ${took} ms`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  })();
  return {
    stop: async () => {
      running = false;
      await loop;
      return { slowestMs, failures };
    },
  };
}

/** Sets the canary's source to `value` and waits until its Referable shows it, transformed. */
async function canaryFollows(canary: string, value: string): Promise<void> {
  await setData("canary", { v: value });
  await waitForReason(admin, canary, "Available", (v) => v.status.value === `${value}!`, 10_000);
}

beforeAll(async () => {
  admin = adminClient();
  ns = await createNamespace(admin, "hostile-transform");
  shard = uniqueName("hostile-transform");
  await createConfigMap("canary", { v: "c-0" });
  await createConfigMap("source", { v: "x" });
  ctl = await startControllerProcess(
    ["--leader-elect=false", "--referable-selector", `${SHARD_LABEL}=${shard}`],
    { env: { NODE_OPTIONS: deployBaseNodeOptions() } },
  );
  await waitFor("the controller to be ready", async () => (await ctl.ready()) === 200, {
    timeoutMs: 60_000,
    intervalMs: 200,
  });
}, 120_000);

afterAll(async () => {
  await killAllProcesses();
  await closeTestClients();
});

describe("a hostile transform costs one evaluation, never the controller", () => {
  let canary: string;
  beforeAll(async () => {
    canary = await createReferable("canary", "value + '!'");
    await waitForReason(admin, canary, "Available", (v) => v.status.value === "c-0!", 30_000);
  });

  it.each([
    {
      reason: "case 1: a 200 KB JSON document parsed 200 times is refused by its estimated cost",
      transform: transforms.JSON_BOMB,
      want: "InvalidSpec",
      message: /estimated worst-case cost is \d+, over the budget of 1000000/,
    },
    {
      reason: "case 2: size() of a 1 MiB string 10,000 times is refused by its estimated cost",
      transform: transforms.SIZE_LOOP,
      want: "InvalidSpec",
      message: /estimated worst-case cost is \d+, over the budget of 1000000/,
    },
    {
      reason: "case 4: 900 references to a 1 MiB string are sized as they are built",
      transform: transforms.SHARED_REFERENCES,
      want: "TransformFailed",
      message: /result is over the limit of 32768 bytes of JSON \(ValueTooLarge\)/,
    },
    {
      reason: "case 4: '%s'.format() of 900 references stops at its bound while it builds",
      transform: transforms.FORMAT_BOMB,
      want: "TransformFailed",
      message: /format would build a string over the limit/,
    },
    {
      reason:
        "a hole the meter does not see (deep equality of 100^5 leaves) is stopped by the worker's deadline",
      transform: transforms.DEEP_EQUALITY,
      want: "TransformFailed",
      message: /the transform ran past its time limit of 50 ms/,
    },
  ])("$reason", async ({ transform, want, message }) => {
    const health = watchHealth(ctl);
    try {
      const hostile = await createReferable("source", transform);
      // Rewrites of its source make it evaluate again, while the canary must keep following.
      for (let i = 1; i <= 5; i++) {
        await setData("source", { v: `x${i}` });
        await canaryFollows(canary, `c-${uniqueName("v")}`);
      }
      const view = await waitForReason(admin, hostile, want, () => true, 30_000);
      expect(view.message).toMatch(message);
      expect(view.status.value).toBeUndefined();
    } finally {
      const { slowestMs, failures } = await health.stop();
      expect(failures).toEqual([]);
      expect(slowestMs).toBeLessThan(1000);
    }
    expect(ctl.stderr()).not.toMatch(/heap out of memory|FATAL/);
    expect(peakRssMiB(ctl.pid)).toBeLessThan(PEAK_RSS_LIMIT_MIB);
  });

  it("case 5: a map literal's __proto__, constructor and prototype keys reach status.value", async () => {
    const rf = await createReferable("source", transforms.PROTO_KEYS);
    await setData("source", { v: "proto" });
    const view = await waitForReason(admin, rf, "Available", (v) => {
      const value = v.status.value as Record<string, unknown> | undefined;
      return value !== undefined && Object.hasOwn(value, "__proto__") && value.__proto__ === "proto";
    });
    expect(JSON.stringify(view.status.value)).toBe('{"__proto__":"proto","constructor":"c","prototype":"p"}');
  });

  it("the process never stopped, and no evaluation escaped as 'failed unexpectedly'", async () => {
    expect(await ctl.healthy()).toBe(200);
    const unexpected = ctl.logs().filter((l) => JSON.stringify(l).includes("unexpectedly"));
    expect(unexpected).toEqual([]);
    const referables = await admin.request<{ items: KubeObject[] }>("GET", RF, {
      query: { labelSelector: `${SHARD_LABEL}=${shard}` },
    });
    for (const item of referables.items) {
      const view = await getReferable(admin, item.metadata!.name!);
      expect(view.message ?? "").not.toContain("failed unexpectedly");
    }
  });
});

describe("with the webhook installed", () => {
  let webhook: TestWebhook;
  beforeAll(async () => {
    webhook = await startTestWebhook(admin);
  });
  afterAll(async () => {
    await webhook?.stop();
  });

  it.each([
    { reason: "case 1", transform: transforms.JSON_BOMB },
    { reason: "case 2", transform: transforms.SIZE_LOOP },
  ])("$reason is refused at admission, with its estimate in the message", async ({ transform }) => {
    const name = uniqueName("rf");
    const err = await admin
      .request("POST", RF, { body: referable(name, "source", transform, webhook.labels) })
      .then(
        () => undefined,
        (e: unknown) => e as { statusCode?: number; body?: unknown; message?: string },
      );
    expect(err).toBeDefined();
    expect(JSON.stringify(err?.body ?? err?.message)).toMatch(
      /spec.transform: its estimated worst-case cost is \d+, over the budget of 1000000 \(inputs of up to 32768 bytes/,
    );
  });
});
