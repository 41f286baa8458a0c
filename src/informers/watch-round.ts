/**
 * One watch from a resourceVersion to its end, supervised: a watchdog closes a watch silent for
 * `watchdogMs` (bookmarks count as traffic), 410 Gone surfaces as {@link Expired}, and a watch
 * that ends at once with nothing on it is an error, so the caller's backoff applies.
 */
import { isApiError, type KubeClient, type WatchEvent } from "../kube/client.ts";
import { WatchEndedEarly } from "./restart-reason.ts";

/** The watch's resourceVersion was compacted (410 Gone): relist. */
export class Expired extends Error {}

/** Options for {@link watchRound}. */
export interface WatchRoundOptions {
  client: Pick<KubeClient, "watch">;
  path: string;
  resourceVersion: string;
  labelSelector: string | undefined;
  /** The lifetime the server gives the watch, in seconds: a random value in [least, most]. */
  timeoutSeconds: [number, number];
  /** A watch silent this long is closed. */
  watchdogMs: number;
  /** Reads an event from its line in place of JSON.parse (see KubeClient.watch). */
  parseLine?: ((line: string) => WatchEvent | undefined) | undefined;
  /** Handles one event; "expired" ends the watch as 410 Gone, a throw ends it as an error. */
  onEvent: (event: WatchEvent) => "expired" | undefined;
  /** Given a function that closes the watch when it opens, and undefined when it has ended. */
  setStop: (stop: (() => void) | undefined) => void;
  /** False when the informer stopped (a stopped watch ending at once is no error). */
  isRunning: () => boolean;
}

/** Runs one watch to its end: "silent" when the watchdog closed it, "ended" otherwise. */
export async function watchRound(options: WatchRoundOptions): Promise<"ended" | "silent"> {
  const [least, most] = options.timeoutSeconds;
  let watchdog: NodeJS.Timeout | undefined;
  let silent = false;
  let events = 0;
  const openedAt = performance.now();
  let expired = false;
  const stream = options.client.watch(
    options.path,
    {
      resourceVersion: options.resourceVersion,
      allowWatchBookmarks: true,
      labelSelector: options.labelSelector,
      // The server ends every watch after this; spread them so reopens never line up. Each
      // reopen is authorised anew, so access withdrawn is noticed within this bound.
      timeoutSeconds: least + Math.floor(Math.random() * (most - least + 1)),
    },
    (event) => {
      events++;
      armWatchdog();
      if (options.onEvent(event) === "expired") {
        expired = true;
        stream.close();
      }
    },
    options.parseLine,
  );
  const armWatchdog = () => {
    clearTimeout(watchdog);
    watchdog = setTimeout(() => {
      silent = true;
      stream.close();
    }, options.watchdogMs);
  };
  options.setStop(() => stream.close());
  armWatchdog();
  try {
    await stream.done;
  } catch (err) {
    if (isApiError(err, 410)) throw new Expired();
    throw err;
  } finally {
    clearTimeout(watchdog);
    options.setStop(undefined);
  }
  if (expired) throw new Expired();
  // A watch the server (or a proxy) ends at once, with nothing on it, would otherwise be
  // reopened in a hot loop: treat it as an error, so the backoff applies (client-go does too).
  if (!silent && options.isRunning() && events === 0 && performance.now() - openedAt < 1000) {
    throw new WatchEndedEarly(options.path);
  }
  return silent ? "silent" : "ended";
}
