/**
 * The takeover of keys from a field manager of earlier releases. A Referable whose name is too
 * long for `referable.dev/<name>` had the manager `name[0:97]-sha256[0:16]`, which a crafted
 * 114-character name could equal; it now has `referable.dev/h-<sha256>` (target.ts). What it
 * wrote under the old manager moves to the new one, and the old one lets go of exactly those
 * keys, so a colliding name's keys under it stay.
 */
import {
  applyTarget,
  readTarget,
  type ApplyConfig,
  type Client,
  type ExportOptions,
  type TargetState,
} from "./writer.ts";
import { legacyFieldManagerFor, type TargetObject } from "./target.ts";

/**
 * Moves to `options.fieldManager` the keys among `keys` that `legacy` (the same writer's manager
 * in an earlier release) owns in `object`, then lets `legacy` go of them, keeping whatever else
 * it owns (a key of another writer whose manager had the same name). The apply is forced only
 * when no manager but these two owns a key it sets: a conflict with anyone else is reported,
 * never forced. Resolves whether anything was moved.
 */
export async function takeOver(
  client: Client,
  object: TargetObject,
  keys: Record<string, string>,
  creator: string | undefined,
  legacy: string,
  options: ExportOptions,
): Promise<boolean> {
  const wanted = Object.keys(keys);
  const state = await readTarget(client, object, wanted, { ...options, fieldManager: legacy });
  const moved = wanted.filter((k) => state.owned.has(k));
  if (!state.exists || moved.length === 0) return false;
  const force = wanted.every((k) =>
    [...(state.managersOf.get(k) ?? [])].every((m) => m === legacy || m === options.fieldManager),
  );
  const config: ApplyConfig = { keys };
  if (creator !== undefined && state.createdBy === creator) config.createdBy = creator;
  await applyTarget(client, object, config, state.uid, options, force);
  await letGo(client, object, state, moved, { ...options, fieldManager: legacy });
  return true;
}

/**
 * Lets the manager of `options` go of `keys` in `object` (as `state`, read under that manager,
 * found it), keeping every other field it owns. Resolves whether it owned any of them.
 */
async function letGo(
  client: Client,
  object: TargetObject,
  state: TargetState,
  keys: readonly string[],
  options: ExportOptions,
): Promise<boolean> {
  if (!state.exists || !keys.some((k) => state.owned.has(k))) return false;
  // No prototype: "__proto__" is a valid ConfigMap key and an assignment must not drop it.
  const rest: Record<string, string> = Object.create(null);
  for (const k of state.owned) {
    const v = state.values.get(k);
    if (!keys.includes(k) && v !== undefined) rest[k] = v;
  }
  const config: ApplyConfig =
    Object.keys(rest).length === 0
      ? { keys: {}, mark: false }
      : { keys: rest, ...(state.createdBy !== undefined && { createdBy: state.createdBy }) };
  await applyTarget(client, object, config, state.uid, options);
  return true;
}

/**
 * {@link takeOver} from the Referable `name`'s manager of earlier releases, if its name had one.
 * Nothing to take over (no key to write, a name that fits): no request.
 */
export async function takeOverLegacy(
  client: Client,
  object: TargetObject,
  keys: Record<string, string>,
  name: string,
  options: ExportOptions,
): Promise<boolean> {
  const legacy = legacyFieldManagerFor(name);
  if (legacy === undefined || Object.keys(keys).length === 0) return false;
  return takeOver(client, object, keys, name, legacy, options);
}

/**
 * Lets the Referable `name`'s manager of earlier releases, if its name had one, go of `keys` in
 * `object`, keeping whatever else it owns. Resolves whether it owned any of them.
 */
export async function releaseLegacy(
  client: Client,
  object: TargetObject,
  keys: readonly string[],
  name: string,
  options: ExportOptions,
): Promise<boolean> {
  const legacy = legacyFieldManagerFor(name);
  if (legacy === undefined) return false;
  const legacyOptions = { ...options, fieldManager: legacy };
  return letGo(client, object, await readTarget(client, object, keys, legacyOptions), keys, legacyOptions);
}
