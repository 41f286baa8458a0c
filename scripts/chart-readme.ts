/**
 * Regenerates the values table of the Helm chart's README from values.yaml (scripts/lib/chart-readme.ts):
 *
 *   node scripts/chart-readme.ts           write deploy/helm/referable/README.md
 *   node scripts/chart-readme.ts --check   exit 1 when it is stale (npm run docs:check does this too)
 */
import { writeFile } from "node:fs/promises";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { parseOrExit } from "../src/process/cli.ts";
import { renderChartReadme } from "./lib/chart-readme.ts";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const args = parseOrExit({
  usage: "npm run chart:readme [-- --check]",
  description: "Regenerates the values table of deploy/helm/referable/README.md from values.yaml.",
  flags: { check: { type: "boolean", help: "exit 1 when the chart's README is stale, writing nothing" } },
});
const { path, current, wanted } = await renderChartReadme(join(root, "deploy", "helm", "referable"));
if (args.check) {
  if (current !== wanted) {
    console.error(`${relative(root, path)} is stale: run \`npm run chart:readme\` and commit it`);
    process.exit(1);
  }
} else if (current !== wanted) {
  await writeFile(path, wanted);
  console.log(`wrote ${relative(root, path)}`);
} else {
  console.log(`${relative(root, path)} is current`);
}
