/**
 * The kubectl the tests run: the one built with the test control plane when the harness started
 * it (REFERABLE_TEST_BIN_DIR), else the one on PATH.
 */
import { execFile } from "node:child_process";
import { join } from "node:path";
import { promisify } from "node:util";
import { loadAll } from "js-yaml";
import type { KubeObject } from "../../src/kube/client.ts";
import { repoRoot } from "./control-plane.ts";

export const KUBECTL = process.env.REFERABLE_TEST_BIN_DIR
  ? join(process.env.REFERABLE_TEST_BIN_DIR, "kubectl")
  : "kubectl";

/** `kubectl kustomize` of a folder of the repository (e.g. `deploy`): the objects an apply of it sends, in order. */
export async function kustomize<T extends KubeObject = KubeObject>(dir: string): Promise<T[]> {
  const { stdout } = await promisify(execFile)(KUBECTL, ["kustomize", join(repoRoot, dir)], {
    maxBuffer: 32 * 1024 * 1024,
  });
  return (loadAll(stdout) as Array<T | null>).filter((o): o is T => Boolean(o));
}
