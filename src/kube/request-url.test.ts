import { RequestUrls } from "./request-url.ts";

describe("RequestUrls", () => {
  /** What the client sent before it built URLs itself: the server and path parsed as a URL. */
  const parsed = (
    server: string,
    path: string,
    query?: Record<string, string | number | boolean | undefined>,
  ) => {
    const url = new URL(server.replace(/\/+$/, "") + path);
    for (const [key, value] of Object.entries(query ?? {}))
      if (value !== undefined) url.searchParams.set(key, String(value));
    return { origin: url.origin, path: `${url.pathname}${url.search}` };
  };
  const urlOf = (
    server: string,
    path: string,
    query?: Record<string, string | number | boolean | undefined>,
  ) => new RequestUrls(server.replace(/\/+$/, "")).of(path, query);

  it.each([
    ["https://10.0.0.1:443", "/api/v1/namespaces/a/configmaps/b", undefined],
    ["https://Example.COM:6443/", "/apis/referable.dev/v1alpha1/referables/r/status", {}],
    ["https://h/k8s/clusters/c-1", "/api/v1/pods", { limit: 500, continue: "a b+c&d=é", watch: undefined }],
    [
      "http://127.0.0.1:8080",
      "/api/v1/configmaps",
      { fieldSelector: "metadata.name=x", allowWatchBookmarks: true },
    ],
    ["https://h", "/api/v1/namespaces/a/configmaps/%2e%2e/b", undefined],
    ["https://h", "/api/v1/../v2/x", { a: "1" }],
    ["https://h", "/api/v1/x?labelSelector=a%3Db", { limit: 1 }],
    ["https://h", "/api/v1/a b/é#frag", undefined],
    ["https://h?x=1", "/api/v1/pods", { limit: 2 }],
  ])("sends what parsing %s with %s gives", (server, path, query) => {
    expect(urlOf(server, path, query)).toEqual(parsed(server, path, query));
  });
});
