/**
 * The bench's propagation phases (bench/propagation.ts) on the real control plane, with the
 * controller in process: every update a phase makes is seen, and costs one status write.
 *
 * Issue 38's bench lost one update of 2,000 at 200 updates/s, and the controller made one status
 * write fewer. The phases of one size each numbered their values from 1 (`u1-<run>`, ...), so an
 * update of the 200/s phase could write into a source the value the 50/s phase had left in it:
 * the API server makes no new version of a patch that changes nothing, so no event followed, and
 * the bench waited 30 s for a change that had been there all along. One Referable and one update
 * a phase make that collision certain.
 *
 * The search for a loss in the controller itself ran the same phases with its watches (sources
 * and Referables) ending every second or two; the second test keeps that.
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { isApiError, KubeClient, type KubeObject } from "../../src/kube/client.ts";
import { configMapSource, createReferable, createSource, NS, RF, sourcePath } from "../../bench/fixtures.ts";
import { measurePropagation } from "../../bench/propagation.ts";
import { reopeningWatch, type ReopeningWatch } from "../../bench/watch.ts";
import { SHARD_LABEL, startTestController, type TestController } from "../harness/controller.ts";
import { adminClient, closeTestClients, testKubeConfig, uniqueName, waitFor } from "../harness/kube.ts";

type Latest = Map<
  string,
  { value: unknown; values: unknown; reason: string | undefined; rv: string; uid: string }
>;

/** Deadline of every wait: generous, for a loaded 2-core machine. */
const WAIT_MS = 60_000;

let admin: KubeClient;
/** The controller whose metrics the bench scrapes now. */
let current: TestController | undefined;
let metrics: Server;
const controllers: TestController[] = [];
const streams: ReopeningWatch[] = [];
const created: string[] = [];

beforeAll(async () => {
  admin = adminClient();
  // The bench's sources live in its namespace (bench/fixtures.ts), made by the bench's main.
  await admin
    .request("POST", "/api/v1/namespaces", { body: { metadata: { name: NS } } })
    .catch((err: unknown) => {
      if (!isApiError(err, 409)) throw err;
    });
  metrics = createServer((_req, res) => {
    void (current?.metrics.registry.metrics() ?? Promise.resolve("")).then((text) => res.end(text));
  });
  await new Promise<void>((resolve) => metrics.listen(0, "127.0.0.1", resolve));
});

afterAll(async () => {
  for (const s of streams) s.close();
  for (const c of controllers) await c.stop();
  await new Promise((resolve) => metrics?.close(resolve));
  for (const path of created.reverse()) await admin.request("DELETE", path).catch(() => undefined);
  await closeTestClients();
});

/** The bench's view of its Referables (bench/referable-watch.ts): a list, then a watch that reopens itself. */
async function watchReferables(selector: string) {
  const latest: Latest = new Map();
  const listeners = new Set<(name: string) => void>();
  const record = (obj: KubeObject) => {
    const status = (obj.status ?? {}) as { value?: unknown; values?: unknown };
    const name = obj.metadata!.name!;
    latest.set(name, {
      value: status.value,
      values: status.values,
      reason: undefined,
      rv: obj.metadata!.resourceVersion!,
      uid: obj.metadata!.uid!,
    });
    for (const l of listeners) l(name);
  };
  const list = await admin.request<{ metadata: { resourceVersion: string }; items: KubeObject[] }>(
    "GET",
    RF,
    { query: { labelSelector: selector } },
  );
  list.items.forEach(record);
  streams.push(
    reopeningWatch(
      admin,
      RF,
      { resourceVersion: list.metadata.resourceVersion, query: { labelSelector: selector } },
      (e) => {
        if (e.type === "ADDED" || e.type === "MODIFIED") record(e.object);
      },
    ),
  );
  return {
    latest,
    onChange(listener: (name: string) => void) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
  };
}

/**
 * `n` ConfigMaps holding v0 in the bench's namespace and a Referable over each, owned by `tc`;
 * resolves with the bench's fixture and its watch once every Referable shows v0.
 */
async function fixture(tc: TestController, n: number) {
  const label = uniqueName("bench-propagation");
  const labels = { "bench-set": label, [SHARD_LABEL]: tc.shard };
  const names = Array.from({ length: n }, (_, i) => `${label}-rf${i}`);
  const sources = Array.from({ length: n }, (_, i) => ({
    kind: "ConfigMap" as const,
    name: `${label}-s${i}`,
  }));
  for (let i = 0; i < n; i++) {
    await createSource(admin, "ConfigMap", sources[i]!.name, "v0", labels);
    created.push(sourcePath("ConfigMap", sources[i]!.name));
    await createReferable(admin, names[i]!, labels, configMapSource(sources[i]!.name));
    created.push(`${RF}/${names[i]}`);
  }
  const watch = await watchReferables(`bench-set=${label}`);
  await waitFor("every Referable to show v0", () => names.every((n) => watch.latest.get(n)?.value === "v0"), {
    timeoutMs: WAIT_MS,
  });
  return { fx: { label, names, sources }, watch };
}

async function start(options: Parameters<typeof startTestController>[0] = {}): Promise<TestController> {
  const tc = await startTestController(options);
  controllers.push(tc);
  current = tc;
  return tc;
}

const endpoint = () => ({ metricsPort: (metrics.address() as AddressInfo).port });

describe("the bench's propagation phases", () => {
  it("sees every update of every phase over one fixture: no update writes a value its source already holds", async () => {
    const tc = await start();
    const { fx, watch } = await fixture(tc, 1);
    // Two phases of one update each, as the bench runs its rates one after the other.
    for (const phase of [1, 2]) {
      const r = await measurePropagation(admin, endpoint(), fx, watch, 1, 1);
      expect({ phase, updates: r.updates, seen: r.seen, statusWrites: r.statusWrites }).toEqual({
        phase,
        updates: 1,
        seen: 1,
        statusWrites: 1,
      });
    }
  }, 120_000);

  it("sees every update while the controller's watches end every second or two", async () => {
    let watchesEnded = 0;
    const client = new KubeClient({
      kubeConfig: testKubeConfig(),
      observe: (o) => void (o.verb === "watch" && watchesEnded++),
    });
    const tc = await start({
      client,
      watchTimeoutSeconds: [1, 2],
      build: { referableWatchTimeoutSeconds: [1, 2] },
    });
    try {
      const { fx, watch } = await fixture(tc, 40);
      const before = watchesEnded;
      const r = await measurePropagation(admin, endpoint(), fx, watch, 50, 10);
      // The source's watch and the Referables' each ended several times under the updates.
      expect(watchesEnded - before).toBeGreaterThanOrEqual(8);
      expect(r.updates).toBeGreaterThan(0);
      expect({ seen: r.seen, statusWrites: r.statusWrites }).toEqual({
        seen: r.updates,
        statusWrites: r.updates,
      });
    } finally {
      await tc.stop();
      controllers.splice(controllers.indexOf(tc), 1);
      await client.close();
    }
  }, 180_000);
});
