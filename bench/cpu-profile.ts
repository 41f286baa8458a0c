/**
 * A V8 .cpuprofile (as `node --cpu-prof` writes it, and `npm run bench -- --profile` into
 * bench/profiles/), read once for the tools that split it: its samples in a time window, and the
 * stack of each.
 */
import { readFileSync } from "node:fs";

export interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
}
export interface ProfileNode {
  id: number;
  callFrame: CallFrame;
  children?: number[];
}
interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

/** One sample that was not idle: when it was taken (µs from the start), the time it stands for, its leaf. */
export interface Sample {
  t: number;
  dt: number;
  leaf: ProfileNode;
}

/** A profile's nodes and samples; see the module comment. */
export class CpuProfile {
  private readonly profile: Profile;
  private readonly byId: Map<number, ProfileNode>;
  private readonly parent = new Map<number, number>();

  constructor(file: string) {
    this.profile = JSON.parse(readFileSync(file, "utf8")) as Profile;
    this.byId = new Map(this.profile.nodes.map((n) => [n.id, n]));
    for (const n of this.profile.nodes) for (const c of n.children ?? []) this.parent.set(c, n.id);
  }

  /** The nodes from `leaf` up to the root, the leaf first. */
  *stack(leaf: ProfileNode): Iterable<ProfileNode> {
    for (let id: number | undefined = leaf.id; id !== undefined; id = this.parent.get(id))
      yield this.byId.get(id)!;
  }

  /**
   * The samples taken from `fromUs` to `untilUs` (µs from the profile's start), but the idle
   * ones, whose time is summed apart. A sample stands for the time until the next one.
   */
  samples(fromUs: number, untilUs: number): { busy: Sample[]; idleUs: number } {
    const { samples, timeDeltas } = this.profile;
    const busy: Sample[] = [];
    let idleUs = 0;
    let t = 0;
    for (let i = 0; i < samples.length; i++) {
      t += timeDeltas[i] ?? 0;
      if (t < fromUs) continue;
      if (t > untilUs) break;
      const dt = timeDeltas[i + 1] ?? 0;
      const leaf = this.byId.get(samples[i]!)!;
      if (leaf.callFrame.functionName === "(idle)") idleUs += dt;
      else busy.push({ t, dt, leaf });
    }
    return { busy, idleUs };
  }
}
