/**
 * A paged list whose page size adapts to the objects' size: a page of 1 MiB ConfigMaps is a few
 * objects, a page of small ones hundreds. Each item is decoded as its bytes arrive (the client
 * never holds a page whole: a page's bytes are the server's to decide, whatever the limit), so a
 * list costs what is kept plus one item.
 */
import { isApiError, type KubeClient, type KubeObject } from "../kube/client.ts";
import type { ListItemFilter } from "../kube/list-stream.ts";
import { ListExpired } from "./restart-reason.ts";

/** The first page's size, before anything is known of the objects' size. */
const FIRST_PAGE = 10;

/**
 * How long an unpaged list may take, from sending to its last byte: the whole collection in one
 * answer (100,000 objects decoded on a loaded replica take minutes). The API server's own
 * request timeout (`--request-timeout`, 60 s by default) still bounds how long it writes.
 */
export const UNPAGED_LIST_TIMEOUT_MS = 300_000;

/** What a list page may be filtered by, and how the list is read. */
export interface ListQuery {
  labelSelector?: string | undefined;
  fieldSelector?: string | undefined;
  /**
   * One request without `limit`, at resourceVersion 0: the API server answers from its watch
   * cache as it is (never from etcd, no wait for the cache to catch up, as client-go's reflector
   * lists) in one response, read item by item here (so it costs one item at a time, as pages
   * do), with no continue token to expire. What a list whose continue token expired falls back
   * to, as client-go's pager does. The answer may be a little behind the newest state.
   * @default false
   */
  unpaged?: boolean | undefined;
}

/** Options for {@link ListPager}. */
export interface ListPagerOptions<T> {
  client: Pick<KubeClient, "request">;
  /** What to keep of each item. */
  decode: (obj: KubeObject) => T;
  /** What each item loses before it is parsed (see list-stream.ts). */
  itemFilter?: ListItemFilter | undefined;
  /** Most objects per page. */
  pageSize: number;
  /** About how many bytes of JSON one page may hold. */
  pageBytes: number;
  /** False stops a list between pages. */
  isRunning: () => boolean;
}

/** Lists collections page by page; remembers the objects' size from one list to the next. */
export class ListPager<T> {
  /** Bytes of JSON per object seen in the last list page, to size the next page. */
  private bytesPerObject: number | undefined;

  private readonly options: ListPagerOptions<T>;

  constructor(options: ListPagerOptions<T>) {
    this.options = options;
  }

  /**
   * Lists `path` page by page, handing each decoded item to `onItem` as its page arrives; returns
   * the list's resourceVersion. Stops early (returning undefined) when `isRunning` turns false.
   * Throws {@link ListExpired} when a page after the first answers 410 (its continue token
   * outlived the server's compaction): the items handed out so far are an incomplete list.
   */
  async list(path: string, query: ListQuery, onItem: (item: T) => void): Promise<string | undefined> {
    const { client, decode, itemFilter, pageSize, isRunning } = this.options;
    const { unpaged, ...selectors } = query;
    let continueToken: string | undefined;
    let resourceVersion = "";
    let limit = unpaged ? undefined : Math.min(pageSize, this.bytesPerObject ? this.pageLimit() : FIRST_PAGE);
    do {
      let length = 0;
      let streamed = 0;
      // Items are decoded as their bytes arrive; a client that answers with the items in the
      // page instead (a fake) is read below.
      const page = await client
        .request<{
          metadata?: { resourceVersion?: string; continue?: string };
          items?: KubeObject[];
        }>("GET", path, {
          query: { ...selectors, limit, continue: continueToken, ...(unpaged && { resourceVersion: "0" }) },
          onBodyLength: (n) => (length = n),
          onItem: (item) => {
            streamed++;
            onItem(decode(item));
          },
          itemFilter,
          ...(unpaged && { timeoutMs: UNPAGED_LIST_TIMEOUT_MS }),
        })
        .catch((err: unknown) => {
          throw continueToken !== undefined && isApiError(err, 410)
            ? new ListExpired(path, { cause: err })
            : err;
        });
      const items = page.items ?? [];
      const count = streamed + items.length;
      if (count > 0 && length > 0) {
        this.bytesPerObject = Math.max(1, length / count);
        if (!unpaged) limit = this.pageLimit();
      }
      // Decode item by item and let go of each whole object at once: the page's array is the
      // only other reference, and it is dropped with `page` at the end of this turn.
      for (let i = 0; i < items.length; i++) {
        const item = items[i]!;
        items[i] = undefined as unknown as KubeObject;
        onItem(decode(item));
      }
      resourceVersion = page.metadata?.resourceVersion ?? resourceVersion;
      continueToken = page.metadata?.continue || undefined;
    } while (continueToken && isRunning());
    return isRunning() ? resourceVersion : undefined;
  }

  /** Objects per page so a page holds about `pageBytes` of JSON. */
  private pageLimit(): number {
    const { pageSize, pageBytes } = this.options;
    return Math.max(1, Math.min(pageSize, Math.floor(pageBytes / (this.bytesPerObject ?? 1))));
  }
}
