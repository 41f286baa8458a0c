/**
 * The one digest: SHA-256, written as base64url (or hex where a name must stay as earlier
 * releases wrote it), cut to the characters a caller needs. Imports nothing of the project.
 */
import { createHash, hash } from "node:crypto";

/** How a digest is written: base64url (6 bits a character), or hex (4). */
export type DigestEncoding = "base64url" | "hex";

/**
 * The first `chars` characters of the SHA-256 of `input` (of each part followed by a NUL, for a
 * list), as `encoding` writes it; the whole digest when it is shorter (43 characters of
 * base64url, 64 of hex).
 *
 * The text is a string of its own: a slice of 13 characters or more keeps the whole digest's
 * text alive beside it (V8's sliced strings), which a digest kept per object or subscription
 * must not.
 */
export function digest(
  input: string | readonly string[],
  chars: number,
  encoding: DigestEncoding = "base64url",
): string {
  let text: string;
  if (typeof input === "string") text = hash("sha256", input, encoding);
  else {
    const h = createHash("sha256");
    for (const part of input) h.update(part).update("\0");
    text = h.digest(encoding);
  }
  if (chars >= text.length) return text;
  // JSON.parse makes a new string, at a third of the cost of a Buffer's toString; neither
  // base64url nor hex has a character to escape.
  return JSON.parse(`"${text.slice(0, chars)}"`) as string;
}
