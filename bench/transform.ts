/**
 * The cost of a transform per evaluation, measured in this process with no control plane: what
 * compiling costs once, what each evaluation costs (time and CEL cost units), and how long the
 * cost budget takes to stop a hostile expression. `npm run bench` (and `-- --quick`) prints it.
 */
import { compileTransform, type TransformInput, type TransformShape } from "../src/transform/index.ts";

/** One expression's measurement. */
export interface TransformResult {
  name: string;
  expression: string;
  /** Microseconds to parse and type-check it the first time (the cache serves later ones). */
  compileMicros: number;
  /** Microseconds per evaluation: median of the batches. */
  evalMicrosP50: number;
  /** Microseconds per evaluation: the slowest batch. */
  evalMicrosMax: number;
  /** Cost units one evaluation spends, of the budget of 1,000,000. */
  costUnits: number;
  /** How the evaluation ends. */
  outcome: string;
}

interface Case {
  name: string;
  expression: string;
  shape: TransformShape;
  input: TransformInput;
}

const SOURCE = {
  apiVersion: "v1",
  kind: "ConfigMap",
  namespace: "a",
  name: "db",
  uid: "u",
  resourceVersion: "1",
};
const single = (value: unknown): TransformInput => ({ value, sources: [SOURCE] });
const S: TransformShape = { mode: "Single", hasDefault: false };
const M: TransformShape = { mode: "Multiple", hasDefault: false };
const hundred = Array.from({ length: 100 }, (_, i) => `value-${i}`);

const CASES: Case[] = [
  {
    name: "format a URL",
    expression: "'postgres://' + value + ':5432/app'",
    shape: S,
    input: single("db.internal"),
  },
  {
    name: "base64 decode",
    expression: "string(base64.decode(value))",
    shape: S,
    input: single("czNjcjN0LXBhc3N3b3Jk"),
  },
  {
    name: "map literal",
    expression: "{'host': value.host, 'port': int(value.port), 'tls': value.?tls.orValue('false') == 'true'}",
    shape: S,
    input: single({ host: "db.internal", port: "5432" }),
  },
  {
    name: "values.size() of 100",
    expression: "values.size()",
    shape: M,
    input: { values: hundred, sources: [] },
  },
  {
    name: "map+join of 100",
    expression: "values.map(v, v.upperAscii()).join(',')",
    shape: M,
    input: { values: hundred, sources: [] },
  },
  {
    name: "hostile: nested comprehensions",
    expression: "values.map(a, values.map(b, values.map(c, a + b + c))).size()",
    shape: M,
    input: { values: hundred, sources: [] },
  },
];

const now = () => Number(process.hrtime.bigint()) / 1000;

function measure(c: Case, quick: boolean): TransformResult {
  // A fresh text per run, so the compile is measured uncached.
  const start = now();
  const compiled = compileTransform(c.expression, c.shape);
  const compileMicros = now() - start;
  let costUnits = 0;
  let outcome = "ok";
  const once = () => {
    try {
      costUnits = compiled.evaluate(c.input, { maxValueBytes: 32 * 1024 }).cost;
    } catch (err) {
      outcome = (err as { reason?: string }).reason ?? "threw";
      costUnits = 1_000_000;
    }
  };
  const hostile = c.name.startsWith("hostile");
  const batches = quick ? 5 : 20;
  const perBatch = hostile ? 1 : quick ? 200 : 2000;
  for (let i = 0; i < perBatch; i++) once(); // warm-up
  const samples: number[] = [];
  for (let b = 0; b < batches; b++) {
    const t = now();
    for (let i = 0; i < perBatch; i++) once();
    samples.push((now() - t) / perBatch);
  }
  samples.sort((a, b) => a - b);
  return {
    name: c.name,
    expression: c.expression,
    compileMicros,
    evalMicrosP50: samples[Math.floor(samples.length / 2)]!,
    evalMicrosMax: samples[samples.length - 1]!,
    costUnits,
    outcome,
  };
}

/** Measures every case; `quick` takes fewer samples. */
export function measureTransforms(quick: boolean): TransformResult[] {
  return CASES.map((c) => measure(c, quick));
}

/** Prints the table of {@link measureTransforms}. */
export function printTransforms(results: TransformResult[], p: (line: string) => void): void {
  p("transforms (one evaluation, in process; budget 1,000,000 cost units):");
  p("| transform | compile µs (once) | eval µs p50 | eval µs max | cost units | outcome |");
  p("|---|---:|---:|---:|---:|---|");
  for (const r of results) {
    p(
      `| ${r.name} | ${r.compileMicros.toFixed(0)} | ${r.evalMicrosP50.toFixed(2)} | ${r.evalMicrosMax.toFixed(2)} | ${r.costUnits} | ${r.outcome} |`,
    );
  }
}
