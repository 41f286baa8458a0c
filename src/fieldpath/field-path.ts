/**
 * The default syntax, as in Crossplane compositions and the Kubernetes API conventions:
 * `status.atProvider.arn`, `spec.ports[0].port`, `metadata.annotations[crossplane.io/external-name]`,
 * `metadata.labels['app.kubernetes.io/name']`, `data["key.with.dots"]`, and kubectl's equality
 * filter `status.conditions[?(@.type=="Ready")].status`, which picks the first matching item so
 * that the type of the value never depends on the data.
 */
import type { EvalResult } from "./compiled-path.ts";
import { type Filter, matchesFilter, readFilter } from "./filter.ts";
import { countItems, describeKind } from "./json-value.ts";
import { type Member, describeMemberMiss, readBracketMember, readFieldName, selectMember } from "./member.ts";
import { quote } from "./quote.ts";
import { Scanner } from "./scanner.ts";

type Step = { readonly start: number } & (
  { readonly kind: "member"; readonly member: Member } | { readonly kind: "filter"; readonly filter: Filter }
);

/** Parses a path in the default syntax; throws an InvalidSpec ResolutionError if it does not parse. */
export function compileFieldPathSyntax(path: string): (obj: unknown) => EvalResult {
  const steps = parse(path);
  return (obj) => evaluate(path, steps, obj);
}

function parse(path: string): readonly Step[] {
  const s: Scanner = new Scanner(path, 0, path.length);
  const steps: Step[] = [];
  if (s.peek() === ".") s.fail(`a field name (write a kubectl JSONPath as "{${path}}")`);
  if (s.peek() !== "[") {
    s.countSegment();
    steps.push({ kind: "member", member: { kind: "key", key: readFieldName(s) }, start: 0 });
  }
  while (!s.atEnd()) {
    const start = s.pos;
    s.countSegment();
    if (s.eat(".")) {
      steps.push({ kind: "member", member: { kind: "key", key: readFieldName(s) }, start });
    } else if (s.eat("[")) {
      if (s.peek() === "?") steps.push({ kind: "filter", filter: readFilter(s), start });
      else steps.push({ kind: "member", member: readBracketMember(s), start });
    } else {
      s.fail(`".", "[" or the end of the path`);
    }
  }
  return steps;
}

function evaluate(path: string, steps: readonly Step[], obj: unknown): EvalResult {
  let value = obj;
  for (const step of steps) {
    const subject = step.start === 0 ? "the object" : quote(path.slice(0, step.start));
    if (step.kind === "member") {
      const next = selectMember(value, step.member);
      if (next === undefined)
        return { found: false, missing: describeMemberMiss(subject, value, step.member) };
      value = next;
    } else {
      if (!Array.isArray(value)) {
        return { found: false, missing: `${subject} is ${describeKind(value)}, not a list to filter` };
      }
      const list: readonly unknown[] = value;
      const match = list.find((item) => matchesFilter(item, step.filter));
      if (match === undefined) {
        return {
          found: false,
          missing: `${subject} has ${countItems(list)}, none where ${step.filter.text}`,
        };
      }
      value = match;
    }
  }
  return { found: true, value };
}
