/**
 * The cost budget of one evaluation, as Kubernetes bounds a CEL expression: every step of the
 * evaluation costs one unit, and a step that builds a string, bytes or a list costs one more
 * unit per ten characters, bytes or items it built (Kubernetes' traversal factor of 0.1), so
 * nested comprehensions and repeated concatenation run out of budget long before they run out
 * of memory or time.
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

/** Node kinds that only read what exists (a variable, a field, a literal): they build nothing. */
const READS = new Set(["id", ".", ".?", "[]", "[?]", "value"]);

interface Evaluator {
  run(ast: { op?: string }, ctx: unknown): unknown;
}

/**
 * Counts every step `evaluator` runs against the meter `current()` returns (none: not counted).
 * `evaluator` is the library's evaluator of one environment.
 */
export function installMeter(evaluator: Evaluator, current: () => Meter | undefined): void {
  const run = Object.getPrototypeOf(evaluator).run as Evaluator["run"];
  evaluator.run = function meteredRun(ast, ctx) {
    const meter = current();
    if (meter === undefined) return run.call(this, ast, ctx);
    meter.charge(1);
    const result = run.call(this, ast, ctx);
    if (!READS.has(ast.op ?? "")) {
      const size =
        typeof result === "string"
          ? result.length
          : result instanceof Uint8Array || Array.isArray(result)
            ? result.length
            : 0;
      if (size >= 10) meter.charge(Math.floor(size / 10));
    }
    return result;
  };
}
