import fc from "fast-check";
import { isResolutionError } from "../api/errors.ts";
import { type EvalResult, compileFieldPath } from "./index.ts";

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
type Step = { kind: "key"; key: string } | { kind: "index"; index: number };

/** Walks `doc` by `choices` (one per level, modulo the children), returning the steps and the value reached. */
function walk(doc: Json, choices: readonly number[]): { steps: Step[]; value: Json } {
  const steps: Step[] = [];
  let value = doc;
  for (const choice of choices) {
    if (Array.isArray(value)) {
      if (value.length === 0) break;
      const index = choice % value.length;
      steps.push({ kind: "index", index });
      value = value[index] as Json;
    } else if (value !== null && typeof value === "object") {
      const keys = Object.keys(value);
      if (keys.length === 0) break;
      const key = keys[choice % keys.length] as string;
      steps.push({ kind: "key", key });
      value = value[key] as Json;
    } else {
      break;
    }
  }
  return { steps, value };
}

const DOTTED_NAME = /^[^.[\]'"\s\p{Cc}]+$/u;
const UNQUOTED_KEY = /^[^[\]'"\s\p{Cc}?-][^[\]'"\s\p{Cc}]*$/u;
const JSONPATH_NAME = /^[^.[\]()'",?*@{}=!\\\s\p{Cc}]+$/u;

function quoted(key: string, style: number): string {
  const q = style % 2 === 0 ? "'" : '"';
  return `[${q}${key.replace(/[\\'"]/g, (c) => (c === q || c === "\\" ? `\\${c}` : c))}${q}]`;
}

/** Writes `steps` in the field-path syntax, choosing among the ways each step may be written. */
function toFieldPath(steps: readonly Step[], styles: readonly number[]): string {
  let path = "";
  steps.forEach((step, i) => {
    const style = styles[i % styles.length] ?? 0;
    if (step.kind === "index") {
      path += `[${step.index}]`;
      return;
    }
    const { key } = step;
    const first = i === 0;
    const dottedOk = DOTTED_NAME.test(key) && !(first && /^[$[{]/.test(key));
    const unquotedOk = UNQUOTED_KEY.test(key) && !/^[0-9]+$/.test(key);
    if (style % 3 === 0 && dottedOk) path += first ? key : `.${key}`;
    else if (style % 3 === 1 && unquotedOk) path += `[${key}]`;
    else path += quoted(key, style);
  });
  return path;
}

/** Writes `steps` as a JSONPath (or kubectl `{}` form). */
function toJsonPath(steps: readonly Step[], styles: readonly number[], braces: boolean): string {
  let path = braces ? "{" : "$";
  steps.forEach((step, i) => {
    const style = styles[i % styles.length] ?? 0;
    if (step.kind === "index") path += `[${step.index}]`;
    else if (style % 2 === 0 && JSONPATH_NAME.test(step.key)) path += `.${step.key}`;
    else path += quoted(step.key, style >> 1);
  });
  return braces ? `${path}}` : path;
}

const documents = fc.jsonValue({ maxDepth: 5 }) as fc.Arbitrary<Json>;
const walks = fc.record({
  doc: documents,
  choices: fc.array(fc.nat(), { minLength: 1, maxLength: 8 }),
  styles: fc.array(fc.nat(), { minLength: 1, maxLength: 8 }),
});

describe("properties: a generated path reads exactly the value at its location", () => {
  it("field-path syntax", () => {
    fc.assert(
      fc.property(walks, ({ doc, choices, styles }) => {
        const { steps, value } = walk(doc, choices);
        fc.pre(steps.length > 0);
        const path = toFieldPath(steps, styles);
        fc.pre(path.length <= 1024);
        expect(compileFieldPath(path).evaluate(doc)).toEqual({ found: true, value });
        const result = compileFieldPath(path).evaluate(doc);
        expect(result.found && result.value).toBe(value);
      }),
      { numRuns: 500 },
    );
  });

  it("JSONPath syntax, in both the $ and the {} form", () => {
    fc.assert(
      fc.property(walks, fc.boolean(), ({ doc, choices, styles }, braces) => {
        const { steps, value } = walk(doc, choices);
        fc.pre(steps.length > 0 || !braces);
        const path = toJsonPath(steps, styles, braces);
        fc.pre(path.length <= 1024);
        const result = compileFieldPath(path).evaluate(doc);
        expect(result).toEqual({ found: true, value });
        expect(result.found && result.value).toBe(value);
      }),
      { numRuns: 500 },
    );
  });
});

// Characters of both grammars, so random strings often get deep into the parsers.
const grammarChar = fc.constantFrom(
  ..."$@{}[]().,:*?=!'\"\\ -_0123456789aby~^`;<>|&".split(""),
  "true",
  "false",
  "==",
  "!=",
  "[?(@.",
  "..",
  "\u0000",
  "😀",
  "\u202e",
  "\ud800",
);
const anyCodeUnit = fc.integer({ min: 0, max: 0xffff }).map((c) => String.fromCharCode(c));
const paths = fc.oneof(
  fc
    .tuple(
      fc.constantFrom("", "$", "{", "{.", "$..", "a.", "a[", "a[?(@."),
      fc.string({ unit: grammarChar, maxLength: 40 }),
    )
    .map(([prefix, rest]) => prefix + rest),
  fc.string({ unit: anyCodeUnit, maxLength: 40 }),
  fc.string({ unit: "binary", maxLength: 40 }),
);
const targets = fc.oneof(
  documents,
  fc.constant({ a: [{ x: 1, type: "Ready" }, { x: "1" }], b: { c: null }, "": [[]] } as Json),
);

function isWellFormed(result: EvalResult): boolean {
  return result.found ? "value" in result : typeof result.missing === "string" && result.missing.length > 0;
}

describe("properties: any string as a path", () => {
  it("compiles or throws InvalidSpec, and evaluates or throws a ResolutionError, quickly", () => {
    fc.assert(
      fc.property(paths, targets, (path, doc) => {
        const start = performance.now();
        let compiled;
        try {
          compiled = compileFieldPath(path);
        } catch (err) {
          expect(isResolutionError(err) && err.reason).toBe("InvalidSpec");
          return;
        }
        try {
          expect(isWellFormed(compiled.evaluate(doc))).toBe(true);
        } catch (err) {
          expect(isResolutionError(err)).toBe(true);
        }
        expect(performance.now() - start).toBeLessThan(250);
      }),
      { numRuns: 3000 },
    );
  });
});
