/**
 * Exported keys are owned (issue 22, cases 3 to 6), on the real control plane, with a controller
 * running as a ServiceAccount with the shipped RBAC (deploy/base, export opted in for one
 * namespace with the RoleBinding the docs give):
 * - drift: a key patched by hand is ExportConflict at once, naming the manager, never forced,
 *   and written again once that manager lets go; a deleted key, a deleted object, put back;
 * - two Referables naming one key: the first created owns it, the other says so, and takes over
 *   when the owner goes; a deleted target is re-created by its owner only;
 * - field managers: a 114- and a 200-character name that shared one manager keep apart; a key
 *   written under a long name's manager of earlier releases is taken over.
 */
import { afterAll, beforeAll, describe, expect, it, jest } from "@jest/globals";
import { isApiError, KubeClient, type KubeObject } from "../../src/kube/client.ts";
import { fieldManagerFor, legacyFieldManagerFor } from "../../src/outputs/keys/target.ts";
import { controllerAccount } from "../harness/controller-account.ts";
import {
  createReferable as createReferableAs,
  getReferable,
  REFERABLES,
  startTestController,
  tearDownControllers,
  type TestController,
} from "../harness/controller.ts";
import { dataOf, exportedCondition, getKeyTarget, waitForData, waitForExported } from "../harness/export.ts";
import {
  adminClient,
  createConfigMap,
  createNamespace,
  deployBaseRules,
  kubeConfigWithToken,
  mergePatch,
  uniqueName,
  waitFor,
  waitForGone,
} from "../harness/kube.ts";

jest.setTimeout(30_000);

let admin: KubeClient;
let ctl: TestController;
/** Sources live here. */
let src: string;
/** Opted in to export (ConfigMaps). */
let open: string;
/** Opted in to Secret export with a role of earlier releases: no list, no watch. */
let older: string;
let controllerClient: KubeClient;
let controllerToken: string;
/** How often the controller re-reads targets where it may not watch them, here. */
const RESYNC_MS = 300;
const cleanup: string[] = [];

beforeAll(async () => {
  admin = adminClient();
  // What deploy/base gives the controller cluster-wide, and the opt-in of one namespace.
  const account = await controllerAccount(admin, "owned-ctl", cleanup);
  src = await createNamespace(admin, "owned-src");
  open = await createNamespace(admin, "owned-open");
  older = await createNamespace(admin, "owned-older");
  for (const ns of [src, open, older]) cleanup.push(`/api/v1/namespaces/${ns}`);
  await account.grant(deployBaseRules("rbac-export.yaml"), open);
  // An opt-in of Secrets with the verbs of earlier releases.
  await account.grant(
    [{ apiGroups: [""], resources: ["secrets"], verbs: ["get", "create", "patch", "delete"] }],
    older,
  );
  controllerToken = account.token;
  const client = account.client;
  controllerClient = client;
  await waitFor("the controller's RBAC to apply", () =>
    client.request("GET", `/api/v1/namespaces/${open}/configmaps`).then(
      () => true,
      () => false,
    ),
  );
  ctl = await startTestController({ client, allowSecretExport: true, build: { exportResyncMs: RESYNC_MS } });
}, 60_000);

afterAll(() => tearDownControllers(admin, [ctl], cleanup), 60_000);

const cmPath = (ns: string, name: string) => `/api/v1/namespaces/${ns}/configmaps/${name}`;

async function createSource(value: string): Promise<string> {
  const name = uniqueName("db");
  await createConfigMap(admin, src, name, { v: value });
  return name;
}

const setSource = (name: string, value: string) =>
  mergePatch(admin, cmPath(src, name), { data: { v: value } });

const createReferable = (spec: Record<string, unknown>, name?: string) =>
  createReferableAs(admin, spec, { shard: ctl.shard, ...(name && { name }) });

const exporting = (source: string, out: string, key: string, extra: Record<string, unknown> = {}) => ({
  source: { apiVersion: "v1", kind: "ConfigMap", namespace: src, name: source, fieldPath: "data.v" },
  export: [{ kind: "ConfigMap", namespace: open, name: out, key }],
  ...extra,
});

const getConfigMap = (name: string) => getKeyTarget(admin, "ConfigMap", open, name);

/** The managers that own `key` of the object's data. */
function managersOf(o: KubeObject | undefined, key: string): string[] {
  const entries = (o?.metadata?.managedFields ?? []) as Array<{
    manager: string;
    fieldsV1?: Record<string, Record<string, unknown>>;
  }>;
  return entries.filter((e) => `f:${key}` in (e.fieldsV1?.["f:data"] ?? {})).map((e) => e.manager);
}

/** Waits until the ConfigMap satisfies `check`; returns it. */
const waitForConfigMap = (
  name: string,
  check: (data: Record<string, string>, object: KubeObject | undefined) => boolean,
  timeoutMs = 5_000,
) => waitForData(admin, "ConfigMap", open, name, check, timeoutMs);

/** Of two Referables, the one created first (creationTimestamp, then name): the owner of a key both name. */
async function firstCreated(a: string, b: string): Promise<[owner: string, other: string]> {
  const stamp = async (n: string) =>
    `${String((await getReferable(admin, n)).object.metadata?.creationTimestamp)} ${n}`;
  return (await stamp(a)) < (await stamp(b)) ? [a, b] : [b, a];
}

async function deleteReferable(name: string): Promise<void> {
  await admin.request("DELETE", `${REFERABLES}/${name}`);
  await waitForGone(admin, `${REFERABLES}/${name}`);
}

describe("drift (case 3)", () => {
  it("a key patched by hand is ExportConflict at once, naming the manager, never forced; written again once that manager lets go", async () => {
    const source = await createSource("db.internal");
    const out = uniqueName("drift");
    const rf = await createReferable(exporting(source, out, "DB_HOST"));
    await waitForExported(admin, rf, "Exported");
    // As `kubectl patch` does: an update under the manager kubectl-patch.
    const patch = (value: string | null) =>
      admin.request("PATCH", cmPath(open, out), {
        body: { data: { DB_HOST: value } },
        contentType: "application/merge-patch+json",
        query: { fieldManager: "kubectl-patch" },
      });
    await patch("by-hand");
    const view = await waitForExported(admin, rf, "ExportConflict", () => true, 5_000);
    const condition = exportedCondition(view)!;
    expect(condition.status).toBe("False");
    expect(condition.message).toContain('conflict with "kubectl-patch"');
    expect(condition.message).not.toContain("by-hand");
    expect(condition.message).not.toContain("db.internal");
    expect(dataOf(await getConfigMap(out)).DB_HOST).toBe("by-hand");
    // Not recorded as written (a record without resourceVersion is only an intent, for the sweep).
    expect(
      ((view.status.exports ?? []) as Array<{ resourceVersion?: string }>).filter((r) => r.resourceVersion),
    ).toEqual([]);

    // The other manager lets go (removes the key): the owner writes again, without a change of the value.
    await patch(null);
    const cm = await waitForConfigMap(out, (d) => d.DB_HOST === "db.internal");
    expect(managersOf(cm, "DB_HOST")).toEqual([`referable.dev/${rf}`]);
    await waitForExported(admin, rf, "Exported", () => true, 5_000);
  });

  it("a key deleted by someone else is put back, without a change of the value", async () => {
    const source = await createSource("db.internal");
    const out = uniqueName("drift");
    const rf = await createReferable(exporting(source, out, "DB_HOST"));
    await waitForExported(admin, rf, "Exported");
    await admin.request("PATCH", cmPath(open, out), {
      body: { data: { DB_HOST: null, OTHER: "theirs" } },
      contentType: "application/merge-patch+json",
      query: { fieldManager: "someone-else" },
    });
    const cm = await waitForConfigMap(out, (d) => d.DB_HOST === "db.internal");
    expect(dataOf(cm)).toEqual({ DB_HOST: "db.internal", OTHER: "theirs" });
    expect(exportedCondition(await getReferable(admin, rf))?.reason).toBe("Exported");
  });

  it("an object deleted by someone else is created again, without a change of the value", async () => {
    const source = await createSource("db.internal");
    const out = uniqueName("drift");
    const rf = await createReferable(exporting(source, out, "DB_HOST"));
    await waitForExported(admin, rf, "Exported");
    const before = await getConfigMap(out);
    await admin.request("DELETE", cmPath(open, out));
    const cm = await waitForConfigMap(
      out,
      (d, o) => d.DB_HOST === "db.internal" && o?.metadata?.uid !== before?.metadata?.uid,
    );
    expect(cm?.metadata?.labels?.["referable.dev/exported"]).toBe("true");
    // The status records the write into the new object.
    await waitForExported(
      admin,
      rf,
      "Exported",
      (v) =>
        (v.status.exports as Array<{ resourceVersion?: string }> | undefined)?.[0]?.resourceVersion !==
        before?.metadata?.resourceVersion,
    );
  });

  it("where the controller may not watch (a role without list and watch), a deleted key is put back by re-reading", async () => {
    // Secrets: ConfigMaps the controller may list everywhere as sources (the default source kinds).
    const secrets = `/api/v1/namespaces/${older}/secrets`;
    const refused = await controllerClient.request("GET", secrets).then(
      () => undefined,
      (err: unknown) => err,
    );
    expect(isApiError(refused, 403)).toBe(true);
    const source = await createSource("db.internal");
    const out = uniqueName("older");
    const rf = await createReferable({
      ...exporting(source, out, "DB_HOST"),
      export: [{ kind: "Secret", namespace: older, name: out, key: "DB_HOST" }],
    });
    await waitForExported(admin, rf, "Exported");
    await admin.request("PATCH", `${secrets}/${out}`, {
      body: { data: { DB_HOST: null } },
      contentType: "application/merge-patch+json",
    });
    await waitFor(
      "the key to be put back",
      async () => {
        const secret = await admin.request<KubeObject>("GET", `${secrets}/${out}`);
        return (secret.data as Record<string, string> | undefined)?.DB_HOST === btoa("db.internal");
      },
      { timeoutMs: 5_000, intervalMs: 20 },
    );
  });
});

describe("the watch costs no read", () => {
  it("a change of the value reads no target: the watch event of its own write is not drift", async () => {
    const verbs: string[] = [];
    const counted = new KubeClient({
      kubeConfig: kubeConfigWithToken(controllerToken),
      observe: (o) => verbs.push(o.verb),
    });
    const own = await startTestController({ client: counted });
    try {
      const source = await createSource("v0");
      const out = uniqueName("quiet");
      const rf = await createReferableAs(admin, exporting(source, out, "DB_HOST"), { shard: own.shard });
      await waitFor(
        "the first export",
        async () => exportedCondition(await getReferable(admin, rf))?.reason === "Exported",
      );
      const start = verbs.length;
      for (let i = 1; i <= 3; i++) {
        await setSource(source, `v${i}`);
        await waitForConfigMap(out, (d) => d.DB_HOST === `v${i}`);
        await waitFor(
          "the status to record it",
          async () => (await getReferable(admin, rf)).status.value === `v${i}`,
        );
        // Whatever else settles (the echo's reconcile, of this change or the one before), it reads nothing.
        expect(verbs.slice(start).filter((v) => v === "get")).toEqual([]);
      }
    } finally {
      await own.stop();
      await counted.close();
    }
  });
});

describe("one key, one owner (cases 4 and 5)", () => {
  it("two Referables naming one key: the first created writes every change, the other says who owns it; it takes over when the owner goes", async () => {
    const source = await createSource("first.internal");
    const out = uniqueName("shared");
    const a = await createReferable(exporting(source, out, "DB_HOST"));
    const b = await createReferable(exporting(source, out, "DB_HOST"));
    const [owner, other] = await firstCreated(a, b);
    await waitForExported(admin, owner, "Exported");
    const refused = await waitForExported(admin, other, "ExportConflict");
    expect(exportedCondition(refused)!.message).toContain(`exported by the Referable ${owner}`);
    expect(exportedCondition(refused)!.message).not.toContain("first.internal");

    // A change: the owner's write goes through (no deadlock), the other still says why not.
    await setSource(source, "second.internal");
    const cm = await waitForConfigMap(out, (d) => d.DB_HOST === "second.internal");
    expect(managersOf(cm, "DB_HOST")).toEqual([`referable.dev/${owner}`]);
    await waitForExported(admin, owner, "Exported");
    await waitForExported(admin, other, "ExportConflict", (v) => v.status.value === "second.internal");

    // The owner goes: the other takes the key over.
    await deleteReferable(owner);
    const after = await waitForConfigMap(
      out,
      (d, o) =>
        d.DB_HOST === "second.internal" && managersOf(o, "DB_HOST").join() === `referable.dev/${other}`,
    );
    expect(dataOf(after)).toEqual({ DB_HOST: "second.internal" });
    await waitForExported(admin, other, "Exported");
  });

  it("a deleted target is re-created by its owner only, with the owner's value", async () => {
    const source = await createSource("db");
    const out = uniqueName("shared");
    const a = await createReferable(exporting(source, out, "DB_HOST", { transform: "value + '-a'" }));
    const b = await createReferable(exporting(source, out, "DB_HOST", { transform: "value + '-b'" }));
    const [owner, other] = await firstCreated(a, b);
    const mine = owner === a ? "db-a" : "db-b";
    await waitForExported(admin, owner, "Exported");
    await waitForExported(admin, other, "ExportConflict");
    const before = await getConfigMap(out);
    expect(dataOf(before)).toEqual({ DB_HOST: mine });

    await admin.request("DELETE", cmPath(open, out));
    const cm = await waitForConfigMap(
      out,
      (d, o) => d.DB_HOST !== undefined && o?.metadata?.uid !== before?.metadata?.uid,
    );
    expect(dataOf(cm)).toEqual({ DB_HOST: mine });
    expect(managersOf(cm, "DB_HOST")).toEqual([`referable.dev/${owner}`]);
    // Both look again at a change of the value: still only the owner writes.
    await setSource(source, "db2");
    const changed = await waitForConfigMap(out, (d) => d.DB_HOST === `${mine.replace("db", "db2")}`);
    await waitForExported(admin, other, "ExportConflict", (v) => String(v.status.value).startsWith("db2"));
    expect(managersOf(await getConfigMap(out), "DB_HOST")).toEqual([`referable.dev/${owner}`]);
    expect(dataOf(changed)).toEqual({ DB_HOST: mine.replace("db", "db2") });
  });
});

describe("field managers (case 6)", () => {
  it("a 114- and a 200-character name that shared a manager keep both keys, under distinct managers", async () => {
    const long = `${uniqueName("owned")}-${"x".repeat(186)}`.slice(0, 200);
    const short = legacyFieldManagerFor(long)!.slice("referable.dev/".length);
    expect([short.length, long.length]).toEqual([114, 200]);
    const source = await createSource("db.internal");
    const out = uniqueName("managers");
    await createReferable(exporting(source, out, "SHORT"), short);
    await waitForExported(admin, short, "Exported");
    await createReferable(exporting(source, out, "LONG"), long);
    await waitForExported(admin, long, "Exported");
    const cm = await getConfigMap(out);
    expect(dataOf(cm)).toEqual({ SHORT: "db.internal", LONG: "db.internal" });
    expect(managersOf(cm, "SHORT")).toEqual([`referable.dev/${short}`]);
    expect(managersOf(cm, "LONG")).toEqual([fieldManagerFor(long)]);
    expect(fieldManagerFor(long)).not.toBe(`referable.dev/${short}`);
    // Both still say so: neither took the other's key.
    expect(exportedCondition(await getReferable(admin, short))?.reason).toBe("Exported");
  });

  it("a key written under a long name's manager of earlier releases is taken over, with the current value, and the old manager let go of", async () => {
    const long = `${uniqueName("legacy")}-${"y".repeat(186)}`.slice(0, 200);
    const legacy = legacyFieldManagerFor(long)!;
    const out = uniqueName("legacy");
    // What an earlier release left: the key under the old manager, with a value since outdated.
    await admin.request("PATCH", cmPath(open, out), {
      body: {
        apiVersion: "v1",
        kind: "ConfigMap",
        metadata: { name: out, namespace: open, labels: { "referable.dev/exported": "true" } },
        data: { DB_HOST: "old" },
      },
      contentType: "application/apply-patch+yaml",
      query: { fieldManager: legacy },
    });
    const source = await createSource("new");
    await createReferable(exporting(source, out, "DB_HOST"), long);
    await waitForExported(admin, long, "Exported");
    const cm = await getConfigMap(out);
    expect(dataOf(cm)).toEqual({ DB_HOST: "new" });
    expect(managersOf(cm, "DB_HOST")).toEqual([fieldManagerFor(long)]);
    const managers = ((cm?.metadata?.managedFields ?? []) as Array<{ manager: string }>).map(
      (m) => m.manager,
    );
    expect(managers).not.toContain(legacy);
  });
});
