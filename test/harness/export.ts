/**
 * What the spec.export tests read and wait for: the Exported condition of a Referable, and the
 * ConfigMaps and Secrets it writes into.
 */
import { isApiError, type KubeClient, type KubeObject } from "../../src/kube/client.ts";
import { waitForView, type ReferableView, type WaitForReason } from "./controller.ts";
import { waitFor } from "./kube.ts";

/** A kind spec.export writes keys into. */
export type KeyTargetKind = "ConfigMap" | "Secret";

export interface ExportedCondition {
  type: string;
  status: string;
  reason: string;
  message: string;
}

/** The Referable's Exported condition, or undefined while it has none. */
export function exportedCondition(view: ReferableView): ExportedCondition | undefined {
  const conditions = (view.status.conditions ?? []) as ExportedCondition[];
  return conditions.find((c) => c.type === "Exported");
}

/** Waits until the Referable's Exported condition has `reason` (and `extra` holds); returns it. */
export const waitForExported: WaitForReason = (
  client,
  name,
  reason,
  extra = () => true,
  timeoutMs = 10_000,
) =>
  waitForView(
    client,
    name,
    `to have Exported ${reason}`,
    (v) => exportedCondition(v)?.reason === reason && extra(v),
    {
      timeoutMs,
    },
  );

/** The ConfigMap or Secret `ns/name`, or undefined when it does not exist. */
export async function getKeyTarget(
  client: KubeClient,
  kind: KeyTargetKind,
  ns: string,
  name: string,
): Promise<KubeObject | undefined> {
  const resource = kind === "Secret" ? "secrets" : "configmaps";
  try {
    return await client.request<KubeObject>("GET", `/api/v1/namespaces/${ns}/${resource}/${name}`);
  } catch (err) {
    if (isApiError(err, 404)) return undefined;
    throw err;
  }
}

/** The object's data (empty when there is none, or no object). */
export const dataOf = (o: KubeObject | undefined) => (o?.data ?? {}) as Record<string, string>;

/** Waits until the object's data satisfies `check`; returns the object. */
export async function waitForData(
  client: KubeClient,
  kind: KeyTargetKind,
  ns: string,
  name: string,
  check: (data: Record<string, string>, object: KubeObject | undefined) => boolean,
  timeoutMs = 10_000,
): Promise<KubeObject | undefined> {
  let last: KubeObject | undefined;
  try {
    await waitFor(
      `${kind} ${ns}/${name} to hold the expected data`,
      async () => {
        last = await getKeyTarget(client, kind, ns, name);
        return check(dataOf(last), last);
      },
      { timeoutMs, intervalMs: 20 },
    );
    return last;
  } catch (err) {
    throw new Error(`${(err as Error).message}; last seen: ${JSON.stringify(last?.data ?? null)}`);
  }
}
