/**
 * Sharding (--shards) against a member Lease that does not behave like a member, on the real API
 * server with two controller processes: a member Lease of the set that claims another number of
 * buckets and is renewed for ever (anyone who may write the set's Leases can make one) must not
 * make the replicas hand buckets back and take none. Every Referable gets its status within the
 * lease duration plus a retry period (and a margin for the writes) of the Lease appearing, and
 * every bucket stays held.
 *
 * The test has its own namespace (ConfigMaps, Leases) and its own label on its Referables (the
 * processes see only those), so it runs beside any other test file.
 */
import { bucketOf } from "../../src/runtime/buckets.ts";
import { jest } from "@jest/globals";
import { microTime, type Lease } from "../../src/runtime/leader-election.ts";
import {
  BUCKETS_ANNOTATION,
  memberLeaseName,
  ROLE_LABEL,
  SHARD_SET_LABEL,
  SYNCING_ANNOTATION,
} from "../../src/runtime/shard-leases.ts";
import { SHARD_LABEL } from "../harness/controller.ts";
import { openShardSet, REFERABLES_PATH as RF, type ShardSet } from "../harness/shard-set.ts";
import { waitFor } from "../harness/kube.ts";
import { metricValue, TEST_LEASE_MS, TEST_RETRY_MS } from "../harness/process.ts";

jest.setTimeout(120_000);

/** The set's name: the default --leader-election-id. */
const SET = "referable-controller";
const BUCKETS = 4;
/** Referables created after the bogus Lease appears: at least one in every bucket. */
const REFERABLES = 24;
/**
 * The margin beyond the lease duration and a retry period: the replicas' rounds (jittered), the
 * first pass over the new Referables and their status writes, on an API server that shares two
 * cores with the rest of the suite (as sharding.test.ts's take-over slack).
 */
const MARGIN_MS = 8_000;

let set: ShardSet;
let leases: string;
let stopRenewing = false;
let renewing: Promise<void> | undefined;

beforeAll(async () => {
  set = await openShardSet("shard-members");
  leases = `/apis/coordination.k8s.io/v1/namespaces/${set.ns}/leases`;
});
afterAll(async () => {
  stopRenewing = true;
  await renewing?.catch(() => undefined);
  await set?.close();
}, 60_000);

const startReplica = (identity: string) => set.startReplica(identity, BUCKETS);

function createReferable(name: string): Promise<unknown> {
  return set.admin.request("POST", RF, {
    body: {
      apiVersion: "referable.dev/v1alpha1",
      kind: "Referable",
      metadata: { name, labels: { [SHARD_LABEL]: set.label } },
      spec: {
        source: {
          apiVersion: "v1",
          kind: "ConfigMap",
          namespace: set.ns,
          name: "source",
          fieldPath: "data.v",
        },
      },
    },
  });
}

/** The names of the Referables without `value` in status.value, of `names`. */
async function without(names: readonly string[], value: string): Promise<string[]> {
  const values = await set.values();
  return names.filter((name) => values.get(name) !== value);
}

/** The holder of each bucket's Lease ("" when released or absent). */
async function holders(): Promise<string[]> {
  const list = await set.admin.request<{ items: Lease[] }>("GET", leases, {
    query: { labelSelector: `${ROLE_LABEL}=bucket` },
  });
  const byName = new Map(list.items.map((l) => [l.metadata?.name, String(l.spec?.holderIdentity ?? "")]));
  return Array.from({ length: BUCKETS }, (_, b) => byName.get(`${SET}-bucket-${b}-of-${BUCKETS}`) ?? "");
}

/**
 * Writes a member Lease of the set claiming `buckets` buckets, then renews it every retry period
 * until the test ends, as a replica's rounds would, with no replica behind it.
 */
async function bogusMember(identity: string, buckets: number): Promise<void> {
  const name = memberLeaseName(SET, identity);
  const spec = () => ({
    holderIdentity: identity,
    leaseDurationSeconds: Math.ceil(TEST_LEASE_MS / 1000),
    renewTime: microTime(new Date()),
  });
  let lease = await set.admin.request<Lease>("POST", leases, {
    body: {
      apiVersion: "coordination.k8s.io/v1",
      kind: "Lease",
      metadata: {
        name,
        labels: { [SHARD_SET_LABEL]: SET, [ROLE_LABEL]: "member" },
        annotations: { [BUCKETS_ANNOTATION]: String(buckets), [SYNCING_ANNOTATION]: "false" },
      },
      spec: spec(),
    },
  });
  renewing = (async () => {
    while (!stopRenewing) {
      // The attacker's own pace, not a wait for a condition: a renewal every retry period.
      await new Promise((resolve) => setTimeout(resolve, TEST_RETRY_MS));
      lease = await set.admin
        .request<Lease>("PUT", `${leases}/${name}`, { body: { ...lease, spec: spec() } })
        .catch(() => set.admin.request<Lease>("GET", `${leases}/${name}`));
    }
  })();
}

describe("sharding with a member Lease that is no member", () => {
  it("a renewed member Lease claiming another number of buckets keeps no Referable from its status", async () => {
    await set.admin.request("POST", `/api/v1/namespaces/${set.ns}/configmaps`, {
      body: { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "source" }, data: { v: "v1" } },
    });
    const replicas = await Promise.all(["replica-0", "replica-1"].map(startReplica));
    await waitFor(
      "the two replicas to hold every bucket",
      async () => {
        const held = await Promise.all(
          replicas.map(async (p) => metricValue(await p.metrics(), "referable_shard_buckets") ?? 0),
        );
        return held.every((n) => n > 0) && held[0]! + held[1]! === BUCKETS;
      },
      { timeoutMs: 60_000, intervalMs: 250 },
    );

    await bogusMember("not-a-replica", BUCKETS * 2);
    const appeared = performance.now();
    const names: string[] = [];
    for (
      let i = 0;
      names.length < REFERABLES || new Set(names.map((n) => bucketOf(n, BUCKETS))).size < BUCKETS;
      i++
    )
      names.push(`${set.label}-${i}`);
    await Promise.all(names.map(createReferable));

    const limitMs = TEST_LEASE_MS + TEST_RETRY_MS + MARGIN_MS;
    let behind: string[] = [];
    try {
      await waitFor(
        "every Referable created after the bogus member Lease to show its source's value",
        async () => (behind = await without(names, "v1")).length === 0,
        { timeoutMs: limitMs, intervalMs: 200 },
      );
    } catch (err) {
      throw new Error(
        `${(err as Error).message}; ${behind.length} of ${names.length} behind, in buckets ${[...new Set(behind.map((n) => bucketOf(n, BUCKETS)))].join(",")}; bucket holders ${JSON.stringify(await holders())}`,
      );
    }
    expect(performance.now() - appeared).toBeLessThanOrEqual(limitMs);

    // Then, the Lease renewed all along: a change of the source followed by every Referable, and
    // every bucket held by a replica.
    await set.admin.request("PATCH", `/api/v1/namespaces/${set.ns}/configmaps/source`, {
      body: { data: { v: "v2" } },
      contentType: "application/merge-patch+json",
    });
    await waitFor(
      "every Referable to follow its source",
      async () => (await without(names, "v2")).length === 0,
      {
        timeoutMs: limitMs,
        intervalMs: 200,
      },
    );
    const held = await holders();
    expect(held).toEqual(held.map(() => expect.stringMatching(/^replica-[01]$/)));
  });
});
