/**
 * What a paged list of Referables costs kube-apiserver, by page size: a private control plane,
 * N Referables (each then given a status, as a cold start lists them), then the whole collection
 * listed page by page at each page size, kube-apiserver's CPU seconds (from /proc) per list.
 *
 *   node bench/list-cost.ts [--referables 30000] [--limits 500,2000,5000] [--rounds 3]
 *
 * Why: the watch cache serves a paged list by gathering every object from the page's continue
 * key to the end of the collection, then taking `limit` of them, so a list's cost grows with the
 * number of pages (N²/2P object visits), which four shards each pay for every Referable.
 */
import { readFileSync } from "node:fs";
import { KubeConfig } from "@kubernetes/client-node";
import { numberFlag, parseOrExit } from "../src/process/cli.ts";
import { KubeClient } from "../src/kube/client.ts";
import { SCALE_FLAGS, startControlPlane } from "../test/harness/control-plane.ts";

const flags = parseOrExit({
  usage: "node bench/list-cost.ts [--referables N] [--limits 500,2000,5000] [--rounds 3]",
  description: "kube-apiserver CPU seconds of one paged list of every Referable, by page size.",
  flags: {
    referables: { type: "string", help: "how many Referables (default 30000)" },
    limits: { type: "string", help: "page sizes, comma-separated (default 500,2000,5000)" },
    rounds: { type: "string", help: "lists per page size (default 3)" },
  },
});
const n = numberFlag(flags, "referables", 30_000);
const limits = String(flags.limits ?? "500,2000,5000")
  .split(",")
  .map(Number);
const rounds = numberFlag(flags, "rounds", 3);
const RF = "/apis/referable.dev/v1alpha1/referables";

const plane = await startControlPlane({ private: true, extraFlags: SCALE_FLAGS });
try {
  const kubeConfig = new KubeConfig();
  kubeConfig.loadFromFile(plane.kubeconfigPath);
  const client = new KubeClient({ kubeConfig, requestTimeoutMs: 120_000 });
  const cpu = (): number => {
    const stat = readFileSync(`/proc/${plane.apiServerPid}/stat`, "utf8");
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return (Number(fields[11]) + Number(fields[12])) / 100; // utime + stime, clock ticks of 10 ms
  };
  let next = 0;
  const worker = async () => {
    while (next < n) {
      const name = `lc-${next++}`;
      const made = await client.request<{ metadata: { uid: string } }>("POST", RF, {
        body: {
          apiVersion: "referable.dev/v1alpha1",
          kind: "Referable",
          metadata: { name, labels: { bench: "list-cost" } },
          spec: {
            source: {
              apiVersion: "v1",
              kind: "ConfigMap",
              namespace: "bench",
              name,
              fieldPath: "data.value",
            },
          },
        },
      });
      await client.request("PATCH", `${RF}/${name}/status`, {
        contentType: "application/merge-patch+json",
        body: {
          metadata: { uid: made.metadata.uid },
          status: {
            value: "v0",
            text: "v0",
            sources: [
              {
                apiVersion: "v1",
                kind: "ConfigMap",
                namespace: "bench",
                name,
                uid: made.metadata.uid,
                resourceVersion: "1",
              },
            ],
            observedGeneration: 1,
            conditions: [
              {
                type: "Ready",
                status: "True",
                reason: "Resolved",
                message: "",
                observedGeneration: 1,
                lastTransitionTime: "2026-11-28T00:00:00Z",
              },
            ],
          },
        },
      });
    }
  };
  await Promise.all(Array.from({ length: 16 }, worker));
  process.stdout.write(`${n} Referables created, each with a status\n`);
  for (let round = 0; round < rounds; round++) {
    for (const limit of limits) {
      const before = cpu();
      let pages = 0;
      let items = 0;
      let continueToken: string | undefined;
      do {
        const page = await client.request<{ metadata?: { continue?: string }; items?: unknown[] }>(
          "GET",
          RF,
          {
            query: { limit, continue: continueToken },
            onItem: () => items++,
          },
        );
        items += page.items?.length ?? 0;
        pages++;
        continueToken = page.metadata?.continue || undefined;
      } while (continueToken);
      process.stdout.write(
        `round ${round + 1}: limit ${limit}: ${items} items in ${pages} pages, kube-apiserver ${(cpu() - before).toFixed(2)} CPU s\n`,
      );
    }
  }
} finally {
  await plane.stop();
}
