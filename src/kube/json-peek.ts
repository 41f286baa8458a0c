/**
 * Reads one string of an object's top-level `metadata` from its JSON text without parsing the
 * rest: a status write's answer is the whole Referable (managedFields included), of which the
 * controller keeps only the new resourceVersion.
 *
 * The scan follows JSON's structure (strings and their escapes, nesting), so a key of the same
 * name anywhere else (an annotation, a field of status.value) is never taken for it. Text it
 * does not understand gives {@link UNREADABLE}; the caller then parses it whole.
 */

import * as char from "./json-chars.ts";

const { QUOTE, BACKSLASH, OPEN_BRACE, CLOSE_BRACE, OPEN_BRACKET, CLOSE_BRACKET, COLON, COMMA } = char;

/** The text is not the JSON object the scan expects. */
export const UNREADABLE = Symbol("unreadable");

/**
 * `JSON.parse(text).metadata?.[field]` of a JSON object whose metadata is an object and the
 * field, if there, a string; {@link UNREADABLE} for anything else.
 */
export function peekMetadataString(text: string, field: string): string | undefined | typeof UNREADABLE {
  let i = skipSpace(text, 0);
  if (text.charCodeAt(i) !== OPEN_BRACE) return UNREADABLE;
  i = skipSpace(text, i + 1);
  if (text.charCodeAt(i) === CLOSE_BRACE) return undefined;
  let found: string | undefined;
  let sawMetadata = false;
  for (;;) {
    // A member of the object: "key": value
    const keyEnd = stringEnd(text, i);
    if (keyEnd < 0) return UNREADABLE;
    const key = text.slice(i + 1, keyEnd);
    i = skipSpace(text, keyEnd + 1);
    if (text.charCodeAt(i) !== COLON) return UNREADABLE;
    i = skipSpace(text, i + 1);
    if (key === "metadata") {
      // JSON.parse keeps the last of two members of the same name.
      sawMetadata = true;
      if (text.charCodeAt(i) === OPEN_BRACE) {
        const inner = memberString(text, i, field);
        if (inner === UNREADABLE) return UNREADABLE;
        found = inner.value;
        i = inner.end;
      } else return UNREADABLE;
    } else if (key.includes("\\")) {
      return UNREADABLE; // an escaped key may spell "metadata"
    } else {
      i = valueEnd(text, i);
    }
    if (i < 0) return UNREADABLE;
    i = skipSpace(text, i);
    const c = text.charCodeAt(i);
    if (c === CLOSE_BRACE) break;
    if (c !== COMMA) return UNREADABLE;
    i = skipSpace(text, i + 1);
  }
  if (skipSpace(text, i + 1) !== text.length) return UNREADABLE;
  return sawMetadata ? found : undefined;
}

/** In the object at `start`: the string value of `field` (the last one, as JSON.parse keeps), and where the object ends. */
function memberString(
  text: string,
  start: number,
  field: string,
): { value: string | undefined; end: number } | typeof UNREADABLE {
  let i = skipSpace(text, start + 1);
  let value: string | undefined;
  if (text.charCodeAt(i) === CLOSE_BRACE) return { value, end: i + 1 };
  for (;;) {
    const keyEnd = stringEnd(text, i);
    if (keyEnd < 0) return UNREADABLE;
    const key = text.slice(i + 1, keyEnd);
    if (key.includes("\\")) return UNREADABLE;
    i = skipSpace(text, keyEnd + 1);
    if (text.charCodeAt(i) !== COLON) return UNREADABLE;
    i = skipSpace(text, i + 1);
    const end = valueEnd(text, i);
    if (end < 0) return UNREADABLE;
    if (key === field) {
      if (text.charCodeAt(i) !== QUOTE) return UNREADABLE;
      else {
        const raw = text.slice(i, end);
        value = raw.includes("\\") ? (JSON.parse(raw) as string) : raw.slice(1, -1);
      }
    }
    i = skipSpace(text, end);
    const c = text.charCodeAt(i);
    if (c === CLOSE_BRACE) return { value, end: i + 1 };
    if (c !== COMMA) return UNREADABLE;
    i = skipSpace(text, i + 1);
  }
}

/**
 * Walks the members of the JSON object that starts at `start` (its `{`) in one pass: `onMember`
 * is told each key and where its value starts, and returns where the value ends: it reads the
 * value (or descends into it), or hands it to {@link skipValue}; -1 for a value it refuses.
 * Returns where the object ends, or -1 when the text there is not such an object, a key has an
 * escape (it may spell one the caller looks for), or `onMember` refused.
 *
 * Skipped values are only scanned for their end (strings, escapes, nesting), not validated: a
 * caller that must refuse what JSON.parse refuses parses the text whole.
 */
export function walkObject(
  text: string,
  start: number,
  onMember: (key: string, at: number) => number,
): number {
  let i = skipSpace(text, start);
  if (text.charCodeAt(i) !== OPEN_BRACE) return -1;
  i = skipSpace(text, i + 1);
  if (text.charCodeAt(i) === CLOSE_BRACE) return i + 1;
  for (;;) {
    const keyEnd = stringEnd(text, i);
    if (keyEnd < 0) return -1;
    const key = text.slice(i + 1, keyEnd);
    if (key.includes("\\")) return -1;
    i = skipSpace(text, keyEnd + 1);
    if (text.charCodeAt(i) !== COLON) return -1;
    const end = onMember(key, skipSpace(text, i + 1));
    if (end < 0) return -1;
    i = skipSpace(text, end);
    const c = text.charCodeAt(i);
    if (c === CLOSE_BRACE) return i + 1;
    if (c !== COMMA) return -1;
    i = skipSpace(text, i + 1);
  }
}

/** Just past the JSON value starting at `i` (scanned, not validated), or -1 when the text ends first. */
export function skipValue(text: string, i: number): number {
  return valueEnd(text, i);
}

/** Whether only whitespace follows `from` in `text`. */
export function onlySpaceFrom(text: string, from: number): boolean {
  return skipSpace(text, from) === text.length;
}

/** Where the string starting at `i` (its opening quote) closes, or -1. */
function stringEnd(text: string, i: number): number {
  if (text.charCodeAt(i) !== QUOTE) return -1;
  // To the next quote at once (most of a Referable's text is strings), then back over the
  // backslashes before it: an odd number escapes it.
  for (let q = text.indexOf('"', i + 1); q >= 0; q = text.indexOf('"', q + 1)) {
    let b = q - 1;
    while (b > i && text.charCodeAt(b) === BACKSLASH) b--;
    if ((q - 1 - b) % 2 === 0) return q;
  }
  return -1;
}

/** Just past the value starting at `i`, or -1 when the text ends first. */
function valueEnd(text: string, i: number): number {
  const first = text.charCodeAt(i);
  if (first === QUOTE) {
    const end = stringEnd(text, i);
    return end < 0 ? -1 : end + 1;
  }
  if (first === OPEN_BRACE || first === OPEN_BRACKET) {
    let depth = 0;
    for (let j = i; j < text.length; j++) {
      const c = text.charCodeAt(j);
      if (c === QUOTE) {
        j = stringEnd(text, j);
        if (j < 0) return -1;
      } else if (c === OPEN_BRACE || c === OPEN_BRACKET) depth++;
      else if (c === CLOSE_BRACE || c === CLOSE_BRACKET) {
        if (--depth === 0) return j + 1;
      }
    }
    return -1;
  }
  // A number, true, false or null: up to the next delimiter.
  let j = i;
  for (; j < text.length; j++) {
    const c = text.charCodeAt(j);
    if (c === COMMA || c === CLOSE_BRACE || c === CLOSE_BRACKET || c <= 0x20) break;
  }
  return j === i ? -1 : j;
}

function skipSpace(text: string, i: number): number {
  while (i < text.length) {
    const c = text.charCodeAt(i);
    if (c !== 0x20 && c !== 0x0a && c !== 0x0d && c !== 0x09) break;
    i++;
  }
  return i;
}
