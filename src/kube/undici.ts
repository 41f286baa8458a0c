/**
 * The two parts of undici the client uses, each from its own file: undici's index loads all of
 * it (fetch, WebSocket, EventSource, caches, mocks, proxies), which an idle controller keeps in
 * its RSS for nothing (BENCHMARKS.md, "At rest"). undici's version is pinned in package.json; a
 * renamed file fails at start-up, loudly.
 */
import { createRequire } from "node:module";
import type * as Undici from "undici";

const require = createRequire(import.meta.url);

/** undici's connection-pooling dispatcher. */
export const Agent = require("undici/lib/dispatcher/agent.js") as typeof Undici.Agent;

/** undici's `request` API as written: a function of its dispatcher (`this`). */
const requestApi = require("undici/lib/api/api-request.js") as (
  this: Undici.Dispatcher,
  options: Undici.Dispatcher.RequestOptions,
) => Promise<Undici.Dispatcher.ResponseData>;

/** Options of {@link request}: undici's request options, less the URL's parts. */
export type RequestOptions = Omit<Undici.Dispatcher.RequestOptions, "origin" | "path">;

/** `dispatcher.request()` for `origin` and `path` (with its query), as undici's own `request(url, { dispatcher })`. */
export function request(
  dispatcher: Undici.Dispatcher,
  origin: string,
  path: string,
  options: RequestOptions,
): Promise<Undici.Dispatcher.ResponseData> {
  return requestApi.call(dispatcher, { ...options, origin, path });
}
