/**
 * The controller's version: package.json's, read once. src/ (run by `npm start`) and dist/ (the
 * image) both sit one folder below package.json, which the image copies beside dist/.
 */
import { createRequire } from "node:module";

const require = createRequire(import.meta.url);

/** The package version, e.g. "0.1.0". */
export const VERSION: string = (require("../../package.json") as { version: string }).version;

/** `--version`'s line: the program, its version and the Node.js it runs on. */
export function versionText(): string {
  return `referable-controller ${VERSION} (node ${process.versions.node})`;
}
