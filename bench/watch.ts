/**
 * A watch the bench can leave open for an hour: when its stream ends or breaks ("other side
 * closed", an API server busy with 100,000 objects), it is opened again from the last
 * resourceVersion seen, after a pause; when that version has expired (410), `relist` is called to
 * start again from a fresh list. A stream's failure is never an unhandled rejection.
 */
import { isApiError, type KubeObject, type RequestOptions, type WatchEvent } from "../src/kube/client.ts";
import { sleep } from "../src/timing/sleep.ts";
import type { BenchClient } from "./retry.ts";

/** Options of {@link reopeningWatch}. */
export interface ReopeningWatchOptions {
  /** Where to start: the resourceVersion of the list the caller made. */
  resourceVersion: string;
  query?: RequestOptions["query"];
  /**
   * Called when the last version seen expired (410): lists again and returns the new list's
   * resourceVersion. @default none: the watch reopens without a version (what exists comes as ADDED)
   */
  relist?: () => Promise<string>;
  /** Told each reopening, with why. */
  onReopen?: (why: string) => void;
  /** The pause before a reopening. @default 500 */
  pauseMs?: number;
}

/** A watch that reopens itself; `close()` ends it for good. */
export interface ReopeningWatch {
  close(): void;
}

/** Opens a watch of `path` that reopens itself; see the module comment. */
export function reopeningWatch(
  client: BenchClient,
  path: string,
  options: ReopeningWatchOptions,
  onEvent: (event: WatchEvent) => void,
): ReopeningWatch {
  let closed = false;
  let rv = options.resourceVersion;
  let current: { close(): void } | undefined;
  const stop = new AbortController();
  const loop = async () => {
    while (!closed) {
      let expired = false;
      const stream = client.watch(
        path,
        { ...options.query, resourceVersion: rv, allowWatchBookmarks: true },
        (e) => {
          if (e.type === "ERROR") {
            // A Status in the stream: 410 when the version we watch from is gone.
            expired = (e.object as { code?: number }).code === 410;
            stream.close();
            return;
          }
          const v = (e.object as KubeObject | undefined)?.metadata?.resourceVersion;
          if (v) rv = v;
          if (e.type !== "BOOKMARK") onEvent(e);
        },
      );
      current = stream;
      let why = "the stream ended";
      try {
        await stream.done;
      } catch (err) {
        why = (err as Error).message;
        expired ||= isApiError(err, 410);
      }
      if (expired) {
        why = "the version expired: listing again";
        if (options.relist) {
          try {
            rv = await options.relist();
          } catch (listErr) {
            why = `listing again failed: ${(listErr as Error).message}`;
          }
        } else rv = ""; // from now: the server sends what exists as ADDED first
      }
      if (closed) return;
      options.onReopen?.(why.slice(0, 200));
      await sleep(options.pauseMs ?? 500, stop.signal);
    }
  };
  void loop();
  return {
    close() {
      closed = true;
      stop.abort();
      current?.close();
    },
  };
}
