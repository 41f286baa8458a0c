import { createHash } from "node:crypto";
import { digest } from "./digest.ts";

const sha256 = (text: string, encoding: "base64url" | "hex") =>
  createHash("sha256").update(text).digest(encoding);

describe("digest", () => {
  it.each([
    {
      reason: "hex, whole: the field manager of a long name, as earlier releases wrote it",
      got: () => digest("x".repeat(200), 64, "hex"),
      want: sha256("x".repeat(200), "hex"),
    },
    {
      reason: "hex, 16 characters: the legacy field manager's suffix, unchanged",
      got: () => digest("x".repeat(200), 16, "hex"),
      want: sha256("x".repeat(200), "hex").slice(0, 16),
    },
    {
      reason: "base64url by default, cut to the characters asked",
      got: () => digest("status", 20),
      want: sha256("status", "base64url").slice(0, 20),
    },
    {
      reason: "more characters than the digest has: the whole digest",
      got: () => digest("input", 100),
      want: sha256("input", "base64url"),
    },
    {
      reason: "a list: each part followed by a NUL",
      got: () => digest(["a", "b"], 22),
      want: sha256("a\0b\0", "base64url").slice(0, 22),
    },
  ])("$reason", ({ got, want }) => {
    expect(got()).toBe(want);
  });

  it("tells apart lists whose parts join to the same text", () => {
    expect(digest(["ab", "c"], 22)).not.toBe(digest(["a", "bc"], 22));
  });
});
