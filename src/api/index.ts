/**
 * The Referable API in code: types, names, condition reasons, limits and stable JSON. Every
 * other room imports it; it imports nothing outside itself.
 * @module
 */
export * from "./label-selector.ts";
export * from "./limits.ts";
export * from "./reasons.ts";
export * from "./referable.ts";
export * from "./references.ts";
export * from "./stable-json.ts";
export * from "./export-kinds.ts";
