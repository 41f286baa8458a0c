// npm's `prepare`: builds dist/ (the library's JavaScript and types) when the package is
// installed from source. Plain JavaScript, run by whatever Node.js npm uses, so it works before
// anything is installed.
//
// - The dev dependencies are there (a developer's `npm ci`; a git install, for which npm
//   installs them before `prepare`): build with their TypeScript.
// - They are not (`npm install ../referable` links a clone and runs `prepare` in it with nothing
//   installed): install them from package-lock.json first (`npm ci --ignore-scripts`, in the
//   clone only), then build. The consumer's own project is not touched.
// - REFERABLE_SKIP_PREPARE=1 builds nothing (the Dockerfile builds in its own step).
import { execFileSync } from "node:child_process";
import { existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const tsc = join(root, "node_modules", "typescript", "bin", "tsc");
const log = (line) => process.stderr.write(`[referable prepare] ${line}\n`);

if (process.env.REFERABLE_SKIP_PREPARE === "1") {
  log("REFERABLE_SKIP_PREPARE=1: not building dist/");
  process.exit(0);
}
if (!existsSync(tsc)) {
  log(
    "no dev dependencies here (an install from a clone): installing them from package-lock.json to build dist/",
  );
  // The install that runs this script passes its own settings down as npm_config_* (a global
  // prefix, omit=dev, ...); the nested install must be a plain one in this folder.
  const env = Object.fromEntries(
    Object.entries(process.env).filter(
      ([k]) =>
        !/^npm_config_/i.test(k) ||
        /^npm_config_(registry|cache|userconfig|globalconfig|proxy|https_proxy|noproxy|strict_ssl|cafile)$/i.test(
          k,
        ),
    ),
  );
  const npm = process.env.npm_execpath;
  const [cmd, args] = npm ? [process.execPath, [npm]] : ["npm", []];
  execFileSync(cmd, [...args, "ci", "--ignore-scripts", "--no-audit", "--no-fund"], {
    cwd: root,
    env,
    stdio: "inherit",
  });
}
execFileSync(process.execPath, [tsc, "-p", join(root, "tsconfig.build.json")], {
  cwd: root,
  stdio: "inherit",
});
log("built dist/");
