/**
 * Runs the example Database controller against the cluster of the current kubeconfig:
 * `node examples/managed-resource/main.ts [context]` (installs the Database, Network and Subnet
 * CRDs if missing; Ctrl-C stops it). KUBECONFIG may list several files, merged as kubectl does.
 */
import { loadKubeConfig } from "../../src/index.ts";
import { consoleLogger, runUntilSignal } from "../example-host.ts";
import { installCrds } from "./crds.ts";
import { DatabaseController } from "./database-controller.ts";

const kubeConfig = await loadKubeConfig({ kubeconfig: process.env.KUBECONFIG, context: process.argv[2] });
await installCrds(kubeConfig);

// The controller reads, watches and patches Databases with @kubernetes/client-node.
await runUntilSignal(kubeConfig, consoleLogger(), (options) => new DatabaseController(options), "Databases");
