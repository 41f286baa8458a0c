import { execFile } from "node:child_process";
import { mkdtemp, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { promisify } from "node:util";
import { isMainModule } from "./main-module.ts";
import { VERSION } from "../api/version.ts";

const execFileAsync = promisify(execFile);
const processDir = dirname(fileURLToPath(import.meta.url));
const repoRoot = dirname(dirname(processDir));

let tmp: string;
beforeAll(async () => {
  tmp = await mkdtemp(join(tmpdir(), "referable-main-module-"));
});
afterAll(() => rm(tmp, { recursive: true, force: true }));

describe("isMainModule", () => {
  it("is true for the file itself, by absolute or relative path", async () => {
    const file = join(tmp, "entry.ts");
    await writeFile(file, "");
    const url = pathToFileURL(file).href;
    expect(isMainModule(url, file)).toBe(true);
    expect(isMainModule(url, join(tmp, ".", "entry.ts"))).toBe(true);
  });

  it("is true when the path given reaches the file through a link, of the file or of a folder", async () => {
    const dir = await mkdtemp(join(tmp, "real-"));
    const file = join(dir, "main.ts");
    await writeFile(file, "");
    await symlink(dir, join(tmp, "linked-dir"));
    await symlink(file, join(tmp, "linked-file.ts"));
    const url = pathToFileURL(file).href;
    expect(isMainModule(url, join(tmp, "linked-dir", "main.ts"))).toBe(true);
    expect(isMainModule(url, join(tmp, "linked-file.ts"))).toBe(true);
  });

  it("is false for another file, a path that does not exist, no path, or a module not on disk", async () => {
    const a = join(tmp, "a.ts");
    const b = join(tmp, "b.ts");
    await writeFile(a, "");
    await writeFile(b, "");
    const url = pathToFileURL(a).href;
    expect(isMainModule(url, b)).toBe(false);
    expect(isMainModule(url, join(tmp, "missing.ts"))).toBe(false);
    expect(isMainModule(url, undefined)).toBe(false);
    expect(isMainModule("data:text/javascript,1", a)).toBe(false);
  });
});

describe("the controller's entry file", () => {
  it("runs the same when reached through a link to the repository: --version prints and exits 0", async () => {
    const link = join(tmp, "referable-link");
    await symlink(repoRoot, link);
    const direct = await execFileAsync(process.execPath, [
      join(repoRoot, "src", "process", "main.ts"),
      "--version",
    ]);
    const linked = await execFileAsync(process.execPath, [
      join(link, "src", "process", "main.ts"),
      "--version",
    ]);
    expect(direct.stdout).toContain(VERSION);
    expect(linked.stdout).toBe(direct.stdout);
  }, 60_000);
});
