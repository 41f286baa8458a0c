/**
 * Runs the example Database controller against the cluster of the current kubeconfig:
 * `node examples/managed-resource/main.ts [context]` (installs the Database, Network and Subnet
 * CRDs if missing; Ctrl-C stops it). KUBECONFIG may list several files, merged as kubectl does.
 */
import { createResolver, KubeClient, loadKubeConfig, type Logger } from "../../src/index.ts";
import { installCrds } from "./crds.ts";
import { DatabaseController } from "./database-controller.ts";

const log = (level: string) => (fields: Record<string, unknown>, message: string) =>
  console.log(JSON.stringify({ level, message, ...fields }));
const logger: Logger = { debug: () => undefined, info: log("info"), warn: log("warn"), error: log("error") };

const kubeConfig = await loadKubeConfig({ kubeconfig: process.env.KUBECONFIG, context: process.argv[2] });
// One client (one connection pool) for the controller and the resolver.
const client = new KubeClient({ kubeConfig });
await installCrds(client);

const resolver = createResolver({ client, logger });
await resolver.start();
const controller = new DatabaseController({ client, resolver, logger });
await controller.start();
logger.info({}, "watching Databases");

for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.once(signal, () => {
    void (async () => {
      await controller.stop();
      await resolver.stop(); // does not close a client it was given
      await client.close();
    })();
  });
}
