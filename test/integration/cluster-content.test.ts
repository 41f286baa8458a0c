/**
 * The controller's memory follows what is referenced, not what the cluster holds.
 *
 * A tenant with rights only in its own namespace fills it with ConfigMaps of about 1 MiB, more
 * in all than the heap cap the Deployment ships, while Referables read ConfigMaps of another
 * namespace. The controller runs as its own process with that heap cap and the RBAC of
 * deploy/base (its rules, bound to a ServiceAccount of this test). A cache of whole objects
 * crash-looped here; this one must stay up, keep its values right, and still push a change,
 * both while the big objects arrive on its watch and after a restart that lists them all.
 *
 * It runs on a control plane of its own: 300 MB of ConfigMaps would otherwise pass through the
 * cluster-wide ConfigMap watch of every other test file running beside it.
 */
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import type { KubeClient } from "../../src/kube/client.ts";
import { closeTestClients, deployBaseNodeOptions } from "../harness/kube.ts";
import { killAllProcesses } from "../harness/process.ts";
import { alive, startTenantPlane, type TenantPlane } from "../harness/tenant-plane.ts";

/** The NODE_OPTIONS deploy/base/deployment.yaml ships: its heap cap. */
const HEAP_CAP = deployBaseNodeOptions();
/** ConfigMaps of about 1 MiB: together about 300 MiB, more than the heap cap. */
const BIG_COUNT = 300;
const BIG_BYTES = 1_000_000;
const WAIT_MS = 60_000;

let t: TenantPlane;
let admin: KubeClient;
let sourceNs: string;
let shard: string;
let setValue: TenantPlane["setValue"];
let expectStatus: TenantPlane["expectStatus"];
const startController = () => t.startController(HEAP_CAP);

beforeAll(async () => {
  t = await startTenantPlane("content", WAIT_MS);
  ({ admin, sourceNs, shard, setValue, expectStatus } = t);

  // What the Referables read: one ConfigMap by name, two by a selector.
  const cm = t.createSource;
  await cm("db", "db-1");
  await cm("web-a", "a-1", { app: "web" });
  await cm("web-b", "b-1", { app: "web" });
  const rf = t.createReferable;
  await rf(`${shard}-db`, { name: "db" });
  await rf(
    `${shard}-web`,
    { selector: { matchLabels: { app: "web" } } },
    { selection: { mode: "Multiple" } },
  );
}, 180_000);

afterAll(async () => {
  await killAllProcesses();
  // The whole control plane goes, and its 300 MB with it.
  await t?.stop();
  await closeTestClients();
});

describe("a tenant's large ConfigMaps", () => {
  it("neither crash the controller under the shipped heap cap nor disturb its values, on the watch and after a restart", async () => {
    let controller = await startController();
    await expectStatus(`${shard}-db`, { reason: "Available", value: "db-1" });
    await expectStatus(`${shard}-web`, { reason: "Available", values: ["a-1", "b-1"] });

    // The tenant fills its namespace while the controller watches ConfigMaps cluster-wide.
    const payload = (i: number) => String.fromCharCode(97 + (i % 26)).repeat(BIG_BYTES);
    await t.fillTenantNamespace(BIG_COUNT, (i) => ({
      metadata: { name: `big-${i}` },
      data: { blob: payload(i) },
    }));

    // Still up, values unchanged, and a change still arrives.
    await setValue("db", "db-2");
    await expectStatus(`${shard}-db`, { reason: "Available", value: "db-2" });
    await setValue("web-b", "b-2");
    await expectStatus(`${shard}-web`, { reason: "Available", values: ["a-1", "b-2"] });
    expect(await alive(controller)).toBe(true);

    // A restart lists every ConfigMap of the cluster, the tenant's included.
    await controller.stop("SIGTERM");
    controller = await startController();
    await setValue("db", "db-3");
    await expectStatus(`${shard}-db`, { reason: "Available", value: "db-3" });
    await expectStatus(`${shard}-web`, { reason: "Available", values: ["a-1", "b-2"] });
    // An object that starts matching a selector gets read (its data was not kept before).
    await admin.request("POST", `/api/v1/namespaces/${sourceNs}/configmaps`, {
      body: { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "web-c" }, data: { v: "c-1" } },
    });
    await admin.request("PATCH", `/api/v1/namespaces/${sourceNs}/configmaps/web-c`, {
      body: { metadata: { labels: { app: "web" } } },
      contentType: "application/merge-patch+json",
    });
    await expectStatus(`${shard}-web`, { reason: "Available", values: ["a-1", "b-2", "c-1"] });
    expect(await alive(controller)).toBe(true);
    expect(controller.stderr()).not.toContain("heap limit");
  }, 600_000);
});
