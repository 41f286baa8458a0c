/**
 * Where a request to the API server goes, as undici takes it: an origin, and a path with its
 * query. Kept per client, so a path this project builds costs no URL parse.
 */

/** A request's query parameters; an undefined one is left out. */
export type Query = Record<string, string | number | boolean | undefined> | undefined;

/** The URLs of one API server's requests. */
export class RequestUrls {
  private readonly server: string;
  /** The server's origin and path: undefined until the first request, null when its URL has more. */
  private base: { origin: string; path: string } | null | undefined;

  /** `server`: the API server's URL, without a trailing slash. */
  constructor(server: string) {
    this.server = server;
  }

  /**
   * Where a request goes: `new URL(server + path)` with the query set on it, as origin and
   * path. A path of plain characters (every path this project builds) is joined to the server's
   * own path as the URL parser would leave it, without parsing a URL per request; any other
   * path is parsed.
   */
  of(path: string, query: Query): { origin: string; path: string } {
    let origin: string;
    let pathname: string;
    const base = this.base === undefined ? (this.base = baseOf(this.server) ?? null) : this.base;
    // Dot segments ("/..", "/%2e%2e") are the parser's to resolve.
    if (base && PLAIN_PATH.test(path) && !path.includes("/.") && !/%2e/i.test(path)) {
      origin = base.origin;
      pathname = base.path + path;
    } else {
      const url = new URL(this.server + path);
      origin = url.origin;
      pathname = url.pathname;
      if (url.search) return { origin, path: withQuery(url, query) };
    }
    if (!query) return { origin, path: pathname };
    let params: URLSearchParams | undefined;
    for (const key of Object.keys(query)) {
      const value = query[key];
      if (value !== undefined) (params ??= new URLSearchParams()).set(key, String(value));
    }
    return { origin, path: params ? `${pathname}?${params.toString()}` : pathname };
  }
}

/** Path characters the URL parser keeps as they are (no `?`, `#`, `\\`, spaces or non-ASCII). */
const PLAIN_PATH = /^\/[A-Za-z0-9\-._~!$&'()*+,;=:@%/]*$/;

/** The server's origin and path (without its trailing slash), or undefined when it has more (a query). */
function baseOf(server: string): { origin: string; path: string } | undefined {
  const url = new URL(server);
  if (url.search || url.hash || url.username || url.password) return undefined;
  return { origin: url.origin, path: url.pathname.replace(/\/+$/, "") };
}

/** A parsed URL's path and query with `query` set on it. */
function withQuery(url: URL, query: Query): string {
  for (const [key, value] of Object.entries(query ?? {})) {
    if (value !== undefined) url.searchParams.set(key, String(value));
  }
  return `${url.pathname}${url.search}`;
}
