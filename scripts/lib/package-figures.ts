/**
 * docs/library.md's figures of the published package ("What is installed"): how many files the
 * `npm pack` tarball holds, its size packed and unpacked, and a table of what is in it by folder.
 * They come from `npm pack --dry-run --json` (which runs `prepare`, so dist/ is built from the
 * sources as they are), sit between two markers, and are replaced as a whole by
 * `npm run docs:update`; `npm run docs:check` fails when they no longer describe the package.
 *
 * File counts must match exactly. Sizes may differ by up to {@link SIZE_TOLERANCE} (a change of a
 * few lines in a module should not make every other branch's check fail); past that, or when a
 * packed file fits no row of the table (a new folder: say what it is), the check fails.
 */
import { execFile } from "node:child_process";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { promisify } from "node:util";
import { format, resolveConfig } from "prettier";

export const BEGIN = "<!-- package:begin (from `npm pack` by `npm run docs:update`) -->";
export const END = "<!-- package:end -->";
/** How far a size in the guide may be from the package's (a share of it). */
export const SIZE_TOLERANCE = 0.05;

/** One row of the table: the packed files it counts, and what they are for a reader. */
interface Row {
  label: string;
  what: string;
  match: RegExp;
}

/** In the order of the table; a file counts in the first row that matches it. */
const ROWS: readonly Row[] = [
  { label: "`dist/index`", what: "the entry point and its types", match: /^dist\/[^/]+$/ },
  { label: "`dist/api/`", what: "the API's types, limits, errors, Logger", match: /^dist\/api\// },
  { label: "`dist/resolver/`", what: "references, selectors, `watch`", match: /^dist\/resolver\// },
  {
    label: "`dist/informers/`",
    what: "the shared informers and projections",
    match: /^dist\/informers\//,
  },
  { label: "`dist/kube/`", what: "the raw-JSON client, discovery", match: /^dist\/kube\// },
  { label: "`dist/fieldpath/`", what: "field paths and JSONPath", match: /^dist\/fieldpath\// },
  {
    label: "`dist/outputs/keys/` (the writer only)",
    what: "`exportValue` into ConfigMap/Secret keys",
    match: /^dist\/outputs\/keys\//,
  },
  {
    label: "`dist/outputs/field/` (the writer only)",
    what: "`exportValue` into an object's field",
    match: /^dist\/outputs\/field\//,
  },
  {
    label: "`dist/outputs/` (the reads both writers share)",
    what: "reading the target, request failures",
    match: /^dist\/outputs\/[^/]+$/,
  },
  {
    label: "`dist/transform/`",
    what: "CEL transforms and their worker pool",
    match: /^dist\/transform\//,
  },
  {
    label: "`dist/timing/`",
    what: "backoff, jitter, sleep, token bucket",
    match: /^dist\/timing\//,
  },
  {
    label: "`dist/runtime/` (the controller runtime, not the Manager)",
    what: "the host helper's queue and workers",
    match: /^dist\/runtime\//,
  },
  { label: "`dist/host/`", what: "`createReferenceController`", match: /^dist\/host\// },
  { label: "`crds/`", what: "the Referable CRD", match: /^crds\// },
  {
    label: "`docs/api.md`, `library.md`, `consuming.md`",
    what: "the contract and these guides",
    match: /^docs\//,
  },
  {
    label: "`etc/referable.api.md`, README, LICENSE, package.json, prepare",
    what: "the API report and the rest",
    match: /^(etc\/|README\.md$|LICENSE$|package\.json$|scripts\/)/,
  },
];

/** What `npm pack --dry-run --json` says of the package. */
export interface PackInfo {
  size: number;
  unpackedSize: number;
  files: Array<{ path: string; size: number }>;
}

/** Packs `root` as `npm pack` would (building dist/ through `prepare`), writing no tarball. */
export async function packInfo(root: string): Promise<PackInfo> {
  const { stdout } = await promisify(execFile)("npm", ["pack", "--dry-run", "--json"], {
    cwd: root,
    maxBuffer: 16 * 1024 * 1024,
  });
  const [info] = JSON.parse(stdout) as PackInfo[];
  if (!info) throw new Error("npm pack --dry-run --json printed no package");
  return info;
}

const kib = (bytes: number) => `${(bytes / 1024).toFixed(1)} KiB`;

/** The figures' Markdown (unformatted); throws naming a packed file that fits no row. */
export function figuresMarkdown(info: PackInfo): string {
  const counts = ROWS.map(() => ({ files: 0, bytes: 0 }));
  const unplaced: string[] = [];
  for (const f of info.files) {
    const i = ROWS.findIndex((r) => r.match.test(f.path));
    if (i < 0) unplaced.push(f.path);
    else {
      counts[i]!.files++;
      counts[i]!.bytes += f.size;
    }
  }
  if (unplaced.length > 0)
    throw new Error(
      `packed files that no row of docs/library.md's package table counts: ${unplaced.join(", ")} (add a row in scripts/lib/package-figures.ts)`,
    );
  const rows = ROWS.map((r, i) => ({ r, c: counts[i]! }))
    .filter(({ c }) => c.files > 0)
    .map(({ r, c }) => `| ${r.label} | ${c.files} | ${kib(c.bytes)} | ${r.what} |`);
  return [
    `\`npm pack\` of this version: ${info.files.length} files, ${kib(info.size)} packed, ${kib(info.unpackedSize)} unpacked:`,
    "",
    "| path | files | size | what |",
    "| --- | ---: | ---: | --- |",
    ...rows,
  ].join("\n");
}

/** The numbers of a figures block, in order, each with whether it is a size (KiB). */
function numbersOf(block: string): { text: string; sizes: number[] } {
  const sizes: number[] = [];
  const text = block
    .replace(/(\d+(?:\.\d+)?) KiB/g, (_, n: string) => {
      sizes.push(Number(n));
      return "# KiB";
    })
    .replace(/[ \t]+/g, " ")
    .replace(/-{3,}/g, "---");
  return { text, sizes };
}

/** The guide's block between the markers. */
function blockOf(text: string, path: string): { start: number; end: number; block: string } {
  const start = text.indexOf(BEGIN);
  const end = text.indexOf(END);
  if (start < 0 || end < start) throw new Error(`${path} needs the markers ${BEGIN} and ${END}`);
  return { start, end, block: text.slice(start + BEGIN.length, end).trim() };
}

/**
 * The guide with its figures made from `info` (formatted as Prettier would), and the reasons its
 * current figures do not describe the package (none when they do, within the tolerance).
 */
export async function renderPackageFigures(
  root: string,
  info: PackInfo,
): Promise<{ path: string; current: string; wanted: string; stale: string[] }> {
  const path = join(root, "docs", "library.md");
  const current = await readFile(path, "utf8");
  const { start, end, block } = blockOf(current, path);
  const text = `${current.slice(0, start)}${BEGIN}\n\n${figuresMarkdown(info)}\n\n${current.slice(end)}`;
  const wanted = await format(text, { ...(await resolveConfig(path)), parser: "markdown" });
  const have = numbersOf(block);
  const want = numbersOf(blockOf(wanted, path).block);
  const stale: string[] = [];
  if (have.text !== want.text || have.sizes.length !== want.sizes.length)
    stale.push("docs/library.md: the package's files or rows changed (run `npm run docs:update`)");
  else
    for (const [i, size] of want.sizes.entries()) {
      const quoted = have.sizes[i]!;
      if (Math.abs(quoted - size) > Math.max(0.1, size * SIZE_TOLERANCE))
        stale.push(
          `docs/library.md: the package figures quote ${quoted} KiB where the package has ${size} KiB (run \`npm run docs:update\`)`,
        );
    }
  return { path, current, wanted, stale };
}
