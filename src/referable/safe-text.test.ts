import { escapeUnsafeText } from "./safe-text.ts";

describe("escapeUnsafeText", () => {
  it.each([
    { text: "data.v", want: "data.v", why: "plain text is left alone" },
    {
      text: "data.\u202eabc",
      want: "data.\\u202eabc",
      why: "a right-to-left override would reverse what follows",
    },
    { text: "a\u2066b\u2069c", want: "a\\u2066b\\u2069c", why: "bidi isolates" },
    { text: "a\u200fb\u061c", want: "a\\u200fb\\u061c", why: "bidi marks" },
    {
      text: "a\u200bb\ufeffc",
      want: "a\\u200bb\\ufeffc",
      why: "zero-width characters and the BOM hide text",
    },
    { text: "line\nnext\r\t", want: "line\\u000anext\\u000d\\u0009", why: "C0 controls, newlines included" },
    { text: "\u001b[31mred", want: "\\u001b[31mred", why: "a terminal escape sequence" },
    { text: "a\u0085b\u007f", want: "a\\u0085b\\u007f", why: "C1 controls and DEL" },
    { text: "a\u2028b", want: "a\\u2028b", why: "the line separator" },
    { text: "naïve → 日本語 ✓", want: "naïve → 日本語 ✓", why: "other non-ASCII text is kept as it is" },
  ])("$why", ({ text, want }) => {
    expect(escapeUnsafeText(text)).toBe(want);
  });
});
