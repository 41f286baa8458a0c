/**
 * How what an informer reads changes its cache, and what its listeners are told of it: a new
 * list replaces the store (only the differences are told), a watch event changes one object,
 * and an out-of-band read (refresh.ts) replaces an object already cached. Nothing goes back in
 * time: what the cache holds newer than a list or a watch event stays (resourceVersions compare
 * as in object-store.ts).
 */
import type { KubeObject, WatchEvent } from "../kube/client.ts";
import type { InformerEvent } from "./informer-types.ts";
import { compareResourceVersions, type Cached, type ObjectStore } from "./object-store.ts";
import { WatchEventError } from "./restart-reason.ts";

/** What the store's changes need: how two decodings compare, and where their events go. */
export interface StoreSink<T extends Cached> {
  /** Whether two decodings of an object tell a reader nothing new. */
  same: (a: T, b: T) => boolean;
  emit: (event: InformerEvent<T>) => void;
}

/**
 * Tells listeners only what differs between `previous` and the `fresh` list made at
 * `resourceVersion`, keeping in `fresh` what `previous` holds newer. An unpaged list is answered
 * from the watch cache as it is, maybe a little behind what the cache here holds: what the cache
 * holds newer than the list stays (the watch from the list's version brings whatever happened to
 * it since), so nothing goes back in time or vanishes for a moment.
 */
export function applyList<T extends Cached>(
  previous: ObjectStore<T>,
  fresh: ObjectStore<T>,
  resourceVersion: string,
  sink: StoreSink<T>,
): void {
  for (const obj of fresh.values()) {
    const old = previous.getLike(obj);
    if (!old) sink.emit({ type: "ADDED", object: obj, old: undefined });
    else if (compareResourceVersions(old.metadata?.resourceVersion, obj.metadata?.resourceVersion) > 0)
      fresh.set(old);
    else if (!sink.same(old, obj)) sink.emit({ type: "MODIFIED", object: obj, old });
  }
  for (const old of previous.values()) {
    if (fresh.getLike(old)) continue;
    if (compareResourceVersions(old.metadata?.resourceVersion, resourceVersion) > 0) fresh.set(old);
    else sink.emit({ type: "DELETED", object: old, old });
  }
}

/** Replaces a cached object with `item` read out of band, unless the cache holds it newer. */
export function applyRead<T extends Cached>(store: ObjectStore<T>, item: T, sink: StoreSink<T>): void {
  const old = store.getLike(item);
  if (!old) return;
  if (compareResourceVersions(old.metadata?.resourceVersion, item.metadata?.resourceVersion) > 0) return;
  // The same version decoded with nothing new to tell (its reads were there): no event.
  if (sink.same(old, item) && old.metadata?.resourceVersion === item.metadata?.resourceVersion) return;
  store.set(item);
  sink.emit({ type: "MODIFIED", object: item, old });
}

/**
 * Applies one watch event to `store`, telling `advance` the resourceVersion to watch from next
 * (undefined: as before) before anything is decoded. "expired" when the server says the watch's
 * version is gone (410); throws a {@link WatchEventError} for any other ERROR event.
 */
export function applyWatchEvent<T extends Cached>(
  store: ObjectStore<T>,
  event: WatchEvent,
  decode: (obj: KubeObject) => T,
  sink: StoreSink<T> & { advance: (resourceVersion: string | undefined) => void },
  path: string,
): "expired" | undefined {
  const raw = event.object;
  switch (event.type) {
    case "ADDED":
    case "MODIFIED": {
      const rv = raw.metadata?.resourceVersion;
      const old = store.getLike(raw);
      sink.advance(rv);
      // A refresh may have cached a newer version than the watch has reached: keep it.
      if (old && compareResourceVersions(old.metadata?.resourceVersion, rv) > 0) return undefined;
      const obj = decode(raw);
      store.set(obj);
      sink.emit({ type: old ? "MODIFIED" : "ADDED", object: obj, old });
      return undefined;
    }
    case "DELETED": {
      const old = store.getLike(raw);
      store.delete(raw);
      sink.advance(raw.metadata?.resourceVersion);
      sink.emit({ type: "DELETED", object: decode(raw), old });
      return undefined;
    }
    case "BOOKMARK":
      sink.advance(raw.metadata?.resourceVersion);
      return undefined;
    case "ERROR": {
      const status = raw as { code?: number; reason?: string; message?: string };
      if (status.code === 410 || status.reason === "Expired" || status.reason === "Gone") return "expired";
      throw new WatchEventError(path, status.code, status.reason);
    }
    default:
      return undefined;
  }
}
