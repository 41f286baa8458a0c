import { Manager, type ManagedController, type ManagedElector } from "./manager.ts";

/** Fakes of the manager's own small interfaces, recording the order of calls. */
function parts(options: { syncGate?: Promise<void>; drainGate?: Promise<void> } = {}) {
  const calls: string[] = [];
  const controller: ManagedController = {
    startCache: () => void calls.push("startCache"),
    whenSynced: async () => {
      await options.syncGate;
      calls.push("synced");
    },
    startWorkers: () => void calls.push("startWorkers"),
    setLeader: (leader) => void calls.push(`setLeader(${leader})`),
    drain: async () => {
      calls.push("drain");
      await options.drainGate;
      calls.push("drained");
    },
    stop: async () => void calls.push("controller.stop"),
  };
  const elector: ManagedElector = {
    run: async () => void calls.push("elector.run"),
    stop: async () => void calls.push("elector.stop"),
  };
  const resolver = { stop: async () => void calls.push("resolver.stop") };
  return { calls, controller, elector, resolver };
}

describe("Manager", () => {
  it.each([
    {
      why: "with an elector: caches, then workers, then the campaign",
      withElector: true,
      want: ["startCache", "synced", "startWorkers", "elector.run"],
    },
    {
      why: "without one: caches, then workers, then leading at once",
      withElector: false,
      want: ["startCache", "synced", "startWorkers", "setLeader(true)"],
    },
  ])("starts in order $why", async ({ withElector, want }) => {
    const p = parts();
    await new Manager({ ...p, elector: withElector ? p.elector : undefined }).start();
    expect(p.calls).toEqual(want);
  });

  it("lets an elector that announces itself do so as the caches start, before they synced", async () => {
    const p = parts();
    const elector = { ...p.elector, announce: () => void p.calls.push("elector.announce") };
    await new Manager({ ...p, elector }).start();
    expect(p.calls).toEqual(["startCache", "elector.announce", "synced", "startWorkers", "elector.run"]);
  });

  it("releases the Lease only after the writers have drained, then closes the caches", async () => {
    let drained!: () => void;
    const p = parts({ drainGate: new Promise<void>((resolve) => (drained = resolve)) });
    const manager = new Manager(p);
    await manager.start();
    p.calls.length = 0;
    const stopped = manager.stop();
    await Promise.resolve();
    // A write is still in flight: the Lease must still be held.
    expect(p.calls).toEqual(["drain"]);
    drained();
    await stopped;
    expect(p.calls).toEqual(["drain", "drained", "elector.stop", "controller.stop", "resolver.stop"]);
  });

  it("a stop before the caches synced ends the start where it is: no workers, no campaign", async () => {
    let synced!: () => void;
    const p = parts({ syncGate: new Promise<void>((resolve) => (synced = resolve)) });
    const manager = new Manager(p);
    const started = manager.start();
    await manager.stop();
    synced();
    await started;
    expect(p.calls).not.toContain("startWorkers");
    expect(p.calls).not.toContain("elector.run");
    expect(p.calls.indexOf("elector.stop")).toBeGreaterThan(p.calls.indexOf("drained"));
  });
});
