/**
 * Records every result a resolver subscription pushes and lets a test wait, with a deadline,
 * for the first one that satisfies a predicate: event-driven, no polling.
 */
import type { ResolutionResult } from "../../src/resolver/types.ts";

type Waiter = { pred: (r: ResolutionResult) => boolean; resolve: (r: ResolutionResult) => void };

export class ResultRecorder {
  readonly results: ResolutionResult[] = [];
  private waiters: Waiter[] = [];
  private consumed = 0;

  /** Pass this as the watch callback. */
  readonly push = (result: ResolutionResult): void => {
    this.results.push(result);
    for (const waiter of [...this.waiters]) {
      if (waiter.pred(result)) {
        this.waiters.splice(this.waiters.indexOf(waiter), 1);
        this.consumed = this.results.length;
        waiter.resolve(result);
      }
    }
  };

  /** The latest result pushed. */
  get last(): ResolutionResult | undefined {
    return this.results[this.results.length - 1];
  }

  /**
   * Resolves with the first result not yet returned by an earlier `next` (results are taken in
   * the order they were pushed) that satisfies `pred`; rejects after `timeoutMs`.
   */
  next(what: string, pred: (r: ResolutionResult) => boolean, timeoutMs = 10_000): Promise<ResolutionResult> {
    for (let i = this.consumed; i < this.results.length; i++) {
      if (pred(this.results[i]!)) {
        this.consumed = i + 1;
        return Promise.resolve(this.results[i]!);
      }
    }
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiters = this.waiters.filter((w) => w !== waiter);
        const seen = this.results.map(describe).join(" → ");
        reject(
          new Error(`timed out after ${timeoutMs} ms waiting for ${what}; pushed: ${seen || "nothing"}`),
        );
      }, timeoutMs);
      const waiter: Waiter = {
        pred,
        resolve: (r) => {
          clearTimeout(timer);
          resolve(r);
        },
      };
      this.waiters.push(waiter);
    });
  }

  /** Waits for a result with this reason (a Ready=True reason or an error reason). */
  reason(reason: string, timeoutMs?: number): Promise<ResolutionResult> {
    return this.next(`reason ${reason}`, (r) => reasonOf(r) === reason, timeoutMs);
  }
}

export function reasonOf(result: ResolutionResult): string {
  return result.ok ? result.reason : result.error.reason;
}

function describe(result: ResolutionResult): string {
  return result.ok ? result.reason : `${result.error.reason}(${result.error.message.slice(0, 80)})`;
}
