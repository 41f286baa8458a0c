/**
 * An informer's paged list that outlives the API server's compaction, on a real control plane
 * of its own that compacts etcd every few seconds (as the bench's scale plane compacts every
 * minute): the continue token of its second page has expired (410 Expired) by the time it is
 * asked for. The informer must list again at once, in one unpaged request, count it as an
 * expiry with its reason (never as an error with a backoff), and end with every object.
 */
import { isApiError, type KubeClient, type RequestOptions } from "../../src/kube/client.ts";
import { Informer } from "../../src/informers/informer.ts";
import type { PrivateControlPlane } from "../harness/control-plane.ts";
import { startPrivatePlane } from "../harness/faults.ts";
import { CONFIGMAPS } from "../harness/fake-kube.ts";
import { waitFor } from "../harness/kube.ts";

/** Deadline of every wait: generous, for a loaded 2-core machine. */
const WAIT_MS = 90_000;
const NS = "restarts";
const OBJECTS = 120;

let plane: PrivateControlPlane;
let admin: KubeClient;

beforeAll(async () => {
  ({ plane, admin } = await startPrivatePlane("informer-restarts", {
    installCrds: false,
    extraFlags: { apiServer: ["--etcd-compaction-interval=3s"] },
  }));
  await admin.request("POST", "/api/v1/namespaces", {
    body: { apiVersion: "v1", kind: "Namespace", metadata: { name: NS } },
  });
  let next = 0;
  await Promise.all(
    Array.from({ length: 8 }, async () => {
      while (next < OBJECTS) {
        const i = next++;
        await admin.request("POST", `/api/v1/namespaces/${NS}/configmaps`, {
          body: { metadata: { name: `cm-${i}` }, data: { v: String(i) } },
        });
      }
    }),
  );
}, 240_000);

afterAll(async () => {
  await admin?.close();
  await plane?.stop();
});

/** Writes one ConfigMap over and over until stopped, so etcd's revision (and its compaction) moves on. */
function churn(): { stop(): Promise<void> } {
  let running = true;
  const loop = (async () => {
    await admin.request("POST", `/api/v1/namespaces/${NS}/configmaps`, {
      body: { metadata: { name: "churn" }, data: { n: "0" } },
    });
    for (let n = 1; running; n++)
      await admin.request("PATCH", `/api/v1/namespaces/${NS}/configmaps/churn`, {
        body: { data: { n: String(n) } },
        contentType: "application/merge-patch+json",
      });
  })();
  return {
    async stop() {
      running = false;
      await loop;
    },
  };
}

describe("a paged list whose continue token expires", () => {
  it("lists again at once in one unpaged request, counted as list-expired, not as an error", async () => {
    const lists: Array<{ limit: unknown; continued: boolean }> = [];
    let held = false;
    // The informer's client: the admin client, but the first page after the first is held until
    // its continue token has expired (a consumer slower than the compaction): the test asks for
    // the same page itself until the API server answers 410, then lets the informer's ask go.
    const client: Pick<KubeClient, "request" | "watch"> = {
      request: async <T>(method: string, path: string, options: RequestOptions = {}) => {
        const continued = options.query?.continue !== undefined;
        lists.push({ limit: options.query?.limit, continued });
        if (continued && !held) {
          held = true;
          await waitFor(
            "the continue token to expire (410)",
            async () => {
              try {
                await admin.request("GET", path, { query: options.query });
                return false;
              } catch (err) {
                if (isApiError(err, 410)) return true;
                throw err;
              }
            },
            { timeoutMs: WAIT_MS, intervalMs: 500 },
          );
        }
        return admin.request<T>(method, path, options);
      },
      watch: (path, query, onEvent) => admin.watch(path, query, onEvent),
    };
    const reasons: string[] = [];
    const writes = churn();
    const informer = new Informer({
      client,
      resource: CONFIGMAPS,
      namespace: NS,
      pageSize: 20,
      // A backoff would show as a long wait; the test's deadline is shorter than this one.
      minBackoffMs: 120_000,
      maxBackoffMs: 120_000,
      onSignal: (signal, reason) => reasons.push(`${signal}:${reason}`),
    });
    try {
      informer.start();
      await waitFor("the informer to sync", () => informer.state.phase === "Synced", { timeoutMs: WAIT_MS });
    } finally {
      await informer.stop();
      await writes.stop();
    }
    expect(reasons).toEqual(["expired:list-expired", "relist:list-expired"]);
    // The paged list cut short, then one request without limit or continue token.
    expect(lists.slice(0, 2)).toEqual([
      { limit: 10, continued: false },
      { limit: 20, continued: true },
    ]);
    expect(lists.slice(2)).toEqual([{ limit: undefined, continued: false }]);
    expect(informer.size).toBe(OBJECTS + 1); // the churned one too
  }, 240_000);
});
