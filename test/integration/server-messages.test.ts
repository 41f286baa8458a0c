/**
 * No text the API server took from an object reaches a condition, an Event or a log: a target
 * CRD whose validation rule's `messageExpression` quotes another field of the target (its
 * password) refuses the value a Referable exports into it. The Exported condition says
 * ExportRejected with the HTTP status, the server's reason code and the field path of the
 * cause, never the server's message; neither do the Referable's Events nor the controller's logs.
 * The controller runs in this process with its own client (as in production: no server messages)
 * and a logger that keeps every line.
 */
import { afterAll, beforeAll, describe, expect, it, jest } from "@jest/globals";
import type { KubeClient, KubeObject } from "../../src/kube/client.ts";
import {
  createReferable as createReferableAs,
  startTestController,
  tearDownControllers,
  type TestController,
} from "../harness/controller.ts";
import { exportedCondition, waitForExported } from "../harness/export.ts";
import { memoryLogger, type MemoryLogger } from "../harness/faults.ts";
import { installTestCrd, openScope, uniqueName, waitFor } from "../harness/kube.ts";

jest.setTimeout(30_000);

const CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
const PASSWORD = "hunter2-do-not-show";
const QUOTED = "is not a database host";

let admin: KubeClient;
let ns: string;
/** The API group of the test's Vault CRD. */
let group: string;
/** The controller, and what it logged. */
let ctl: TestController, logger: MemoryLogger;
const cleanup: string[] = [];

beforeAll(async () => {
  ({ admin, ns } = await openScope("server-messages"));
  cleanup.push(`/api/v1/namespaces/${ns}`);
  group = `${uniqueName("vault")}.example.org`;
  // The rule quotes the password, another field of the object, in its message.
  await installTestCrd(admin, group, "Vault", "Namespaced", {
    spec: {
      type: "object",
      properties: { host: { type: "string", maxLength: 64 }, password: { type: "string", maxLength: 64 } },
      "x-kubernetes-validations": [
        {
          rule: "!has(self.host) || self.host.startsWith('db-')",
          messageExpression: `self.host + ' ${QUOTED}; the password is ' + self.password`,
        },
      ],
    },
  });
  cleanup.push(`${CRDS}/vaults.${group}`);
  await waitFor("the Vault CRD to be served", async () => {
    await admin.request("GET", `/apis/${group}/v1/vaults`);
    return true;
  });
  logger = memoryLogger();
  ctl = await startTestController({ build: { logger } });
}, 60_000);

afterAll(() => tearDownControllers(admin, [ctl], cleanup), 60_000);

describe("messages from the API server", () => {
  it("ExportRejected keeps the status, the reason and the field path, never the server's message quoting the target", async () => {
    const vault = uniqueName("vault");
    await admin.request("POST", `/apis/${group}/v1/namespaces/${ns}/vaults`, {
      body: {
        apiVersion: `${group}/v1`,
        kind: "Vault",
        metadata: { name: vault },
        spec: { password: PASSWORD },
      },
    });
    // What the API server says to a person: the rule's message, password and all.
    const refusal = await admin
      .request("PATCH", `/apis/${group}/v1/namespaces/${ns}/vaults/${vault}`, {
        body: { spec: { host: "web-1" } },
        contentType: "application/merge-patch+json",
      })
      .then(
        () => "",
        (err: unknown) => (err as Error).message,
      );
    expect(refusal).toContain(PASSWORD);

    const source = uniqueName("src");
    await admin.request("POST", `/api/v1/namespaces/${ns}/configmaps`, {
      body: { apiVersion: "v1", kind: "ConfigMap", metadata: { name: source }, data: { v: "web-1" } },
    });
    const rf = await createReferableAs(
      admin,
      {
        source: { apiVersion: "v1", kind: "ConfigMap", namespace: ns, name: source, fieldPath: "data.v" },
        export: [
          { apiVersion: `${group}/v1`, kind: "Vault", namespace: ns, name: vault, fieldPath: "spec.host" },
        ],
      },
      { shard: ctl.shard },
    );
    const view = await waitForExported(admin, rf, "ExportRejected");
    const message = exportedCondition(view)!.message;
    expect(message).toContain(`Vault ${ns}/${vault}`);
    expect(message).toMatch(/\b422 Invalid\b/);
    expect(message).toContain("at spec");
    expect(message).not.toContain(PASSWORD);
    expect(message).not.toContain(QUOTED);
    expect(JSON.stringify(view.status)).not.toContain(PASSWORD);

    // Nothing of it anywhere else people read: the Referable's Events, the controller's logs.
    const events = await admin.request<{ items: KubeObject[] }>("GET", "/api/v1/namespaces/default/events", {
      query: { fieldSelector: `involvedObject.name=${rf}` },
    });
    expect(JSON.stringify(events.items)).not.toContain(PASSWORD);
    expect(JSON.stringify(logger.lines)).not.toContain(PASSWORD);
    const vaultNow = await admin.request<KubeObject & { spec: Record<string, unknown> }>(
      "GET",
      `/apis/${group}/v1/namespaces/${ns}/vaults/${vault}`,
    );
    expect(vaultNow.spec).toEqual({ password: PASSWORD });
  });
});
