/**
 * The messages between the transform pool (./pool.ts) and its workers (./worker.ts). Values
 * cross as structured clones: plain JSON in, plain JSON out.
 */
import type { FailureReason } from "../api/errors.ts";
import type { EvaluateLimits, TransformInput, TransformShape } from "./engine.ts";

/** What a worker starts with. */
export interface WorkerData {
  /**
   * 24 bytes shared with the pool: an Int32 at 0, the id of the job running (0: none); a
   * Float64 at 8, when it started (ms since the epoch, fractional); a Float64 at 16, the
   * thread's CPU time then (ms).
   */
  state: SharedArrayBuffer;
}

/** One evaluation. */
export interface Job {
  id: number;
  text: string;
  shape: TransformShape;
  input: TransformInput;
  limits: EvaluateLimits;
}

/** Pool to worker: evaluate these, in order. */
export interface JobMessage {
  jobs: Job[];
}

/** Worker to pool: the outcome of each job of one {@link JobMessage}. */
export interface ResultMessage {
  results: Array<
    | { id: number; ok: true; value: unknown; cost: number }
    | { id: number; ok: false; reason: FailureReason; message: string }
  >;
}

/** Worker to pool, once, when it can take jobs; `tid` is its Linux thread id, or -1. */
export interface ReadyMessage {
  ready: true;
  tid: number;
}
