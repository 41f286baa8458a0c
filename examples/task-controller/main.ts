/**
 * Runs the example Task controller against the cluster of the current kubeconfig:
 * `node examples/task-controller/main.ts [context]` (installs the Task CRD if missing; Ctrl-C
 * stops it). KUBECONFIG may list several files; they are merged as kubectl merges them.
 */
import {
  ApiException,
  ApiextensionsV1Api,
  loadYaml,
  type V1CustomResourceDefinition,
} from "@kubernetes/client-node";
import { createResolver, loadKubeConfig, type Logger } from "../../src/index.ts";
import { TaskController } from "./task-controller.ts";
import { taskCustomResourceDefinition } from "./task-crd.ts";

const log = (level: string) => (fields: Record<string, unknown>, message: string) =>
  console.log(JSON.stringify({ level, message, ...fields }));
const logger: Logger = { debug: () => undefined, info: log("info"), warn: log("warn"), error: log("error") };

const kubeConfig = await loadKubeConfig({ kubeconfig: process.env.KUBECONFIG, context: process.argv[2] });

try {
  // loadYaml turns the CRD's wire names (`x-kubernetes-validations`) into client-node's model,
  // which the typed API writes back out; JSON is YAML.
  const body = loadYaml<V1CustomResourceDefinition>(JSON.stringify(taskCustomResourceDefinition()));
  await kubeConfig.makeApiClient(ApiextensionsV1Api).createCustomResourceDefinition({ body });
} catch (err) {
  if (!(err instanceof ApiException && err.code === 409)) throw err; // 409: already installed
}

// The resolver makes its own connection from the same kubeconfig; the controller reads and
// writes Tasks with @kubernetes/client-node.
const resolver = createResolver({ kubeConfig, logger });
await resolver.start();
const controller = new TaskController({ kubeConfig, resolver, logger });
await controller.start(); // waits out the 429s of a CRD whose storage is still starting
logger.info({}, "watching Tasks");

for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.once(signal, () => {
    void (async () => {
      await controller.stop();
      await resolver.stop();
    })();
  });
}
