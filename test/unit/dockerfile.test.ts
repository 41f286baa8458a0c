/**
 * The Dockerfile, proven without a container engine (none runs on these machines): what the
 * runtime stage runs is what the tests run, every file it copies exists after a build, and its
 * user, base image and build context are the ones deploy/ and the README promise.
 *
 * The strongest check rebuilds the runtime stage's /app by hand: `tsc` as the build stage runs
 * it, package.json, and node_modules holding only the production packages of the lockfile (what
 * `npm ci --omit=dev` installs); then runs the image's command there.
 */
import { execFile } from "node:child_process";
import { access, cp, mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, posix } from "node:path";
import { promisify } from "node:util";
import { load } from "js-yaml";
import { repoRoot } from "../harness/control-plane.ts";

const execFileAsync = promisify(execFile);

interface Instruction {
  op: string;
  /** The text after the keyword, continuation lines joined. */
  rest: string;
}

interface Stage {
  image: string;
  name: string | undefined;
  instructions: Instruction[];
}

/** Splits a Dockerfile into stages of instructions (comments dropped, `\` continuations joined). */
function parseDockerfile(text: string): Stage[] {
  const logical: string[] = [];
  let pending = "";
  for (const raw of text.split("\n")) {
    const line = raw.trim();
    if (!pending && (line === "" || line.startsWith("#"))) continue;
    if (line.endsWith("\\")) pending += `${line.slice(0, -1)} `;
    else {
      logical.push(pending + line);
      pending = "";
    }
  }
  const stages: Stage[] = [];
  for (const line of logical) {
    const m = /^(\w+)\s+(.*)$/.exec(line);
    if (!m) throw new Error(`cannot parse Dockerfile line ${JSON.stringify(line)}`);
    const op = m[1]!.toUpperCase();
    const rest = m[2]!.trim();
    if (op === "FROM") {
      const [image, as, name] = rest.split(/\s+/);
      stages.push({ image: image!, name: as?.toUpperCase() === "AS" ? name : undefined, instructions: [] });
    } else {
      const stage = stages.at(-1);
      if (!stage) throw new Error(`${op} before the first FROM`);
      stage.instructions.push({ op, rest });
    }
  }
  return stages;
}

/** The exec form (`["a", "b"]`) as a list; undefined for the shell form. */
function execForm(rest: string): string[] | undefined {
  if (!rest.startsWith("[")) return undefined;
  return JSON.parse(rest) as string[];
}

interface Copy {
  from: string | undefined;
  sources: string[];
  dest: string;
}

function copies(stage: Stage): Copy[] {
  return stage.instructions
    .filter((i) => i.op === "COPY")
    .map((i) => {
      const words = execForm(i.rest) ?? i.rest.split(/\s+/);
      const from = words.find((w) => w.startsWith("--from="))?.slice("--from=".length);
      const paths = words.filter((w) => !w.startsWith("--"));
      return { from, sources: paths.slice(0, -1), dest: paths.at(-1)! };
    });
}

/** The WORKDIR in effect at the end of a stage. */
function workdir(stage: Stage): string {
  return stage.instructions
    .filter((i) => i.op === "WORKDIR")
    .reduce((dir, i) => posix.resolve(dir, i.rest), "/");
}

/** Whether a .dockerignore pattern excludes `path` (relative to the context) or a folder above it. */
function ignored(patterns: string[], path: string): boolean {
  const toRegExp = (pattern: string) =>
    new RegExp(
      `^${pattern
        .replace(/^\/+|\/+$/g, "")
        .split("**")
        .map((part) =>
          part
            .replace(/[.+^${}()|[\]\\]/g, "\\$&")
            .replace(/\*/g, "[^/]*")
            .replace(/\?/g, "[^/]"),
        )
        .join(".*")}$`,
    );
  const parts = path.split("/");
  const prefixes = parts.map((_, i) => parts.slice(0, i + 1).join("/"));
  let excluded = false;
  for (const pattern of patterns) {
    const negated = pattern.startsWith("!");
    const re = toRegExp(negated ? pattern.slice(1) : pattern);
    if (prefixes.some((p) => re.test(p))) excluded = !negated;
  }
  return excluded;
}

let stages: Stage[];
let build: Stage;
let runtime: Stage;
let dockerignore: string[];

beforeAll(async () => {
  stages = parseDockerfile(await readFile(join(repoRoot, "Dockerfile"), "utf8"));
  build = stages[0]!;
  runtime = stages.at(-1)!;
  dockerignore = (await readFile(join(repoRoot, ".dockerignore"), "utf8"))
    .split("\n")
    .map((l) => l.trim())
    .filter((l) => l && !l.startsWith("#"));
});

describe("Dockerfile", () => {
  it("is multi-stage: a named build stage, then the runtime stage", () => {
    expect(stages.length).toBeGreaterThanOrEqual(2);
    expect(build.name).toBe("build");
    expect(runtime).not.toBe(build);
  });

  it("runs `node dist/main.js` in exec form, so node is PID 1 and receives SIGTERM itself", () => {
    const entrypoint = runtime.instructions.filter((i) => i.op === "ENTRYPOINT");
    const cmd = runtime.instructions.filter((i) => i.op === "CMD");
    expect(entrypoint).toHaveLength(1);
    expect(execForm(entrypoint[0]!.rest)).toEqual(["node", "dist/main.js"]);
    expect(cmd).toEqual([]); // arguments come from the Deployment's args
    expect(workdir(runtime)).toBe("/app");
  });

  it("copies into the runtime stage only files that exist: the build stage's tsc output and files of the context", async () => {
    const buildConfig = JSON.parse(await readFile(join(repoRoot, "tsconfig.build.json"), "utf8")) as {
      compilerOptions: { outDir: string };
    };
    // The build stage compiles with tsconfig.build.json, whose outDir is relative to its WORKDIR.
    expect(
      build.instructions.some((i) => i.op === "RUN" && /\btsc -p tsconfig\.build\.json\b/.test(i.rest)),
    ).toBe(true);
    const builtDir = posix.resolve(workdir(build), buildConfig.compilerOptions.outDir);
    for (const stage of stages) {
      for (const copy of copies(stage)) {
        if (copy.from !== undefined) {
          expect({ from: copy.from, sources: copy.sources }).toEqual({
            from: build.name,
            sources: [builtDir],
          });
          continue;
        }
        for (const source of copy.sources) {
          await expect(access(join(repoRoot, source))).resolves.toBeUndefined();
          expect({ source, ignored: ignored(dockerignore, source) }).toEqual({ source, ignored: false });
        }
      }
    }
  });

  it("runs as a numeric non-root user, the one the Deployment declares", async () => {
    const users = runtime.instructions.filter((i) => i.op === "USER");
    expect(users).toHaveLength(1);
    const [uid, gid] = users[0]!.rest.split(":").map(Number);
    expect(Number.isInteger(uid) && uid! > 0).toBe(true);
    expect(Number.isInteger(gid) && gid! > 0).toBe(true);
    const deployment = load(await readFile(join(repoRoot, "deploy", "base", "deployment.yaml"), "utf8")) as {
      spec: { template: { spec: { securityContext: { runAsUser: number; runAsGroup: number } } } };
    };
    expect(deployment.spec.template.spec.securityContext).toMatchObject({ runAsUser: uid, runAsGroup: gid });
  });

  it("builds on a slim Node LTS image that is still supported, the major the tests run on", async () => {
    const pkg = JSON.parse(await readFile(join(repoRoot, "package.json"), "utf8")) as {
      devDependencies: Record<string, string>;
    };
    const testedMajor = Number(pkg.devDependencies.node!.split(".")[0]);
    expect(Number(process.versions.node.split(".")[0])).toBe(testedMajor);
    for (const stage of stages) {
      const m = /^node:(\d+)(?:\.\d+)*(?:-[a-z]+)?-slim$/.exec(stage.image);
      expect({ image: stage.image, slim: Boolean(m) }).toEqual({ image: stage.image, slim: true });
      const major = Number(m![1]);
      expect(major).toBe(testedMajor);
      // Even majors become LTS; each is released in April of 2013 + major/2 and supported
      // until April three years later (Node 24: 2025 to April 2028).
      expect(major % 2).toBe(0);
      const endOfLife = new Date(Date.UTC(2013 + major / 2 + 3, 3, 30));
      expect(new Date().getTime()).toBeLessThan(endOfLife.getTime());
    }
  });

  it("installs only production dependencies in the runtime stage", () => {
    const runs = runtime.instructions.filter((i) => i.op === "RUN").map((i) => i.rest);
    expect(runs.some((r) => /\bnpm ci\b/.test(r) && /--omit=dev\b/.test(r))).toBe(true);
    expect(runtime.instructions).toContainEqual({ op: "ENV", rest: "NODE_ENV=production" });
  });

  it("keeps glibc to one malloc arena in the runtime stage (a shard's RSS)", () => {
    expect(runtime.instructions).toContainEqual({ op: "ENV", rest: "MALLOC_ARENA_MAX=1" });
  });

  it("has a .dockerignore that keeps node_modules, .git, tests and local builds out of the context", () => {
    for (const path of ["node_modules", ".git", "test", "test/integration/deploy.test.ts", "dist"]) {
      expect({ path, ignored: ignored(dockerignore, path) }).toEqual({ path, ignored: true });
    }
  });

  it("starts: the image's command runs in an /app laid out as the runtime stage lays it out", async () => {
    const app = await mkdtemp(join(tmpdir(), "referable-image-"));
    try {
      // The build stage: tsc with tsconfig.build.json (only the output folder differs).
      await execFileAsync(
        process.execPath,
        [
          join(repoRoot, "node_modules", "typescript", "bin", "tsc"),
          "-p",
          join(repoRoot, "tsconfig.build.json"),
          "--outDir",
          join(app, "dist"),
        ],
        { cwd: repoRoot },
      ).catch((err: { stdout?: string; message: string }) => {
        throw new Error(`tsc failed as the build stage would: ${err.stdout || err.message}`);
      });
      await expect(access(join(app, "dist", "main.js"))).resolves.toBeUndefined();

      // The runtime stage's copies from the context, and `npm ci --omit=dev`: every package of
      // the lockfile not marked dev, nothing else (no hoisted dev package to lean on by accident).
      for (const copy of copies(runtime).filter((c) => c.from === undefined)) {
        for (const source of copy.sources) {
          const dest = copy.dest.endsWith("/") ? join(app, source) : join(app, copy.dest);
          await cp(join(repoRoot, source), dest, { recursive: true });
        }
      }
      const lock = JSON.parse(await readFile(join(repoRoot, "package-lock.json"), "utf8")) as {
        packages: Record<string, { dev?: boolean; optional?: boolean }>;
      };
      const production = new Set(
        Object.entries(lock.packages)
          .filter(([path, p]) => path.startsWith("node_modules/") && !p.dev)
          .map(([path]) => path),
      );
      const packageRoot = /(^|\/)node_modules\/(@[^/]+\/[^/]+|[^@/][^/]*)$/;
      await cp(join(repoRoot, "node_modules"), join(app, "node_modules"), {
        recursive: true,
        filter: (source) => {
          const path = source.slice(repoRoot.length + 1);
          return !packageRoot.test(path) || production.has(path);
        },
      });

      const { stdout } = await execFileAsync(process.execPath, ["dist/main.js", "--help"], {
        cwd: app,
        env: { PATH: process.env.PATH ?? "/usr/bin:/bin", NODE_ENV: "production" },
      });
      expect(stdout.split("\n")[0]).toBe("Usage: referable-controller [options]");
      expect(stdout).toContain("--allow-secrets");
    } finally {
      await rm(app, { recursive: true, force: true });
    }
  }, 120_000);
});
