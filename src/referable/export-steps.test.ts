import type { ExportRecord, ReferableStatus } from "../api/referable.ts";
import { combineExports, type ExportStep } from "./export-steps.ts";

const key = { kind: "ConfigMap", namespace: "b", name: "app", key: "K" };
const field = { apiVersion: "v1", kind: "Task", namespace: "b", name: "t", fieldPath: "spec.x" };
const ok = (exports: ExportRecord[]): ExportStep => ({
  state: { exports, status: "True", reason: "Exported", message: "" },
  retryAfterMs: undefined,
});

describe("combineExports", () => {
  it("is the one step that ran when the other did not", () => {
    const step = ok([key]);
    expect(combineExports(step, undefined, undefined)).toBe(step);
    expect(combineExports(undefined, step, undefined)).toBe(step);
  });
  it("joins records; False wins over True, with the failing part's reason and message", () => {
    const fields: ExportStep = {
      state: { exports: [field], status: "False", reason: "ExportConflict", message: "owned by x" },
      retryAfterMs: 30_000,
      thenRequeue: true,
    };
    expect(combineExports(ok([key]), fields, undefined)).toEqual({
      state: { exports: [key, field], status: "False", reason: "ExportConflict", message: "owned by x" },
      retryAfterMs: 30_000,
      thenRequeue: true,
    });
  });
  it("a part with nothing to export (null) leaves the other's state as it is", () => {
    const keys: ExportStep = { state: null, retryAfterMs: undefined };
    expect(combineExports(keys, ok([field]), undefined)?.state).toEqual(ok([field]).state);
    expect(combineExports(keys, { state: null, retryAfterMs: 5 }, undefined)).toEqual({
      state: null,
      retryAfterMs: 5,
    });
  });
  it("a part held back with the other exporting nothing carries the stored state over whole", () => {
    const held: ExportStep = { state: undefined, retryAfterMs: 100 };
    expect(combineExports(held, { state: null, retryAfterMs: undefined }, undefined)).toEqual({
      state: undefined,
      retryAfterMs: 100,
    });
  });
  it("a part held back (undefined) keeps its stored records", () => {
    const stored: ReferableStatus = {
      exports: [key, field],
      conditions: [
        { type: "Exported", status: "True", reason: "Exported", message: "", lastTransitionTime: "t" },
      ],
    };
    const held: ExportStep = { state: undefined, retryAfterMs: 100 };
    expect(combineExports(held, ok([field]), stored)).toEqual({
      state: { exports: [key, field], status: "True", reason: "Exported", message: "" },
      retryAfterMs: 100,
    });
  });
});
