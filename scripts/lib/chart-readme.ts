/**
 * The Helm chart's README (deploy/helm/referable/README.md) has a values table generated from
 * values.yaml: each key, its default, and the comment right above it. The prose around the
 * table is hand-written; the table sits between two markers and is replaced as a whole.
 * scripts/chart-readme.ts writes it; scripts/docs-reference.ts (npm run docs:check) fails when
 * it is stale.
 */
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { load } from "js-yaml";
import { format, resolveConfig } from "prettier";

export const BEGIN = "<!-- values:begin (generated from values.yaml by `npm run chart:readme`) -->";
export const END = "<!-- values:end -->";

/** One documented value: its dotted path, its default as JSON, and its comment. */
export interface ValueDoc {
  path: string;
  default: string;
  description: string;
}

/**
 * Every key of values.yaml with the comment block right above it (a blank line ends a block, so
 * a commented-out example under a key documents nothing). A key whose default is a non-empty
 * map is listed only when it has a comment of its own; its children are always listed.
 */
export function valueDocs(yaml: string): ValueDoc[] {
  const values = load(yaml) as Record<string, unknown>;
  const out: ValueDoc[] = [];
  const stack: Array<{ indent: number; key: string }> = [];
  let comment: string[] = [];
  for (const line of yaml.split("\n")) {
    const trimmed = line.trim();
    if (trimmed === "") {
      comment = [];
      continue;
    }
    if (trimmed.startsWith("#")) {
      comment.push(trimmed.replace(/^#\s?/, ""));
      continue;
    }
    const key = /^(\s*)([A-Za-z_][\w-]*):(\s|$)/.exec(line);
    if (!key) {
      comment = [];
      continue;
    }
    const indent = key[1]!.length;
    while (stack.length > 0 && stack.at(-1)!.indent >= indent) stack.pop();
    stack.push({ indent, key: key[2]! });
    const path = stack.map((s) => s.key);
    let value: unknown = values;
    for (const p of path) value = (value as Record<string, unknown>)[p];
    const parent =
      value !== null && typeof value === "object" && !Array.isArray(value) && Object.keys(value).length > 0;
    if (!parent || comment.length > 0) {
      out.push({
        path: path.join("."),
        default: parent ? "" : JSON.stringify(value),
        description: comment.join(" "),
      });
    }
    comment = [];
  }
  return out;
}

/** The Markdown table of `docs`. */
export function valuesTable(docs: readonly ValueDoc[]): string {
  const cell = (s: string) => s.replace(/\|/g, "\\|");
  const rows = docs.map(
    (d) => `| \`${d.path}\` | ${d.default ? `\`${cell(d.default)}\`` : ""} | ${cell(d.description)} |`,
  );
  return ["| Value | Default | What it does |", "| --- | --- | --- |", ...rows].join("\n");
}

/** The README with its table generated from the chart's values.yaml, formatted as Prettier would. */
export async function renderChartReadme(
  chartDir: string,
): Promise<{ path: string; current: string; wanted: string }> {
  const path = join(chartDir, "README.md");
  const current = await readFile(path, "utf8");
  const start = current.indexOf(BEGIN);
  const end = current.indexOf(END);
  if (start < 0 || end < start) throw new Error(`${path} needs the markers ${BEGIN} and ${END}`);
  const table = valuesTable(valueDocs(await readFile(join(chartDir, "values.yaml"), "utf8")));
  const text = `${current.slice(0, start)}${BEGIN}\n\n${table}\n\n${current.slice(end)}`;
  const wanted = await format(text, { ...(await resolveConfig(path)), parser: "markdown" });
  return { path, current, wanted };
}
