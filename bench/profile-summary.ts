/**
 * Top self-time and inclusive-time functions of a V8 .cpuprofile (as `node --cpu-prof` writes
 * it, and `npm run bench -- --profile` into bench/profiles/).
 *
 *   node bench/profile-summary.ts bench/profiles/CPU.….cpuprofile [--top 25] [--until-seconds 30]
 *
 * `--until-seconds` keeps only the samples of the first S seconds of the profile (a cold start,
 * without what the process did after it). Inclusive time counts a function once per sample
 * however often it recurs on that sample's stack.
 */
import { parseArgs } from "node:util";
import { CpuProfile, type ProfileNode } from "./cpu-profile.ts";

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: { top: { type: "string", default: "25" }, "until-seconds": { type: "string" } },
});
const top = Number(values.top);
const untilUs = values["until-seconds"] === undefined ? Infinity : Number(values["until-seconds"]) * 1e6;

for (const file of positionals) {
  const profile = new CpuProfile(file);
  const label = (n: ProfileNode): string => {
    const f = n.callFrame;
    const where = f.url
      ? `${f.url.replace(/^.*\/(src|dist|node_modules)\//, "$1/")}:${f.lineNumber + 1}`
      : "";
    return `${f.functionName || "(anonymous)"} ${where}`.trim();
  };
  const self = new Map<string, number>();
  const incl = new Map<string, number>();
  let total = 0;
  const { busy, idleUs: idle } = profile.samples(0, untilUs);
  for (const { dt, leaf } of busy) {
    total += dt;
    self.set(label(leaf), (self.get(label(leaf)) ?? 0) + dt);
    const seen = new Set<string>();
    for (const node of profile.stack(leaf)) {
      const l = label(node);
      if (seen.has(l)) continue;
      seen.add(l);
      incl.set(l, (incl.get(l) ?? 0) + dt);
    }
  }
  const ms = (us: number) => (us / 1000).toFixed(0).padStart(7);
  const pct = (us: number) => `${((100 * us) / total).toFixed(1).padStart(5)}%`;
  console.log(`${file}\n  busy ${ms(total)} ms, idle ${ms(idle)} ms`);
  for (const [title, m] of [
    ["self", self],
    ["inclusive", incl],
  ] as const) {
    console.log(`  top ${top} by ${title} time:`);
    for (const [k, v] of [...m].sort((a, b) => b[1] - a[1]).slice(0, top))
      console.log(`  ${ms(v)} ms ${pct(v)}  ${k}`);
  }
}
