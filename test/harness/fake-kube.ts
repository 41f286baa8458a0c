/**
 * Fakes of our own small client interface (never HTTP) for unit tests and the bench: the
 * ConfigMap resource as discovery would describe it, a list answer read through JSON text as the
 * real client reads a page, and a watch that stays open and silent until closed.
 */
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
