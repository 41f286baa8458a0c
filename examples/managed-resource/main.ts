/**
 * Runs the example Database controller against the cluster of the current kubeconfig:
 * `node examples/managed-resource/main.ts [context]` (installs the Database, Network and Subnet
 * CRDs if missing; Ctrl-C stops it). KUBECONFIG may list several files, merged as kubectl does.
 */
import { createResolver, loadKubeConfig, type Logger } from "../../src/index.ts";
import { installCrds } from "./crds.ts";
import { DatabaseController } from "./database-controller.ts";

const log = (level: string) => (fields: Record<string, unknown>, message: string) =>
  console.log(JSON.stringify({ level, message, ...fields }));
const logger: Logger = { debug: () => undefined, info: log("info"), warn: log("warn"), error: log("error") };

const kubeConfig = await loadKubeConfig({ kubeconfig: process.env.KUBECONFIG, context: process.argv[2] });
await installCrds(kubeConfig);

// The resolver makes its own connection from the same kubeconfig (and closes it on stop); the
// controller reads, watches and patches Databases with @kubernetes/client-node.
const resolver = createResolver({ kubeConfig, logger });
await resolver.start();
const controller = new DatabaseController({ kubeConfig, resolver, logger });
await controller.start(); // waits out the 429s of a CRD whose storage is still starting
logger.info({}, "watching Databases");

for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.once(signal, () => {
    void (async () => {
      await controller.stop();
      await resolver.stop();
    })();
  });
}
