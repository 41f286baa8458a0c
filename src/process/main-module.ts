/**
 * Whether a module is the entry point the process was started with. Node.js resolves the main
 * module's symbolic links (unless --preserve-symlinks-main), so `import.meta.url` names the real
 * file while `process.argv[1]` is the path as typed: `node /opt/app/current/src/process/main.ts` with
 * `current` a link (as package managers and deploy tools lay files out) gives two different
 * paths for one file. Both are compared by their real paths.
 */
import { realpathSync } from "node:fs";
import { resolve } from "node:path";
import { fileURLToPath } from "node:url";

/** Whether `moduleUrl` (a module's `import.meta.url`) is the file `argv1` (`process.argv[1]`) names. */
export function isMainModule(moduleUrl: string, argv1: string | undefined): boolean {
  if (!argv1 || !moduleUrl.startsWith("file:")) return false;
  const file = fileURLToPath(moduleUrl);
  if (resolve(argv1) === file) return true;
  try {
    return realpathSync(argv1) === realpathSync(file);
  } catch {
    // A path that no longer resolves (or never did) names no module of this process.
    return false;
  }
}
