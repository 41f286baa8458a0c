import { compileLabelSelector } from "../informers/label-selector.ts";
import {
  describeCycle,
  exportObjectNode,
  exportScopeNode,
  ReferenceGraph,
  type ReadsReferables,
} from "./reference-graph.ts";

const byName = (name: string): ReadsReferables => ({ name });
const bySelector = (matchLabels: Record<string, string>): ReadsReferables => ({
  selector: compileLabelSelector({ matchLabels }),
});

/** A ring r0 → r1 → ... → r(n-1) → r0, by name. */
function ring(graph: ReferenceGraph, n: number, prefix = "r"): void {
  for (let i = 0; i < n; i++) graph.set(`${prefix}${i}`, undefined, byName(`${prefix}${(i + 1) % n}`));
}

describe("ReferenceGraph", () => {
  it.each([
    { n: 2, why: "the shortest ring of two" },
    { n: 66, why: "longer than the 64 the old search stopped at" },
    { n: 10_000, why: "as long as a cluster's worth: no recursion, no search limit" },
  ])("sees every member of a ring of $n by name ($why)", ({ n }) => {
    const graph = new ReferenceGraph();
    ring(graph, n);
    expect(graph.flush().size).toBe(n);
    expect(graph.cyclicCount).toBe(n);
    const path = graph.cycleOf("r0")!;
    expect(path).toHaveLength(n + 1);
    expect(path[0]).toBe("r0");
    expect(path[1]).toBe("r1");
    expect(path[n]).toBe("r0");
    expect(graph.cycleOf(`r${n - 1}`)!.slice(0, 2)).toEqual([`r${n - 1}`, "r0"]);
  });

  it.each([
    {
      why: "a chain that ends is no cycle",
      build: (g: ReferenceGraph) => {
        g.set("a", undefined, byName("b"));
        g.set("b", undefined, byName("c"));
        g.set("c", undefined, undefined);
      },
      cyclic: [],
    },
    {
      why: "a name that does not exist is no edge (yet)",
      build: (g: ReferenceGraph) => g.set("a", undefined, byName("ghost")),
      cyclic: [],
    },
    {
      why: "a selector that matches the Referable itself is a cycle of one",
      build: (g: ReferenceGraph) => g.set("a", { team: "x" }, bySelector({ team: "x" })),
      cyclic: ["a"],
    },
    {
      why: "a selector closes a ring made by names",
      build: (g: ReferenceGraph) => {
        g.set("a", { role: "head" }, byName("b"));
        g.set("b", undefined, byName("c"));
        g.set("c", undefined, bySelector({ role: "head" }));
      },
      cyclic: ["a", "b", "c"],
    },
    {
      why: "a tail reading into a cycle is not a member of it",
      build: (g: ReferenceGraph) => {
        g.set("tail", undefined, byName("a"));
        g.set("a", undefined, byName("b"));
        g.set("b", undefined, byName("a"));
      },
      cyclic: ["a", "b"],
    },
    {
      why: "two cycles joined by a one-way edge are two components",
      build: (g: ReferenceGraph) => {
        g.set("a", undefined, byName("b"));
        g.set("b", { k: "v" }, byName("a"));
        g.set("c", undefined, byName("d"));
        g.set("d", undefined, bySelector({ k: "w" }));
        g.set("e", { k: "w" }, byName("c"));
      },
      cyclic: ["a", "b", "c", "d", "e"],
    },
  ])("$why", ({ build, cyclic }) => {
    const graph = new ReferenceGraph();
    build(graph);
    graph.flush();
    const members = ["a", "b", "c", "d", "e", "tail", "ghost"].filter((n) => graph.cycleOf(n));
    expect(members).toEqual(cyclic);
  });

  it.each([
    {
      why: "a label that stops matching breaks the cycle",
      change: (g: ReferenceGraph) => g.set("a", { role: "other" }, byName("b")),
      after: [],
    },
    {
      why: "deleting a member breaks the cycle",
      change: (g: ReferenceGraph) => g.delete("b"),
      after: [],
    },
    {
      why: "a new member lengthens the cycle",
      change: (g: ReferenceGraph) => {
        g.set("b", undefined, byName("n"));
        g.set("n", undefined, byName("c"));
      },
      after: ["a", "b", "c", "n"],
    },
  ])("follows changes: $why", ({ change, after }) => {
    const graph = new ReferenceGraph();
    graph.set("a", { role: "head" }, byName("b"));
    graph.set("b", undefined, byName("c"));
    graph.set("c", undefined, bySelector({ role: "head" }));
    expect([...graph.flush()].sort()).toEqual(["a", "b", "c"]);
    change(graph);
    const changed = graph.flush();
    const members = ["a", "b", "c", "n"].filter((n) => graph.cycleOf(n));
    expect(members).toEqual(after);
    // Everything that was or is a member is told, so its status is recomputed.
    expect([...changed].sort()).toEqual([...new Set(["a", "b", "c", ...after])].sort());
  });

  it("reports nothing changed when an update leaves every edge alone", () => {
    const graph = new ReferenceGraph();
    ring(graph, 3);
    graph.flush();
    graph.set("r0", { unrelated: "label" }, byName("r1"));
    expect(graph.flush().size).toBe(0);
    expect(graph.cycleOf("r0")).toEqual(["r0", "r1", "r2", "r0"]);
  });

  it("gives each member its shortest way back, not just any cycle of its component", () => {
    const graph = new ReferenceGraph();
    ring(graph, 5); // r0 → r1 → r2 → r3 → r4 → r0
    // r1 now reads r2 and r4 by a selector: a shortcut r1 → r4 → r0 → r1.
    graph.set("r2", { hop: "x" }, byName("r3"));
    graph.set("r4", { hop: "x" }, byName("r0"));
    graph.set("r1", undefined, bySelector({ hop: "x" }));
    graph.flush();
    expect(graph.cycleOf("r1")).toEqual(["r1", "r4", "r0", "r1"]);
    expect(graph.cycleOf("r2")).toEqual(["r2", "r3", "r4", "r0", "r1", "r2"]);
  });
});

describe("describeCycle", () => {
  it.each([
    { path: ["a", "b", "a"], want: "a → b → a", why: "short cycles in full" },
    {
      path: [...Array.from({ length: 8 }, (_, i) => `r${i}`), "r0"],
      want: "r0 → r1 → r2 → r3 → r4 → r5 → r6 → r7 → r0",
      why: "eight names still in full",
    },
    {
      path: [...Array.from({ length: 66 }, (_, i) => `r${i}`), "r0"],
      want: "r0 → r1 → r2 → r3 → … 58 more … → r62 → r63 → r64 → r65 → r0",
      why: "long ones keep both ends and say how many are left out",
    },
  ])("$why", ({ path, want }) => {
    expect(describeCycle(path)).toBe(want);
  });
});

describe("ReferenceGraph through exports", () => {
  const object = (name: string, ns = "team") => exportObjectNode("ConfigMap", ns, name);
  const scope = (ns = "team") => exportScopeNode("ConfigMap", ns);
  const writes = (...names: string[]) => names.map((n) => ({ object: object(n), scope: scope() }));

  it.each([
    {
      why: "two Referables exporting into each other's source ConfigMap are a cycle through both objects",
      build: (g: ReferenceGraph) => {
        g.set("a", undefined, { object: object("x"), writes: writes("y") });
        g.set("b", undefined, { object: object("y"), writes: writes("x") });
      },
      cyclic: ["a", "b"],
      path: ["a", object("x"), "b", object("y"), "a"],
    },
    {
      why: "a chain through an export that does not come back is no cycle",
      build: (g: ReferenceGraph) => {
        g.set("a", undefined, { object: object("x"), writes: writes("y") });
        g.set("b", undefined, { object: object("y"), writes: writes("z") });
      },
      cyclic: [],
    },
    {
      why: "a selector source that matches exported objects reads every writer of that namespace",
      build: (g: ReferenceGraph) => {
        g.set("a", undefined, {
          scope: scope(),
          writes: [{ object: object("y", "other"), scope: scope("other") }],
        });
        g.set("b", undefined, { object: object("y", "other"), writes: writes("anything") });
      },
      cyclic: ["a", "b"],
      path: ["a", scope(), "b", object("y", "other"), "a"],
    },
    {
      why: "the same namespace but another kind is no edge",
      build: (g: ReferenceGraph) => {
        g.set("a", undefined, { object: object("x"), writes: writes("y") });
        g.set("b", undefined, {
          object: object("y"),
          writes: [
            { object: exportObjectNode("Secret", "team", "x"), scope: exportScopeNode("Secret", "team") },
          ],
        });
      },
      cyclic: [],
    },
    {
      why: "an export cycle closed by a Referable read by name",
      build: (g: ReferenceGraph) => {
        g.set("a", undefined, { object: object("x") });
        g.set("b", undefined, { name: "a", writes: writes("x") });
      },
      cyclic: ["a", "b"],
      path: ["a", object("x"), "b", "a"],
    },
  ])("$why", ({ build, cyclic, path }) => {
    const graph = new ReferenceGraph();
    build(graph);
    graph.flush();
    expect(["a", "b"].filter((n) => graph.cycleOf(n))).toEqual(cyclic);
    // Objects are nodes of the path, never members counted as Referables.
    expect(graph.cyclicCount).toBe(cyclic.length);
    if (path) expect(graph.cycleOf("a")).toEqual(path);
  });

  it("follows a target dropped from the spec: the cycle ends, and both members are told", () => {
    const graph = new ReferenceGraph();
    graph.set("a", undefined, { object: object("x"), writes: writes("y") });
    graph.set("b", undefined, { object: object("y"), writes: writes("x") });
    expect([...graph.flush()].sort()).toEqual(["a", "b"]);
    graph.set("b", undefined, { object: object("y") });
    expect([...graph.flush()].sort()).toEqual(["a", "b"]);
    expect(graph.cycleOf("a")).toBeUndefined();
    graph.delete("a");
    graph.set("a", undefined, { object: object("x"), writes: writes("y") });
    graph.set("b", undefined, { object: object("y"), writes: writes("x") });
    graph.flush();
    graph.delete("b");
    expect([...graph.flush()].sort()).toEqual(["a", "b"]);
    expect(graph.cycleOf("a")).toBeUndefined();
  });

  it("keeps the source's name and a shared start for a reader of one object by name, and still finds its cycles", () => {
    const graph = new ReferenceGraph();
    // As readsOf gives it: the object node, and the source's name it ends with.
    const reads = (name: string) => ({ object: object(name), objectName: name });
    graph.set("a", undefined, reads("x"));
    graph.set("b", undefined, { object: object("y"), writes: writes("x") });
    expect(graph.flush().size).toBe(0);
    // A writer into what a only reads closes the cycle: the edge was kept.
    graph.set("b", undefined, { ...reads("y"), writes: writes("x") });
    graph.set("a", undefined, { ...reads("x"), writes: writes("y") });
    expect([...graph.flush()].sort()).toEqual(["a", "b"]);
    expect(graph.cycleOf("a")).toEqual(["a", object("x"), "b", object("y"), "a"]);
    // Back to reading only: what it reads is unchanged, so the same edge, and the cycle ends.
    graph.set("a", undefined, reads("x"));
    expect([...graph.flush()].sort()).toEqual(["a", "b"]);
    expect(graph.cycleOf("a")).toBeUndefined();
    graph.set("a", undefined, { ...reads("x"), writes: writes("y") });
    expect([...graph.flush()].sort()).toEqual(["a", "b"]);
    // A name the object node does not end with is kept whole, and read alike.
    graph.set("a", undefined, { object: object("x"), objectName: "other", writes: writes("y") });
    expect(graph.flush().size).toBe(0);
    expect(graph.cycleOf("a")).toEqual(["a", object("x"), "b", object("y"), "a"]);
  });

  it("costs one edge per reader and per writer of an object, not their product", () => {
    const graph = new ReferenceGraph();
    for (let i = 0; i < 2000; i++) graph.set(`w${i}`, undefined, { writes: writes("shared") });
    for (let i = 0; i < 2000; i++) graph.set(`r${i}`, undefined, { object: object("shared") });
    graph.flush();
    expect(graph.cyclicCount).toBe(0);
    // One reader that writes back closes a cycle with every writer.
    graph.set("r0", undefined, {
      object: object("shared"),
      writes: [{ object: object("w-source"), scope: scope() }],
    });
    graph.set("w0", undefined, { object: object("w-source"), writes: writes("shared") });
    graph.flush();
    expect(graph.cycleOf("r0")).toEqual(["r0", object("shared"), "w0", object("w-source"), "r0"]);
  });
});

describe("ReferenceGraph: who is read (the graph label's third rule)", () => {
  it("a Referable read by name or by a selector that matches it is read; the reader's own read of itself is not counted", () => {
    const graph = new ReferenceGraph();
    graph.set("a", { team: "x" }, undefined);
    graph.set("b", undefined, undefined);
    graph.set("self", { me: "yes" }, bySelector({ me: "yes" }));
    expect(graph.readBy("a")).toBe(false);
    graph.set("reader", undefined, byName("a"));
    graph.set("selecting", undefined, bySelector({ team: "x" }));
    expect(graph.readBy("a")).toBe(true);
    expect(graph.readTargets("selecting")).toEqual(["a"]);
    expect(graph.readTargets("reader")).toEqual(["a"]);
    graph.delete("reader");
    expect(graph.readBy("a")).toBe(true);
    graph.set("a", { team: "y" }, undefined);
    expect(graph.readBy("a")).toBe(false);
    expect(graph.readBy("b")).toBe(false);
    expect(graph.readBy("self")).toBe(false);
    // A name read before the Referable exists counts once it does.
    graph.set("early", undefined, byName("later"));
    expect(graph.readBy("later")).toBe(true);
  });
});
