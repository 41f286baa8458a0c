/**
 * A fake of our own client interface for the cost benches: it serves `n` objects a page at a
 * time (the `limit` and `continue` of a list), and watches that stay silent.
 */
import type { KubeClient, RequestOptions } from "../src/kube/client.ts";
import { answerAsJson, silentWatch } from "../test/harness/fake-kube.ts";

/** One page of `make(0..n)` as the list answers it, through JSON text as the real client reads it. */
export function page<T>(n: number, make: (i: number) => unknown, options: RequestOptions): T {
  const start = Number(options.query?.continue ?? 0);
  const limit = Number(options.query?.limit ?? n);
  const items = Array.from({ length: Math.max(0, Math.min(limit, n - start)) }, (_, k) => make(start + k));
  const next = start + limit < n ? String(start + limit) : undefined;
  // What is kept must not pin the text.
  return answerAsJson<T>({ metadata: { resourceVersion: "200000", continue: next }, items }, options);
}

/** A client whose every list serves `make(0)` to `make(n - 1)`, page by page. */
export function pagedClient(n: number, make: (i: number) => unknown): Pick<KubeClient, "request" | "watch"> {
  return {
    request: async <T>(_method: string, _path: string, options: RequestOptions = {}): Promise<T> =>
      page<T>(n, make, options),
    watch: silentWatch,
  };
}
