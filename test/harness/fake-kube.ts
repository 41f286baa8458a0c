/**
 * Fakes of our own small client interface (never HTTP) for unit tests and the bench: the
 * ConfigMap resource as discovery would describe it, a list answer read through JSON text as the
 * real client reads a page, a watch that stays open and silent until closed, and a synced claim
 * on a source cache.
 */
import type { KindHandle, SourceCache } from "../../src/informers/source-cache.ts";
import type { RequestOptions, WatchStream } from "../../src/kube/client.ts";
import type { ResourceInfo } from "../../src/kube/discovery.ts";

/** ConfigMaps, listable and watchable, as discovery describes them. */
export const CONFIGMAPS: ResourceInfo = {
  group: "",
  version: "v1",
  resource: "configmaps",
  kind: "ConfigMap",
  namespaced: true,
  verbs: ["list", "watch"],
};

/**
 * `body` as the client returns it: through JSON text (so what is kept cannot pin the caller's
 * objects), its length told to `onBodyLength` as the real client does.
 */
export function answerAsJson<T>(body: unknown, options: RequestOptions = {}): T {
  const text = JSON.stringify(body);
  options.onBodyLength?.(text.length);
  return JSON.parse(text) as T;
}

/** A watch that stays open and silent until closed, as a real one with nothing to say. */
export function silentWatch(): WatchStream {
  let end!: () => void;
  const done = new Promise<void>((resolve) => (end = resolve));
  return { done, close: () => end() };
}

/** A claim on `resource` in `cache` that reads nothing but `labelKeys`, once its kind is synced. */
export async function syncedClaim(
  cache: SourceCache,
  labelKeys: readonly string[] = [],
  resource: ResourceInfo = CONFIGMAPS,
): Promise<KindHandle> {
  let synced!: () => void;
  const done = new Promise<void>((resolve) => (synced = resolve));
  const handle = cache.acquire(resource, undefined, {
    extractorsFor: () => [],
    onEvent: () => undefined,
    onState: (s) => s.phase === "Synced" && synced(),
  });
  handle.addLabelKeys(labelKeys);
  // A kind already synced for an earlier claim tells a new one nothing.
  if (handle.state.phase !== "Synced") await done;
  return handle;
}
