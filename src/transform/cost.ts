/**
 * The cost budget of one evaluation, as Kubernetes bounds a CEL expression: every step of the
 * evaluation costs one unit; a call or operator costs one more unit per ten characters, bytes,
 * items or entries of its operands or of its result, whichever is larger (Kubernetes'
 * traversal factor of 0.1), with the searches (`contains`, `indexOf`) charged the product of
 * both and JSON parsing a unit per byte; a list or map literal costs 10 or 30 more (Kubernetes'
 * create costs). So nested comprehensions over large values, repeated searches and repeated
 * concatenation run out of budget long before they run out of memory or time. The meter sees
 * only the top level of each value: work that grows with nesting is bounded by the worker's
 * deadline and heap ceiling instead (./pool.ts).
 *
 * The CEL library has no cost tracker of its own, so this module counts on the library's one
 * evaluation entry point (`run`, which the evaluator calls for every node it evaluates) of the
 * environments it is installed on. An exceeded budget is sticky: CEL's `||`, `&&`, `exists` and
 * `all` absorb errors, so once the budget is spent every further step fails too and the result
 * is refused whatever the expression made of the error.
 */

/** The cost budget of one evaluation: Kubernetes' per-call limit for validation rules. */
export const DEFAULT_COST_BUDGET = 1_000_000;

/** Thrown inside an evaluation when its budget is spent. */
export class CostExceeded extends Error {
  constructor(budget: number) {
    super(`the transform exceeded its cost budget of ${budget}`);
    this.name = "CostExceeded";
  }
}

/** The running count of one evaluation. */
export class Meter {
  private spent = 0;
  /** True once the budget was spent; the evaluation's result is refused then. */
  exceeded = false;

  /** The units this evaluation may spend. */
  readonly budget: number;

  /** Where the node being evaluated collects the sizes of its operands (see installMeter). */
  operands: Operands | undefined;

  constructor(budget: number) {
    this.budget = budget;
  }

  /** Charges `units`; throws {@link CostExceeded} once the total passes the budget. */
  charge(units: number): void {
    this.spent += units;
    if (this.spent > this.budget || this.exceeded) {
      this.exceeded = true;
      throw new CostExceeded(this.budget);
    }
  }

  /** The units charged so far. */
  get cost(): number {
    return this.spent;
  }
}

/** Node kinds that only read what exists (a variable, a field, a literal, an index): they build nothing. */
const READS = new Set(["id", ".", ".?", "[]", "[?]", "value"]);

/**
 * Node kinds whose work grows with their operands: every call, and the operators that copy or
 * compare what they are given. Charged by the size of their operands (see {@link workCost}).
 */
const BY_INPUT = new Set(["call", "rcall", "+", "==", "!=", "<", "<=", ">", ">=", "in"]);

/**
 * Calls that are macros: their "operands" are the evaluations of their body, already charged
 * node by node, so they are charged as any node that builds (by their result).
 */
const MACROS = new Set(["has", "all", "exists", "exists_one", "map", "filter", "bind", "or", "orValue"]);

/** Kubernetes' StringTraversalCostFactor: one unit per ten characters, bytes or items traversed. */
const TRAVERSAL = 0.1;
/** Kubernetes' ListCreateBaseCost and MapCreateBaseCost. */
const LIST_CREATE = 10;
const MAP_CREATE = 30;

/** The operands of one node, as they are evaluated: their count, total size and the two largest. */
class Operands {
  sum = 0;
  first = 0;
  second = 0;
  add(size: number): void {
    this.sum += size;
    if (size > this.first) {
      this.second = this.first;
      this.first = size;
    } else if (size > this.second) this.second = size;
  }
}

/**
 * The size of a value as the cost model counts it: characters of a string, bytes of bytes, items
 * of a list, entries of a map. Only the top level: the work nested values add (deep equality of
 * lists of lists) is not charged, and is what the worker's deadline is for.
 */
export function sizeOf(value: unknown): number {
  if (typeof value === "string") return value.length;
  if (value instanceof Uint8Array || Array.isArray(value)) return value.length;
  if (value instanceof Map || value instanceof Set) return value.size;
  if (value !== null && typeof value === "object" && isPlainMap(value)) return Object.keys(value).length;
  return 0;
}

function isPlainMap(value: object): boolean {
  const proto = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
}

/**
 * The units a call or operator costs beyond its one step, from the sizes of its operands and of
 * its result, after Kubernetes' CEL cost model: a traversal of the input (or of the result built,
 * when that is larger) at one unit per ten; `contains`/`indexOf` the product of both traversals
 * (a search may compare the needle at every place); `startsWith`/`endsWith` the prefix; parsing
 * JSON one unit per byte parsed (each byte can become at most one node of the result).
 */
export function workCost(name: string, operands: Operands, resultSize: number): number {
  switch (name) {
    case "contains":
    case "indexOf":
    case "lastIndexOf":
      return Math.ceil(1 + operands.first * TRAVERSAL) * Math.ceil(1 + operands.second * TRAVERSAL);
    case "startsWith":
    case "endsWith":
      return Math.ceil(operands.second * TRAVERSAL);
    case "json":
      return operands.sum;
    default:
      return Math.max(Math.ceil(operands.sum * TRAVERSAL), Math.floor(resultSize * TRAVERSAL));
  }
}

interface Evaluator {
  run(ast: { op?: string; args?: unknown }, ctx: unknown): unknown;
}

/**
 * A map literal as a `Map`, so that every key is an ordinary key: the library drops `__proto__`,
 * `constructor` and `prototype` from the objects it builds, and reads an object's CEL type from
 * its `constructor`. Keys keep their CEL value (`{1: 'a'}` has the int key 1), as the library's
 * `Map` support expects.
 */
function mapLiteral(this: Evaluator, ast: { args?: unknown }, ctx: unknown): Map<unknown, unknown> {
  const out = new Map<unknown, unknown>();
  for (const entry of ast.args as Array<[unknown, unknown]>) {
    const key = this.run(entry[0] as { op?: string }, ctx);
    out.set(key, this.run(entry[1] as { op?: string }, ctx));
  }
  return out;
}

/**
 * Counts every step `evaluator` runs against the meter `current()` returns (none: not counted),
 * and evaluates map literals so that every key is an ordinary key. `evaluator` is the library's
 * evaluator of one environment.
 */
export function installMeter(evaluator: Evaluator, current: () => Meter | undefined): void {
  const run = Object.getPrototypeOf(evaluator).run as Evaluator["run"];
  evaluator.run = function meteredRun(ast, ctx) {
    const op = ast.op ?? "";
    const meter = current();
    if (meter === undefined) return op === "map" ? mapLiteral.call(this, ast, ctx) : run.call(this, ast, ctx);
    meter.charge(1);
    const parent = meter.operands;
    const name = op === "call" || op === "rcall" ? String((ast.args as unknown[])[0]) : op;
    const operands = BY_INPUT.has(op) && !MACROS.has(name) ? new Operands() : undefined;
    meter.operands = operands;
    let result: unknown;
    try {
      result = op === "map" ? mapLiteral.call(this, ast, ctx) : run.call(this, ast, ctx);
    } finally {
      meter.operands = parent;
    }
    if (READS.has(op)) {
      parent?.add(sizeOf(result));
      return result;
    }
    const size = sizeOf(result);
    parent?.add(size);
    if (operands) meter.charge(workCost(name, operands, size));
    else {
      const base = op === "list" ? LIST_CREATE : op === "map" ? MAP_CREATE : 0;
      const built = Math.floor(size * TRAVERSAL);
      if (base + built > 0) meter.charge(base + built);
    }
    return result;
  };
}
