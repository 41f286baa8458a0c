/**
 * `helm` for the chart's tests: built once from the Go module proxy by scripts/helm-binary.sh
 * (cached in ~/.cache/referable/helm; REFERABLE_HELM_BIN uses another binary), and run with
 * the test cluster's kubeconfig.
 */
import { execFile } from "node:child_process";
import { join } from "node:path";
import { promisify } from "node:util";
import { repoRoot, runBuildScript } from "./control-plane.ts";

const execFileAsync = promisify(execFile);

/** The chart's folder. */
export const CHART = join(repoRoot, "deploy", "helm", "referable");

/** Builds (once) or finds helm; resolves with its path. Progress lines go to `log`. */
export function ensureHelm(
  log: (line: string) => void = (l) => process.stderr.write(`${l}\n`),
): Promise<string> {
  return runBuildScript("helm-binary.sh", "helm", log);
}

/** Runs helm with `args`; rejects with its stderr when it fails. */
export async function runHelm(helm: string, args: readonly string[]): Promise<string> {
  try {
    const { stdout } = await execFileAsync(helm, args, { maxBuffer: 32 * 1024 * 1024, cwd: repoRoot });
    return stdout;
  } catch (err) {
    const e = err as Error & { stderr?: string };
    throw new Error(`helm ${args.join(" ")}: ${e.stderr || e.message}`);
  }
}
