import { ResolutionError, asError, isResolutionError } from "./errors.ts";

describe("ResolutionError", () => {
  it.each([
    {
      reason: "InvalidSpec" as const,
      retryable: false,
      why: "a spec that cannot parse stays wrong until edited",
    },
    { reason: "SourceNotFound" as const, retryable: true, why: "a source may appear later" },
    { reason: "Forbidden" as const, retryable: true, why: "RBAC may be granted later" },
  ])("$reason is retryable=$retryable ($why)", ({ reason, retryable }) => {
    const err = new ResolutionError(reason, "something");
    expect(err.reason).toBe(reason);
    expect(err.retryable).toBe(retryable);
    expect(isResolutionError(err)).toBe(true);
    expect(err.name).toBe("ResolutionError");
  });

  it("is recognised without instanceof, as a copy from another module instance would be", () => {
    const err = new ResolutionError("KindNotFound", "x");
    const foreign = Object.assign(Object.create(Error.prototype), err);
    foreign[Symbol.for("referable.dev/ResolutionError")] = true;
    expect(isResolutionError(foreign)).toBe(true);
    expect(isResolutionError(new Error("plain"))).toBe(false);
    expect(isResolutionError({ reason: "InvalidSpec" })).toBe(false);
  });

  it("asError never returns a non-Error", () => {
    expect(asError("boom").message).toBe("boom");
    expect(asError(42)).toBeInstanceOf(Error);
    expect(asError(Object.create(null))).toBeInstanceOf(Error);
  });
});
