/**
 * Compiles and evaluates transforms: CEL expressions that shape a resolved value.
 *
 * Each expression is parsed and type-checked once, in an environment that declares exactly the
 * variables its request binds (`value` or `values`, `sources`, and `default` only when a default
 * is set), and kept in a bounded cache keyed by its text. An evaluation has a cost budget and
 * its result a size limit; whatever goes wrong is a `ResolutionError`: `InvalidSpec` at compile
 * time (with the line and column), `TransformFailed` at run time. Evaluation never throws
 * anything else and never runs past its budget.
 */
import { Environment } from "@marcbachmann/cel-js";
import { LRUCache } from "lru-cache";
import { Limits } from "../api/limits.ts";
import { ResolutionError, isResolutionError } from "../api/errors.ts";
import { CostExceeded, DEFAULT_COST_BUDGET, Meter, installMeter } from "./cost.ts";
import { estimateCost } from "./estimate.ts";
import { ExtensionError, registerExtensions } from "./extensions.ts";
import { toCel, toJson } from "./json.ts";

/** The longest transform, in characters (the CRD's maxLength of spec.transform). */
export const MAX_TRANSFORM_LENGTH = Limits.transform;

/** How many compiled expressions the cache keeps (per process), least recently used dropped first. */
export const COMPILE_CACHE_SIZE = 1024;

/** Whether the request resolves to one value or a list, which decides the variables in scope. */
export type TransformMode = "Single" | "Multiple";

/** What a transform is compiled for. */
export interface TransformShape {
  /** `Single` binds `value`; `Multiple` binds `values`. */
  mode: TransformMode;
  /** Whether `default` is bound. */
  hasDefault: boolean;
}

/** The variables of one evaluation. */
export interface TransformInput {
  /** The value read (Single mode). */
  value?: unknown;
  /** The values read, in order (Multiple mode). */
  values?: unknown[];
  /** The objects read, as `status.sources` would list them. */
  sources: readonly object[];
  /** The request's default, when it has one. */
  default?: unknown;
}

/** Limits of one evaluation. */
export interface EvaluateLimits {
  /** The largest result, in bytes of JSON; larger is `TransformFailed`. */
  maxValueBytes: number;
  /** The cost budget (see `./cost.ts`). @default 1000000 */
  costBudget?: number;
}

/** The outcome of one evaluation: the result as JSON, and the cost it took. */
export interface TransformOutput {
  /** The result, mapped to JSON. */
  value: unknown;
  /** The cost units the evaluation spent. */
  cost: number;
}

/** An expression, parsed and type-checked once, to evaluate any number of times. */
export interface CompiledTransform {
  /** The expression text. */
  readonly text: string;
  /** What it was compiled for. */
  readonly shape: TransformShape;
  /** Evaluates with `input`; throws only a `ResolutionError` with reason `TransformFailed`. */
  evaluate(input: TransformInput, limits: EvaluateLimits): TransformOutput;
  /**
   * The worst-case cost of one evaluation with inputs of up to `maxValueBytes` (see
   * ./estimate.ts), computed once per size.
   */
  estimateCost(maxValueBytes: number): number;
  /**
   * Why the expression is refused before it runs: its estimated worst-case cost with inputs of
   * `limits.maxValueBytes` is over `limits.costBudget`; undefined when it is not.
   */
  overBudget(limits: EvaluateLimits): string | undefined;
}

type Program = ((context: Record<string, unknown>) => unknown) & { ast: unknown };

interface Engine {
  env: Environment;
  meter: Meter | undefined;
}

const engines = new Map<string, Engine>();

function engineFor(shape: TransformShape): Engine {
  const key = `${shape.mode}/${shape.hasDefault}`;
  const existing = engines.get(key);
  if (existing) return existing;
  const env = new Environment({
    enableOptionalTypes: true,
    // A map literal mixing value types ({'host': value, 'port': 5432}) is ordinary in a
    // transform; Kubernetes' CEL accepts it as map(string, dyn).
    homogeneousAggregateLiterals: false,
  });
  if (shape.mode === "Single") env.registerVariable("value", "dyn");
  else env.registerVariable("values", "list<dyn>");
  env.registerVariable("sources", "list<map<string, dyn>>");
  if (shape.hasDefault) env.registerVariable("default", "dyn");
  registerExtensions(env);
  const engine: Engine = { env, meter: undefined };
  // The library hands its evaluator to function handlers as `this` and to nothing else: a probe
  // function, called once here, is how the meter gets at it.
  let evaluator: unknown;
  env.registerFunction("__referable_meter_probe__(): bool", function (this: unknown) {
    // eslint-disable-next-line @typescript-eslint/no-this-alias -- the probe exists to capture it
    evaluator = this;
    return true;
  });
  const probe = env.parse("__referable_meter_probe__()") as unknown as Program;
  probe({ value: null, values: [], sources: [], default: null });
  if (typeof (evaluator as { run?: unknown })?.run !== "function") {
    throw new Error("the CEL library's evaluator has no run method: the cost meter cannot be installed");
  }
  installMeter(evaluator as Parameters<typeof installMeter>[0], () => engine.meter);
  engines.set(key, engine);
  return engine;
}

/** Builds the engine of every shape, so a worker's first evaluation does not pay for it. */
export function warmUp(): void {
  for (const mode of ["Single", "Multiple"] as const)
    for (const hasDefault of [false, true]) engineFor({ mode, hasDefault });
}

const cache = new LRUCache<string, CompiledTransform | ResolutionError>({ max: COMPILE_CACHE_SIZE });

/** Where in `text` the offset `pos` is, as `line L, column C` (both from 1). */
function position(text: string, pos: unknown): string {
  if (typeof pos !== "number" || pos < 0) return "";
  const before = text.slice(0, pos).split("\n");
  return ` (at line ${before.length}, column ${before[before.length - 1]!.length + 1})`;
}

/** The first line of a library message: the rest is a code frame that repeats the expression. */
function headline(err: unknown): string {
  const message = err instanceof Error ? err.message : String(err);
  const first = message.split("\n", 1)[0]!.trim();
  return first.length > 200 ? `${first.slice(0, 200)}...` : first;
}

/** How many characters of a value a message may repeat before it counts as showing the value. */
const SHOWN = 4;

/**
 * `message` without the data it quotes. The library's messages quote what failed, and that can
 * be the value read (`No such key: <value>` for `m[value]`, `Invalid duration string: <value>`),
 * which must never reach a condition or an Event. A message that repeats any 4 characters of
 * the value(s) or default that the expression itself does not contain keeps only its text
 * before the first colon: it errs on the side of saying less.
 */
function withoutValues(message: string, text: string, input: TransformInput): string {
  const leaves: string[] = [];
  const collect = (v: unknown, depth: number) => {
    if (depth > 100) return;
    if (typeof v === "string" || typeof v === "number") leaves.push(String(v));
    else if (Array.isArray(v)) for (const x of v) collect(x, depth + 1);
    else if (v !== null && typeof v === "object") {
      for (const [k, x] of Object.entries(v)) {
        leaves.push(k);
        collect(x, depth + 1);
      }
    }
  };
  // Sources are not collected: object names are in messages anyway, and their fixed keys
  // (resourceVersion) would hide every message with a common word in it.
  collect([input.value, input.values, input.default], 0);
  const data = leaves.join("\u0000");
  for (let i = 0; i + SHOWN <= message.length; i++) {
    const window = message.slice(i, i + SHOWN);
    if (!text.includes(window) && data.includes(window)) {
      const colon = message.indexOf(":");
      return `${colon > 0 ? message.slice(0, colon) : "the expression failed on the data"} (the data is not shown)`;
    }
  }
  return message;
}

/** What the evaluated text starts with (see compileUncached). */
const WRAP_PREFIX = "dyn(";

/** Functions refused at compile time, with why. */
const REFUSED: Record<string, string> = {
  // The library runs matches() on JavaScript's backtracking RegExp, where one pattern can take
  // exponential time on a 32 KiB value; Kubernetes uses RE2, which cannot.
  matches:
    "matches() is not available in a transform: its regular expressions could run without bound; use contains(), startsWith(), endsWith() or split()",
};

function refusedCall(node: unknown, seen = new Set<unknown>()): { name: string; pos: unknown } | undefined {
  if (node === null || typeof node !== "object" || seen.has(node)) return undefined;
  seen.add(node);
  const n = node as { op?: unknown; args?: unknown; pos?: unknown };
  if ((n.op === "call" || n.op === "rcall") && Array.isArray(n.args) && typeof n.args[0] === "string") {
    if (REFUSED[n.args[0]] !== undefined) return { name: n.args[0], pos: n.pos };
  }
  const children = Array.isArray(node) ? node : n.args !== undefined ? [n.args] : [];
  for (const child of children) {
    const found = refusedCall(child, seen);
    if (found) return found;
  }
  return undefined;
}

/**
 * Compiles `text` for `shape`, from the cache when it was compiled before. Throws
 * `ResolutionError("InvalidSpec")` naming `field` and the position when it does not parse or
 * type-check.
 */
export function compileTransform(
  text: string,
  shape: TransformShape,
  field = "transform",
): CompiledTransform {
  const key = `${shape.mode}/${shape.hasDefault}/${text}`;
  let entry = cache.get(key);
  if (entry === undefined) {
    entry = compileUncached(text, shape, field);
    cache.set(key, entry);
  }
  if (isResolutionError(entry)) {
    // The cached error names the field of the request that compiled it first.
    throw new ResolutionError("InvalidSpec", entry.message.replace(/^[^:]*:/, `${field}:`));
  }
  return entry;
}

function compileUncached(
  text: string,
  shape: TransformShape,
  field: string,
): CompiledTransform | ResolutionError {
  if (typeof text !== "string" || text.trim() === "")
    return new ResolutionError("InvalidSpec", `${field}: must be a non-empty CEL expression`);
  if (text.length > MAX_TRANSFORM_LENGTH) {
    return new ResolutionError(
      "InvalidSpec",
      `${field}: is ${text.length} characters, over the limit of ${MAX_TRANSFORM_LENGTH}`,
    );
  }
  const engine = engineFor(shape);
  let program: Program;
  try {
    program = engine.env.parse(text) as unknown as Program;
  } catch (err) {
    return new ResolutionError(
      "InvalidSpec",
      `${field}: does not parse: ${headline(err)}${position(text, (err as { node?: { pos?: unknown } }).node?.pos)}`,
    );
  }
  const checked = (program as unknown as { check(): { valid: boolean; error?: unknown } }).check();
  if (!checked.valid) {
    const err = checked.error as { node?: { pos?: unknown } } | undefined;
    const hint =
      shape.mode === "Single" && /Unknown variable: values\b/.test(headline(err))
        ? " (values is bound in mode Multiple; use value)"
        : shape.mode === "Multiple" && /Unknown variable: value\b/.test(headline(err))
          ? " (mode Multiple binds values, the list; value is bound in mode Single)"
          : /Unknown variable: default\b/.test(headline(err))
            ? " (default is bound only when the request sets a default)"
            : "";
    return new ResolutionError(
      "InvalidSpec",
      `${field}: does not type-check: ${headline(err)}${hint}${position(text, err?.node?.pos)}`,
    );
  }
  const refused = refusedCall(program.ast);
  if (refused) {
    return new ResolutionError(
      "InvalidSpec",
      `${field}: ${REFUSED[refused.name]}${position(text, refused.pos)}`,
    );
  }
  // The library evaluates the root of an expression itself, past the evaluator's `run` that the
  // meter counts on: as the argument of `dyn(...)` the expression's own root is a step like any
  // other (metered, and a map literal there keeps every key). The line break ends a trailing
  // `//` comment. It parses and type-checks as the text did, which was checked above.
  const wrapped = engine.env.parse(`${WRAP_PREFIX}${text}\n)`) as unknown as Program;
  (wrapped as unknown as { check(): unknown }).check();
  program = wrapped;
  const estimates = new Map<number, number>();
  const estimateFor = (maxValueBytes: number) => {
    let cost = estimates.get(maxValueBytes);
    if (cost === undefined) {
      cost = estimateCost(program.ast, maxValueBytes);
      // A process sees one or two sizes (the controller's flag, a library's option).
      if (estimates.size >= 8) estimates.clear();
      estimates.set(maxValueBytes, cost);
    }
    return cost;
  };
  return {
    text,
    shape: { ...shape },
    evaluate: (input, limits) => evaluate(engine, program, text, shape, input, limits),
    estimateCost: estimateFor,
    overBudget: (limits) => {
      const budget = limits.costBudget ?? DEFAULT_COST_BUDGET;
      const cost = estimateFor(limits.maxValueBytes);
      if (cost <= budget) return undefined;
      return `${field}: its estimated worst-case cost is ${cost}, over the budget of ${budget} (inputs of up to ${limits.maxValueBytes} bytes, --max-value-bytes): iterate over less, or avoid nested comprehensions and repeated searches over large values`;
    },
  };
}

/** A position in the evaluated text, `dyn(` + text + `)`, as a position in the text. */
function unwrapped(pos: unknown): unknown {
  return typeof pos === "number" ? pos - WRAP_PREFIX.length : pos;
}

function failed(message: string): ResolutionError {
  return new ResolutionError("TransformFailed", message);
}

function evaluate(
  engine: Engine,
  program: Program,
  text: string,
  shape: TransformShape,
  input: TransformInput,
  limits: EvaluateLimits,
): TransformOutput {
  const budget = limits.costBudget ?? DEFAULT_COST_BUDGET;
  const context: Record<string, unknown> = { sources: toCel(input.sources) };
  if (shape.mode === "Single") context.value = toCel(input.value);
  else context.values = toCel(input.values ?? []);
  if (shape.hasDefault) context.default = toCel(input.default);
  const meter = new Meter(budget);
  const outer = engine.meter;
  engine.meter = meter;
  let result: unknown;
  try {
    result = program(context);
  } catch (err) {
    if (meter.exceeded || err instanceof CostExceeded)
      throw failed(`the transform exceeded its cost budget of ${budget}: make it do less work`);
    if (isResolutionError(err)) throw err;
    if (err instanceof RangeError) throw failed(`the transform ran out of room: ${headline(err)}`);
    throw failed(
      `the transform failed: ${err instanceof ExtensionError ? headline(err) : withoutValues(headline(err), text, input)}${position(text, unwrapped((err as { node?: { pos?: unknown } }).node?.pos))}`,
    );
  } finally {
    engine.meter = outer;
  }
  // An error the expression absorbed (true || <over budget>) still spent the budget.
  if (meter.exceeded)
    throw failed(`the transform exceeded its cost budget of ${budget}: make it do less work`);
  try {
    return { value: toJson(result, limits.maxValueBytes), cost: meter.cost };
  } catch (err) {
    if (isResolutionError(err)) throw err;
    throw failed(`the transform's result could not be converted to JSON: ${headline(err)}`);
  }
}
