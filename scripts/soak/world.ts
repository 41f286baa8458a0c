/** The world the soak's churn plays in: its namespaces, kinds and names, and the seeded dice that pick. */
import type { KubeClient } from "../../src/kube/client.ts";
import { installTestCrd } from "../../test/harness/kube.ts";

/** mulberry32: small, fast, and the same sequence for the same seed everywhere. */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export class Dice {
  private readonly next: () => number;
  constructor(seed: number) {
    this.next = prng(seed);
  }
  /** An integer in [0, n). */
  int(n: number): number {
    return Math.floor(this.next() * n);
  }
  chance(p: number): boolean {
    return this.next() < p;
  }
  pick<T>(items: readonly T[]): T {
    return items[this.int(items.length)]!;
  }
  /** A key of `weights`, with probability proportional to its weight. */
  weighted<K extends string>(weights: Record<K, number>): K {
    const entries = Object.entries(weights) as Array<[K, number]>;
    let roll = this.next() * entries.reduce((sum, [, w]) => sum + w, 0);
    for (const [key, w] of entries) {
      roll -= w;
      if (roll < 0) return key;
    }
    return entries[entries.length - 1]![0];
  }
}

export const GROUP = "soak.test.referable.dev";
export const CR_VERSION = `${GROUP}/v1`;
export const NAMESPACES = ["soak-a", "soak-b", "soak-c"];
export const LEASE_NAMESPACE = "soak-system";
/** Where Referables export: a few objects and keys, so targets are shared, edited and deleted. */
export const EXPORT_NAMESPACE = "soak-out";
export const EXPORT_OBJECTS = 3;
export const EXPORT_KEYS = 3;
export const COLORS = ["red", "green", "blue"];
export const SOURCE_NAMES = 6;
export const REFERABLE_NAMES = 40;
export const RF = "/apis/referable.dev/v1alpha1/referables";

export interface SourceKind {
  apiVersion: string;
  kind: string;
  resource: string;
  namespaced: boolean;
  /** Field paths a Referable of this kind may read (dotted names and [key] only: the oracle's subset). */
  fieldPaths: string[];
}

export const KINDS: SourceKind[] = [
  {
    apiVersion: "v1",
    kind: "ConfigMap",
    resource: "configmaps",
    namespaced: true,
    fieldPaths: ["data.v", "data.v", "data[w]", "metadata.labels[app]"],
  },
  {
    apiVersion: CR_VERSION,
    kind: "Widget",
    resource: "widgets",
    namespaced: true,
    fieldPaths: ["spec.size", "spec.tags[env]", "metadata.labels[app]"],
  },
  {
    apiVersion: CR_VERSION,
    kind: "Gadget",
    resource: "gadgets",
    namespaced: false,
    fieldPaths: ["spec.size", "spec.tags[env]"],
  },
];
/** Never served: Referables of it are KindNotFound (and keep a CRD informer open while they exist). */
export const GHOST = { apiVersion: CR_VERSION, kind: "Ghost" };
export const ORACLE_KINDS = [...KINDS.map((k) => ({ apiVersion: k.apiVersion, kind: k.kind })), GHOST];

export interface SourceSlot {
  kind: SourceKind;
  namespace: string | undefined;
  name: string;
}

/** The path of an export target object. */
export const targetPath = (name: string) => `/api/v1/namespaces/${EXPORT_NAMESPACE}/configmaps/${name}`;

export function slotPath(slot: SourceSlot, withName = true): string {
  const base = slot.kind.apiVersion.includes("/") ? `/apis/${slot.kind.apiVersion}` : `/api/v1`;
  const ns = slot.namespace ? `/namespaces/${slot.namespace}` : "";
  return `${base}${ns}/${slot.kind.resource}${withName ? `/${slot.name}` : ""}`;
}

export const slotKey = (s: SourceSlot) => `${s.kind.kind}/${s.namespace ?? ""}/${s.name}`;

/** Every source slot of the world: a few names per kind and namespace, so names get reused. */
export function allSlots(): SourceSlot[] {
  const slots: SourceSlot[] = [];
  for (const kind of KINDS) {
    for (const namespace of kind.namespaced ? NAMESPACES : [undefined]) {
      for (let i = 0; i < SOURCE_NAMES; i++)
        slots.push({ kind, namespace, name: `${kind.kind.toLowerCase()}-${i}` });
    }
  }
  return slots;
}

export type OpType =
  | "createSource"
  | "updateSource"
  | "relabelSource"
  | "deleteSource"
  | "relabelBurst"
  | "createReferable"
  | "updateReferable"
  | "deleteReferable"
  | "editTarget"
  | "deleteTarget";

export const WEIGHTS: Record<OpType, number> = {
  createSource: 18,
  updateSource: 26,
  relabelSource: 14,
  deleteSource: 9,
  relabelBurst: 2,
  createReferable: 13,
  updateReferable: 10,
  deleteReferable: 8,
  editTarget: 4,
  deleteTarget: 2,
};

/** Namespaces for the sources and the Lease, and the two custom kinds. */
export async function setUpWorld(admin: KubeClient): Promise<void> {
  for (const name of [...NAMESPACES, LEASE_NAMESPACE, EXPORT_NAMESPACE])
    await admin.request("POST", "/api/v1/namespaces", {
      body: { apiVersion: "v1", kind: "Namespace", metadata: { name } },
    });
  await installTestCrd(admin, GROUP, "Widget", "Namespaced");
  await installTestCrd(admin, GROUP, "Gadget", "Cluster");
}
