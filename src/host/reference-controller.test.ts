import { createReferenceController, type ReferenceControllerOptions } from "./reference-controller.ts";

const base = {
  kubeConfig: {} as never,
  resolver: { watch: () => ({ close: () => undefined }) } as never,
  group: "demo.referable.dev",
  version: "v1alpha1",
  plural: "tasks",
  referencesOf: () => [],
  reconcile: async () => undefined,
} satisfies ReferenceControllerOptions<never>;

describe("createReferenceController", () => {
  it.each([
    {
      reason: "a typo of an option",
      extra: { backofMs: [1, 2] },
      want: /unknown key "backofMs".*did you mean "backoffMs"\?/,
    },
    {
      reason: "another shape's option",
      extra: { selector: {} },
      want: /unknown key "selector" in the options of createReferenceController/,
    },
  ])("refuses $reason before connecting anywhere", ({ extra, want }) => {
    expect(() => createReferenceController({ ...base, ...extra } as never)).toThrow(want);
  });

  it("accepts every documented option, and connects nothing until start", () => {
    const loop = createReferenceController({
      ...base,
      namespace: "a",
      backoffMs: [10, 100],
      logger: undefined as never,
    });
    expect(loop.subscriptionsOf("a", "x")).toBe(0);
  });
});
