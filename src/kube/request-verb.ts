/** The Kubernetes verb of a request, for its observation (metrics, benchmarks). */

/** get, list, watch, create, update, patch or delete, from the method, the path and the query. */
export function verbOf(method: string, path: string, query: Record<string, unknown> | undefined): string {
  switch (method) {
    case "GET": {
      if (query?.watch) return "watch";
      // A collection path ends in a plural resource: /api/v1/configmaps, /apis/g/v/namespaces/n/kind.
      const parts = path.split("?")[0]!.split("/").filter(Boolean);
      const isGroup = parts[0] === "apis";
      const base = isGroup ? 3 : 2;
      const rest = parts.length - base;
      if (rest <= 0) return "get";
      const namespaced = parts[base] === "namespaces" && rest >= 3;
      return (namespaced ? rest - 2 : rest) % 2 === 1 ? "list" : "get";
    }
    case "POST":
      return "create";
    case "PUT":
      return "update";
    case "PATCH":
      return "patch";
    case "DELETE":
      return "delete";
    default:
      return method.toLowerCase();
  }
}
