/**
 * Runs the example Task controller against the cluster of the current kubeconfig:
 * `node examples/task-controller/main.ts [context]` (installs the Task CRD if missing; Ctrl-C
 * stops it). KUBECONFIG may list several files; they are merged as kubectl merges them.
 */
import { createResolver, isApiError, KubeClient, loadKubeConfig, type Logger } from "../../src/index.ts";
import { TaskController } from "./task-controller.ts";
import { taskCustomResourceDefinition } from "./task-crd.ts";

const log = (level: string) => (fields: Record<string, unknown>, message: string) =>
  console.log(JSON.stringify({ level, message, ...fields }));
const logger: Logger = { debug: () => undefined, info: log("info"), warn: log("warn"), error: log("error") };

const kubeConfig = await loadKubeConfig({ kubeconfig: process.env.KUBECONFIG, context: process.argv[2] });
// One client (one connection pool) for the controller and the resolver.
const client = new KubeClient({ kubeConfig });

try {
  await client.request("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", {
    body: taskCustomResourceDefinition(),
  });
} catch (err) {
  if (!isApiError(err, 409)) throw err; // 409: already installed
}

const resolver = createResolver({ client, logger });
await resolver.start();
const controller = new TaskController({ client, resolver, logger });
await controller.start(); // waits out the 429s of a CRD whose storage is still starting
logger.info({}, "watching Tasks");

for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.once(signal, () => {
    void (async () => {
      await controller.stop();
      await resolver.stop(); // does not close a client it was given
      await client.close();
    })();
  });
}
