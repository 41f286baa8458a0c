/**
 * Refuses to load on a Node.js the package does not support, with one clear error, before any
 * dependency runs: on Node 20 the import otherwise dies deep inside undici ("Cannot read
 * properties of undefined (reading 'bind')"). src/index.ts imports this module first, and ES
 * modules evaluate their imports in order, so nothing else has run when it throws.
 */

/** The oldest supported Node.js, as in package.json's `engines` (undici 8 and require(esm) need it). */
export const MIN_NODE_VERSION = "22.19.0";

/** Whether `version` ("v22.19.0" or "22.19.0") is at least {@link MIN_NODE_VERSION}. */
export function nodeVersionSupported(version: string): boolean {
  const have = version.replace(/^v/, "").split(".").map(Number);
  const need = MIN_NODE_VERSION.split(".").map(Number);
  for (let i = 0; i < need.length; i++) {
    const a = have[i] ?? 0;
    const b = need[i]!;
    if (a !== b) return a > b;
  }
  return true;
}

if (!nodeVersionSupported(process.versions.node)) {
  throw new Error(
    `referable needs Node.js >= ${MIN_NODE_VERSION}, but this is Node.js ${process.versions.node}: upgrade Node.js (e.g. \`nvm install 24\`)`,
  );
}
