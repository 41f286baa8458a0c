import { availability } from "../harness/availability.ts";

describe("availability of a check that needs something", () => {
  const cases: Array<{ reason: string; missing: string | undefined; env: NodeJS.ProcessEnv; want: string }> =
    [
      { reason: "nothing missing: it runs", missing: undefined, env: {}, want: "run" },
      { reason: "nothing missing in CI: it runs", missing: undefined, env: { CI: "true" }, want: "run" },
      {
        reason: "missing on a workstation: skipped, never passed",
        missing: "no prometheus",
        env: {},
        want: "skip",
      },
      {
        reason: "missing in CI (CI=true): fails",
        missing: "no prometheus",
        env: { CI: "true" },
        want: "fail",
      },
      { reason: "missing in CI (CI=1): fails", missing: "no prometheus", env: { CI: "1" }, want: "fail" },
      { reason: "CI=false is not CI", missing: "no prometheus", env: { CI: "false" }, want: "skip" },
    ];
  it.each(cases)("$reason", ({ missing, env, want }) => {
    expect(availability(missing, env)).toBe(want);
  });
});
