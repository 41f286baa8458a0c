/**
 * spec.export on the real control plane: the value delivered into ConfigMap and Secret keys with
 * server-side apply, by a controller running as a ServiceAccount with the shipped RBAC (deploy/base)
 * and export opted in for one namespace only, with the RoleBindings the docs give:
 * - into a new ConfigMap, created and labelled; into an existing one, whose other keys stay;
 * - into a Secret (opted in, --allow-secret-export), base64-encoded; refused without the flag;
 * - a key another field manager owns: ExportConflict naming it, never overwritten;
 * - the source changing (followed), deleted (the key removed, not the others);
 * - the Referable deleted: its keys removed, an object it created and that holds nothing else
 *   deleted, everyone else's data kept;
 * - a namespace not opted in: ExportForbidden saying what to apply;
 * - a restart: nothing written, not the targets, not the status;
 * - `kubectl get rf` shows EXPORTED.
 * The webhook's refusal of an author who may not write a target is in admission.test.ts, where
 * the users and grants are.
 */
import { execFile } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it, jest } from "@jest/globals";
import { loadAll } from "js-yaml";
import { exportValue, isExportError, removeExport } from "../../src/index.ts";
import { isApiError, type KubeClient, type KubeObject } from "../../src/kube/client.ts";
import { describeIf } from "../harness/availability.ts";
import { repoRoot } from "../harness/control-plane.ts";
import { controllerAccount, type ControllerAccount } from "../harness/controller-account.ts";
import {
  createReferable as createReferableAs,
  getReferable,
  REFERABLES,
  type ReferableView,
  restartCountingWrites,
  startTestController,
  tearDownControllers,
  type TestController,
  waitForReason,
} from "../harness/controller.ts";
import {
  dataOf,
  exportedCondition,
  getKeyTarget,
  waitForData as waitForDataAs,
  waitForExported as waitForExportedAs,
  type KeyTargetKind,
} from "../harness/export.ts";
import { SeverableClient } from "../harness/faults.ts";
import {
  adminClient,
  createNamespace,
  deployBaseRules,
  testKubeConfig,
  uniqueName,
  waitFor,
  waitForGone,
} from "../harness/kube.ts";

jest.setTimeout(30_000);

let admin: KubeClient;
let controllerClient: KubeClient;
let controllerToken: string;
let ctl: TestController;
/** The controller's ServiceAccount, with deploy/base's rules. */
let account: ControllerAccount;
/** Sources live here. */
let src: string;
/** Opted in to export: ConfigMaps and Secrets. */
let open: string;
/** Not opted in. */
let closed: string;
/** The ClusterRole of deploy/base/rbac-export.yaml, as this test created it. */
let exportConfigMapsRole: string;
/** The ClusterRole of deploy/examples/allow-secret-export, as this test created it. */
let exportSecretsRole: string;
const cleanup: string[] = [];
const controllers: TestController[] = [];

/** The rules of the ClusterRole in a file of deploy/ (e.g. an example's). */
function clusterRoleRules(path: string): unknown[] {
  for (const doc of loadAll(readFileSync(join(repoRoot, path), "utf8"))) {
    const obj = doc as { kind?: string; rules?: unknown[] } | null;
    if (obj?.kind === "ClusterRole") return obj.rules ?? [];
  }
  throw new Error(`no ClusterRole in ${path}`);
}

beforeAll(async () => {
  admin = adminClient();
  // What deploy/base gives the controller cluster-wide: no write on ConfigMaps or Secrets.
  account = await controllerAccount(admin, "export-ctl", cleanup);
  src = await createNamespace(admin, "export-src");
  open = await createNamespace(admin, "export-open");
  closed = await createNamespace(admin, "export-closed");
  for (const ns of [src, open, closed]) cleanup.push(`/api/v1/namespaces/${ns}`);
  // The opt-in of one namespace, as deploy/examples/export-namespace and allow-secret-export do.
  exportConfigMapsRole = await account.grant(deployBaseRules("rbac-export.yaml"), open);
  exportSecretsRole = await account.grant(
    clusterRoleRules("deploy/examples/allow-secret-export/export-secrets.yaml"),
    open,
  );
  controllerToken = account.token;
  controllerClient = account.client;
  await waitFor("the controller's RBAC to apply", async () => {
    await controllerClient
      .request("GET", `/api/v1/namespaces/${open}/configmaps/none`)
      .catch((err: unknown) => {
        if (!isApiError(err, 404)) throw err;
      });
    return true;
  });
  ctl = await startTestController({ client: controllerClient, allowSecretExport: true });
  controllers.push(ctl);
}, 60_000);

afterAll(() => tearDownControllers(admin, controllers, cleanup), 60_000);

async function createConfigMap(
  ns: string,
  name: string,
  data: Record<string, string>,
  fieldManager?: string,
): Promise<void> {
  await admin.request("POST", `/api/v1/namespaces/${ns}/configmaps`, {
    body: { apiVersion: "v1", kind: "ConfigMap", metadata: { name }, data },
    ...(fieldManager ? { query: { fieldManager } } : {}),
  });
}

const createReferable = (spec: Record<string, unknown>, shard = ctl.shard) =>
  createReferableAs(admin, spec, { shard });

const sourceOf = (name: string, key = "v") => ({
  apiVersion: "v1",
  kind: "ConfigMap",
  namespace: src,
  name,
  fieldPath: `data.${key}`,
});

/**
 * A new source ConfigMap in `src` holding `value`, and a Referable of it (with `transform`, owned by
 * `shard`) that exports into `exports`; resolves with both names.
 */
async function exportingReferable(
  value: string,
  exports: unknown[],
  { shard = ctl.shard, transform }: { shard?: string; transform?: string } = {},
): Promise<{ source: string; rf: string }> {
  const source = uniqueName("db");
  await createConfigMap(src, source, { v: value });
  const rf = await createReferable(
    { source: sourceOf(source), ...(transform && { transform }), export: exports },
    shard,
  );
  return { source, rf };
}

const target = (kind: "ConfigMap" | "Secret", namespace: string, name: string, key: string) => ({
  kind,
  namespace,
  name,
  key,
});

const getObject = (kind: KeyTargetKind, ns: string, name: string) => getKeyTarget(admin, kind, ns, name);

/** referable_export_writes_total{result} of a test controller. */
async function exportWrites(c: TestController, result: string): Promise<number> {
  const metric = await c.metrics.exportWrites.get();
  return metric.values.find((v) => v.labels.result === result)?.value ?? 0;
}

const waitForExported = (
  name: string,
  reason: string,
  extra?: (view: ReferableView) => boolean,
  timeoutMs = 15_000,
) => waitForExportedAs(admin, name, reason, extra, timeoutMs);

const waitForData = (
  kind: KeyTargetKind,
  ns: string,
  name: string,
  check: (data: Record<string, string>, object: KubeObject | undefined) => boolean,
  timeoutMs?: number,
) => waitForDataAs(admin, kind, ns, name, check, timeoutMs);

describe("export into ConfigMaps", () => {
  it("creates a missing ConfigMap with the key, labelled, and records the key with its resourceVersion", async () => {
    const out = uniqueName("settings");
    const { rf } = await exportingReferable("db.internal", [target("ConfigMap", open, out, "DB_HOST")]);
    const view = await waitForExported(
      rf,
      "Exported",
      (v) => (v.status.exports as unknown[] | undefined)?.length === 1,
    );
    expect(view.reason).toBe("Available");
    expect(exportedCondition(view)).toMatchObject({ status: "True", message: "" });
    const cm = await getObject("ConfigMap", open, out);
    expect(dataOf(cm)).toEqual({ DB_HOST: "db.internal" });
    expect(cm?.metadata?.labels?.["referable.dev/exported"]).toBe("true");
    expect(view.status.exports).toEqual([
      {
        kind: "ConfigMap",
        namespace: open,
        name: out,
        key: "DB_HOST",
        resourceVersion: cm?.metadata?.resourceVersion,
      },
    ]);
    // The key belongs to the Referable's own field manager, applied.
    const managed = (cm?.metadata?.managedFields ?? []) as Array<{
      manager: string;
      operation: string;
      fieldsV1: Record<string, Record<string, unknown>>;
    }>;
    const mine = managed.find((m) => m.manager === `referable.dev/${rf}`);
    expect(mine?.operation).toBe("Apply");
    expect(Object.keys(mine?.fieldsV1["f:data"] ?? {})).toEqual(["f:DB_HOST"]);
    // Only a Referable that exports carries the finalizer.
    expect((view.object.metadata?.finalizers as string[] | undefined) ?? []).toContain(
      "referable.dev/export",
    );
  });

  it("writes into an existing ConfigMap, keeps its other keys, and follows the source", async () => {
    const out = uniqueName("app");
    await createConfigMap(open, out, { OTHER: "kept", LOG_LEVEL: "info" });
    const { source, rf } = await exportingReferable("one", [target("ConfigMap", open, out, "DB_HOST")]);
    await waitForExported(rf, "Exported");
    expect(dataOf(await getObject("ConfigMap", open, out))).toEqual({
      OTHER: "kept",
      LOG_LEVEL: "info",
      DB_HOST: "one",
    });

    const started = Date.now();
    await admin.request("PATCH", `/api/v1/namespaces/${src}/configmaps/${source}`, {
      body: { data: { v: "two" } },
      contentType: "application/merge-patch+json",
    });
    const cm = await waitForData("ConfigMap", open, out, (d) => d.DB_HOST === "two", 5_000);
    expect(Date.now() - started).toBeLessThan(5_000);
    expect(dataOf(cm)).toEqual({ OTHER: "kept", LOG_LEVEL: "info", DB_HOST: "two" });
    // The status records the write that put "two" there.
    await waitForExported(
      rf,
      "Exported",
      (v) =>
        (v.status.exports as Array<{ resourceVersion?: string }>)[0]?.resourceVersion ===
        cm?.metadata?.resourceVersion,
    );
  });

  it("re-creates a ConfigMap it created that someone deleted, at once and with its claim (the target watch)", async () => {
    const out = uniqueName("app");
    const { rf } = await exportingReferable("one", [target("ConfigMap", open, out, "DB_HOST")]);
    await waitForExported(rf, "Exported");
    const before = await getObject("ConfigMap", open, out);
    await admin.request("DELETE", `/api/v1/namespaces/${open}/configmaps/${out}`);
    // No change of the value: the watch of the target brings it back.
    const cm = await waitForData(
      "ConfigMap",
      open,
      out,
      (d, o) => d.DB_HOST === "one" && o?.metadata?.uid !== before?.metadata?.uid,
      5_000,
    );
    expect(dataOf(cm)).toEqual({ DB_HOST: "one" });
    // Created by the Referable again: its claim, so deleting the Referable deletes it.
    expect(cm?.metadata?.annotations?.["referable.dev/created-by"]).toBe(rf);
  });

  it("writes a value that is not a string as its JSON text, and several keys of one object", async () => {
    const out = uniqueName("json");
    const { rf } = await exportingReferable(
      "db.internal",
      [target("ConfigMap", open, out, "DB"), target("ConfigMap", open, out, "DB_COPY")],
      { transform: "{'host': value, 'port': 5432}" },
    );
    await waitForExported(rf, "Exported");
    const data = dataOf(await getObject("ConfigMap", open, out));
    expect(Object.keys(data).sort()).toEqual(["DB", "DB_COPY"]);
    expect(JSON.parse(data.DB!)).toEqual({ host: "db.internal", port: 5432 });
    expect(data.DB_COPY).toBe(data.DB);
  });

  it("reports a key another field manager owns as ExportConflict, naming the manager, and never overwrites it", async () => {
    const out = uniqueName("owned");
    await createConfigMap(open, out, { DB_HOST: "theirs" }, "someone-else");
    const { rf } = await exportingReferable("value-of-the-referable", [
      target("ConfigMap", open, out, "DB_HOST"),
    ]);
    const view = await waitForExported(rf, "ExportConflict");
    const condition = exportedCondition(view)!;
    expect(condition.status).toBe("False");
    expect(condition.message).toContain('conflict with "someone-else"');
    expect(condition.message).toContain(".data.DB_HOST");
    // Neither value appears: not the Referable's, not the other writer's.
    expect(condition.message).not.toContain("value-of-the-referable");
    expect(condition.message).not.toContain("theirs");
    expect(view.reason).toBe("Available");
    expect(dataOf(await getObject("ConfigMap", open, out))).toEqual({ DB_HOST: "theirs" });
    expect(await exportWrites(ctl, "conflict")).toBeGreaterThan(0);
  });

  it("removes the key when the source is deleted, and only that key", async () => {
    const out = uniqueName("app");
    await createConfigMap(open, out, { OTHER: "kept" });
    const { source, rf } = await exportingReferable("db.internal", [
      target("ConfigMap", open, out, "DB_HOST"),
    ]);
    await waitForExported(rf, "Exported");
    await admin.request("DELETE", `/api/v1/namespaces/${src}/configmaps/${source}`);
    const cm = await waitForData("ConfigMap", open, out, (d) => !("DB_HOST" in d));
    expect(dataOf(cm)).toEqual({ OTHER: "kept" });
    const view = await waitForExported(rf, "NoValue");
    expect(view.reason).toBe("SourceNotFound");
    expect(exportedCondition(view)?.status).toBe("False");
    expect(view.status.exports).toBeUndefined();
  });

  it("deleting the Referable removes its keys, deletes the object it created, and keeps everyone else's", async () => {
    const made = uniqueName("made");
    const shared = uniqueName("shared");
    await createConfigMap(open, shared, { OTHER: "kept" });
    const { source, rf } = await exportingReferable("db.internal", [
      target("ConfigMap", open, made, "DB_HOST"),
      target("ConfigMap", open, shared, "DB_HOST"),
    ]);
    // Another Referable writing into the object the first one creates: its key stays.
    const neighbour = await createReferable({
      source: sourceOf(source),
      export: [target("ConfigMap", open, shared, "NEIGHBOUR")],
    });
    await waitForExported(rf, "Exported");
    await waitForExported(neighbour, "Exported");
    expect(dataOf(await getObject("ConfigMap", open, made))).toEqual({ DB_HOST: "db.internal" });

    await admin.request("DELETE", `${REFERABLES}/${rf}`);
    await waitForGone(admin, `${REFERABLES}/${rf}`);
    // Removed before the Referable went (the finalizer): no waiting needed.
    expect(await getObject("ConfigMap", open, made)).toBeUndefined();
    const after = await getObject("ConfigMap", open, shared);
    expect(dataOf(after)).toEqual({ OTHER: "kept", NEIGHBOUR: "db.internal" });
    const managers = ((after?.metadata?.managedFields ?? []) as Array<{ manager: string }>).map(
      (m) => m.manager,
    );
    expect(managers).not.toContain(`referable.dev/${rf}`);
    expect(managers).toContain(`referable.dev/${neighbour}`);
  });

  it("removes the key of a target dropped from spec.export; with no target left, lets go of the finalizer", async () => {
    const out = uniqueName("app");
    await createConfigMap(open, out, { OTHER: "kept" });
    const { rf } = await exportingReferable("db.internal", [
      target("ConfigMap", open, out, "A"),
      target("ConfigMap", open, out, "B"),
    ]);
    await waitForExported(rf, "Exported");
    expect(dataOf(await getObject("ConfigMap", open, out))).toEqual({
      OTHER: "kept",
      A: "db.internal",
      B: "db.internal",
    });
    const patchExport = (exports: unknown) =>
      admin.request("PATCH", `${REFERABLES}/${rf}`, {
        body: { spec: { export: exports } },
        contentType: "application/merge-patch+json",
      });
    await patchExport([target("ConfigMap", open, out, "B")]);
    await waitForData("ConfigMap", open, out, (d) => !("A" in d));
    expect(dataOf(await getObject("ConfigMap", open, out))).toEqual({ OTHER: "kept", B: "db.internal" });
    await patchExport(null);
    await waitForData("ConfigMap", open, out, (d) => !("B" in d));
    const view = await waitFor(
      "the Referable to drop the export finalizer and the Exported condition",
      async () => {
        const v = await getReferable(admin, rf);
        const finalizers = (v.object.metadata?.finalizers as string[] | undefined) ?? [];
        return !finalizers.includes("referable.dev/export") && !exportedCondition(v) ? v : undefined;
      },
    );
    expect(view.status.exports).toBeUndefined();
    expect(view.reason).toBe("Available");
  });

  it("refuses to export into the object it reads, which would feed the value back into itself", async () => {
    // The source and the target in the opted-in namespace: data (the whole map) takes any key in.
    const both = uniqueName("loop");
    await createConfigMap(open, both, { v: "x" });
    const rf = await createReferable({
      source: { apiVersion: "v1", kind: "ConfigMap", namespace: open, name: both, fieldPath: "data" },
      export: [target("ConfigMap", open, both, "ALL")],
    });
    // The value first: the source's create can reach the controller's cache after the
    // Referable's, and this refusal does not wait for a value (SourceNotFound meanwhile).
    await waitForReason(admin, rf, "Available");
    const view = await waitForExported(rf, "InvalidSpec");
    expect(exportedCondition(view)!.message).toContain("cannot export into an object it reads");
    expect(view.reason).toBe("Available");
    expect(dataOf(await getObject("ConfigMap", open, both))).toEqual({ v: "x" });
  });

  it("keeps an object it created that someone else has written into since", async () => {
    const made = uniqueName("made");
    const { rf } = await exportingReferable("db.internal", [target("ConfigMap", open, made, "DB_HOST")]);
    await waitForExported(rf, "Exported");
    await admin.request("PATCH", `/api/v1/namespaces/${open}/configmaps/${made}`, {
      body: { data: { THEIRS: "x" } },
      contentType: "application/merge-patch+json",
      query: { fieldManager: "someone-else" },
    });
    await admin.request("DELETE", `${REFERABLES}/${rf}`);
    const cm = await waitForData("ConfigMap", open, made, (d) => !("DB_HOST" in d));
    expect(dataOf(cm)).toEqual({ THEIRS: "x" });
  });

  it("a namespace not opted in is ExportForbidden, saying what to apply; Ready is unaffected and nothing is written", async () => {
    const out = uniqueName("closed");
    const { rf } = await exportingReferable("db.internal", [target("ConfigMap", closed, out, "DB_HOST")]);
    await waitForReason(admin, rf, "Available"); // the value first, as above
    const view = await waitForExported(rf, "ExportForbidden");
    expect(view.reason).toBe("Available");
    expect(view.status.value).toBe("db.internal");
    const message = exportedCondition(view)!.message;
    expect(message).toContain(`namespace ${closed}`);
    expect(message).toContain("RoleBinding of the ClusterRole referable-export-configmaps");
    expect(message).toContain("deploy/examples/export-namespace");
    expect(message).not.toContain("db.internal");
    expect(await getObject("ConfigMap", closed, out)).toBeUndefined();
  });

  it("a Referable that never wrote into a namespace not opted in is not kept by it when deleted", async () => {
    // A Secret: the controller may not even read it there (a ConfigMap it may read, as a source).
    const { rf } = await exportingReferable("db.internal", [
      target("Secret", closed, uniqueName("creds"), "PASSWORD"),
    ]);
    await waitForExported(rf, "ExportForbidden");
    await admin.request("DELETE", `${REFERABLES}/${rf}`);
    await waitForGone(admin, `${REFERABLES}/${rf}`);
  });
});

describe("opting a namespace in later", () => {
  it("is picked up by itself: the refused export is retried on a backoff and succeeds", async () => {
    const later = await createNamespace(admin, "export-later", cleanup);
    const out = uniqueName("later");
    const { rf } = await exportingReferable("db.internal", [target("ConfigMap", later, out, "DB_HOST")]);
    await waitForExported(rf, "ExportForbidden");
    await account.bind(exportConfigMapsRole, later, "referable-export-configmaps");
    // The first retries come 1, 2 and 4 s after the refusal.
    await waitForExported(rf, "Exported", () => true, 20_000);
    expect(dataOf(await getObject("ConfigMap", later, out))).toEqual({ DB_HOST: "db.internal" });
  });
});

describe("export into Secrets", () => {
  it("writes the value base64-encoded into a Secret of an opted-in namespace", async () => {
    const out = uniqueName("creds");
    const { rf } = await exportingReferable("s3cr3t-pass", [target("Secret", open, out, "PASSWORD")]);
    await waitForExported(rf, "Exported");
    const secret = await getObject("Secret", open, out);
    expect(dataOf(secret)).toEqual({ PASSWORD: Buffer.from("s3cr3t-pass").toString("base64") });
    expect(secret?.metadata?.labels?.["referable.dev/exported"]).toBe("true");
  });

  it("is ExportForbidden when the controller runs without --allow-secret-export, though RBAC allows it", async () => {
    const strict = await startTestController({ client: controllerClient });
    controllers.push(strict);
    const out = uniqueName("creds");
    const { rf } = await exportingReferable("s3cr3t-pass", [target("Secret", open, out, "PASSWORD")], {
      shard: strict.shard,
    });
    const view = await waitForExported(rf, "ExportForbidden");
    expect(exportedCondition(view)!.message).toContain("--allow-secret-export");
    expect(await getObject("Secret", open, out)).toBeUndefined();
  });
});

describe("a restart", () => {
  it("writes nothing: not the exported key, not the status", async () => {
    const first = await startTestController({ client: controllerClient });
    controllers.push(first);
    const out = uniqueName("restart");
    const { source, rf } = await exportingReferable(
      "db.internal",
      [target("ConfigMap", open, out, "DB_HOST")],
      { shard: first.shard },
    );
    const before = await waitForExported(rf, "Exported");
    const cmBefore = await getObject("ConfigMap", open, out);
    await first.stop();

    const restarted = await restartCountingWrites(controllerToken, first.shard);
    const { controller: second, writes } = restarted;
    controllers.push(second);
    expect(writes).toEqual([]);
    expect(await exportWrites(second, "success")).toBe(0);
    const cmAfter = await getObject("ConfigMap", open, out);
    expect(cmAfter?.metadata?.resourceVersion).toBe(cmBefore?.metadata?.resourceVersion);
    const after = await getReferable(admin, rf);
    expect(after.object.metadata?.resourceVersion).toBe(before.object.metadata?.resourceVersion);

    // And it still follows the source.
    await admin.request("PATCH", `/api/v1/namespaces/${src}/configmaps/${source}`, {
      body: { data: { v: "db2.internal" } },
      contentType: "application/merge-patch+json",
    });
    await waitForData("ConfigMap", open, out, (d) => d.DB_HOST === "db2.internal", 5_000);
    await restarted.stop();
  });
});

/** Binds `role` to the controller in `ns`; resolves with the RoleBinding's path. */
const bindToController = (ns: string, role: string): Promise<string> => account.bind(role, ns);

/** Waits until the controller's `get` of a Secret in `ns` answers `code` (RBAC applied). */
async function waitForSecretAccess(ns: string, code: 403 | 404): Promise<void> {
  await waitFor(`the controller's get of Secrets in ${ns} to answer ${code}`, async () => {
    try {
      await controllerClient.request("GET", `/api/v1/namespaces/${ns}/secrets/none`);
      return false;
    } catch (err) {
      return isApiError(err, code);
    }
  });
}

const waitForReferableGone = (name: string, timeoutMs = 15_000) =>
  waitForGone(admin, `${REFERABLES}/${name}`, timeoutMs);

const patchSpecExport = (name: string, exports: unknown) =>
  admin.request("PATCH", `${REFERABLES}/${name}`, {
    body: { spec: { export: exports } },
    contentType: "application/merge-patch+json",
  });

describe("loops through exports (issue 22, case 2)", () => {
  it("two Referables exporting into each other's source are InvalidSpec naming the cycle, and the writes stop", async () => {
    // A controller of its own, over a client that records every write it makes.
    const counted = new SeverableClient(controllerClient);
    const own = await startTestController({
      client: controllerClient,
      build: { writer: counted as unknown as KubeClient },
    });
    controllers.push(own);
    const x = uniqueName("loop-x");
    const y = uniqueName("loop-y");
    const counter = (from: string, into: string) => ({
      source: { apiVersion: "v1", kind: "ConfigMap", namespace: open, name: from, fieldPath: "data.n" },
      default: "0",
      transform: "string(int(value) + 1)",
      export: [target("ConfigMap", open, into, "n")],
    });
    const a = await createReferable(counter(x, y), own.shard);
    const b = await createReferable(counter(y, x), own.shard);
    for (const [name, other] of [
      [a, b],
      [b, a],
    ] as const) {
      const view = await waitForReason(admin, name, "InvalidSpec");
      // The cycle, with the objects it runs through.
      const cycle =
        name === a
          ? `${a} → ConfigMap ${open}/${x} → ${b} → ConfigMap ${open}/${y} → ${a}`
          : `${b} → ConfigMap ${open}/${y} → ${a} → ConfigMap ${open}/${x} → ${b}`;
      expect(view.message).toContain(`in a cycle of 2 (${cycle})`);
      expect(view.message).toContain(other);
      // No value, so no key: what was exported before the cycle was seen is removed.
      await waitForExported(
        name,
        "NoValue",
        (v) => (v.status.exports as unknown[] | undefined) === undefined,
      );
    }
    const configMapWrites = () => counted.writes.filter((w) => w.includes("/configmaps/")).length;
    const versions = async () => [
      (await getObject("ConfigMap", open, x))?.metadata?.resourceVersion,
      (await getObject("ConfigMap", open, y))?.metadata?.resourceVersion,
    ];
    const settledWrites = configMapWrites();
    const settledVersions = await versions();
    // Bounded: a handful of writes before the second Referable closed the cycle, and their removal.
    expect(settledWrites).toBeLessThanOrEqual(8);
    // And nothing after: a counting loop (about 19 writes a second before) would move them here.
    const watchedFrom = Date.now();
    await expect(
      waitFor(
        "a write into either ConfigMap after both are InvalidSpec",
        async () =>
          configMapWrites() !== settledWrites ||
          JSON.stringify(await versions()) !== JSON.stringify(settledVersions),
        { timeoutMs: 3_000, intervalMs: 100 },
      ),
    ).rejects.toThrow("timed out after 3000 ms");
    expect(Date.now() - watchedFrom).toBeGreaterThanOrEqual(3_000);
    expect(configMapWrites()).toBe(settledWrites);
  });
});

describe("a target dropped from spec.export (issue 22, case 10)", () => {
  it("deletes the object the Referable created once its last key is removed, and keeps one that holds more", async () => {
    const made = uniqueName("made");
    const shared = uniqueName("shared");
    const { rf } = await exportingReferable("db.internal", [
      target("ConfigMap", open, made, "DB_HOST"),
      target("ConfigMap", open, shared, "DB_HOST"),
    ]);
    await waitForExported(rf, "Exported", (v) => (v.status.exports as unknown[] | undefined)?.length === 2);
    const madeBefore = await getObject("ConfigMap", open, made);
    expect(madeBefore?.metadata?.annotations?.["referable.dev/created-by"]).toBe(rf);
    // Someone else writes into the other object it created: that one must stay.
    await admin.request("PATCH", `/api/v1/namespaces/${open}/configmaps/${shared}`, {
      body: { data: { THEIRS: "x" } },
      contentType: "application/merge-patch+json",
      query: { fieldManager: "someone-else" },
    });
    await patchSpecExport(rf, [target("ConfigMap", open, uniqueName("next"), "DB_HOST")]);
    await waitFor(
      `ConfigMap ${made} to be deleted`,
      async () => (await getObject("ConfigMap", open, made)) === undefined,
    );
    await waitForData("ConfigMap", open, shared, (d) => !("DB_HOST" in d));
    expect(dataOf(await getObject("ConfigMap", open, shared))).toEqual({ THEIRS: "x" });
    const view = await waitForExported(
      rf,
      "Exported",
      (v) => (v.status.exports as unknown[] | undefined)?.length === 1,
    );
    expect((view.status.exports as Array<{ name: string }>).map((r) => r.name)).not.toContain(made);
  });
});

describe("a crash between a key's write and its status write (issue 22, case 7)", () => {
  it("leaves nothing behind: the key written before the crash is removed once the spec no longer names it", async () => {
    const out = uniqueName("crash");
    const objectPath = `/api/v1/namespaces/${open}/configmaps/${out}`;
    // The process "dies" right after the apply into the target: the status write after it
    // (or anything else) never reaches the API server.
    const dying = new SeverableClient(
      controllerClient,
      (method, path) => method === "PATCH" && path === objectPath,
    );
    const first = await startTestController({
      client: controllerClient,
      build: { writer: dying as unknown as KubeClient },
    });
    controllers.push(first);
    const { rf } = await exportingReferable("db.internal", [target("ConfigMap", open, out, "K")], {
      shard: first.shard,
    });
    await dying.severed;
    await first.stop();
    expect(dataOf(await getObject("ConfigMap", open, out))).toEqual({ K: "db.internal" });
    // Intent came first: the status names the key, with no resourceVersion (none was recorded).
    const crashed = await getReferable(admin, rf);
    expect(crashed.status.exports).toEqual([{ kind: "ConfigMap", namespace: open, name: out, key: "K" }]);

    await patchSpecExport(rf, [target("ConfigMap", open, uniqueName("elsewhere"), "K")]);
    const second = await startTestController({ client: controllerClient, shard: first.shard });
    controllers.push(second);
    await waitFor(
      `the orphaned ConfigMap ${out} to be gone`,
      async () => (await getObject("ConfigMap", open, out)) === undefined,
    );
    const view = await waitForExported(
      rf,
      "Exported",
      (v) => (v.status.exports as unknown[] | undefined)?.length === 1,
    );
    expect((view.status.exports as Array<{ name: string }>)[0]!.name).not.toBe(out);
    await second.stop();
  });
});

describe("--allow-secret-export turned off (issue 22, case 8)", () => {
  /** A Referable exporting into a new Secret of `ns`, exported by a controller allowed to. */
  async function exportedSecret(ns: string): Promise<{ rf: string; secret: string; shard: string }> {
    const allowed = await startTestController({ client: controllerClient, allowSecretExport: true });
    controllers.push(allowed);
    const secret = uniqueName("creds");
    const { rf } = await exportingReferable("s3cr3t-pass", [target("Secret", ns, secret, "PASSWORD")], {
      shard: allowed.shard,
    });
    await waitForExported(
      rf,
      "Exported",
      (v) =>
        (v.status.exports as Array<{ resourceVersion?: string }> | undefined)?.[0]?.resourceVersion !==
        undefined,
    );
    expect(dataOf(await getObject("Secret", ns, secret))).toEqual({
      PASSWORD: Buffer.from("s3cr3t-pass").toString("base64"),
    });
    await allowed.stop();
    return { rf, secret, shard: allowed.shard };
  }

  it("removes the Secret keys written before, says why none is written, and lets the Referable go", async () => {
    const { rf, secret, shard } = await exportedSecret(open);
    const strict = await startTestController({ client: controllerClient, shard });
    controllers.push(strict);
    // The Secret was created by the Referable and holds nothing else: it goes with the key.
    await waitFor(
      `Secret ${secret} to be gone`,
      async () => (await getObject("Secret", open, secret)) === undefined,
    );
    const view = await waitForExported(rf, "ExportForbidden", (v) => v.status.exports === undefined);
    expect(exportedCondition(view)!.message).toContain("--allow-secret-export");
    await admin.request("DELETE", `${REFERABLES}/${rf}`);
    await waitForReferableGone(rf);
  });

  it("removes them when the Referable is deleted while the flag is off", async () => {
    const { rf, secret, shard } = await exportedSecret(open);
    await admin.request("DELETE", `${REFERABLES}/${rf}`);
    const strict = await startTestController({ client: controllerClient, shard });
    controllers.push(strict);
    await waitForReferableGone(rf);
    expect(await getObject("Secret", open, secret)).toBeUndefined();
  });

  it("says so where RBAC no longer allows the removal, and the finalizer waits until it does", async () => {
    const ns = await createNamespace(admin, "export-revoked", cleanup);
    await bindToController(ns, exportConfigMapsRole);
    const secretsBinding = await bindToController(ns, exportSecretsRole);
    await waitForSecretAccess(ns, 404);
    const { rf, secret, shard } = await exportedSecret(ns);
    await admin.request("DELETE", secretsBinding);
    await waitForSecretAccess(ns, 403);
    const strict = await startTestController({ client: controllerClient, shard });
    controllers.push(strict);
    const refused = await waitForExported(rf, "ExportForbidden", (v) =>
      (exportedCondition(v)?.message ?? "").includes(
        "could not remove the keys written before --allow-secret-export was turned off",
      ),
    );
    // The records stay: the key is still there, and the status says so.
    expect((refused.status.exports as Array<{ name: string }>).map((r) => r.name)).toEqual([secret]);
    await admin.request("DELETE", `${REFERABLES}/${rf}`);
    const terminating = await waitForExported(rf, "ExportForbidden", (v) =>
      (exportedCondition(v)?.message ?? "").includes("keeps its finalizer referable.dev/export"),
    );
    expect(terminating.object.metadata?.deletionTimestamp).toBeDefined();
    expect(dataOf(await getObject("Secret", ns, secret))).toHaveProperty("PASSWORD");
    // Access restored: the next retry (1, 2, 4 s... after the refusal) removes it, and the Referable goes.
    await bindToController(ns, exportSecretsRole);
    await waitForReferableGone(rf, 20_000);
    expect(await getObject("Secret", ns, secret)).toBeUndefined();
  });
});

describe("the library's exportValue and removeExport", () => {
  it("writes, writes nothing when the key holds the value, keeps its other keys, conflicts, and removes", async () => {
    // As a consumer calls it: with a KubeConfig (the library makes and closes its connection).
    const kubeConfig = testKubeConfig();
    const out = uniqueName("lib");
    const options = { fieldManager: "my-operator/db" };
    const t = (key: string) => target("ConfigMap", open, out, key);
    const first = await exportValue(kubeConfig, t("HOST"), "db.internal", options);
    expect(first.written).toBe(true);
    expect(await exportValue(kubeConfig, t("HOST"), "db.internal", options)).toEqual({
      written: false,
      resourceVersion: first.resourceVersion,
    });
    await exportValue(kubeConfig, t("PORT"), 5432, options);
    expect(dataOf(await getObject("ConfigMap", open, out))).toEqual({ HOST: "db.internal", PORT: "5432" });

    // Another manager's key is reported, not taken.
    const err = await exportValue(kubeConfig, t("HOST"), "elsewhere", { fieldManager: "another" }).catch(
      (e: unknown) => e,
    );
    expect(isExportError(err) && err.reason).toBe("ExportConflict");
    expect((err as Error).message).toContain('conflict with "my-operator/db"');

    expect(await removeExport(kubeConfig, t("HOST"), options)).toBe(true);
    expect(dataOf(await getObject("ConfigMap", open, out))).toEqual({ PORT: "5432" });
    expect(await removeExport(kubeConfig, t("HOST"), options)).toBe(false);
    // The last key of an object the manager created: the object goes with it.
    expect(await removeExport(kubeConfig, t("PORT"), options)).toBe(true);
    expect(await getObject("ConfigMap", open, out)).toBeUndefined();
  });
});

const binDir = process.env.REFERABLE_TEST_BIN_DIR;
const withKubectl = describeIf(
  binDir
    ? undefined
    : "no kubectl: REFERABLE_TEST_BIN_DIR is set only when the harness starts the control plane",
);

withKubectl("kubectl get rf", () => {
  it("shows EXPORTED: True once exported, False when not", async () => {
    const { rf: done } = await exportingReferable("db.internal", [
      target("ConfigMap", open, uniqueName("k"), "K"),
    ]);
    const { rf: refused } = await exportingReferable("db.internal", [
      target("ConfigMap", closed, uniqueName("k"), "K"),
    ]);
    await waitForExported(done, "Exported");
    await waitForExported(refused, "ExportForbidden");
    const { stdout } = await promisify(execFile)(join(binDir!, "kubectl"), ["get", "rf", done, refused], {
      env: { ...process.env, KUBECONFIG: process.env.REFERABLE_TEST_KUBECONFIG },
    });
    const [header, ...rows] = stdout.trim().split("\n");
    const column = header!.indexOf("EXPORTED");
    expect(column).toBeGreaterThan(0);
    const cell = (row: string) => row.slice(column).split(/\s+/)[0];
    expect(cell(rows.find((r) => r.startsWith(done))!)).toBe("True");
    expect(cell(rows.find((r) => r.startsWith(refused))!)).toBe("False");
  });
});
