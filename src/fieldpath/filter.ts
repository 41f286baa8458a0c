/**
 * kubectl's equality filter on list items, `[?(@.type=="Ready")]`, matched by this code and
 * never evaluated as script. The grammar is closed: `@`, then member steps, then `==` or `!=`,
 * then a string, number or boolean literal. Anything else is an InvalidSpec parse error.
 */
import { type Member, readBracketMember, readFieldName, selectMember } from "./member.ts";
import type { Scanner } from "./scanner.ts";

/** A literal a filter compares with. */
export type FilterLiteral = string | number | boolean;

/** A parsed equality filter. */
export interface Filter {
  /** The path from the item (`@`) to the compared field; empty for the item itself. */
  readonly path: readonly Member[];
  readonly operator: "==" | "!=";
  readonly literal: FilterLiteral;
  /** The expression as written, between `?(` and `)`, for messages. */
  readonly text: string;
}

// JSON's number grammar: no leading "+", no leading zeros, no "Infinity", no hex.
const NUMBER = /-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?/y;

/** Reads a filter at the cursor (on the `?` right after `[`) through its closing `)]`. */
export function readFilter(s: Scanner): Filter {
  s.expect("?");
  s.expect("(");
  s.skipSpaces();
  const textStart = s.pos;
  if (!s.eat("@")) s.fail(`a field path that starts with "@"`);
  const path: Member[] = [];
  for (;;) {
    if (s.eat(".")) {
      s.countSegment();
      const key = readFieldName(s, "=!()<>");
      path.push({ kind: "key", key });
    } else if (s.eat("[")) {
      s.countSegment();
      path.push(readBracketMember(s));
    } else {
      break;
    }
  }
  s.skipSpaces();
  let operator: Filter["operator"];
  if (s.eat("==")) operator = "==";
  else if (s.eat("!=")) operator = "!=";
  else s.fail(`".", "[", "==" or "!="`);
  s.skipSpaces();
  const literal = readLiteral(s);
  const text = s.source.slice(textStart, s.pos);
  s.skipSpaces();
  s.expect(")");
  s.expect("]");
  return { path, operator, literal, text };
}

function readLiteral(s: Scanner): FilterLiteral {
  const ch = s.peek();
  if (ch === "'" || ch === '"') return s.readQuoted();
  if (s.eat("true")) return true;
  if (s.eat("false")) return false;
  NUMBER.lastIndex = s.pos;
  const match = NUMBER.exec(s.source);
  if (match !== null && NUMBER.lastIndex <= s.end) {
    const value = Number(match[0]);
    if (!Number.isFinite(value)) s.fail("a finite number");
    s.pos = NUMBER.lastIndex;
    return value;
  }
  return s.fail("a quoted string, a number, true or false");
}

/**
 * True if `item` has a value at the filter's path and it compares as asked. Comparison is
 * strict (the number 80 is not the string "80"). An item without the field matches neither
 * `==` nor `!=`, as in kubectl, so `!=` never selects items that lack the field.
 */
export function matchesFilter(item: unknown, filter: Filter): boolean {
  let value = item;
  for (const member of filter.path) {
    value = selectMember(value, member);
    if (value === undefined) return false;
  }
  return filter.operator === "==" ? value === filter.literal : value !== filter.literal;
}
