/**
 * `npm run demo`: the main job on a machine with no cluster. Starts the local control plane
 * (the test harness's etcd + kube-apiserver), installs the CRD, runs the controller against it
 * as a separate process, applies examples/crds/ and examples/referables/, prints what
 * `kubectl get rf` prints (kubectl itself runs), then changes sources and shows the values follow.
 * Runs until Ctrl-C; `--exit` ends it after the demonstration (for scripts and CI). Everything it
 * writes (the controller's log) is in one temporary folder, removed when it ends.
 */
import { execFile, spawn, type ChildProcess } from "node:child_process";
import { createWriteStream } from "node:fs";
import { mkdtemp, readdir, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { KubeConfig } from "@kubernetes/client-node";
import { loadAll } from "js-yaml";
import { parseOrExit } from "../src/process/cli.ts";
import { KubeClient, type KubeObject } from "../src/kube/client.ts";
import { Discovery } from "../src/kube/discovery.ts";
import { repoRoot, startControlPlane, type ControlPlane } from "../test/harness/control-plane.ts";
import { freePort } from "../test/harness/ports.ts";

const execFileAsync = promisify(execFile);
const flags = parseOrExit({
  usage: "npm run demo [-- --exit]",
  description:
    "Starts a local control plane, runs the controller against it, applies examples/ and shows values follow their sources. Runs until Ctrl-C.",
  flags: {
    exit: { type: "boolean", help: "end after the demonstration (for scripts and CI)" },
  },
});
const exitAfter = flags.exit === true;
const say = (line = "") => process.stdout.write(`${line}\n`);

/** Polls `probe` until it returns something, or throws after `timeoutMs`. */
async function until<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs = 30_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe().catch(() => undefined);
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** Server-side applies every document of a file, finding each kind's resource through discovery. */
async function applyFile(client: KubeClient, discovery: Discovery, file: string): Promise<void> {
  const docs = loadAll(await readFile(file, "utf8")) as KubeObject[];
  for (const doc of docs) {
    if (!doc) continue;
    const info = await discovery.lookup(doc.apiVersion!, doc.kind!);
    const base = info.group ? `/apis/${info.group}/${info.version}` : `/api/${info.version}`;
    const ns = info.namespaced ? `/namespaces/${doc.metadata!.namespace ?? "default"}` : "";
    await client.request("PATCH", `${base}${ns}/${info.resource}/${doc.metadata!.name}`, {
      query: { fieldManager: "referable-demo", force: true },
      body: doc,
      contentType: "application/apply-patch+yaml",
    });
    if (doc.kind === "CustomResourceDefinition") {
      discovery.invalidate();
      await until(`CRD ${doc.metadata!.name} to be established`, async () => {
        const crd = await client.request<{
          status?: { conditions?: Array<{ type: string; status: string }> };
        }>("GET", `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${doc.metadata!.name}`);
        return crd.status?.conditions?.some((c) => c.type === "Established" && c.status === "True")
          ? true
          : undefined;
      });
    }
  }
}

async function referables(client: KubeClient): Promise<KubeObject[]> {
  const list = await client.request<{ items: KubeObject[] }>(
    "GET",
    "/apis/referable.dev/v1alpha1/referables",
  );
  return list.items;
}

/** The reason of a Referable's Ready condition, "" when it has none yet. */
function readyReason(obj: KubeObject): string {
  const status = (obj.status ?? {}) as { conditions?: Array<Record<string, string>> };
  return status.conditions?.find((c) => c.type === "Ready")?.reason ?? "";
}

/** Runs kubectl (the harness's, else the one on the PATH) against the demo's cluster. */
async function kubectl(plane: ControlPlane, ...args: string[]): Promise<string> {
  const bin = plane.binDir ? join(plane.binDir, "kubectl") : "kubectl";
  const { stdout } = await execFileAsync(bin, [`--kubeconfig=${plane.kubeconfigPath}`, ...args]);
  return stdout.trimEnd();
}

/** A change the demo makes: a merge patch of the object at `path`. */
interface Change {
  path: string;
  body: Record<string, unknown>;
}

/** Times how long a Referable's status takes to satisfy `done` after `change`, watching it. */
async function follow(
  client: KubeClient,
  name: string,
  change: Change,
  done: (obj: KubeObject) => boolean,
): Promise<number> {
  const current = await client.request<KubeObject>("GET", `/apis/referable.dev/v1alpha1/referables/${name}`);
  let resolveSeen: (ms: number) => void = () => undefined;
  const seen = new Promise<number>((r) => (resolveSeen = r));
  let started = 0;
  const stream = client.watch(
    "/apis/referable.dev/v1alpha1/referables",
    { resourceVersion: current.metadata!.resourceVersion, fieldSelector: `metadata.name=${name}` },
    (event) => {
      if (started && done(event.object)) resolveSeen(performance.now() - started);
    },
  );
  try {
    started = performance.now();
    await client.request("PATCH", change.path, {
      body: change.body,
      contentType: "application/merge-patch+json",
    });
    const timeout = new Promise<number>((_, reject) =>
      setTimeout(() => reject(new Error(`${name} did not follow within 30 s`)), 30_000).unref(),
    );
    return await Promise.race([seen, timeout]);
  } finally {
    stream.close();
  }
}

async function main(): Promise<void> {
  let plane: ControlPlane | undefined;
  let controller: ChildProcess | undefined;
  let client: KubeClient | undefined;
  const workDir = await mkdtemp(join(tmpdir(), "referable-demo-"));
  const logFile = join(workDir, "controller.log");
  const cleanup = async () => {
    if (controller && controller.exitCode === null) {
      const exited = new Promise((r) => controller!.once("exit", r));
      controller.kill("SIGTERM");
      await exited;
    }
    await client?.close();
    await plane?.stop();
    await rm(workDir, { recursive: true, force: true });
  };
  process.once("SIGINT", () => void cleanup().then(() => process.exit(0)));
  process.once("SIGTERM", () => void cleanup().then(() => process.exit(0)));

  try {
    say("== starting a local control plane (etcd + kube-apiserver) and installing crds/");
    plane = await startControlPlane();
    const kubeConfig = new KubeConfig();
    kubeConfig.loadFromFile(plane.kubeconfigPath);
    client = new KubeClient({ kubeConfig });
    const discovery = new Discovery({ client });

    const [metricsPort, probePort] = [await freePort(), await freePort()];
    const log = createWriteStream(logFile);
    say(`== starting the controller (logs: ${logFile}, metrics: http://127.0.0.1:${metricsPort}/metrics)`);
    controller = spawn(
      process.execPath,
      [
        join(repoRoot, "src", "process", "main.ts"),
        `--kubeconfig=${plane.kubeconfigPath}`,
        "--leader-elect=false",
        // Readable lines in the log file (and its tail on failure), as on a terminal.
        "--log-format=text",
        `--metrics-bind-address=127.0.0.1:${metricsPort}`,
        `--health-probe-bind-address=127.0.0.1:${probePort}`,
      ],
      { stdio: ["ignore", "pipe", "pipe"] },
    );
    controller.stdout!.pipe(log);
    controller.stderr!.pipe(log);
    controller.once("exit", (code) => {
      if (code !== 0 && code !== null) say(`!! the controller exited with code ${code}`);
    });
    await until("the controller to be ready", async () => {
      const res = await fetch(`http://127.0.0.1:${probePort}/readyz`);
      return res.status === 200 ? true : undefined;
    });

    // The example CRD first, as `kubectl apply -f examples/crds/` does before the rest.
    for (const folder of ["crds", "referables"]) {
      const dir = join(repoRoot, "examples", folder);
      const files = (await readdir(dir)).filter((f) => f.endsWith(".yaml")).sort();
      say(`== applying examples/${folder}/ (${files.join(", ")})`);
      for (const file of files) await applyFile(client, discovery, join(dir, file));
    }

    await until("every Referable to have a Ready condition", async () => {
      const all = await referables(client!);
      return all.every((o) => readyReason(o) && readyReason(o) !== "Pending") ? true : undefined;
    });
    say("\n$ kubectl get rf");
    say(await kubectl(plane, "get", "rf"));

    say("\n== the bucket reports Ready=True: artifacts-bucket-arn takes its value");
    const bucketMs = await follow(
      client,
      "artifacts-bucket-arn",
      {
        path: "/apis/storage.demo.referable.dev/v1/namespaces/demo/buckets/artifacts/status",
        body: { status: { conditions: [{ type: "Ready", status: "True", reason: "Available" }] } },
      },
      (o) => readyReason(o) === "Available",
    );
    say(`   artifacts-bucket-arn became Available ${bucketMs.toFixed(0)} ms after the status change`);
    // datasync-source-arn reads the same bucket and writes its ARN into a field of a Task shaped
    // like a Crossplane managed resource, which reads nothing of ours.
    const taskPath = "/apis/datasync.demo.referable.dev/v1beta1/namespaces/demo/tasks/nightly-sync";
    await until("the Task's spec.forProvider.sourceLocationArn to be written", async () => {
      const task = await client!.request<{ spec?: { forProvider?: { sourceLocationArn?: string } } }>(
        "GET",
        taskPath,
      );
      return task.spec?.forProvider?.sourceLocationArn ? true : undefined;
    });
    say("\n$ kubectl -n demo get task nightly-sync -o jsonpath={.spec.forProvider}");
    say(
      await kubectl(plane, "-n", "demo", "get", "task", "nightly-sync", "-o", "jsonpath={.spec.forProvider}"),
    );
    say(
      "   (sourceLocationArn is the Referable's, under its own field manager; the rest is the Task's author's)",
    );

    say("== changing ConfigMap demo/database data.host to db-2.demo.svc.cluster.local");
    const hostMs = await follow(
      client,
      "database-host",
      {
        path: "/api/v1/namespaces/demo/configmaps/database",
        body: { data: { host: "db-2.demo.svc.cluster.local" } },
      },
      (o) => (o.status as { value?: unknown } | undefined)?.value === "db-2.demo.svc.cluster.local",
    );
    say(`   database-host followed in ${hostMs.toFixed(0)} ms (pushed by watches, no polling)`);
    // database-url exports the same host, transformed, into a ConfigMap key workloads read.
    const url = "postgres://db-2.demo.svc.cluster.local:5432/app";
    await until("the exported key DATABASE_URL to follow", async () => {
      const cm = await client!.request<KubeObject>("GET", "/api/v1/namespaces/demo/configmaps/app-settings");
      return (cm.data as Record<string, string> | undefined)?.DATABASE_URL === url ? true : undefined;
    });
    say("\n$ kubectl -n demo get configmap app-settings -o jsonpath={.data.DATABASE_URL}");
    say(
      await kubectl(
        plane,
        "-n",
        "demo",
        "get",
        "configmap",
        "app-settings",
        "-o",
        "jsonpath={.data.DATABASE_URL}",
      ),
    );

    say("== removing cache-b from the selector (label app=cache → app=retired)");
    const cacheMs = await follow(
      client,
      "cache-endpoints",
      {
        path: "/api/v1/namespaces/demo/configmaps/cache-b",
        body: { metadata: { labels: { app: "retired" } } },
      },
      (o) => ((o.status as { values?: unknown[] } | undefined)?.values ?? []).length === 2,
    );
    say(`   cache-endpoints dropped it in ${cacheMs.toFixed(0)} ms`);

    say("\n$ kubectl get rf");
    say(await kubectl(plane, "get", "rf"));

    if (exitAfter) {
      say("\n== done (--exit): stopping the controller and the control plane");
      await cleanup();
      return;
    }
    const kubectlBin = plane.binDir ? join(plane.binDir, "kubectl") : "kubectl";
    say(
      `\nThe controller keeps running. Try:\n  export KUBECONFIG=${plane.kubeconfigPath}\n  ${kubectlBin} get rf -w`,
    );
    say("Press Ctrl-C to stop everything.");
    await new Promise(() => undefined);
  } catch (err) {
    say(`!! demo failed: ${(err as Error).message}`);
    // The log goes with the temporary folder: show its end first.
    const tail = await readFile(logFile, "utf8").then(
      (text) => text.trimEnd().split("\n").slice(-20).join("\n"),
      () => "",
    );
    if (tail) say(`-- the controller's last log lines:\n${tail}`);
    await cleanup();
    process.exitCode = 1;
  }
}

await main();
