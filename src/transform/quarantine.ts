/**
 * Which lane of the transform pool (pool.ts) an expression's evaluation runs in, and the
 * quarantine's memory. Three lanes, each with workers and a queue of its own. An expression's
 * first evaluations run in a probation lane; once one ends within the limits (a value or an
 * error of its own), the expression is trusted and runs in the healthy lane ({@link MAX_TRUSTED}
 * remembered). An expression that hits the deadline or the heap ceiling is quarantined: its later
 * evaluations run in a lane of their own (one worker). So an expression that never failed never
 * waits behind one that did, however many such expressions there are (150 of them, each costing
 * a worker and a deadline, once kept the one worker stalled all the time), and many new hostile
 * expressions cost only the first evaluations of other new ones.
 *
 * Within the quarantine each expression backs off: it fails at once (the same message) for 1 s
 * after its first failure, then 2, 4, ... up to 5 min while it fails on the same input; a new
 * input brings the wait back to at most 1 s. {@link Quarantine.retryAfterMs} says when it is
 * evaluated again (the resolver asks again then), so a source rewritten faster than the
 * expression fails still gets its failure published, and a good input is taken within a second.
 * The quarantine remembers at most {@link MAX_QUARANTINED} expressions, the least recently used
 * forgotten first (one forgotten starts again on probation, and is quarantined again by its next
 * failure).
 */
import { digest } from "../api/digest.ts";
import { stableStringify } from "../api/stable-json.ts";
import type { TransformInput, TransformShape } from "./engine.ts";

/** Expressions the quarantine remembers (the least recently used forgotten first). */
export const MAX_QUARANTINED = 1024;

/** Expressions remembered as having been evaluated within their limits (the least recently used forgotten first). */
export const MAX_TRUSTED = 4096;

/**
 * The lanes: expressions that have been evaluated within their limits before, those not yet
 * (their first evaluations), and the quarantine.
 */
export const HEALTHY = 0;
export const PROBATION = 1;
export const QUARANTINE = 2;
/** One of the three lanes. */
export type Lane = typeof HEALTHY | typeof PROBATION | typeof QUARANTINE;

/** What the quarantine knows of one expression. */
interface Quarantined {
  /** The backoff after its last failure (ms). */
  backoffMs: number;
  /** Until when it fails at once with the input it failed on (ms since the epoch). */
  until: number;
  /** A digest of the input its last evaluation failed on. */
  input: string;
  /** Its last failure's message. */
  message: string;
}

/** The lanes' memory of expressions, by shape and text; see the module comment. */
export class Quarantine {
  private readonly backoff: readonly [number, number];
  /** Expressions (by shape and text) that hit a hard limit: the quarantine, least recently used first. */
  private readonly quarantine = new Map<string, Quarantined>();
  /** Expressions (by shape and text) evaluated within their limits before: the healthy lane's. */
  private readonly trusted = new Map<string, true>();
  /** Evaluations run in the quarantine's lane so far. */
  private laneEvaluations = 0;

  /** `backoff`: [first, longest] wait of an expression that failed again on the same input (ms). */
  constructor(backoff: readonly [number, number]) {
    const [first, longest] = backoff;
    this.backoff = [Math.max(0, first), Math.max(0, first, longest)];
  }

  /** How many expressions are quarantined now (at most {@link MAX_QUARANTINED}). */
  get size(): number {
    return this.quarantine.size;
  }

  /** How many evaluations ran in the quarantine's lane so far. */
  get evaluations(): number {
    return this.laneEvaluations;
  }

  /**
   * How long until the quarantined expression `text` (compiled for `shape`) is evaluated again
   * rather than failed at once; undefined when it is not backing off.
   */
  retryAfterMs(text: string, shape: TransformShape): number | undefined {
    const known = this.quarantine.get(expressionKey(text, shape));
    const left = known ? known.until - Date.now() : 0;
    return left > 0 ? left : undefined;
  }

  /**
   * The lane an evaluation of `key` with `input` runs in, or the message it fails with at once
   * (quarantined, still backing off).
   */
  laneOf(key: string, input: TransformInput): Lane | { fail: string } {
    const known = this.quarantine.get(key);
    if (!known) return this.trusted.has(key) ? HEALTHY : PROBATION;
    // Most recently used last: the first key is the one to forget.
    this.quarantine.delete(key);
    this.quarantine.set(key, known);
    const now = Date.now();
    if (known.until > now) {
      // A new input: the wait goes back to its first step (never longer than it was).
      if (known.input !== inputDigest(input)) {
        known.backoffMs = this.backoff[0];
        known.until = Math.min(known.until, now + this.backoff[0]);
      }
      return { fail: known.message };
    }
    this.laneEvaluations++;
    return QUARANTINE;
  }

  /** Moves `key` to the healthy lane (the most recently trusted last: the first is forgotten first). */
  trust(key: string): void {
    if (this.trusted.has(key) || this.quarantine.has(key)) return;
    this.trusted.set(key, true);
    if (this.trusted.size > MAX_TRUSTED) this.trusted.delete(this.trusted.keys().next().value!);
  }

  /**
   * Quarantines the expression `key` (or backs it off further, when it failed again on the same
   * `input`): it fails at once with that input for the backoff, and runs in the quarantine's
   * lane. Returns the message its evaluations fail with meanwhile.
   */
  remember(key: string, input: TransformInput, message: string): string {
    this.trusted.delete(key);
    const digest = inputDigest(input);
    const known = this.quarantine.get(key);
    const [first, longest] = this.backoff;
    const backoffMs = known?.input === digest ? Math.min(longest, Math.max(1, known.backoffMs) * 2) : first;
    const seconds = backoffMs < 1000 ? `${backoffMs} ms` : `${Math.round(backoffMs / 1000)} s`;
    const said = `${message} (quarantined: evaluated again in ${seconds}, apart from the other transforms)`;
    this.quarantine.delete(key);
    this.quarantine.set(key, { backoffMs, until: Date.now() + backoffMs, input: digest, message: said });
    if (this.quarantine.size > MAX_QUARANTINED) this.quarantine.delete(this.quarantine.keys().next().value!);
    return said;
  }
}

/** The key of an expression compiled for a shape. */
export function expressionKey(text: string, shape: TransformShape): string {
  return `${shape.mode}/${shape.hasDefault}/${text}`;
}

/** A digest of an evaluation's input (asked only of quarantined expressions). */
function inputDigest(input: TransformInput): string {
  return digest(stableStringify(input), 43);
}
