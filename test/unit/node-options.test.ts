/**
 * The V8 options a user runs are the ones measured: deploy/base's NODE_OPTIONS, the Helm chart's
 * defaults (heapCapMiB, semiSpaceMiB) and the bench's controller launch (bench/options.ts, whose scale
 * phases swap in only their own heap cap) say the same, and Node takes them from NODE_OPTIONS
 * (it refuses most V8 flags there, exit code 9, before the controller runs a line).
 */
import { execFile } from "node:child_process";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { promisify } from "node:util";
import { load } from "js-yaml";
import { repoRoot } from "../harness/control-plane.ts";

const execFileAsync = promisify(execFile);

async function deployNodeOptions(): Promise<string | undefined> {
  const deployment = load(await readFile(join(repoRoot, "deploy", "base", "deployment.yaml"), "utf8")) as {
    spec: { template: { spec: { containers: Array<{ env?: Array<{ name: string; value?: string }> }> } } };
  };
  const env = deployment.spec.template.spec.containers[0]!.env ?? [];
  return env.find((e) => e.name === "NODE_OPTIONS")?.value;
}

/** NODE_OPTIONS as the chart's template builds it from its default values. */
async function chartNodeOptions(): Promise<string> {
  const values = load(
    await readFile(join(repoRoot, "deploy", "helm", "referable", "values.yaml"), "utf8"),
  ) as {
    heapCapMiB: number;
    semiSpaceMiB: number;
  };
  return [
    ...(values.heapCapMiB ? [`--max-old-space-size=${values.heapCapMiB}`] : []),
    ...(values.semiSpaceMiB ? [`--max-semi-space-size=${values.semiSpaceMiB}`] : []),
  ].join(" ");
}

/** The default of the bench's --controller-node-options. */
async function benchNodeOptions(): Promise<string | undefined> {
  const text = await readFile(join(repoRoot, "bench", "options.ts"), "utf8");
  return /arg\("controller-node-options"\)\s*\?\?\s*"([^"]*)"/.exec(text)?.[1];
}

describe("the controller's NODE_OPTIONS", () => {
  it("are the same in deploy/, the Helm chart's defaults and the bench", async () => {
    const deploy = await deployNodeOptions();
    expect(deploy).toMatch(/--max-old-space-size=\d+/);
    expect({ chart: await chartNodeOptions(), bench: await benchNodeOptions() }).toEqual({
      chart: deploy,
      bench: deploy,
    });
  });

  it("are taken by Node from NODE_OPTIONS", async () => {
    const value = (await deployNodeOptions())!;
    // Rejects (exit code 9, "is not allowed in NODE_OPTIONS") when Node refuses one of them.
    const { stdout } = await execFileAsync(process.execPath, ["-p", "process.env.NODE_OPTIONS"], {
      env: { ...process.env, NODE_OPTIONS: value },
    });
    expect(stdout.trim()).toBe(value);
  });
});
