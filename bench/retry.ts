/**
 * The bench's requests survive the load they make: every request is retried when the API server
 * (or the connection to it) failed in a way a retry can fix, with a bounded backoff, and reported
 * (thrown, naming the request) when it cannot; cleanups go page by page. At 30,000 Referables one
 * run died on an unhandled "other side closed" socket error and another when one deletecollection
 * of 30,000 objects got the API server's 60 s 504: this file is what keeps a run of 100,000 alive.
 */
import { isApiError, type KubeClient, type RequestOptions, type WatchStream } from "../src/kube/client.ts";
import { backoffDelay, jittered } from "../src/timing/backoff.ts";
import { sleep as abortableSleep } from "../src/timing/sleep.ts";

/** How requests are retried. */
export interface RetryOptions {
  /** Attempts in all, the first included. @default 8 */
  attempts?: number;
  /** The wait after the first failure; it doubles with each. @default 250 */
  baseMs?: number;
  /** The longest wait between two attempts. @default 10000 */
  maxMs?: number;
  /** The wait itself (tests pass a fake). @default a timer */
  sleep?: (ms: number) => Promise<void>;
  /** Told each failure that will be retried (the bench logs them, so retries are never silent). */
  onRetry?: (what: string, error: Error, attempt: number, waitMs: number) => void;
}

/** The error codes of a connection that failed before or while the answer came (undici's and the OS's). */
const TRANSIENT_CODES = new Set([
  "ECONNRESET",
  "ECONNREFUSED",
  "EPIPE",
  "ETIMEDOUT",
  "UND_ERR_SOCKET", // "other side closed"
  "UND_ERR_CLOSED",
  "UND_ERR_CONNECT_TIMEOUT",
  "UND_ERR_HEADERS_TIMEOUT",
  "UND_ERR_BODY_TIMEOUT",
]);

/**
 * True when sending the request again can succeed: the API server was overloaded (429), failed
 * or timed out (5xx, 504 included), the connection broke (reset, "other side closed"), or the
 * request's own deadline passed. A 4xx other than 429 is an answer, never retried.
 */
export function isTransient(err: unknown): boolean {
  if (isApiError(err)) return err.statusCode === 429 || (err.statusCode >= 500 && err.statusCode <= 599);
  for (let e: unknown = err, depth = 0; e && typeof e === "object" && depth < 5; depth++) {
    const { code, name, message } = e as { code?: unknown; name?: unknown; message?: unknown };
    if (typeof code === "string" && TRANSIENT_CODES.has(code)) return true;
    if (name === "TimeoutError" || name === "AbortError") return true;
    if (typeof message === "string" && /other side closed|socket hang up/i.test(message)) return true;
    e = (e as { cause?: unknown }).cause;
  }
  return false;
}

/** `value` as an Error (a non-Error thrown is wrapped, never rethrown bare). */
function asError(value: unknown): Error {
  return value instanceof Error ? value : new Error(String(value));
}

/**
 * Runs `attempt` until it succeeds, retrying {@link isTransient} failures with a doubling,
 * jittered wait, at most `attempts` times in all. A failure that is not transient is thrown as it
 * came; when the attempts run out, an Error naming `what` and the attempts, the last failure its cause.
 * `attempt` is told whether an earlier attempt failed transiently (it may have been applied).
 */
export async function withRetry<T>(
  what: string,
  attempt: (retried: boolean) => Promise<T>,
  options: RetryOptions = {},
): Promise<T> {
  const attempts = Math.max(1, options.attempts ?? 8);
  const wait = options.sleep ?? ((ms: number) => abortableSleep(ms));
  for (let i = 0; ; i++) {
    try {
      return await attempt(i > 0);
    } catch (caught) {
      const err = asError(caught);
      // An answer (a 404, a 409) is the caller's to read: thrown as it came.
      if (!isTransient(err)) throw err;
      if (i + 1 >= attempts)
        throw new Error(`${what}: still failing after ${attempts} attempts: ${err.message}`, { cause: err });
      const ms = jittered(backoffDelay(i, { baseMs: options.baseMs ?? 250, maxMs: options.maxMs ?? 10_000 }));
      options.onRetry?.(what, err, i + 1, ms);
      await wait(ms);
    }
  }
}

/** What the bench asks of a Kubernetes client. */
export type BenchClient = Pick<KubeClient, "request" | "watch">;

/**
 * A client whose every request is retried ({@link withRetry}). A retried request may have been
 * applied before its connection broke, so the answer a retry gets is read as that attempt would
 * have been: a create that finds its object AlreadyExists (409) and a delete that finds it gone
 * (404) succeeded. Watches are passed through: {@link ReopeningWatch}-style callers reopen them.
 */
export class RetryingClient implements BenchClient {
  private readonly inner: BenchClient;
  private readonly options: RetryOptions;

  constructor(inner: BenchClient, options: RetryOptions = {}) {
    this.inner = inner;
    this.options = options;
  }

  request<T = unknown>(method: string, path: string, options: RequestOptions = {}): Promise<T> {
    return withRetry(
      `${method} ${path}`,
      async (retried) => {
        try {
          return await this.inner.request<T>(method, path, options);
        } catch (err) {
          if (retried && method === "POST" && isApiError(err, 409)) return undefined as T;
          if (retried && method === "DELETE" && isApiError(err, 404)) return undefined as T;
          throw err;
        }
      },
      this.options,
    ) as Promise<T>;
  }

  watch(
    path: string,
    query: RequestOptions["query"],
    onEvent: Parameters<KubeClient["watch"]>[2],
  ): WatchStream {
    return this.inner.watch(path, query, onEvent);
  }
}

/** One page of a list: its items' names and where the next page starts. */
interface Page {
  metadata?: { continue?: string };
  items: Array<{ metadata?: { name?: string } }>;
}

/**
 * The names of the objects at `path` matching `labelSelector`, `limit` at a time: each page is
 * handed to `onPage` before the next is asked for, so a caller deletes as it goes and a list of
 * 100,000 never sits in memory or in one response. An expired continue token (410) starts over.
 */
export async function forEachPage(
  client: BenchClient,
  path: string,
  labelSelector: string,
  onPage: (names: string[]) => Promise<void>,
  limit = 500,
): Promise<void> {
  let token: string | undefined;
  for (;;) {
    let page: Page;
    try {
      page = await client.request<Page>("GET", path, {
        query: { labelSelector, limit, ...(token ? { continue: token } : {}) },
        timeoutMs: 120_000,
      });
    } catch (err) {
      if (token && isApiError(err, 410)) {
        token = undefined; // the snapshot expired: start again from now (deleted ones are gone)
        continue;
      }
      throw err;
    }
    const names = page.items.map((i) => i.metadata?.name).filter((n): n is string => !!n);
    if (names.length > 0) await onPage(names);
    token = page.metadata?.continue || undefined;
    if (!token) return;
  }
}

/** Runs `task` over `items` with at most `limit` in flight; the first failure is thrown after all settle. */
export async function pool<T>(
  items: readonly T[],
  limit: number,
  task: (item: T) => Promise<unknown>,
): Promise<void> {
  let next = 0;
  let failure: unknown;
  let failed = false;
  await Promise.all(
    Array.from({ length: Math.min(limit, items.length) }, async () => {
      while (next < items.length && !failed) {
        try {
          await task(items[next++]!);
        } catch (err) {
          failed = true;
          failure = err;
        }
      }
    }),
  );
  if (failed) throw failure;
}

/**
 * Deletes every object at each of `paths` matching `labelSelector`: first in batches of
 * deletecollection (one per value of `batchLabel`, when the fixture was made with one, each
 * small enough to finish well inside the API server's 60 s), where a 504 only means the server
 * was still deleting; then, page by page, one DELETE per object left, `concurrency` at a time.
 * Returns how many objects the paged pass deleted.
 */
export async function deleteAll(
  client: BenchClient,
  paths: readonly string[],
  labelSelector: string,
  options: { batchLabel?: { key: string; values: readonly string[] }; concurrency?: number } = {},
): Promise<number> {
  const batch = options.batchLabel;
  if (batch)
    for (const path of paths)
      for (const value of batch.values) {
        try {
          await client.request("DELETE", path, {
            query: { labelSelector: `${labelSelector},${batch.key}=${value}` },
            timeoutMs: 120_000,
          });
        } catch (err) {
          // Out of retries (504s): the paged pass below deletes what this batch left.
          if (!isTransient((err as { cause?: unknown }).cause)) throw err;
        }
      }
  let deleted = 0;
  for (const path of paths)
    await forEachPage(client, path, labelSelector, async (names) => {
      await pool(names, options.concurrency ?? 32, async (name) => {
        await client.request("DELETE", `${path}/${name}`, { timeoutMs: 120_000 }).catch((err: unknown) => {
          if (!isApiError(err, 404)) throw err;
        });
        deleted++;
      });
    });
  return deleted;
}
