import { escapeFieldSelectorValue, nameFieldSelector } from "./field-selector.ts";

describe("field selectors", () => {
  it.each([
    { reason: "a plain name is kept as it is", name: "db", want: "metadata.name=db" },
    { reason: "an equals sign is escaped", name: "a=b", want: "metadata.name=a\\=b" },
    { reason: "a comma would start another term", name: "a,b", want: "metadata.name=a\\,b" },
    { reason: "a backslash is escaped first", name: "a\\,b", want: "metadata.name=a\\\\\\,b" },
    { reason: "every occurrence is escaped", name: "==", want: "metadata.name=\\=\\=" },
  ])("$reason", ({ name, want }) => {
    expect(nameFieldSelector(name)).toBe(want);
  });

  it("escapes only what the API server's parser splits on", () => {
    expect(escapeFieldSelectorValue("a.b-c_d:e!f")).toBe("a.b-c_d:e!f");
  });
});
