/**
 * A member step of the field-path grammar (Crossplane / Kubernetes conventions): a field name,
 * a map key, or a list index. Also the grammar of the path inside a filter, in both syntaxes.
 */
import { countItems, describeKind, isJsonObject, listItem, ownField } from "./json-value.ts";
import { quote } from "./quote.ts";
import { isDigits, isSpaceOrControl, type Scanner } from "./scanner.ts";

/**
 * One member step. `index` comes from unquoted digits (`[0]`): an index on a list, and the key
 * `"0"` on a map, as in Crossplane. Names and quoted keys are always keys.
 */
export type Member =
  | { readonly kind: "key"; readonly key: string }
  | { readonly kind: "index"; readonly index: number; readonly key: string };

// Quotes never belong to an unquoted name: `labels.'app'` is a mistake to report, not a key.
const NAME_STOPS = ".[]'\"";
const KEY_STOPS = "[]'\"";

/**
 * Reads a dotted name at the cursor: everything up to `.`, `[`, `]`, a quote, whitespace, a
 * control character or one of `extraStops`. It may hold `/`, `-`, `:` and any other character.
 */
export function readFieldName(s: Scanner, extraStops = ""): string {
  const start = s.pos;
  for (let ch = s.peek(); ch !== undefined; ch = s.peek()) {
    if (NAME_STOPS.includes(ch) || extraStops.includes(ch) || isSpaceOrControl(ch)) break;
    s.pos++;
  }
  if (s.pos === start) s.fail("a field name");
  return s.source.slice(start, s.pos);
}

/**
 * Reads the inside of `[...]` after the `[`, and the `]`: `'quoted'`, `"quoted"`, digits (an
 * index), or an unquoted key that may contain dots and slashes (`[crossplane.io/external-name]`).
 */
export function readBracketMember(s: Scanner): Member {
  const ch = s.peek();
  if (ch === "'" || ch === '"') {
    const key = s.readQuoted();
    s.expect("]");
    return { kind: "key", key };
  }
  const start = s.pos;
  // Unlike a dotted name, an unquoted key may hold dots; it ends at "]" (or a quote or "[", both errors).
  for (let c = s.peek(); c !== undefined && !KEY_STOPS.includes(c) && !isSpaceOrControl(c); c = s.peek())
    s.pos++;
  const raw = s.source.slice(start, s.pos);
  if (raw === "") s.fail("an index or a key", start);
  if (raw.startsWith("?")) s.fail("an index or a key (a filter cannot hold another filter)", start);
  if (/^-[0-9]/.test(raw)) s.fail(`an index of 0 or more (quote a key that starts with "-")`, start);
  s.expect("]");
  if (isDigits(raw)) return { kind: "index", index: s.toIndex(raw, start), key: raw };
  return { kind: "key", key: raw };
}

/** The value `member` selects in `value`; `undefined` when there is none. */
export function selectMember(value: unknown, member: Member): unknown {
  if (member.kind === "index" && Array.isArray(value)) return listItem(value, member.index);
  return ownField(value, member.key);
}

/** Says why `member` selects nothing in `value`, which `subject` names (never printing values). */
export function describeMemberMiss(subject: string, value: unknown, member: Member): string {
  if (Array.isArray(value)) {
    if (member.kind === "index") return `${subject} has ${countItems(value)}, no index ${member.index}`;
    return `${subject} is a list, not an object with a field ${quote(member.key)}`;
  }
  if (isJsonObject(value)) return `${subject} has no field ${quote(member.key)}`;
  return `${subject} is ${describeKind(value)}, not ${member.kind === "index" ? "a list" : "an object"}`;
}
