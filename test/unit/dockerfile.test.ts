/**
 * The Dockerfile, read without a container engine (`npm run test:image` builds and runs it with
 * podman): what the runtime stage runs is what the tests run, every file it copies exists after a
 * build, the final stage is `scratch` with only the files the rootfs stage collects, and its
 * user, labels, pinned base and build context are the ones deploy/ and the README promise.
 *
 * The strongest check rebuilds the image's /app by hand: `tsc` as the build stage runs it,
 * package.json, and node_modules holding only the production packages of the lockfile (what
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

/**
 * Splits a Dockerfile into stages of instructions (comments dropped, `\` continuations joined),
 * with the global ARGs (those before the first FROM) substituted into each FROM.
 */
function parseDockerfile(text: string): { args: Record<string, string>; stages: Stage[] } {
  const logical: string[] = [];
  let pending = "";
  for (const raw of text.split("\n")) {
    const line = raw.trim();
    if (pending && line.startsWith("#")) continue;
    if (!pending && (line === "" || line.startsWith("#"))) continue;
    if (line.endsWith("\\")) pending += `${line.slice(0, -1)} `;
    else {
      logical.push(pending + line);
      pending = "";
    }
  }
  const args: Record<string, string> = {};
  const stages: Stage[] = [];
  for (const line of logical) {
    const m = /^(\w+)\s+(.*)$/.exec(line);
    if (!m) throw new Error(`cannot parse Dockerfile line ${JSON.stringify(line)}`);
    const op = m[1]!.toUpperCase();
    const rest = m[2]!.trim();
    if (op === "FROM") {
      const [image, as, name] = rest.split(/\s+/);
      const resolved = image!.replace(/\$\{?(\w+)\}?/g, (ref, arg: string) => {
        if (!(arg in args)) throw new Error(`FROM ${image}: no global ARG ${arg} with a default`);
        return args[arg]!;
      });
      stages.push({ image: resolved, name: as?.toUpperCase() === "AS" ? name : undefined, instructions: [] });
    } else {
      const stage = stages.at(-1);
      if (stage) stage.instructions.push({ op, rest });
      else if (op === "ARG" && rest.includes("="))
        args[rest.slice(0, rest.indexOf("="))] = rest.slice(rest.indexOf("=") + 1);
      else throw new Error(`${op} before the first FROM`);
    }
  }
  return { args, stages };
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
let globalArgs: Record<string, string>;
let build: Stage;
/** The stage that lays out the final image's files under /rootfs. */
let rootfs: Stage;
let runtime: Stage;
let dockerignore: string[];

beforeAll(async () => {
  ({ args: globalArgs, stages } = parseDockerfile(await readFile(join(repoRoot, "Dockerfile"), "utf8")));
  build = stages[0]!;
  runtime = stages.at(-1)!;
  rootfs = stages.find((s) => s.name === "rootfs")!;
  dockerignore = (await readFile(join(repoRoot, ".dockerignore"), "utf8"))
    .split("\n")
    .map((l) => l.trim())
    .filter((l) => l && !l.startsWith("#"));
});

describe("Dockerfile", () => {
  it("is multi-stage: a named build stage, a rootfs stage, then the runtime stage from scratch", () => {
    expect(stages.map((s) => s.name)).toEqual(["build", "rootfs", undefined]);
    expect(runtime.image).toBe("scratch");
    // The final stage runs nothing (it has no shell to run it with) and takes every file from rootfs.
    expect(runtime.instructions.filter((i) => i.op === "RUN")).toEqual([]);
    expect(copies(runtime)).toEqual([{ from: "rootfs", sources: ["/rootfs"], dest: "/" }]);
  });

  it("runs `node dist/main.js` in exec form, so node is PID 1 and receives SIGTERM itself", () => {
    const entrypoint = runtime.instructions.filter((i) => i.op === "ENTRYPOINT");
    const cmd = runtime.instructions.filter((i) => i.op === "CMD");
    expect(entrypoint).toHaveLength(1);
    expect(execForm(entrypoint[0]!.rest)).toEqual(["node", "dist/main.js"]);
    expect(cmd).toEqual([]); // arguments come from the Deployment's args
    expect(workdir(runtime)).toBe("/app");
    // /app of the final image is /rootfs/app of the rootfs stage; node is found on PATH.
    expect(workdir(rootfs)).toBe("/rootfs/app");
    expect(runtime.instructions).toContainEqual({ op: "ENV", rest: "PATH=/usr/local/bin" });
    const collect = rootfs.instructions.filter((i) => i.op === "RUN").map((i) => i.rest);
    expect(collect.some((r) => r.includes("cp /usr/local/bin/node /rootfs/usr/local/bin/node"))).toBe(true);
  });

  it("copies only files that exist: the build stage's tsc output and files of the context, never crds/ or an npmrc", async () => {
    const buildConfig = JSON.parse(await readFile(join(repoRoot, "tsconfig.build.json"), "utf8")) as {
      compilerOptions: { outDir: string };
    };
    // The build stage compiles with tsconfig.build.json, whose outDir is relative to its WORKDIR.
    expect(
      build.instructions.some((i) => i.op === "RUN" && /\btsc -p tsconfig\.build\.json\b/.test(i.rest)),
    ).toBe(true);
    const builtDir = posix.resolve(workdir(build), buildConfig.compilerOptions.outDir);
    for (const stage of stages.slice(0, -1)) {
      for (const copy of copies(stage)) {
        if (copy.from !== undefined) {
          expect({ from: copy.from, sources: copy.sources }).toEqual({
            from: build.name,
            sources: [builtDir],
          });
          continue;
        }
        for (const source of copy.sources) {
          expect(source).not.toMatch(/^crds|npmrc/);
          await expect(access(join(repoRoot, source))).resolves.toBeUndefined();
          expect({ source, ignored: ignored(dockerignore, source) }).toEqual({ source, ignored: false });
        }
      }
    }
  });

  it("passes npm's settings to `npm ci` as build secrets, never as files of a layer", () => {
    for (const stage of [build, rootfs]) {
      const ci = stage.instructions.filter((i) => i.op === "RUN" && /\bnpm ci\b/.test(i.rest));
      expect(ci).toHaveLength(1);
      expect(ci[0]!.rest).toContain("--mount=type=secret,id=npmrc,target=/root/.npmrc");
      expect(ci[0]!.rest).toContain("--mount=type=secret,id=npm-ca,");
    }
    expect(
      [...stages.flatMap((s) => s.instructions)].filter(
        (i) => i.op === "ENV" && /NPM|CA_CERTS/i.test(i.rest),
      ),
    ).toEqual([]);
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

  it("carries the OCI labels of this release: version, licence, source", async () => {
    const pkg = JSON.parse(await readFile(join(repoRoot, "package.json"), "utf8")) as {
      version: string;
      license: string;
    };
    const labels: Record<string, string> = {};
    for (const i of runtime.instructions.filter((x) => x.op === "LABEL")) {
      for (const m of i.rest.matchAll(/([\w.-]+)="([^"]*)"/g)) labels[m[1]!] = m[2]!;
    }
    expect(labels).toMatchObject({
      "org.opencontainers.image.version": pkg.version,
      "org.opencontainers.image.licenses": pkg.license,
      "org.opencontainers.image.source": expect.stringMatching(/^https:\/\//),
      "org.opencontainers.image.title": "referable-controller",
    });
  });

  it("builds on a slim Node LTS image pinned by digest, still supported, the major the tests run on", async () => {
    const pkg = JSON.parse(await readFile(join(repoRoot, "package.json"), "utf8")) as {
      devDependencies: Record<string, string>;
    };
    const testedMajor = Number(pkg.devDependencies.node!.split(".")[0]);
    expect(Number(process.versions.node.split(".")[0])).toBe(testedMajor);
    // One base for every stage but the last, given once (the image test overrides it).
    expect(Object.keys(globalArgs)).toEqual(["NODE_IMAGE"]);
    for (const stage of stages.slice(0, -1)) expect(stage.image).toBe(globalArgs.NODE_IMAGE);
    const m = /^node:(\d+)(?:\.\d+)*(?:-[a-z]+)?-slim@sha256:[0-9a-f]{64}$/.exec(globalArgs.NODE_IMAGE!);
    expect({ image: globalArgs.NODE_IMAGE, pinned: Boolean(m) }).toEqual({
      image: globalArgs.NODE_IMAGE,
      pinned: true,
    });
    const major = Number(m![1]);
    expect(major).toBe(testedMajor);
    // Even majors become LTS; each is released in April of 2013 + major/2 and supported
    // until April three years later (Node 24: 2025 to April 2028).
    expect(major % 2).toBe(0);
    const endOfLife = new Date(Date.UTC(2013 + major / 2 + 3, 3, 30));
    expect(new Date().getTime()).toBeLessThan(endOfLife.getTime());
  });

  it("installs only production dependencies into the image's /app", () => {
    const runs = rootfs.instructions.filter((i) => i.op === "RUN").map((i) => i.rest);
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

  it("starts: the image's command runs in an /app laid out as the rootfs stage lays it out", async () => {
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

      // The rootfs stage's copies from the context, and `npm ci --omit=dev`: every package of
      // the lockfile not marked dev, nothing else (no hoisted dev package to lean on by accident).
      for (const copy of copies(rootfs).filter((c) => c.from === undefined)) {
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
