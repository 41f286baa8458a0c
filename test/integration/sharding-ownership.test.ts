/**
 * One owner per exported key and per exported field across shards: two controller processes
 * with `--shards=2` (listing by slot: each lists its own bucket and the graph view), each serving
 * one bucket, and two Referables in different buckets (so served
 * by different processes) that name the same ConfigMap key and the same annotation of another
 * ConfigMap. The first created owns both and is the only one whose field manager writes them;
 * the other, served by the other process, is `ExportConflict` naming it (not a foreign manager).
 * When the owner is deleted the other, still on its own shard, takes the key and the field over.
 *
 * Own namespace, own Leases and its own label on its Referables: it runs beside any other file.
 */
import type { KubeClient, KubeObject } from "../../src/kube/client.ts";
import { bucketOf } from "../../src/runtime/buckets.ts";
import { GRAPH_LABEL, SLOT_LABEL, slotOf } from "../../src/runtime/slots.ts";
import {
  createReferable,
  REFERABLES,
  SHARD_LABEL,
  waitForView,
  type ReferableView,
} from "../harness/controller.ts";
import { exportedCondition, waitForExported } from "../harness/export.ts";
import { createConfigMap, mergePatch, uniqueName, waitFor, waitForGone } from "../harness/kube.ts";
import { killAllProcesses, metricValue, type ControllerProcess } from "../harness/process.ts";
import { openShardSet, type ShardSet } from "../harness/shard-set.ts";

const BUCKETS = 2;
const WAIT_MS = 60_000;
const ANNOTATION = "example.com/owner";

let set: ShardSet;
let admin: KubeClient;
let ns: string;
let label: string;
const IDENTITIES = ["owner-a", "owner-b"];
const replicas: ControllerProcess[] = [];

beforeAll(async () => {
  set = await openShardSet("shard-owner");
  ({ admin, ns, label } = set);
  for (const identity of IDENTITIES) replicas.push(await set.startReplica(identity, BUCKETS));
}, WAIT_MS);

afterAll(async () => {
  await killAllProcesses();
  const list = await admin
    .request<{ items: KubeObject[] }>("GET", REFERABLES, {
      query: { labelSelector: `${SHARD_LABEL}=${label}` },
    })
    .catch(() => ({ items: [] as KubeObject[] }));
  for (const rf of list.items) {
    const path = `${REFERABLES}/${rf.metadata?.name}`;
    await mergePatch(admin, path, { metadata: { finalizers: null } }).catch(() => undefined);
    await admin.request("DELETE", path).catch(() => undefined);
  }
  await admin.request("DELETE", `/api/v1/namespaces/${ns}`).catch(() => undefined);
  await set.close();
}, WAIT_MS);

/** A fresh Referable name whose bucket is `bucket`. */
function nameInBucket(bucket: number): string {
  for (;;) {
    const name = uniqueName(`${label}-b${bucket}`);
    if (bucketOf(name, BUCKETS) === bucket) return name;
  }
}

/** The identities that logged a status write of `referable`. */
const writersOf = (referable: string): string[] =>
  IDENTITIES.filter((_, i) =>
    replicas[i]!.logs().some((line) => line.msg === "status written" && line.referable === referable),
  );

/** The referable.dev field managers in `object`'s managedFields that own `field` (`f:data`/`f:K` style). */
function referableManagers(object: KubeObject, path: string[]): string[] {
  const entries = (object.metadata?.managedFields ?? []) as Array<{ manager?: string; fieldsV1?: unknown }>;
  return entries
    .filter((e) => e.manager?.startsWith("referable.dev/"))
    .filter((e) => {
      let node = e.fieldsV1 as Record<string, unknown> | undefined;
      for (const step of path) node = node?.[step] as Record<string, unknown> | undefined;
      return node !== undefined;
    })
    .map((e) => e.manager!);
}

/** The error lines both replicas logged (a reconcile that panicked is one). */
const errorLines = (): string[] =>
  replicas.flatMap((p) =>
    p
      .logs()
      .filter((line) => line.level === "error")
      .map((line) => String(line.msg)),
  );

/** Runs `step`; on failure adds the last log lines of both replicas to the error. */
async function withLogs<T>(step: () => Promise<T>): Promise<T> {
  try {
    return await step();
  } catch (err) {
    const tails = replicas.map(
      (p, i) => `--- ${IDENTITIES[i]}:\n${p.stdout().trim().split("\n").slice(-40).join("\n")}`,
    );
    throw new Error(`${(err as Error).message}\n${tails.join("\n")}`);
  }
}

const getConfigMap = (name: string) =>
  admin.request<KubeObject>("GET", `/api/v1/namespaces/${ns}/configmaps/${name}`);

describe("export ownership across two shards", () => {
  it(
    "lets exactly one Referable own a key and a field when the claimants are served by different shards, and hands both over when the owner goes",
    async () => {
      // Each process holds one of the two buckets.
      await waitFor(
        "each replica to hold one bucket",
        async () => {
          const held = await Promise.all(
            replicas.map(async (p) => metricValue(await p.metrics(), "referable_shard_buckets") ?? 0),
          );
          return held.every((n) => n === 1);
        },
        { timeoutMs: WAIT_MS, intervalMs: 250 },
      );

      await createConfigMap(admin, ns, "source", { v: "from-source" });
      await createConfigMap(admin, ns, "keys", {});
      await createConfigMap(admin, ns, "fields", {});
      const spec = {
        source: { apiVersion: "v1", kind: "ConfigMap", namespace: ns, name: "source", fieldPath: "data.v" },
        export: [
          { kind: "ConfigMap", namespace: ns, name: "keys", key: "SHARED" },
          {
            apiVersion: "v1",
            kind: "ConfigMap",
            namespace: ns,
            name: "fields",
            fieldPath: `metadata.annotations[${ANNOTATION}]`,
          },
        ],
      };
      const names = [nameInBucket(0), nameInBucket(1)];
      for (const name of names) await createReferable(admin, spec, { shard: label, name });
      // Owner: first created (creationTimestamp, then name), as every replica orders them.
      const created = await Promise.all(
        names.map(async (name) => {
          const o = await admin.request<KubeObject>("GET", `${REFERABLES}/${name}`);
          return { name, created: String(o.metadata?.creationTimestamp) };
        }),
      );
      created.sort((x, y) =>
        x.created < y.created ? -1 : x.created > y.created ? 1 : x.name < y.name ? -1 : 1,
      );
      const [owner, other] = created.map((c) => c.name) as [string, string];

      await waitForExported(admin, owner, "Exported", () => true, WAIT_MS);
      const conflict = await withLogs(() =>
        waitForExported(
          admin,
          other,
          "ExportConflict",
          // Both parts settled: the key's conflict, and the field's (not its intent being recorded).
          (v: ReferableView) => {
            const message = exportedCondition(v)!.message;
            return message.includes(owner) && message.includes(ANNOTATION);
          },
          WAIT_MS,
        ),
      );
      // It names the owning Referable for the key and for the field, never a foreign manager.
      const message = exportedCondition(conflict)!.message;
      expect(message).toContain("the key SHARED");
      expect(message).toContain(ANNOTATION);
      expect(message).not.toContain(`referable.dev/${owner}`);

      // Served by different processes: each Referable's status was written by one replica only.
      const [ownerWriters, otherWriters] = [writersOf(owner), writersOf(other)];
      expect(ownerWriters).toHaveLength(1);
      expect(otherWriters).toHaveLength(1);
      expect(ownerWriters[0]).not.toBe(otherWriters[0]);

      // Each shard lists only its own bucket; the other's exporter reaches it through the graph
      // view: both carry their slot and the graph label their replica wrote.
      for (const name of names) {
        const labels = (await admin.request<KubeObject>("GET", `${REFERABLES}/${name}`)).metadata?.labels;
        expect(labels).toMatchObject({ [SLOT_LABEL]: slotOf(name), [GRAPH_LABEL]: "true" });
      }

      // Exactly one writer of each: the owner's field manager, nobody else of referable.dev.
      const keys = await getConfigMap("keys");
      const fields = await getConfigMap("fields");
      expect((keys.data as Record<string, string>).SHARED).toBe("from-source");
      expect(fields.metadata?.annotations?.[ANNOTATION]).toBe("from-source");
      expect(referableManagers(keys, ["f:data", "f:SHARED"])).toEqual([`referable.dev/${owner}`]);
      expect(referableManagers(fields, ["f:metadata", "f:annotations", `f:${ANNOTATION}`])).toEqual([
        `referable.dev/${owner}`,
      ]);

      // The owner goes (its finalizer releases what it wrote first); the next in line takes over.
      await admin.request("DELETE", `${REFERABLES}/${owner}`);
      await waitForGone(admin, `${REFERABLES}/${owner}`, WAIT_MS);
      await waitForExported(admin, other, "Exported", () => true, WAIT_MS);
      await waitFor(
        "the key and the field to be the other Referable's alone",
        async () => {
          const [k, f] = [await getConfigMap("keys"), await getConfigMap("fields")];
          const key = referableManagers(k, ["f:data", "f:SHARED"]);
          const field = referableManagers(f, ["f:metadata", "f:annotations", `f:${ANNOTATION}`]);
          return (
            key.length === 1 &&
            key[0] === `referable.dev/${other}` &&
            field.length === 1 &&
            field[0] === `referable.dev/${other}` &&
            f.metadata?.annotations?.[ANNOTATION] === "from-source"
          );
        },
        { timeoutMs: WAIT_MS, intervalMs: 100 },
      );
      // The owner's name, reconciled once it is gone, is simply not cached on its shard.
      expect(errorLines()).toEqual([]);
    },
    3 * WAIT_MS,
  );

  it(
    "puts back a slot label someone changed to another shard's bucket, and the Referable keeps following its source",
    async () => {
      await createConfigMap(admin, ns, "moved", { v: "one" });
      const name = nameInBucket(0);
      // Created with a slot of the other bucket: listed by the shard that does not serve it.
      const wrong = Array.from({ length: 1024 }, (_, s) => String(s)).find(
        (s) => Number(s) % BUCKETS !== bucketOf(name, BUCKETS),
      )!;
      await createReferable(
        admin,
        {
          source: { apiVersion: "v1", kind: "ConfigMap", namespace: ns, name: "moved", fieldPath: "data.v" },
        },
        { shard: label, name, labels: { [SLOT_LABEL]: wrong } },
      );
      const slotBack = (v: ReferableView) =>
        (v.object.metadata?.labels as Record<string, string> | undefined)?.[SLOT_LABEL] === slotOf(name);
      await withLogs(() =>
        waitForView(
          admin,
          name,
          "has its own slot and the value",
          (v) => slotBack(v) && v.status.value === "one",
          {
            timeoutMs: WAIT_MS,
          },
        ),
      );
      // Moved by hand again, once it is served: put back again, and still served.
      await mergePatch(admin, `${REFERABLES}/${name}`, { metadata: { labels: { [SLOT_LABEL]: wrong } } });
      await waitForView(admin, name, "has its own slot again", slotBack, { timeoutMs: WAIT_MS });
      await mergePatch(admin, `/api/v1/namespaces/${ns}/configmaps/moved`, { data: { v: "two" } });
      await withLogs(() =>
        waitForView(admin, name, "follows its source", (v) => v.status.value === "two", {
          timeoutMs: WAIT_MS,
        }),
      );
      expect(errorLines()).toEqual([]);
    },
    3 * WAIT_MS,
  );
});
