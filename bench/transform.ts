/**
 * The cost of a transform per evaluation, measured in this process with no control plane: what
 * compiling costs once, what each evaluation costs (time and CEL cost units) in this thread and
 * through the worker pool the controller uses (one at a time: the round trip; a hundred in
 * flight: what each costs when a burst is batched), and how long the cost budget takes to stop
 * a hostile expression. `npm run bench` (and `-- --quick`) prints it.
 */
import { compileTransform, type TransformInput, type TransformShape } from "../src/transform/index.ts";
import { TransformPool } from "../src/transform/pool.ts";

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
  /** Microseconds per evaluation through the worker pool, one at a time (the round trip): median. */
  poolMicrosOne: number;
  /** Microseconds per evaluation through the worker pool, 100 in flight at once: median of the bursts. */
  poolMicrosBatched: number;
  /** Cost units one evaluation spends, of the budget of 1,000,000. */
  costUnits: number;
  /** The worst-case cost estimated before it runs, with inputs of 32 KiB. */
  estimatedCost: number;
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

async function measurePool(c: Case, quick: boolean, pool: TransformPool): Promise<[number, number]> {
  const limits = { maxValueBytes: 32 * 1024 };
  const once = () =>
    pool.evaluate(c.expression, c.shape, c.input, limits).catch(() => undefined) as Promise<unknown>;
  const rounds = quick ? 50 : 500;
  for (let i = 0; i < 20; i++) await once(); // warm-up: the worker's compile cache and JIT
  const single: number[] = [];
  for (let i = 0; i < rounds; i++) {
    const t = now();
    await once();
    single.push(now() - t);
  }
  const batched: number[] = [];
  for (let b = 0; b < (quick ? 5 : 20); b++) {
    const t = now();
    await Promise.all(Array.from({ length: 100 }, once));
    batched.push((now() - t) / 100);
  }
  single.sort((a, b) => a - b);
  batched.sort((a, b) => a - b);
  return [single[Math.floor(single.length / 2)]!, batched[Math.floor(batched.length / 2)]!];
}

function measure(c: Case, quick: boolean): Omit<TransformResult, "poolMicrosOne" | "poolMicrosBatched"> {
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
    estimatedCost: compiled.estimateCost(32 * 1024),
    outcome,
  };
}

/** Measures every case; `quick` takes fewer samples. */
export async function measureTransforms(quick: boolean): Promise<TransformResult[]> {
  const pool = new TransformPool();
  try {
    const out: TransformResult[] = [];
    for (const c of CASES) {
      const inProcess = measure(c, quick);
      const hostile = c.name.startsWith("hostile");
      const [poolMicrosOne, poolMicrosBatched] = hostile ? [NaN, NaN] : await measurePool(c, quick, pool);
      out.push({ ...inProcess, poolMicrosOne, poolMicrosBatched });
    }
    return out;
  } finally {
    await pool.close();
  }
}

/** Prints the table of {@link measureTransforms}. */
export function printTransforms(results: TransformResult[], p: (line: string) => void): void {
  p("transforms (one evaluation; budget 1,000,000 cost units; pool: 1 worker, as the controller runs them):");
  p(
    "| transform | compile µs (once) | in-thread µs p50 | in-thread µs max | pool µs, one at a time | pool µs each, 100 in flight | cost units | estimated worst case | outcome |",
  );
  p("|---|---:|---:|---:|---:|---:|---:|---:|---|");
  const f = (v: number) => (Number.isFinite(v) ? v.toFixed(2) : "-");
  for (const r of results) {
    p(
      `| ${r.name} | ${r.compileMicros.toFixed(0)} | ${f(r.evalMicrosP50)} | ${f(r.evalMicrosMax)} | ${f(r.poolMicrosOne)} | ${f(r.poolMicrosBatched)} | ${r.costUnits} | ${r.estimatedCost} | ${r.outcome} |`,
    );
  }
}
