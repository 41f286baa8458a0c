/**
 * The versions of kro and provider-kubernetes the consumer tests run are written once, in
 * scripts/consumer-binaries.sh; README.md and docs/consuming.md name them, and must name the
 * same ones.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const root = fileURLToPath(new URL("../..", import.meta.url));
const read = (path: string) => readFileSync(join(root, path), "utf8");

/** The default of `NAME="${ENV:-vX.Y.Z}"` in the script. */
function pinned(script: string, name: string): string {
  const match = new RegExp(`^${name}="\\$\\{[A-Z_]+:-(v[0-9]+\\.[0-9]+\\.[0-9]+)\\}"$`, "m").exec(script);
  if (!match) throw new Error(`scripts/consumer-binaries.sh sets no ${name}`);
  return match[1]!;
}

describe("the consumers' versions", () => {
  const script = read("scripts/consumer-binaries.sh");
  const versions = {
    kro: pinned(script, "KRO_VERSION"),
    "provider-kubernetes": pinned(script, "PK_VERSION"),
  };

  // provider-kubernetes v1.3.1 and v1.4.x do not build from the module proxy (a dependency's
  // version it pins is refused: crossplane-runtime/v2's pseudo-version, nebius/gosdk), so
  // v1.2.1 stays until they do.
  it("are kro v0.9.4 and provider-kubernetes v1.2.1", () => {
    expect(versions).toEqual({ kro: "v0.9.4", "provider-kubernetes": "v1.2.1" });
  });

  it.each(["README.md", "docs/consuming.md"])("%s names the pinned ones and no other", (path) => {
    const text = read(path);
    for (const [tool, version] of Object.entries(versions)) {
      const named = [...text.matchAll(new RegExp(`${tool} (v[0-9]+\\.[0-9]+\\.[0-9]+)`, "g"))].map(
        (m) => m[1],
      );
      expect({ tool, named: [...new Set(named)] }).toEqual({ tool, named: [version] });
    }
  });
});
