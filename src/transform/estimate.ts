/**
 * The worst-case cost of an expression, estimated from its syntax tree before it ever runs, as
 * Kubernetes estimates CRD validation rules and ValidatingAdmissionPolicy expressions: every
 * input is taken at its size bound (a value or default of `maxValueBytes` characters, items or
 * entries, up to {@link MAX_SOURCES} sources), a comprehension runs once per item of the
 * largest list it can be given, and each step is charged as the runtime meter (./cost.ts)
 * charges it. The estimate is an upper bound of what the meter can charge for the steps it
 * models; an expression over the budget is refused before it runs (the webhook at admission,
 * `InvalidSpec` from the controller).
 */
import { MAX_BUILT_STRING } from "./extensions.ts";

/** The most sources one evaluation sees: the status's maxItems of `sources`. */
export const MAX_SOURCES = 4096;

/**
 * One node's estimate: its cost, the size of its result, the size of its largest item, and the
 * sum of its items' sizes. The sum is what keeps a list of inputs honest: `values` holds at most
 * `maxValueBytes` of JSON in all, so it cannot hold both many items and large ones.
 */
interface Est {
  cost: number;
  size: number;
  item: number;
  total: number;
}

interface Node {
  op?: string;
  args?: unknown;
}

const TRAVERSAL = 0.1;
const CONST: Est = { cost: 0, size: 0, item: 0, total: 0 };
/** Functions whose result is a string or list no larger than their receiver. */
const SAME_SIZE = new Set(["lowerAscii", "upperAscii", "trim", "reverse", "substring", "string", "bytes"]);
/** Functions whose result is a scalar. */
const SCALAR = new Set([
  "size",
  "contains",
  "startsWith",
  "endsWith",
  "indexOf",
  "lastIndexOf",
  "int",
  "uint",
  "double",
  "bool",
  "timestamp",
  "duration",
  "type",
  "dyn",
  "at",
]);

const add = (a: number, b: number) => Math.min(Number.MAX_SAFE_INTEGER, a + b);
const mul = (a: number, b: number) => Math.min(Number.MAX_SAFE_INTEGER, a * b);
const cap = (n: number) => Math.min(n, MAX_BUILT_STRING);

/** The worst-case cost of the expression `ast` with inputs (value, values, default) of up to `maxValueBytes`. */
export function estimateCost(ast: unknown, maxValueBytes: number): number {
  const input: Est = { cost: 1, size: maxValueBytes, item: maxValueBytes, total: maxValueBytes };
  const scope = new Map<string, Est>([
    ["value", input],
    ["values", input],
    ["default", input],
    ["sources", { cost: 1, size: MAX_SOURCES, item: 8, total: MAX_SOURCES * 8 }],
  ]);
  return Math.ceil(estimate(ast as Node, scope).cost);
}

function estimate(node: Node, scope: Map<string, Est>): Est {
  const args = node.args as unknown[];
  const sub = (n: unknown) => estimate(n as Node, scope);
  switch (node.op) {
    case "value":
      return { ...CONST, size: typeof node.args === "string" ? node.args.length : 0 };
    case "id":
      return { ...(scope.get(String(node.args)) ?? CONST), cost: 1 };
    case ".":
    case ".?":
    case "[]":
    case "[?]": {
      const base = sub(args[0]);
      const key = node.op === "[]" || node.op === "[?]" ? sub(args[1]) : CONST;
      return { cost: add(1, add(base.cost, key.cost)), size: base.item, item: base.item, total: base.item };
    }
    case "list": {
      const items = args.map(sub);
      const cost = items.reduce((c, e) => add(c, e.cost), 1 + 10 + Math.floor(items.length * TRAVERSAL));
      return {
        cost,
        size: items.length,
        item: Math.max(0, ...items.map((e) => e.size)),
        total: items.reduce((t, e) => add(t, e.size), 0),
      };
    }
    case "map": {
      const entries = (args as Array<[unknown, unknown]>).map(([k, v]) => [sub(k), sub(v)] as const);
      let cost = 1 + 30 + Math.floor(entries.length * TRAVERSAL);
      for (const [k, v] of entries) cost = add(cost, add(k.cost, v.cost));
      return {
        cost,
        size: entries.length,
        item: Math.max(0, ...entries.map(([, v]) => v.size)),
        total: entries.reduce((t, [, v]) => add(t, v.size), 0),
      };
    }
    case "?:": {
      const [c, a, b] = args.map(sub) as [Est, Est, Est];
      return {
        cost: add(1, add(c.cost, Math.max(a.cost, b.cost))),
        size: Math.max(a.size, b.size),
        item: Math.max(a.item, b.item),
        total: Math.max(a.total, b.total),
      };
    }
    case "call":
    case "rcall":
      return call(node, scope);
    default: {
      // Operators: unary, arithmetic, logic, comparison, `in`, `+`.
      const operands = (Array.isArray(args) ? args : [args]).filter((a) => typeof a === "object").map(sub);
      const cost = operands.reduce((c, e) => add(c, e.cost), 1);
      const sum = operands.reduce((s, e) => add(s, e.size), 0);
      if (node.op === "+")
        return {
          cost: add(cost, Math.ceil(sum * TRAVERSAL)),
          size: sum,
          item: Math.max(0, ...operands.map((e) => e.item)),
          total: operands.reduce((t, e) => add(t, e.total), 0),
        };
      const compares = ["==", "!=", "<", "<=", ">", ">=", "in"].includes(node.op ?? "");
      return { ...CONST, cost: compares ? add(cost, Math.ceil(sum * TRAVERSAL)) : cost };
    }
  }
}

function call(node: Node, scope: Map<string, Est>): Est {
  const all = node.args as unknown[];
  const name = String(all[0]);
  const receiverNode = node.op === "rcall" ? all[1] : undefined;
  const argNodes = (node.op === "rcall" ? all[2] : all[1]) as Node[];
  const sub = (n: unknown, s = scope) => estimate(n as Node, s);
  const comprehension = ["map", "filter", "all", "exists", "exists_one"].includes(name);
  if (node.op === "rcall" && comprehension && argNodes.length >= 2)
    return comprehensionCall(name, receiverNode, argNodes, scope);
  if (name === "bind" && argNodes.length === 3) return bindCall(argNodes, scope);
  const operands = [...(receiverNode !== undefined ? [receiverNode] : []), ...argNodes].map((n) => sub(n));
  let cost = operands.reduce((c, e) => add(c, e.cost), 1);
  if (name === "has" || name === "or" || name === "orValue") {
    return {
      cost,
      size: Math.max(0, ...operands.map((e) => e.size)),
      item: Math.max(0, ...operands.map((e) => e.item)),
      total: Math.max(0, ...operands.map((e) => e.total)),
    };
  }
  const sizes = operands.map((e) => e.size).sort((a, b) => b - a);
  const sum = sizes.reduce(add, 0);
  const [first = 0, second = 0] = sizes;
  let size: number;
  let item = 0;
  let total: number | undefined;
  if (SCALAR.has(name)) size = 0;
  else if (SAME_SIZE.has(name)) size = first;
  else if (name === "split" || name === "json") {
    // The parts (of a split, of a parsed document) together are no larger than the text.
    size = first;
    item = first;
    total = first;
  } else if (name === "join") {
    const list = operands[0]!;
    size = cap(add(mul(list.size, list.item), mul(list.size, second)));
  } else if (name === "format")
    size = cap(
      add(
        sum,
        operands.reduce((t, e) => add(t, e.total), 0),
      ),
    );
  // Encoders and the rest: at most twice what they were given (hex doubles; base64 is 4/3).
  else size = cap(mul(2, sum));
  switch (name) {
    case "contains":
    case "indexOf":
    case "lastIndexOf":
      cost = add(cost, mul(Math.ceil(1 + first * TRAVERSAL), Math.ceil(1 + second * TRAVERSAL)));
      break;
    case "startsWith":
    case "endsWith":
      cost = add(cost, Math.ceil(second * TRAVERSAL));
      break;
    case "json":
      cost = add(cost, sum);
      break;
    default:
      cost = add(cost, Math.max(Math.ceil(sum * TRAVERSAL), Math.floor(size * TRAVERSAL)));
  }
  return { cost, size, item, total: total ?? mul(size, item) };
}

/** A macro over a list (map, filter, all, exists, exists_one): the range, then the body per item. */
function comprehensionCall(
  name: string,
  receiverNode: unknown,
  argNodes: Node[],
  scope: Map<string, Est>,
): Est {
  const sub = (n: unknown, s = scope) => estimate(n as Node, s);
  const range = sub(receiverNode);
  const variable = String(argNodes[0]!.args);
  // The body's cost for an empty item and for the largest; a cost that grows with the item
  // (linearly or faster) is largest, for items whose sizes sum to at most range.total, when
  // as many items as can be are the largest and the rest empty.
  const body = (m: number) => {
    const inner = new Map(scope);
    inner.set(variable, { cost: 1, size: m, item: m, total: m });
    return argNodes.slice(1).map((n) => sub(n, inner));
  };
  const small = body(0).reduce((c, e) => add(c, e.cost), 2);
  const steps = body(range.item);
  const large = steps.reduce((c, e) => add(c, e.cost), 2);
  const largest = range.item > 0 ? Math.min(range.size, Math.ceil(range.total / range.item)) : 0;
  const perItems = add(mul(range.size, small), mul(largest, Math.max(0, large - small)));
  const last = steps[steps.length - 1]!;
  const item = name === "map" ? last.size : name === "filter" ? range.item : 0;
  return {
    cost: add(range.cost, add(perItems, Math.floor(range.size * TRAVERSAL))),
    size: name === "map" || name === "filter" ? range.size : 0,
    item,
    total: name === "filter" ? range.total : name === "map" ? mul(range.size, item) : 0,
  };
}

/** cel.bind(variable, init, body): the init once, then the body with the variable bound. */
function bindCall(argNodes: Node[], scope: Map<string, Est>): Est {
  const sub = (n: unknown, s = scope) => estimate(n as Node, s);
  const init = sub(argNodes[1]);
  const inner = new Map(scope);
  inner.set(String(argNodes[0]!.args), { ...init, cost: 1 });
  const body = sub(argNodes[2], inner);
  return { ...body, cost: add(1, add(init.cost, body.cost)) };
}
