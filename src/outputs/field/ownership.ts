/**
 * One owner per field: the claims of the Referables naming each field of an object (the first
 * created owns it, see output.ts), and what one object gets under that rule.
 */
import type { Referable } from "../../api/referable.ts";
import { fieldManagerFor } from "../keys/target.ts";
import { createdKey, type ObjectPlan, type Problem } from "./plan.ts";
import { fieldKey, fieldTargetsOf, mergeInto, nest, type ParsedFieldTarget } from "./target.ts";
import type { FieldObjectState } from "./writer.ts";

/** The fields each Referable claims, and so who owns each; one per field output. */
export class FieldClaims {
  /** Per field of an object: the Referables naming it, with their creation order key. Bounded by 16 per Referable. */
  private readonly claims = new Map<string, Map<string, string>>();
  /** Per Referable: the fields it claims. */
  private readonly claimed = new Map<string, Set<string>>();
  private readonly enqueue: ((name: string) => void) | undefined;

  /** `enqueue` asks for a look at a Referable (one it shares a field with changed its claim). */
  constructor(enqueue: ((name: string) => void) | undefined) {
    this.enqueue = enqueue;
  }

  /**
   * Records the fields a cached Referable names (replacing its earlier claims). A spec whose
   * field targets are invalid claims nothing: its own reconcile reports InvalidSpec.
   */
  follow(obj: Referable): void {
    const targets = fieldTargetsOf(obj);
    this.claim(obj.metadata.name, createdKey(obj), typeof targets === "string" ? [] : targets);
  }

  /** Lets go of every claim of a Referable that is gone. */
  forget(name: string): void {
    this.claim(name, "", []);
  }

  /** Records `name`'s claims (replacing the earlier ones) and asks every Referable sharing one to look again. */
  claim(name: string, created: string, targets: readonly ParsedFieldTarget[]): void {
    const next = new Set(targets.map((t) => fieldKey(t, t.fieldPath)));
    const before = this.claimed.get(name) ?? new Set<string>();
    const touched = new Set<string>();
    for (const k of before) {
      if (next.has(k)) continue;
      const c = this.claims.get(k);
      c?.delete(name);
      if (c?.size === 0) this.claims.delete(k);
      else if (c) for (const other of c.keys()) touched.add(other);
    }
    for (const k of next) {
      let c = this.claims.get(k);
      if (!c) this.claims.set(k, (c = new Map()));
      if (c.get(name) !== created) for (const other of c.keys()) if (other !== name) touched.add(other);
      c.set(name, created);
    }
    if (next.size > 0) this.claimed.set(name, next);
    else this.claimed.delete(name);
    for (const other of touched) this.enqueue?.(other);
  }

  /** The Referable that owns a field by the one-owner rule (the first created naming it). */
  ownerOf(key: string): string | undefined {
    const c = this.claims.get(key);
    if (!c) return undefined;
    let best: [string, string] | undefined;
    for (const [name, created] of c) if (!best || created < best[1]) best = [name, created];
    return best?.[0];
  }

  /** The Referable a field manager belongs to, among those claiming `key`. */
  claimantOf(key: string, manager: string): string | undefined {
    for (const name of this.claims.get(key)?.keys() ?? []) if (fieldManagerFor(name) === manager) return name;
    return undefined;
  }
}

/**
 * What one object gets: the body to apply (the Referable's fields there that it owns and that
 * have a value), the IfNotPresent fields to fill, and whether the apply takes a field from a
 * later Referable (force). A field owned elsewhere is a problem, left out.
 */
export function decide(
  claims: FieldClaims,
  name: string,
  what: string,
  p: ObjectPlan,
  state: FieldObjectState,
  value: unknown,
  problems: Problem[],
): { body: Record<string, unknown>; included: Set<string>; fills: ParsedFieldTarget[]; force: boolean } {
  const body: Record<string, unknown> = {};
  const included = new Set<string>();
  const fills: ParsedFieldTarget[] = [];
  let force = false;
  for (const t of p.targets) {
    const f = state.fields.get(t.fieldPath)!;
    const owner = claims.ownerOf(fieldKey(t, t.fieldPath));
    if (owner !== undefined && owner !== name) {
      problems.push({
        reason: "ExportConflict",
        message: `${what}: ${t.fieldPath} is exported by the Referable ${owner}, created first: one field has one owner; export to another field`,
        retry: false,
      });
      continue;
    }
    if (value === undefined) continue; // no value: released (Always), left (IfNotPresent)
    if (t.policy === "IfNotPresent") {
      if (!f.present) fills.push(t);
      continue;
    }
    if (f.others.length > 0 && !f.equal) {
      const strangers = f.others.filter((m) => claims.claimantOf(fieldKey(t, t.fieldPath), m) === undefined);
      if (strangers.length > 0) {
        problems.push({
          reason: "ExportConflict",
          message: `${what}: ${t.fieldPath} is owned by the field manager ${strangers.map((m) => JSON.stringify(m)).join(", ")}: it is never taken; remove the field there (or hand it over), or export to another field`,
          retry: false,
        });
        continue;
      }
      force = true; // held by a later Referable only: the owner takes it over
    }
    mergeInto(body, nest(t.path, value));
    included.add(t.fieldPath);
  }
  return { body, included, fills, force };
}
