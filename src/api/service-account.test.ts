import { describe, expect, it } from "@jest/globals";
import { actingAccount, parseServiceAccount, serviceAccountProblem } from "./service-account.ts";

describe("serviceAccountProblem", () => {
  it.each([
    { reason: "a namespace and a name", ref: { namespace: "team-a", name: "reader.v1" }, want: undefined },
    {
      reason: "not an object",
      ref: "team-a/reader",
      want: "x must be an object with a namespace and a name",
    },
    { reason: "a list", ref: [], want: "x must be an object with a namespace and a name" },
    {
      reason: "a field of another kind (a typo) is refused, not ignored",
      ref: { namespace: "team-a", name: "reader", kind: "User" },
      want: 'x has an unknown field "kind": it takes namespace and name',
    },
    {
      reason: "a namespace that is no DNS label",
      ref: { namespace: "Team_A", name: "reader" },
      want: "x.namespace must be a namespace's name (a DNS label of at most 63 characters)",
    },
    {
      reason: "a missing name",
      ref: { namespace: "team-a" },
      want: "x.name must be a ServiceAccount's name (a DNS subdomain of at most 253 characters)",
    },
  ])("$reason", ({ ref, want }) => {
    expect(serviceAccountProblem(ref, "x")).toBe(want);
  });
});

describe("parseServiceAccount", () => {
  it("reads NAMESPACE/NAME", () => {
    expect(parseServiceAccount("tenants/nobody")).toEqual({ namespace: "tenants", name: "nobody" });
  });
  it.each(["nobody", "a/b/c", "/nobody", "tenants/"])("refuses %j", (text) => {
    expect(() => parseServiceAccount(text)).toThrow(JSON.stringify(text));
  });
});

describe("actingAccount", () => {
  const fallback = { namespace: "tenants", name: "nobody" };
  it("is the spec's account, else the fallback, else none", () => {
    const own = { namespace: "team-a", name: "reader" };
    expect(actingAccount({ serviceAccountRef: own }, fallback)).toEqual(own);
    expect(actingAccount({}, fallback)).toBe(fallback);
    expect(actingAccount(undefined, undefined)).toBeUndefined();
  });
  it("says what is wrong with a malformed reference, never falls back for it", () => {
    expect(actingAccount({ serviceAccountRef: { name: "x" } }, fallback)).toMatch(
      /^spec\.serviceAccountRef\.namespace must be/,
    );
  });
});
