/**
 * The controller's version: package.json's, read once. src/api/ (run by `npm start`) and
 * dist/api/ (the image) both sit two folders below package.json, which the image copies beside
 * dist/. Not shipped with the library (package.json's files leave it out): only the controller
 * reads it, for --version and referable_build_info.
 */
import { createRequire } from "node:module";

const require = createRequire(import.meta.url);

/** The package version, e.g. "0.1.0". */
export const VERSION: string = (require("../../package.json") as { version: string }).version;

/** `--version`'s line: the program, its version and the Node.js it runs on. */
export function versionText(): string {
  return `referable-controller ${VERSION} (node ${process.versions.node})`;
}
