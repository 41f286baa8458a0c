/**
 * `helm` for the chart's tests: built once from the Go module proxy by scripts/helm-binary.sh
 * (cached in ~/.cache/referable/helm; REFERABLE_HELM_BIN uses another binary), and run with
 * the test cluster's kubeconfig.
 */
import { execFile, spawn } from "node:child_process";
import { join } from "node:path";
import { promisify } from "node:util";
import { repoRoot } from "./control-plane.ts";

const execFileAsync = promisify(execFile);

/** The chart's folder. */
export const CHART = join(repoRoot, "deploy", "helm", "referable");

/** Builds (once) or finds helm; resolves with its path. Progress lines go to `log`. */
export function ensureHelm(
  log: (line: string) => void = (l) => process.stderr.write(`${l}\n`),
): Promise<string> {
  const script = join(repoRoot, "scripts", "helm-binary.sh");
  return new Promise((resolve, reject) => {
    const child = spawn("bash", [script], { stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    child.stdout.on("data", (d: Buffer) => (out += d.toString()));
    child.stderr.on("data", (d: Buffer) => {
      for (const line of d.toString().split("\n")) if (line.trim()) log(line);
    });
    child.on("error", reject);
    child.on("exit", (code) => {
      const path = out.trim().split("\n").pop();
      if (code === 0 && path) resolve(path);
      else reject(new Error(`building helm failed (exit ${code}); see the lines above`));
    });
  });
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
