/**
 * Checks that need something the machine may lack (a Prometheus binary, kubectl): skipped, and
 * reported by Jest as skipped, where it is missing; failed in CI (CI=true), which installs
 * everything and must never let a check it cannot run count as passed or quietly vanish.
 */

/** What to do with a check that needs something: run it, skip it, or fail it. */
export type Availability = "run" | "skip" | "fail";

/** `missing` says why the check cannot run (undefined when it can); CI turns a skip into a failure. */
export function availability(
  missing: string | undefined,
  env: NodeJS.ProcessEnv = process.env,
): Availability {
  if (missing === undefined) return "run";
  return env.CI === "true" || env.CI === "1" ? "fail" : "skip";
}

function failing(missing: string): (name: string, fn?: unknown, timeout?: number) => void {
  return (name, _fn, timeout) =>
    it(
      name,
      () => {
        throw new Error(`this check cannot run here, and CI must run it: ${missing}`);
      },
      timeout,
    );
}

/** `it` when nothing is missing; else `it.skip` (the reason on stderr), or a failing test in CI. */
export function itIf(missing: string | undefined): jest.It {
  const what = availability(missing);
  if (what === "run") return it;
  if (what === "fail") return failing(missing!) as unknown as jest.It;
  process.stderr.write(`SKIPPED (reported as skipped): ${missing}\n`);
  return it.skip;
}

/** `describe` when nothing is missing; else `describe.skip` (the reason on stderr), or one failing test in CI. */
export function describeIf(missing: string | undefined): jest.Describe {
  const what = availability(missing);
  if (what === "run") return describe;
  if (what === "fail")
    return ((name: string) =>
      describe(name, () => failing(missing!)("can run", undefined))) as unknown as jest.Describe;
  process.stderr.write(`SKIPPED (reported as skipped): ${missing}\n`);
  return describe.skip;
}
