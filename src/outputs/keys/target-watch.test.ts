import { describe, expect, it } from "@jest/globals";
import type { KubeObject } from "../../kube/client.ts";
import { KeyOwnership } from "./ownership.ts";
import { driftedOwners, projectTarget, type TargetProjection } from "./target-watch.ts";

const object = { kind: "ConfigMap", namespace: "team-b", name: "app" } as const;
const T1 = "2026-01-01T00:00:00Z";
const T2 = "2026-01-02T00:00:00Z";

function ownership(): KeyOwnership {
  const o = new KeyOwnership();
  o.set("a", T1, [{ ...object, key: "K" }]);
  o.set("b", T2, [
    { ...object, key: "K" },
    { ...object, key: "M" },
  ]);
  return o;
}

function configMap(rv: string, data: Record<string, string>, managers: Record<string, string[]>): KubeObject {
  return {
    apiVersion: "v1",
    kind: "ConfigMap",
    metadata: {
      name: "app",
      namespace: "team-b",
      uid: "u1",
      resourceVersion: rv,
      managedFields: Object.entries(managers).map(([manager, keys]) => ({
        manager,
        fieldsV1: { "f:data": Object.fromEntries(keys.map((k) => [`f:${k}`, {}])) },
      })),
    },
    data,
  };
}

describe("projectTarget", () => {
  it("keeps, of the keys Referables name, a hash and the managers; never a value, never another key", () => {
    const p = projectTarget(
      "ConfigMap",
      configMap("7", { K: "secret-ish", OTHER: "theirs" }, { "referable.dev/a": ["K"], helm: ["OTHER"] }),
      ownership(),
    );
    expect(p.metadata).toEqual({ name: "app", namespace: "team-b", uid: "u1", resourceVersion: "7" });
    expect([...p.keys.keys()].sort()).toEqual(["K", "M"]);
    expect(p.keys.get("K")).toMatch(/^\S{16} referable\.dev\/a$/);
    expect(p.keys.get("M")).toBe("- ");
    expect(JSON.stringify([...p.keys])).not.toContain("secret-ish");
    expect(JSON.stringify([...p.keys])).not.toContain("theirs");
  });

  it("keeps at most four managers of a key", () => {
    const managers = Object.fromEntries(Array.from({ length: 50 }, (_, i) => [`m${i}`, ["K"]]));
    const p = projectTarget("ConfigMap", configMap("7", { K: "v" }, managers), ownership());
    expect(p.keys.get("K")!.split(" ")).toHaveLength(5);
  });
});

describe("driftedOwners", () => {
  const o = ownership();
  const project = (rv: string, data: Record<string, string>, managers: Record<string, string[]>) =>
    projectTarget("ConfigMap", configMap(rv, data, managers), o);
  const written = project("7", { K: "v", M: "w" }, { "referable.dev/a": ["K"], "referable.dev/b": ["M"] });
  const cases: Array<{
    reason: string;
    event: {
      type: "ADDED" | "MODIFIED" | "DELETED";
      object: TargetProjection;
      old: TargetProjection | undefined;
    };
    lastVersion?: Record<string, string>;
    want: string[];
  }> = [
    {
      reason: "the echo of the owner's own write is nothing",
      event: { type: "MODIFIED", object: written, old: project("6", {}, {}) },
      lastVersion: { a: "7", b: "7" },
      want: [],
    },
    {
      reason: "a key patched by hand is drift for its owner only",
      event: {
        type: "MODIFIED",
        object: project("8", { K: "by-hand", M: "w" }, { "kubectl-patch": ["K"], "referable.dev/b": ["M"] }),
        old: written,
      },
      want: ["a"],
    },
    {
      reason: "a change of a key no Referable owns is nothing",
      event: {
        type: "MODIFIED",
        object: project(
          "8",
          { K: "v", M: "w", OTHER: "x" },
          { "referable.dev/a": ["K"], "referable.dev/b": ["M"] },
        ),
        old: written,
      },
      want: [],
    },
    {
      reason: "a deleted key is drift",
      event: {
        type: "MODIFIED",
        object: project("8", { M: "w" }, { "referable.dev/b": ["M"] }),
        old: written,
      },
      want: ["a"],
    },
    {
      reason: "a deleted object is drift for every owner, whatever the versions",
      event: { type: "DELETED", object: written, old: written },
      lastVersion: { a: "7", b: "7" },
      want: ["a", "b"],
    },
    {
      reason: "an object first seen at another version than the one last written is looked at",
      event: { type: "ADDED", object: written, old: undefined },
      lastVersion: { a: "7", b: "5" },
      want: ["b"],
    },
  ];
  it.each(cases)("$reason", ({ event, lastVersion, want }) => {
    expect(driftedOwners(object, event, o, (name) => lastVersion?.[name]).sort()).toEqual(want);
  });
});
