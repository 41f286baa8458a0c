/**
 * Out-of-band reads of chosen objects (`Informer.refresh`): requests made together are
 * read together, one round at a time; a failed round is retried with backoff.
 */
import { nameFieldSelector } from "../kube/field-selector.ts";
import { sleep } from "../timing/sleep.ts";
import { objectKey } from "./object-store.ts";

/** Which objects `Informer.refresh` reads again: one by name, or those a label selector matches. */
export type RefreshTarget =
  { namespace: string | undefined; name: string } | { namespace: string | undefined; labelSelector: string };

/** One list a refresh round makes: a namespace (all, when undefined), filtered by either selector. */
export interface RefreshRead {
  namespace: string | undefined;
  labelSelector?: string;
  fieldSelector?: string;
}

/** Targets read one by one in a refresh round before a whole namespace is read instead. */
const REFRESH_BY_NAME_MAX = 32;

/** The refresh queue's key of a target: requests for the same objects are read once. */
function refreshKey(target: RefreshTarget): string {
  return "name" in target
    ? `n:${objectKey(target.namespace, target.name)}`
    : `s:${target.namespace ?? ""}:${target.labelSelector}`;
}

/**
 * The lists that read `targets`: one per label selector; names grouped by namespace, each read
 * by a field selector, or the whole namespace when the names are many and a good share of it.
 * `countIn` says how many objects of a namespace are cached.
 */
export function planRefreshReads(
  targets: readonly RefreshTarget[],
  namespaced: boolean,
  countIn: (namespace: string | undefined) => number,
): RefreshRead[] {
  const byNamespace = new Map<string, string[]>();
  const reads: RefreshRead[] = [];
  for (const t of targets) {
    if ("labelSelector" in t) reads.push({ namespace: t.namespace, labelSelector: t.labelSelector });
    else {
      const ns = namespaced ? (t.namespace ?? "") : "";
      let names = byNamespace.get(ns);
      if (!names) byNamespace.set(ns, (names = []));
      names.push(t.name);
    }
  }
  for (const [ns, names] of byNamespace) {
    const namespace = ns || undefined;
    const inNamespace = countIn(namespaced ? namespace : undefined);
    if (names.length > REFRESH_BY_NAME_MAX && names.length * 4 >= inNamespace) reads.push({ namespace });
    else for (const name of names) reads.push({ namespace, fieldSelector: nameFieldSelector(name) });
  }
  return reads;
}

/** Options for {@link RefreshQueue}. */
export interface RefreshQueueOptions {
  /** Reads one round of targets; a throw retries them all with backoff. */
  readRound: (targets: RefreshTarget[]) => Promise<void>;
  /** False ends the rounds. */
  isRunning: () => boolean;
  /** Aborted when the rounds should end: cuts the wait after a failed round short. */
  stopped: () => AbortSignal;
  /** Told of a failed round and how many failed in a row; returns how long to wait (ms). */
  onFailure: (err: unknown, failures: number) => number;
}

/** Collects refresh targets and reads them in rounds, retrying a failed round with backoff. */
export class RefreshQueue {
  private readonly queue = new Map<string, RefreshTarget>();
  private refreshing = false;
  private failures = 0;

  private readonly options: RefreshQueueOptions;

  constructor(options: RefreshQueueOptions) {
    this.options = options;
  }

  add(target: RefreshTarget): void {
    this.queue.set(refreshKey(target), target);
    if (!this.refreshing) {
      this.refreshing = true;
      // After the current burst of requests (a resolver flush asks for many at once).
      void Promise.resolve().then(() => this.rounds());
    }
  }

  private async rounds(): Promise<void> {
    const { readRound, isRunning, stopped, onFailure } = this.options;
    try {
      while (this.queue.size > 0 && isRunning()) {
        const targets = [...this.queue.values()];
        this.queue.clear();
        try {
          await readRound(targets);
          this.failures = 0;
        } catch (err) {
          if (!isRunning()) return;
          for (const t of targets) {
            const key = refreshKey(t);
            if (!this.queue.has(key)) this.queue.set(key, t);
          }
          this.failures++;
          await sleep(onFailure(err, this.failures), stopped());
        }
      }
    } finally {
      // The loop ends with the queue drained (requests made meanwhile joined it) or stopped.
      this.refreshing = false;
    }
  }
}
