/**
 * The one place that calls jsonpath-plus (and the only importer of it in the project).
 *
 * Script evaluation is always off (`eval: false`): jsonpath-plus then refuses `[?()]` and `[()]`
 * by throwing, and our grammar never hands it either. It is given only single selectors we
 * build ourselves (`$[*]`, `$[1:3]`, `$..`, `$..*`, `$..[::2]`), never user text.
 *
 * jsonpath-plus keeps every path string it has parsed in a module-level Map with no bound
 * (`pathCache` in src/jsonpath.js, 11.x; older versions used `JSONPath.cache`). Its only handle
 * is `JSONPath.clearCache()`, so we count the distinct strings we have passed since the last
 * clear and clear it when they pass {@link FieldPathLimits.jsonPathPlusCacheSize}.
 */
import { JSONPath } from "jsonpath-plus";
import { FieldPathLimits } from "./limits.ts";

const passedSinceClear = new Set<string>();

/**
 * Every value `path` selects in `json`, in document order. Selects nothing in a primitive
 * (jsonpath-plus returns `undefined` for a falsy document; that is an empty list here).
 */
export function jsonPathPlusSelect(path: string, json: unknown): unknown[] {
  if (!passedSinceClear.has(path)) {
    if (passedSinceClear.size >= FieldPathLimits.jsonPathPlusCacheSize) {
      JSONPath.clearCache();
      passedSinceClear.clear();
    }
    passedSinceClear.add(path);
  }
  const result = JSONPath({ path, json, eval: false, wrap: true, resultType: "value" });
  return Array.isArray(result) ? result : [];
}

/** How many entries jsonpath-plus's parse cache holds that came from us (for tests). */
export function jsonPathPlusCacheSize(): number {
  return passedSinceClear.size;
}
