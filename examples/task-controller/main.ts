/**
 * Runs the example Task controller against the cluster of the current kubeconfig:
 * `node examples/task-controller/main.ts [context]` (installs the Task CRD if missing; Ctrl-C
 * stops it). KUBECONFIG may list several files; they are merged as kubectl merges them.
 */
import { loadKubeConfig } from "../../src/index.ts";
import { consoleLogger, createCrd, runUntilSignal } from "../example-host.ts";
import { TaskController } from "./task-controller.ts";
import { taskCustomResourceDefinition } from "./task-crd.ts";

const kubeConfig = await loadKubeConfig({ kubeconfig: process.env.KUBECONFIG, context: process.argv[2] });
await createCrd(kubeConfig, taskCustomResourceDefinition());

// The controller reads and writes Tasks with @kubernetes/client-node.
await runUntilSignal(kubeConfig, consoleLogger(), (options) => new TaskController(options), "Tasks");
