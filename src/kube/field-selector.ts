/**
 * Field selectors as the API server parses them (k8s.io/apimachinery/pkg/fields): a value's
 * backslash, comma and equals sign are escaped with a backslash, or the server splits the
 * selector there and answers 400. Names of custom resources may hold `=` and `,`.
 */

/** `value` escaped for the right-hand side of a field selector term. */
export function escapeFieldSelectorValue(value: string): string {
  return value.replace(/[\\,=]/g, (c) => `\\${c}`);
}

/** The field selector that matches the object named `name`. */
export function nameFieldSelector(name: string): string {
  return `metadata.name=${escapeFieldSelectorValue(name)}`;
}
