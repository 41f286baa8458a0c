/**
 * The controller's budget for the reads it makes on its own initiative: drift reads, the GET of
 * an object a field was exported into that nothing says has changed (docs/api.md, "Drift, with a
 * bound"), and the reads again of a target that was missing. Writes have had a budget from the
 * start (write-policy.ts); reads had none, so 100 Referables with 16 field targets each made
 * 3,200 GETs a minute between them, and more Referables more.
 *
 * One token bucket for the whole controller (`rate` reads a second, as many at once after a
 * quiet spell), shared fairly between Referables: a Referable that finds it empty reserves the
 * next token and holds at most that one place in the line, so a Referable with many targets
 * reads one of them per turn, and every other Referable's turn comes in between (as API Priority
 * and Fairness shares a server between flows). A wait is a requeue after the reserved time,
 * never a sleep. Reads a change calls for (the value or the Referable changed) are not counted
 * here: they come with a write, which the write policy paces.
 *
 * Pure logic on a clock given as milliseconds, for fake time.
 */
import { TokenBucket } from "../timing/token-bucket.ts";

/** The defaults: 10 reads a second, 10 at once. */
export const READ_BUDGET_DEFAULTS = Object.freeze({ rate: 10 });

/** How long after it came due a place nobody took up is forgotten by {@link ReadBudget.waiting}. */
const ABANDONED_MS = 60_000;

/** One Referable's place in the line of {@link ReadBudget}. */
export interface ReadGate {
  /** When the token it reserved is due (the budget's clock); undefined when it holds none. */
  readUntil: number | undefined;
}

/** What a {@link ReadBudget} counts, for metrics; must not throw. */
export interface ReadBudgetObserver {
  /** A read was let through. */
  onRead?: () => void;
}

/** See the module comment. */
export class ReadBudget {
  private readonly bucket: TokenBucket | undefined;
  private readonly now: () => number;
  private readonly observer: ReadBudgetObserver;
  /** The gates holding a place: at most one per Referable, each dropped when it reads. */
  private readonly holders = new Set<ReadGate>();
  /** Past this many holders, the abandoned ones are forgotten (so the set stays bounded unscraped). */
  private purgeAt = 1024;

  /** `rate` reads a second over the whole controller (0: no budget). */
  constructor(
    rate: number = READ_BUDGET_DEFAULTS.rate,
    now: () => number = () => performance.now(),
    observer: ReadBudgetObserver = {},
  ) {
    if (!(rate >= 0)) throw new RangeError("the read budget must not be negative");
    this.now = now;
    this.bucket = rate > 0 ? new TokenBucket(rate, Math.max(1, rate), now()) : undefined;
    this.observer = observer;
  }

  /**
   * How many Referables wait for their turn now (each holds at most one place). A place not
   * taken up a minute after it came due (its Referable went) is forgotten here.
   */
  get waiting(): number {
    const now = this.now();
    let n = 0;
    for (const gate of this.holders) {
      const due = gate.readUntil;
      if (due === undefined || now - due > ABANDONED_MS) this.holders.delete(gate);
      else if (due > now) n++;
    }
    return n;
  }

  /**
   * Whether the Referable of `gate` may read now: 0, and the read is counted. Else the
   * milliseconds until its turn; its place is kept in `gate` (taken once, whatever it asks
   * meanwhile), so it reads when it looks again after that.
   */
  admit(gate: ReadGate): number {
    const now = this.now();
    if (gate.readUntil !== undefined) {
      const wait = gate.readUntil - now;
      if (wait > 0) return Math.ceil(wait);
      gate.readUntil = undefined;
      this.holders.delete(gate);
      this.observer.onRead?.();
      return 0;
    }
    if (!this.bucket) {
      this.observer.onRead?.();
      return 0;
    }
    const wait = this.bucket.tryTake(now);
    if (wait === 0) {
      this.observer.onRead?.();
      return 0;
    }
    const reserved = this.bucket.reserve(now);
    gate.readUntil = now + reserved;
    this.holders.add(gate);
    if (this.holders.size > this.purgeAt) this.purgeAt = 2 * this.waiting + 1024;
    return Math.max(1, reserved);
  }

  /** Gives back the place `gate` holds (the Referable is gone, or its memory dropped). */
  release(gate: ReadGate): void {
    if (gate.readUntil === undefined) return;
    gate.readUntil = undefined;
    this.holders.delete(gate);
  }
}
