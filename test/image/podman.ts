/**
 * The container image as users build it: the repository's Dockerfile, built with podman, on the
 * base it pins, or on a stand-in for that base when no container registry can be reached (made
 * from Debian's packages, the Node binary of the `node` devDependency and npm from the npm
 * registry, and cached in ~/.cache/referable/image/ keyed by those inputs).
 *
 * podman runs with `--runtime runc` (crun refuses hybrid cgroups) and needs
 * `default_ulimits = []` in containers.conf where rlimits cannot be raised; .ci/run sets both up.
 */
import { execFile, spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { createWriteStream } from "node:fs";
import { access, mkdir, readFile, rm, stat, symlink, copyFile, chmod, rename } from "node:fs/promises";
import { homedir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { repoRoot } from "../harness/control-plane.ts";

const execFileAsync = promisify(execFile);

/** Prints one line of what the image test does or checked. */
export function step(line: string): void {
  process.stderr.write(`[image] ${line}\n`);
}

/** podman with this machine's runtime; resolves with stdout, rejects with stderr in the message. */
export async function podman(args: string[], options: { timeoutMs?: number } = {}): Promise<string> {
  try {
    const { stdout } = await execFileAsync("podman", ["--runtime", "runc", ...args], {
      maxBuffer: 64 * 1024 * 1024,
      timeout: options.timeoutMs ?? 120_000,
    });
    return stdout;
  } catch (err) {
    const e = err as { stderr?: string; message: string; code?: string };
    if (e.code === "ENOENT")
      throw new Error(
        "podman is not installed: `apt-get install -y --no-install-recommends podman runc debootstrap` (as root; .ci/run does)",
      );
    throw new Error(`podman ${args.join(" ")}: ${(e.stderr || e.message).trim().slice(-2000)}`);
  }
}

/** Runs a long command with its output in `logFile`; rejects with the log's tail. */
async function runLogged(command: string, args: string[], logFile: string, cwd = repoRoot): Promise<void> {
  const out = createWriteStream(logFile);
  await new Promise<void>((resolve, reject) => {
    const child = spawn(command, args, { cwd, stdio: ["ignore", "pipe", "pipe"] });
    child.stdout.pipe(out, { end: false });
    child.stderr.pipe(out, { end: false });
    child.once("error", reject);
    child.once("close", (code) => (code === 0 ? resolve() : reject(new Error(`exit code ${code}`))));
  }).catch(async (err: Error) => {
    out.end();
    const tail = (await readFile(logFile, "utf8").catch(() => "")).trim().split("\n").slice(-30).join("\n");
    throw new Error(`${command} ${args.join(" ")} failed (${err.message}); the end of ${logFile}:\n${tail}`);
  });
  await new Promise((resolve) => out.end(resolve));
}

/** The default of the Dockerfile's `ARG NODE_IMAGE`: the pinned base. */
export async function pinnedBase(): Promise<string> {
  const dockerfile = await readFile(join(repoRoot, "Dockerfile"), "utf8");
  const m = /^ARG NODE_IMAGE=(\S+)$/m.exec(dockerfile);
  if (!m) throw new Error("the Dockerfile has no `ARG NODE_IMAGE=<image>@sha256:<digest>`");
  return m[1]!;
}

const exists = (path: string) =>
  access(path).then(
    () => true,
    () => false,
  );

/** What the stand-in is made of; its hash names the cached tarball and the image tag. */
interface StandInInputs {
  recipe: number;
  suite: string;
  variant: string;
  mirror: string;
  node: string;
  npm: string;
}

/** The Debian mirror apt uses on this machine (deb822 or one-line sources), else deb.debian.org. */
async function debianMirror(): Promise<string> {
  if (process.env.REFERABLE_DEBIAN_MIRROR) return process.env.REFERABLE_DEBIAN_MIRROR;
  const deb822 = await readFile("/etc/apt/sources.list.d/debian.sources", "utf8").catch(() => "");
  const uri = /^URIs:\s*(\S+\/debian)\/?$/m.exec(deb822)?.[1];
  if (uri) return uri;
  const oneLine = await readFile("/etc/apt/sources.list", "utf8").catch(() => "");
  return (
    /^deb\s+(?:\[[^\]]*\]\s+)?(\S+\/debian)\/?\s+bookworm\b/m.exec(oneLine)?.[1] ??
    "http://deb.debian.org/debian"
  );
}

/** The Node binary of the `node` devDependency (the one every npm script runs on). */
const NODE_BINARY = join(repoRoot, "node_modules", "node", "bin", "node");

async function standInInputs(): Promise<StandInInputs> {
  const { stdout: nodeVersion } = await execFileAsync(NODE_BINARY, ["--version"]);
  const { stdout: npmVersion } = await execFileAsync("npm", ["--version"]);
  return {
    recipe: 1,
    suite: "bookworm",
    variant: "minbase",
    mirror: await debianMirror(),
    node: nodeVersion.trim(),
    npm: npmVersion.trim(),
  };
}

export const IMAGE_CACHE = join(homedir(), ".cache", "referable", "image");

/**
 * The stand-in for `node:24-bookworm-slim`: debootstrap's minbase bookworm (Debian's packages),
 * /usr/local/bin/node from the `node` devDependency, npm unpacked from the npm registry into
 * /usr/local/lib/node_modules/npm with npm and npx linked beside node, as the real image lays
 * them out. Imported under a tag of its own (podman cannot give an imported image the pinned
 * digest), which the build gets as `--build-arg NODE_IMAGE`.
 */
export async function standInBase(): Promise<string> {
  const inputs = await standInInputs();
  const key = createHash("sha256").update(JSON.stringify(inputs)).digest("hex").slice(0, 16);
  const tag = `localhost/referable-node-standin:24-bookworm-slim-${key}`;
  const described = `debootstrap ${inputs.variant} ${inputs.suite}, node ${inputs.node}, npm ${inputs.npm}`;
  if ((await podman(["image", "ls", "--quiet", "--filter", `reference=${tag}`])).trim()) {
    step(`stand-in base ${tag} is in podman's storage (${described})`);
    return tag;
  }
  await mkdir(IMAGE_CACHE, { recursive: true });
  const tarball = join(IMAGE_CACHE, `node-standin-${key}.tar`);
  if (!(await exists(tarball))) {
    const started = Date.now();
    const work = join(IMAGE_CACHE, `work-${process.pid}`);
    const rootfs = join(work, "rootfs");
    await rm(work, { recursive: true, force: true });
    await mkdir(work, { recursive: true });
    try {
      step(`making the stand-in base (${described}, mirror ${inputs.mirror}); log in ${work}`);
      await runLogged(
        "debootstrap",
        [`--variant=${inputs.variant}`, inputs.suite, rootfs, inputs.mirror],
        join(work, "debootstrap.log"),
      ).catch((err: Error) => {
        if (/ENOENT/.test(err.message))
          throw new Error(
            "debootstrap is not installed: `apt-get install -y --no-install-recommends debootstrap`",
          );
        throw err;
      });
      await copyFile(NODE_BINARY, join(rootfs, "usr", "local", "bin", "node"));
      await chmod(join(rootfs, "usr", "local", "bin", "node"), 0o755);
      const { stdout: packed } = await execFileAsync(
        "npm",
        ["pack", `npm@${inputs.npm}`, "--pack-destination", work, "--silent"],
        { cwd: work },
      );
      const npmDir = join(rootfs, "usr", "local", "lib", "node_modules", "npm");
      await mkdir(npmDir, { recursive: true });
      await execFileAsync("tar", ["-xzf", join(work, packed.trim()), "-C", npmDir, "--strip-components=1"]);
      await symlink("../lib/node_modules/npm/bin/npm-cli.js", join(rootfs, "usr", "local", "bin", "npm"));
      await symlink("../lib/node_modules/npm/bin/npx-cli.js", join(rootfs, "usr", "local", "bin", "npx"));
      await execFileAsync("tar", ["-C", rootfs, "-cf", `${tarball}.partial`, "."]);
      await rename(`${tarball}.partial`, tarball);
      step(`stand-in base made in ${((Date.now() - started) / 1000).toFixed(1)} s, cached as ${tarball}`);
    } finally {
      await rm(work, { recursive: true, force: true });
    }
  } else {
    step(`stand-in base from the cache: ${tarball}`);
  }
  await podman(["import", "--change", 'CMD ["node"]', tarball, tag], { timeoutMs: 300_000 });
  step(`imported as ${tag}`);
  return tag;
}

/**
 * The base to build on: the pinned one when podman has it or can pull it, else the stand-in
 * (said in the output). REFERABLE_IMAGE_BASE=standin skips the pull.
 */
export async function buildBase(): Promise<{ image: string; standIn: boolean }> {
  const pinned = await pinnedBase();
  if (process.env.REFERABLE_IMAGE_BASE !== "standin") {
    const present = await podman(["image", "exists", pinned]).then(
      () => true,
      () => false,
    );
    if (present) {
      step(`building on the pinned base ${pinned} (in podman's storage)`);
      return { image: pinned, standIn: false };
    }
    const pulled = await podman(["pull", "--quiet", pinned], { timeoutMs: 300_000 }).then(
      () => undefined,
      (err: Error) => {
        const line = err.message.split("\n").at(-1)!;
        return line
          .slice(line.includes("Error: ") ? line.indexOf("Error: ") + "Error: ".length : 0)
          .slice(0, 300);
      },
    );
    if (pulled === undefined) {
      step(`building on the pinned base ${pinned} (pulled)`);
      return { image: pinned, standIn: false };
    }
    step(`the pinned base ${pinned} cannot be pulled (${pulled})`);
  }
  const image = await standInBase();
  step(`building on the STAND-IN base ${image}, given as --build-arg NODE_IMAGE (not the pinned image)`);
  return { image, standIn: true };
}

/** npm's settings on this machine that a build inside a container needs: files, or undefined. */
export async function npmBuildSecrets(): Promise<{ npmrc?: string; ca?: string }> {
  const get = async (key: string) => {
    const { stdout } = await execFileAsync("npm", ["config", "get", key]);
    const value = stdout.trim();
    return value && value !== "null" && value !== "undefined" ? value : undefined;
  };
  const npmrc = await get("userconfig");
  const ca = (await get("cafile")) ?? process.env.NODE_EXTRA_CA_CERTS;
  const file = async (path: string | undefined) =>
    path &&
    (await stat(path).then(
      (s) => s.isFile() && s.size > 0,
      () => false,
    ))
      ? path
      : undefined;
  return { npmrc: await file(npmrc), ca: await file(ca) };
}

/** Builds the Dockerfile as it ships into `tag`; returns the build's seconds. */
export async function buildImage(tag: string, base: string, logFile: string): Promise<number> {
  const secrets = await npmBuildSecrets();
  const secretArgs = [
    ...(secrets.npmrc ? ["--secret", `id=npmrc,src=${secrets.npmrc}`] : []),
    ...(secrets.ca ? ["--secret", `id=npm-ca,src=${secrets.ca}`] : []),
  ];
  const previous = (
    await podman(["image", "ls", "--quiet", "--no-trunc", "--filter", `reference=${tag}`])
  ).trim();
  step(
    `podman build of ./Dockerfile (npm's settings as build secrets: ${
      [secrets.npmrc && "npmrc", secrets.ca && "npm-ca"].filter(Boolean).join(", ") || "none"
    }); log in ${logFile}`,
  );
  const started = Date.now();
  await runLogged(
    "podman",
    [
      "--runtime",
      "runc",
      "build",
      "--pull=never",
      "--network=host",
      "--build-arg",
      `NODE_IMAGE=${base}`,
      ...secretArgs,
      "--tag",
      tag,
      "--file",
      join(repoRoot, "Dockerfile"),
      repoRoot,
    ],
    logFile,
  );
  const seconds = (Date.now() - started) / 1000;
  // The image this tag named before is no one's now: free its layers (the build cache, podman's
  // intermediate images, stays for the next build; `podman image prune` frees it).
  const current = (
    await podman(["image", "ls", "--quiet", "--no-trunc", "--filter", `reference=${tag}`])
  ).trim();
  if (previous && previous !== current) await podman(["rmi", previous]).catch(() => undefined);
  return seconds;
}
