/**
 * Where a controller's CPU went, by what it was for, from a V8 .cpuprofile (`npm run bench --
 * --profile` writes one per controller into bench/profiles/):
 *
 *   node bench/profile-split.ts bench/profiles/CPU.….cpuprofile [--from-seconds A] [--until-seconds B]
 *
 * Each sample goes to the first part whose files are on its stack, in this order: garbage
 * collection (the leaf), the shard and leader Leases, the Referable cache's decode (a list item
 * or watch line made into a projection or a compact record), the graph and ownership fed by its
 * events, the source cache's decode (projections), reconciles and what they call (resolver,
 * outputs, their requests), the metrics scrape. What only the informers' shared reading is on
 * (a list page's items scanned and parsed, a watch line's framing, the store) is given to the
 * Referables or the sources by the decode sampled nearest in time (a page is read and decoded in
 * one burst). The rest: the HTTP client with no caller of ours on the stack (a response's bytes,
 * TLS), V8's `(program)`, and everything else.
 */
import { parseArgs } from "node:util";
import { type CallFrame, CpuProfile, type ProfileNode } from "./cpu-profile.ts";

/** The parts, in the order a stack is matched against them; `reading` is shared, given out after. */
const PARTS: ReadonlyArray<[part: string, files: RegExp]> = [
  [
    "leases (shards, leader election)",
    /\/runtime\/(shards|held-buckets|shard-view|shard-leases|leader-election)\.js/,
  ],
  [
    "Referables: decode (projection, compact record, watch line)",
    /\/referable\/(cache|compact|spec|watch-line)\.js/,
  ],
  [
    "Referables: graph, ownership, counts",
    /\/referable\/(edges|reference-graph|counts)\.js|\/outputs\/(keys|field)\/ownership\.js/,
  ],
  ["sources: decode (projections)", /\/informers\/(projection|source-cache|label-keys|label-selector)\.js/],
  [
    "reconciles and writes (resolver, outputs, queue)",
    /\/referable\/(reconciler|release|status|state|subscriptions|hand-off|events|export-steps)\.js|\/outputs\/|\/resolver\/|\/runtime\/(workers|workqueue|controller|shard-gate|handler|predicate|source)\.js|\/transform\//,
  ],
  ["module loading and compiling (start)", /node:internal\/modules\//],
  ["metrics scrape", /prom-client|\/referable\/(metrics|metric-families)\.js|\/process\/server/],
  [
    "reading: lists and watches (shared)",
    /\/kube\/(list-stream|json-peek|json-chars)\.js|\/informers\/(informer|list-pager|watch-round|object-store|store-events|refresh|pool)\.js/,
  ],
  [
    "HTTP client (no caller of ours on the stack)",
    /\/kube\/client\.js|node_modules\/undici|node:(_tls|tls|net|http|https|stream|internal\/(tls|stream|streams|net))/,
  ],
];
const READING = "reading: lists and watches (shared)";
const HTTP = PARTS[PARTS.length - 1]![0];

/**
 * What the HTTP client was doing, by the kube client's function nearest the leaf: reading a
 * list's body (`readList`), a watch's (the async loop `watch` starts), or a request's sending
 * and answer (`request`); sockets and TLS with none of them on the stack, "sockets".
 */
function httpPart(frames: readonly CallFrame[]): string {
  for (const f of frames) {
    if (!f.url.endsWith("/kube/client.js")) continue;
    if (f.functionName === "readList") return "list bodies";
    if (f.functionName === "request") return "requests (sending, answers)";
    if (f.functionName === "" || f.functionName === "watch") return "watch streams";
  }
  return "sockets, TLS, undici";
}
const REFERABLES = PARTS[1]![0];
const SOURCES = PARTS[3]![0];

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    "from-seconds": { type: "string" },
    "until-seconds": { type: "string" },
    /** Also lists the N functions (leaves) that took most of the part --detail names (default "other"). */
    other: { type: "string", default: "0" },
    detail: { type: "string", default: "other" },
  },
});
const fromUs = Number(values["from-seconds"] ?? 0) * 1e6;
const untilUs = values["until-seconds"] === undefined ? Infinity : Number(values["until-seconds"]) * 1e6;

for (const file of positionals) {
  const profile = new CpuProfile(file);
  const partOf = new Map<number, string>();
  const classify = (leaf: ProfileNode): string => {
    const hit = partOf.get(leaf.id);
    if (hit !== undefined) return hit;
    const name = leaf.callFrame.functionName;
    let part: string | undefined =
      name === "(garbage collector)" ? "garbage collection" : name === "(program)" ? "(program)" : undefined;
    if (part === undefined) {
      const frames = [...profile.stack(leaf)].map((n) => n.callFrame);
      part = PARTS.find(([, files]) => frames.some((f) => files.test(f.url)))?.[0] ?? "other";
      if (part === HTTP) part = `${HTTP}: ${httpPart(frames)}`;
    }
    partOf.set(leaf.id, part);
    return part;
  };
  // Each sample's time and part; the shared reading is given out below.
  const at: number[] = [];
  const parts: string[] = [];
  const dts: number[] = [];
  const leafs: ProfileNode[] = [];
  const { busy: samples, idleUs: idle } = profile.samples(fromUs, untilUs);
  for (const { t, dt, leaf } of samples) {
    at.push(t);
    parts.push(classify(leaf));
    dts.push(dt);
    leafs.push(leaf);
  }
  // The decode sampled nearest in time, before or after, for each sample of the shared reading.
  const nearest = (i: number, step: 1 | -1): [number, string] | undefined => {
    for (let j = i + step; j >= 0 && j < parts.length; j += step)
      if (parts[j] === REFERABLES || parts[j] === SOURCES) return [Math.abs(at[j]! - at[i]!), parts[j]!];
    return undefined;
  };
  const totals = new Map<string, number>();
  const others = new Map<string, number>();
  const add = (part: string, dt: number) => totals.set(part, (totals.get(part) ?? 0) + dt);
  let busy = 0;
  for (let i = 0; i < parts.length; i++) {
    busy += dts[i]!;
    if (parts[i]!.startsWith(values.detail!)) {
      const f = leafs[i]!.callFrame;
      const k = `${f.functionName} ${f.url.replace(/^.*\/(dist|node_modules)\//, "$1/")}`;
      others.set(k, (others.get(k) ?? 0) + dts[i]!);
    }
    if (parts[i] !== READING) {
      add(parts[i]!, dts[i]!);
      continue;
    }
    const before = nearest(i, -1);
    const after = nearest(i, 1);
    const pick = !before ? after : !after ? before : before[0] <= after[0] ? before : after;
    add(pick ? `${pick[1]}: its reading` : READING, dts[i]!);
  }
  const s = (us: number) => (us / 1e6).toFixed(2).padStart(7);
  console.log(`${file}\n  busy ${s(busy)} s, idle ${s(idle)} s`);
  for (const [part, us] of [...totals].sort((a, b) => b[1] - a[1]))
    console.log(`  ${s(us)} s ${((100 * us) / busy).toFixed(1).padStart(5)}%  ${part}`);
  const shown = Number(values.other);
  if (shown > 0) console.log(`  of ${values.detail}:`);
  for (const [k, us] of [...others].sort((a, b) => b[1] - a[1]).slice(0, shown))
    console.log(`  ${s(us)} s  ${k}`);
}
