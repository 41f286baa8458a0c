/**
 * Quoting of user text for error messages: a message must show exactly what was written, with
 * nothing that a terminal or a `kubectl describe` could hide or reorder.
 */

// Format characters (bidi overrides, zero-width joiners) and line/paragraph separators are
// invisible or reorder text when printed; JSON.stringify leaves them alone.
const INVISIBLE = /[\p{Cf}\p{Zl}\p{Zp}]/gu;

/** Double-quotes `text` as a JSON string, also escaping invisible and direction-changing characters. */
export function quote(text: string): string {
  return JSON.stringify(text).replace(INVISIBLE, (ch) => {
    const code = ch.codePointAt(0) ?? 0;
    return code > 0xffff ? `\\u{${code.toString(16)}}` : `\\u${code.toString(16).padStart(4, "0")}`;
  });
}
