/**
 * A resourceVersion as a cache keeps it for each of its objects: a number when it is a small
 * decimal (no string per object), the string otherwise (the API server's versions are opaque:
 * anything else is kept as it came).
 */
export type PackedVersion = string | number | undefined;

/** Decimals of up to 9 digits: a V8 small integer, no heap number either. */
const SMI_DECIMAL = /^[1-9][0-9]{0,8}$/;
/** Decimals of up to 15 digits: exact as a double. */
const SAFE_DECIMAL = /^[1-9][0-9]{0,14}$/;

/**
 * Packs `resourceVersion`: as a number when it is a decimal of at most 9 digits (`smi`) or 15,
 * read back the same by {@link unpackVersion}.
 */
export function packVersion(resourceVersion: string | undefined, range: "smi" | "safe"): PackedVersion {
  if (resourceVersion === undefined) return undefined;
  return (range === "smi" ? SMI_DECIMAL : SAFE_DECIMAL).test(resourceVersion)
    ? Number(resourceVersion)
    : resourceVersion;
}

/** The resourceVersion {@link packVersion} packed, as the string it was. */
export function unpackVersion(packed: PackedVersion): string | undefined {
  return typeof packed === "number" ? String(packed) : packed;
}
