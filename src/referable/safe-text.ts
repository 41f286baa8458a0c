/**
 * Text the controller writes where people read it (condition messages, Events) made safe to
 * show: messages echo user input, and a control or bidi character in one could make a terminal
 * or `kubectl describe` show something other than what is stored.
 */

/**
 * C0 and C1 controls, DEL, and the Unicode format characters that reorder or hide text: bidi
 * embeddings, overrides and isolates (U+202A–U+202E, U+2066–U+2069), marks (U+200E, U+200F,
 * U+061C), zero-width characters, line and paragraph separators, and the BOM.
 */
// eslint-disable-next-line no-control-regex
const UNSAFE_TEXT = /[\u0000-\u001f\u007f-\u009f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]/g;

/**
 * `text` with every control, bidi and invisible format character written as a `\uXXXX` escape:
 * messages echo user input (a fieldPath, a label, a name in a message from the API server), and
 * a right-to-left override in one would make `kubectl describe` show a different text than the
 * one stored.
 */
export function escapeUnsafeText(text: string): string {
  return text.replace(UNSAFE_TEXT, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`);
}
