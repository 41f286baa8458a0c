/**
 * The package as a consumer gets it: `npm pack` (which builds dist/ through `prepare`), the
 * tarball installed into a new project, and the clone installed by path; each imported with
 * `import` and `require` on the first try, and an unsupported Node.js refused with one clear
 * error. No cluster is needed; it lives here because it is slow (a real npm install).
 */
import { execFile } from "node:child_process";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { repoRoot } from "../harness/control-plane.ts";

const execFileAsync = promisify(execFile);
const STEP_MS = 300_000;

let tmp: string;
let tarball: string;
let packed: string[];
let freshClone: string;

/** Runs npm in `cwd` (the machine's npm, as a user would). */
async function npm(cwd: string, ...args: string[]): Promise<string> {
  const { stdout } = await execFileAsync("npm", args, { cwd, maxBuffer: 16 * 1024 * 1024 });
  return stdout;
}

/** A new consumer project under the test's folder, named after `prefix`; `fields` go into its package.json. */
async function newProject(prefix: string, fields: Record<string, unknown> = {}): Promise<string> {
  const project = await mkdtemp(join(tmp, prefix));
  await writeFile(
    join(project, "package.json"),
    JSON.stringify({ name: "consumer", private: true, ...fields }),
  );
  return project;
}

/** `npm install` of `specs` in `project`, as a user would (from the cache where it can). */
const npmInstall = (project: string, ...specs: string[]) =>
  npm(project, "install", "--no-audit", "--no-fund", "--prefer-offline", ...specs);

/** Runs a consumer's script with this Node.js (>= 22.19); resolves with its stdout. */
async function run(cwd: string, file: string, code: string): Promise<string> {
  await writeFile(join(cwd, file), code);
  const { stdout } = await execFileAsync(process.execPath, [file], { cwd });
  return stdout.trim();
}

/**
 * Type-checks the project's consumer.ts with this repository's tsc under `options` (no emit, the
 * repository's @types/node); resolves with "compiles" or with tsc's errors.
 */
async function compile(project: string, options: Record<string, unknown>): Promise<string> {
  await writeFile(
    join(project, "tsconfig.json"),
    JSON.stringify({
      compilerOptions: {
        target: "ES2023",
        ...options,
        noEmit: true,
        types: ["node"],
        typeRoots: [join(repoRoot, "node_modules", "@types")],
      },
      files: ["consumer.ts"],
    }),
  );
  const tsc = join(repoRoot, "node_modules", "typescript", "bin", "tsc");
  return execFileAsync(process.execPath, [tsc, "-p", project], { cwd: project }).then(
    () => "compiles",
    (err: { stdout?: string }) => err.stdout ?? String(err),
  );
}

const ESM = `import { createResolver, Reasons, isResolutionError } from "referable";
console.log(typeof createResolver, Reasons.Available, typeof isResolutionError);`;
const CJS = `const { createResolver, Reasons } = require("referable");
console.log(typeof createResolver, Reasons.Available);`;

/**
 * A consumer as docs/library.md shows one. Each `@ts-expect-error` fails the compile if the line
 * under it type-checks, so the internals staying out of the published types is checked too.
 */
const TYPED_CONSUMER = `import { KubeConfig } from "@kubernetes/client-node";
import {
  createResolver,
  isResolutionError,
  Reasons,
  type GenericReference,
  type ResolutionResult,
  type Resolver,
} from "referable";
// @ts-expect-error the raw-JSON client is internal
import { KubeClient } from "referable";
// @ts-expect-error the old name of the error guard is gone
import { isReferenceError } from "referable";

export async function arnOf(kubeConfig: KubeConfig, ref: GenericReference): Promise<string> {
  const resolver: Resolver = createResolver({ kubeConfig });
  try {
    const { value } = await resolver.resolve(ref);
    return String(value);
  } catch (err) {
    if (!isResolutionError(err)) throw err;
    return err.reason === Reasons.SourceNotFound ? "missing" : \`\${err.reason}: \${err.message}\`;
  } finally {
    await resolver.stop();
  }
}

export const pushed = (result: ResolutionResult): string | boolean =>
  result.ok ? result.reason : result.error.retryable;

// @ts-expect-error a resolver is made with a kubeConfig, not a client
createResolver({ client: {} });
export { KubeClient, isReferenceError };
`;

beforeAll(async () => {
  tmp = await mkdtemp(join(tmpdir(), "referable-package-test-"));
  const [info] = JSON.parse(await npm(repoRoot, "pack", "--json", "--pack-destination", tmp)) as Array<{
    filename: string;
    files: Array<{ path: string }>;
  }>;
  tarball = join(tmp, info!.filename);
  packed = info!.files.map((f) => f.path);
  freshClone = join(tmp, "clone");
  await execFileAsync("git", ["clone", "--quiet", repoRoot, freshClone]);
}, STEP_MS);

// The folder holds installed node_modules and a clone: removing it takes more than Jest's default
// 5 s for a hook on a loaded machine (a clean-clone CI run failed on it).
afterAll(async () => {
  if (tmp) await rm(tmp, { recursive: true, force: true });
}, STEP_MS);

describe("npm pack", () => {
  const needed: Array<{ reason: string; path: string }> = [
    { reason: "the entry point, built by prepare", path: "dist/index.js" },
    { reason: "the types of the entry point", path: "dist/index.d.ts" },
    { reason: "the Node.js version check, evaluated first", path: "dist/api/node-version.js" },
    { reason: "the CRD, for consumers that install it", path: "crds/referable.dev_referables.yaml" },
    { reason: "the API reference", path: "docs/api.md" },
    { reason: "the library guide", path: "docs/library.md" },
  ];
  it.each(needed)("holds $path: $reason", ({ path }) => {
    expect(packed).toContain(path);
  });

  it("holds no tests and no TypeScript sources", () => {
    expect(packed.filter((p) => /\.test\.|^src\/|^test\//.test(p))).toEqual([]);
  });

  it("holds the library, not the controller: it runs from the image and the repository", () => {
    const controller = /^dist\/(controller|webhook|process|referable)\/|^deploy\/|^examples\//;
    expect(packed.filter((p) => controller.test(p))).toEqual([]);
    expect(packed.filter((p) => p.endsWith(".map"))).toEqual([]);
  });
});

describe("installed into a new project", () => {
  const ways: Array<{ reason: string; install: () => string }> = [
    { reason: "the npm pack tarball", install: () => tarball },
    { reason: "the clone, by path (a link)", install: () => repoRoot },
    // A fresh clone has no node_modules: prepare installs the dev dependencies in it to build.
    { reason: "a fresh clone without node_modules, by path", install: () => freshClone },
    { reason: "a fresh clone as git+file://", install: () => `git+file://${freshClone}` },
  ];
  it.each(ways)(
    "from $reason: import and require work on the first try",
    async ({ install }) => {
      const project = await newProject("consumer-");
      await npmInstall(project, install());
      expect(await run(project, "esm.mjs", ESM)).toBe("function Available function");
      expect(await run(project, "cjs.cjs", CJS)).toBe("function Available");
    },
    STEP_MS,
  );

  it(
    "from the npm pack tarball: a TypeScript consumer compiles against the published types, which hold the curated API only",
    async () => {
      const project = await newProject("typed-consumer-", { type: "module" });
      await npmInstall(project, tarball);
      await writeFile(join(project, "consumer.ts"), TYPED_CONSUMER);
      expect(
        await compile(project, {
          module: "NodeNext",
          moduleResolution: "NodeNext",
          strict: true,
          skipLibCheck: true,
        }),
      ).toBe("compiles");
    },
    STEP_MS,
  );

  it.each([
    { resolution: "node16", module: "node16" },
    { resolution: "bundler", module: "esnext" },
  ])(
    "from the npm pack tarball: its declarations compile in the strictest consumer (moduleResolution $resolution, skipLibCheck false, exactOptionalPropertyTypes)",
    async ({ resolution, module }) => {
      const project = await newProject(`strict-${resolution}-`, { type: "module" });
      // @types/ws: client-node's own declarations import "ws", which a consumer checking every
      // declaration needs the types of (nothing of this package's).
      await npmInstall(project, tarball, "@types/ws@^8");
      // Every declaration the entry point reaches is checked (skipLibCheck: false), the
      // namespace import making sure none is left out.
      await writeFile(
        join(project, "consumer.ts"),
        `${TYPED_CONSUMER}\nimport * as everything from "referable";\nexport const api = everything;\n`,
      );
      expect(
        await compile(project, {
          module,
          moduleResolution: resolution,
          strict: true,
          exactOptionalPropertyTypes: true,
          noUncheckedIndexedAccess: true,
          skipLibCheck: false,
        }),
      ).toBe("compiles");
    },
    STEP_MS,
  );

  it(
    "from the npm pack tarball: only what the library loads is installed (no pino, no prom-client), its dependencies in caret ranges",
    async () => {
      const project = await newProject("installs-");
      await npmInstall(project, tarball);
      const lock = JSON.parse(await readFile(join(project, "package-lock.json"), "utf8")) as {
        packages: Record<string, { peer?: boolean }>;
      };
      const installed = Object.keys(lock.packages).filter((p) => p.startsWith("node_modules/"));
      const controllerOnly = installed.filter((p) => /(^|\/)node_modules\/(pino|prom-client)$/.test(p));
      expect(controllerOnly).toEqual([]);
      expect(installed).toContain("node_modules/referable");
      const manifest = JSON.parse(
        await readFile(join(project, "node_modules", "referable", "package.json"), "utf8"),
      ) as { dependencies: Record<string, string> };
      expect(Object.keys(manifest.dependencies).sort()).toEqual([
        "@marcbachmann/cel-js",
        "js-yaml",
        "jsonpath-plus",
        "lru-cache",
        "undici",
      ]);
      for (const [name, range] of Object.entries(manifest.dependencies))
        expect({ name, range }).toEqual({ name, range: expect.stringMatching(/^\^\d+\.\d+\.\d+$/) });
    },
    STEP_MS,
  );

  it(
    "beside the consumer's own @kubernetes/client-node, it uses that one copy (a peer dependency)",
    async () => {
      const project = await newProject("peer-");
      const version = JSON.parse(
        await readFile(join(repoRoot, "node_modules", "@kubernetes", "client-node", "package.json"), "utf8"),
      ).version as string;
      await npmInstall(project, `@kubernetes/client-node@${version}`);
      await npmInstall(project, tarball);
      const { stdout } = await execFileAsync("find", [
        join(project, "node_modules"),
        "-path",
        "*/@kubernetes/client-node/package.json",
      ]);
      expect(stdout.trim().split("\n")).toEqual([
        join(project, "node_modules", "@kubernetes", "client-node", "package.json"),
      ]);
      expect(await run(project, "esm.mjs", ESM)).toBe("function Available function");
    },
    STEP_MS,
  );

  it(
    "on an unsupported Node.js, importing it throws one error naming the version needed",
    async () => {
      const project = await newProject("old-node-");
      await npmInstall(project, tarball);
      // Node 20 itself may not be on this machine: the same check, with the version it reads faked.
      const out = await run(
        project,
        "old.mjs",
        `Object.defineProperty(process.versions, "node", { value: "20.19.0" });
try { await import("referable"); console.log("imported"); } catch (err) { console.log(err.message); }`,
      );
      expect(out).toBe(
        "referable needs Node.js >= 22.19.0, but this is Node.js 20.19.0: upgrade Node.js (e.g. `nvm install 24`)",
      );
    },
    STEP_MS,
  );
});
