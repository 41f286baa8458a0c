/**
 * The API report: every export of the package (src/index.ts) with its type, as API Extractor
 * writes it, checked in at etc/referable.api.md so that a change to the public API is a visible,
 * reviewed diff.
 *
 *   node scripts/api-report.ts            check: fail when the report is out of date (npm test)
 *   node scripts/api-report.ts --update   write the report (npm run api:update)
 *
 * It builds the declarations of src/index.ts and what it imports, with `@internal` stripped as
 * in the published package, into a temporary directory, so it needs no prior build. Besides the
 * report, API Extractor fails the check when an export's type names something the package does
 * not export (ae-forgotten-export): a consumer could not name that type.
 */
import { Extractor, ExtractorConfig, ExtractorLogLevel, type IConfigFile } from "@microsoft/api-extractor";
import { execFile } from "node:child_process";
import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { parseOrExit } from "../src/process/cli.ts";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const REPORT = join(root, "etc", "referable.api.md");
const UPDATE = "npm run api:update";

const args = parseOrExit({
  usage: "npm run api:check | npm run api:update",
  description:
    "Checks (or with --update writes) etc/referable.api.md, the public API report of src/index.ts.",
  flags: {
    update: { type: "boolean", help: "write the report instead of checking it (npm run api:update)" },
  },
});

/** Builds the report into a temporary directory and returns its text. */
export async function buildApiReport(): Promise<string> {
  const tmp = await mkdtemp(join(tmpdir(), "referable-api-report-"));
  try {
    const dts = join(tmp, "dts");
    // Only the library's import graph, declarations only, as the package build emits them.
    const tsconfig = join(tmp, "tsconfig.json");
    await writeFile(
      tsconfig,
      JSON.stringify({
        extends: join(root, "tsconfig.build.json"),
        compilerOptions: {
          rootDir: join(root, "src"),
          outDir: dts,
          // Relative to this temporary tsconfig they would not be found.
          typeRoots: [join(root, "node_modules", "@types")],
          emitDeclarationOnly: true,
          stripInternal: true,
          sourceMap: false,
          inlineSources: false,
          declarationMap: false,
        },
        include: [],
        files: [join(root, "src", "index.ts")],
      }),
    );
    const tsc = join(root, "node_modules", "typescript", "bin", "tsc");
    await promisify(execFile)(process.execPath, [tsc, "-p", tsconfig], { cwd: root }).catch(
      (err: unknown) => {
        const out = err as { stdout?: string; stderr?: string };
        throw new Error(`tsc could not build the declarations:\n${out.stdout ?? ""}${out.stderr ?? ""}`, {
          cause: err,
        });
      },
    );

    const reportFolder = join(tmp, "report");
    await mkdir(reportFolder);
    const configObject: IConfigFile = {
      projectFolder: root,
      mainEntryPointFilePath: join(dts, "index.d.ts"),
      compiler: {
        overrideTsconfig: {
          compilerOptions: {
            target: "ES2023",
            lib: ["ES2023"],
            module: "NodeNext",
            moduleResolution: "NodeNext",
            types: ["node"],
            strict: true,
            skipLibCheck: true,
          },
          files: [join(dts, "index.d.ts")],
        },
      },
      apiReport: {
        enabled: true,
        reportFileName: "referable.api.md",
        reportFolder,
        reportTempFolder: join(tmp, "report-temp"),
      },
      docModel: { enabled: false },
      dtsRollup: { enabled: false },
      tsdocMetadata: { enabled: false },
      messages: {
        compilerMessageReporting: { default: { logLevel: ExtractorLogLevel.Error } },
        extractorMessageReporting: {
          default: { logLevel: ExtractorLogLevel.Error },
          // Release tags (@public, @beta) are not used: everything exported is public.
          "ae-missing-release-tag": { logLevel: ExtractorLogLevel.None },
          // Documentation is TypeDoc's check (npm run docs:check), one place for it.
          "ae-undocumented": { logLevel: ExtractorLogLevel.None },
        },
        // TSDoc is checked by TypeDoc (npm run docs:check), which knows the tags used here.
        tsdocMessageReporting: { default: { logLevel: ExtractorLogLevel.None } },
      },
    };
    const config = ExtractorConfig.prepare({
      configObject,
      configObjectFullPath: join(root, "api-extractor.json"),
      packageJsonFullPath: join(root, "package.json"),
    });
    const problems: string[] = [];
    const result = Extractor.invoke(config, {
      localBuild: true,
      showVerboseMessages: false,
      messageCallback: (message) => {
        // console-* messages are about the report file itself (created, changed): compared below.
        const aboutTheApi = !String(message.messageId).startsWith("console-");
        if (
          aboutTheApi &&
          (message.logLevel === ExtractorLogLevel.Error || message.logLevel === ExtractorLogLevel.Warning)
        )
          problems.push(message.formatMessageWithLocation(root));
        message.handled = true;
      },
    });
    if (!result.succeeded || problems.length > 0)
      throw new Error(`API Extractor found problems in the public API:\n${problems.join("\n")}`);
    return await readFile(join(reportFolder, "referable.api.md"), "utf8");
  } finally {
    await rm(tmp, { recursive: true, force: true });
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  try {
    const built = await buildApiReport();
    const checkedIn = await readFile(REPORT, "utf8").catch(() => undefined);
    if (args.update) {
      if (built !== checkedIn) await writeFile(REPORT, built);
      console.log(`${built === checkedIn ? "unchanged" : "updated"}: ${REPORT}`);
    } else if (built !== checkedIn) {
      console.error(
        `The public API differs from etc/referable.api.md. If the change is intended, run \`${UPDATE}\` ` +
          "and commit the report with the change (reviewers read its diff); otherwise change src/index.ts " +
          "or the exported types back.\n\n" +
          lineDiff(checkedIn ?? "", built),
      );
      process.exitCode = 1;
    } else {
      console.log("the API report is up to date: etc/referable.api.md");
    }
  } catch (err) {
    console.error((err as Error).message);
    process.exitCode = 1;
  }
}

/** The lines only one side has, marked - (checked in) and + (built), in order; enough to see what changed. */
function lineDiff(before: string, after: string): string {
  const a = before.split("\n");
  const b = after.split("\n");
  const inA = new Set(a);
  const inB = new Set(b);
  const out = [
    ...a.filter((line) => !inB.has(line)).map((line) => `- ${line}`),
    ...b.filter((line) => !inA.has(line)).map((line) => `+ ${line}`),
  ];
  return out.length > 0 ? out.join("\n") : "(only the order of lines differs)";
}
