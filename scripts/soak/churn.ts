/** The churn: one operation at a time on sources, Referables and export targets, as the dice pick. */
import type { KubeClient, KubeObject } from "../../src/kube/client.ts";
import { SHARD_LABEL } from "../../test/harness/controller.ts";
import type { Dice } from "./world.ts";
import {
  allSlots,
  COLORS,
  EXPORT_KEYS,
  EXPORT_NAMESPACE,
  EXPORT_OBJECTS,
  GHOST,
  KINDS,
  NAMESPACES,
  type OpType,
  REFERABLE_NAMES,
  RF,
  slotKey,
  slotPath,
  SOURCE_NAMES,
  type SourceSlot,
  targetPath,
  WEIGHTS,
} from "./world.ts";

/** The churn: the model of what exists (kept from the API server's answers) and the operations. */
export class Churn {
  readonly counts: Record<string, number> = {};
  failed = 0;
  /** The first few refusals, for the log. */
  readonly firstErrors: string[] = [];
  private readonly dice: Dice;
  private readonly admin: KubeClient;
  private readonly shard: string;
  private readonly slots = allSlots();
  private readonly present = new Map<string, SourceSlot>();
  private readonly referables = new Set<string>();
  private serial = 0;

  constructor(dice: Dice, admin: KubeClient, shard: string) {
    this.dice = dice;
    this.admin = admin;
    this.shard = shard;
  }

  get total(): number {
    return Object.values(this.counts).reduce((a, b) => a + b, 0);
  }

  /** Names of the Referables that exist now. */
  referableNames(): string[] {
    return [...this.referables];
  }

  async step(): Promise<void> {
    let op = this.dice.weighted(WEIGHTS);
    // Keep the model's choices possible: nothing to update means create.
    if (op !== "createSource" && op !== "createReferable") {
      if (op.endsWith("Referable") && this.referables.size === 0) op = "createReferable";
      else if (!op.endsWith("Referable") && this.present.size === 0) op = "createSource";
    }
    if (op === "createSource" && this.present.size === this.slots.length) op = "updateSource";
    if (op === "createReferable" && this.referables.size === REFERABLE_NAMES) op = "updateReferable";
    this.counts[op] = (this.counts[op] ?? 0) + 1;
    try {
      await this.run(op);
    } catch (err) {
      // The model follows the server (a 404 means gone, a 409 on create means there); any
      // other refusal is counted, and the oracle judges the cluster as it ends up anyway.
      this.failed++;
      if (this.firstErrors.length < 5)
        this.firstErrors.push(`${op}: ${(err as Error).message.slice(0, 200)}`);
    }
  }

  private async run(op: OpType): Promise<void> {
    const d = this.dice;
    switch (op) {
      case "createSource": {
        const slot = d.pick(this.slots.filter((s) => !this.present.has(slotKey(s))));
        this.present.set(slotKey(slot), slot);
        await this.admin.request("POST", slotPath(slot, false), { body: this.sourceBody(slot) });
        return;
      }
      case "updateSource": {
        const slot = this.pickPresent();
        await this.mergePatch(slotPath(slot), this.sourceUpdate(slot), slot);
        return;
      }
      case "relabelSource": {
        const slot = this.pickPresent();
        await this.mergePatch(slotPath(slot), { metadata: { labels: { app: this.color() } } }, slot);
        return;
      }
      case "relabelBurst": {
        // Several at once, so the controller sees a burst; the targets are distinct, so the
        // end state does not depend on the order the server applies them.
        const picked = new Map<string, SourceSlot>();
        for (let i = 0; i < 6; i++) {
          const slot = this.pickPresent();
          picked.set(slotKey(slot), slot);
        }
        const patches = [...picked.values()].map((slot) => [slot, this.color()] as const);
        const results = await Promise.allSettled(
          patches.map(([slot, app]) =>
            this.mergePatch(slotPath(slot), { metadata: { labels: { app } } }, slot),
          ),
        );
        for (const r of results) if (r.status === "rejected") throw r.reason;
        return;
      }
      case "deleteSource": {
        const slot = this.pickPresent();
        this.present.delete(slotKey(slot));
        await this.admin.request("DELETE", slotPath(slot));
        return;
      }
      case "createReferable": {
        const free = Array.from({ length: REFERABLE_NAMES }, (_, i) => `soak-r${i}`).filter(
          (n) => !this.referables.has(n),
        );
        const name = d.pick(free);
        this.referables.add(name);
        await this.admin.request("POST", RF, {
          body: {
            apiVersion: "referable.dev/v1alpha1",
            kind: "Referable",
            metadata: { name, labels: { [SHARD_LABEL]: this.shard } },
            spec: this.referableSpec(),
          },
        });
        return;
      }
      case "updateReferable": {
        const name = d.pick([...this.referables].sort());
        try {
          await this.admin.request("PATCH", `${RF}/${name}`, {
            body: [{ op: "replace", path: "/spec", value: this.referableSpec() }],
            contentType: "application/json-patch+json",
          });
        } catch (err) {
          if ((err as { statusCode?: number }).statusCode === 404) this.referables.delete(name);
          throw err;
        }
        return;
      }
      case "deleteReferable": {
        const name = d.pick([...this.referables].sort());
        this.referables.delete(name);
        await this.admin.request("DELETE", `${RF}/${name}`);
        return;
      }
      case "editTarget": {
        // A hand edit of an exported key (or its removal), as kubectl would make it.
        const key = `K${d.int(EXPORT_KEYS)}`;
        await this.admin.request("PATCH", targetPath(`out-${d.int(EXPORT_OBJECTS)}`), {
          body: { data: { [key]: d.chance(0.3) ? null : `hand${++this.serial}` } },
          contentType: "application/merge-patch+json",
          query: { fieldManager: "soak-hand" },
        });
        return;
      }
      case "deleteTarget": {
        await this.admin.request("DELETE", targetPath(`out-${d.int(EXPORT_OBJECTS)}`));
        return;
      }
    }
  }

  private pickPresent(): SourceSlot {
    return this.dice.pick([...this.present.values()].sort((a, b) => (slotKey(a) < slotKey(b) ? -1 : 1)));
  }

  private async mergePatch(path: string, body: unknown, slot: SourceSlot): Promise<void> {
    try {
      await this.admin.request("PATCH", path, { body, contentType: "application/merge-patch+json" });
    } catch (err) {
      if ((err as { statusCode?: number }).statusCode === 404) this.present.delete(slotKey(slot));
      throw err;
    }
  }

  private color(): string | null {
    return this.dice.chance(0.2) ? null : this.dice.pick(COLORS);
  }

  private sourceBody(slot: SourceSlot): KubeObject {
    const d = this.dice;
    const n = ++this.serial;
    const metadata: Record<string, unknown> = { name: slot.name };
    if (slot.namespace) metadata.namespace = slot.namespace;
    const app = this.color();
    if (app) metadata.labels = { app };
    if (slot.kind.kind === "ConfigMap") {
      const data: Record<string, string> = {};
      if (d.chance(0.85)) data.v = `v${n}`;
      if (d.chance(0.5)) data.w = `w${n}`;
      return { apiVersion: "v1", kind: "ConfigMap", metadata, data };
    }
    const spec: Record<string, unknown> = {};
    if (d.chance(0.85)) spec.size = n;
    if (d.chance(0.5)) spec.tags = { env: `e${n}` };
    return { apiVersion: slot.kind.apiVersion, kind: slot.kind.kind, metadata, spec };
  }

  private sourceUpdate(slot: SourceSlot): unknown {
    const d = this.dice;
    const n = ++this.serial;
    const roll = d.int(10);
    // An annotation-only change: every Referable reading it must be left alone.
    if (roll === 0) return { metadata: { annotations: { touched: `${n}` } } };
    if (slot.kind.kind === "ConfigMap") {
      if (roll === 1) return { data: { v: null } };
      if (roll <= 3) return { data: { w: d.chance(0.3) ? null : `w${n}` } };
      return { data: { v: `v${n}` } };
    }
    if (roll === 1) return { spec: { size: null } };
    if (roll <= 3) return { spec: { tags: d.chance(0.3) ? null : { env: `e${n}` } } };
    return { spec: { size: n } };
  }

  private referableSpec(): Record<string, unknown> {
    const d = this.dice;
    const ghost = d.chance(0.04);
    const kind = ghost ? undefined : d.pick([KINDS[0]!, KINDS[0]!, KINDS[1]!, KINDS[2]!]);
    const source: Record<string, unknown> = ghost
      ? { apiVersion: GHOST.apiVersion, kind: GHOST.kind, namespace: d.pick(NAMESPACES) }
      : { apiVersion: kind!.apiVersion, kind: kind!.kind };
    if (kind) {
      // Now and then the scope is wrong, which is InvalidSpec.
      const wrongScope = d.chance(0.04);
      if (kind.namespaced !== wrongScope) source.namespace = d.pick(NAMESPACES);
    }
    source.fieldPath = kind ? d.pick(kind.fieldPaths) : "spec.size";
    const spec: Record<string, unknown> = { source };
    if (d.chance(0.5)) {
      source.name = `${(kind?.kind ?? "ghost").toLowerCase()}-${d.int(SOURCE_NAMES)}`;
    } else {
      source.selector = { matchLabels: { app: d.pick(COLORS) } };
      if (d.chance(0.6)) {
        const selection: Record<string, unknown> = { mode: "Multiple" };
        const min = d.pick([undefined, undefined, 0, 2]);
        const max = d.pick([undefined, undefined, 2, 3]);
        if (min !== undefined) selection.minMatch = min;
        if (max !== undefined && (min === undefined || min <= max)) selection.maxMatch = max;
        spec.selection = selection;
      } else if (d.chance(0.3)) {
        spec.selection = { mode: "Single" };
      }
    }
    const policy = d.int(8);
    if (policy === 0) spec.policy = { resolution: "Optional" };
    else if (policy === 1) spec.default = d.pick(["fallback", 7, ["d1", "d2"], { port: 5432 }]);
    if (d.chance(0.35)) {
      // One or two keys of a few shared objects: several Referables name the same key.
      const keys = new Set<string>();
      for (let i = 1 + d.int(2); i > 0; i--) keys.add(`out-${d.int(EXPORT_OBJECTS)}/K${d.int(EXPORT_KEYS)}`);
      spec.export = [...keys].map((k) => {
        const [name, key] = k.split("/");
        return { kind: "ConfigMap", namespace: EXPORT_NAMESPACE, name, key };
      });
    }
    return spec;
  }
}
