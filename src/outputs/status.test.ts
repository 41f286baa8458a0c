import type { Referable } from "../api/referable.ts";
import { ApiError } from "../kube/client.ts";
import { classifyError } from "../runtime/reconciler.ts";
import { StatusOutput, statusPatch, type StatusOutcome } from "./status.ts";
import { WritePolicy } from "./write-policy.ts";

const owner: Referable = { metadata: { name: "r", uid: "u1", generation: 1, resourceVersion: "5" } };
const desired = { status: { observedGeneration: 1, value: "v" }, baseVersion: "5" };

/** A client that answers every request with `answer`, recording what it was asked. */
function fakeClient(answer: unknown) {
  const calls: Array<{ method: string; path: string; body: unknown }> = [];
  return {
    calls,
    request: async <T>(method: string, path: string, options?: { body?: unknown }): Promise<T> => {
      calls.push({ method, path, body: options?.body });
      if (answer instanceof Error) throw answer;
      return answer as T;
    },
  };
}

const apiError = (code: number) => new ApiError("PATCH", "/x", code, "Reason", "message");

/** A StatusOutput whose every request fails with `statusCode`, and the write results it reports. */
function failingOutput(statusCode: number): { output: StatusOutput; writes: string[] } {
  const writes: string[] = [];
  const output = new StatusOutput({
    client: fakeClient(apiError(statusCode)),
    policy: new WritePolicy(),
    onWrite: (r) => void writes.push(r),
  });
  return { output, writes };
}

describe("StatusOutput", () => {
  it.each<{ reason: string; answer: unknown; want: StatusOutcome; metric: string[] }>([
    {
      reason: "a write that succeeds reports the version it made",
      answer: { metadata: { resourceVersion: "6" } },
      want: { result: "written", resourceVersion: "6" },
      metric: ["success"],
    },
    {
      reason: "a Referable deleted meanwhile (404) drops the write, quietly",
      answer: apiError(404),
      want: { result: "dropped" },
      metric: [],
    },
    {
      reason: "a write computed from an old version (409) is a conflict, to compute again",
      answer: apiError(409),
      want: { result: "conflict" },
      metric: ["conflict"],
    },
  ])("$reason", async ({ answer, want, metric }) => {
    const client = fakeClient(answer);
    const writes: string[] = [];
    const output = new StatusOutput({
      client,
      policy: new WritePolicy(),
      onWrite: (r) => void writes.push(r),
    });
    expect(await output.write(owner, desired, output.memory())).toEqual(want);
    expect(writes).toEqual(metric);
    expect(client.calls.map((c) => `${c.method} ${c.path}`)).toEqual([
      "PATCH /apis/referable.dev/v1alpha1/referables/r/status",
    ]);
    // The uid and the version it was computed from are preconditions of the patch.
    expect(client.calls[0]!.body).toEqual([
      { op: "test", path: "/metadata/uid", value: "u1" },
      { op: "replace", path: "/metadata/resourceVersion", value: "5" },
      { op: "add", path: "/status", value: desired.status },
    ]);
  });

  it("a refused status or a re-created object (422) is a terminal error: retrying cannot mend it", async () => {
    const { output, writes } = failingOutput(422);
    const err = await output.write(owner, desired, output.memory()).catch((e: unknown) => e);
    expect({ kind: classifyError(err), writes }).toEqual({ kind: "terminal", writes: ["error"] });
  });

  it("throws what retrying may mend (a 500), counted as an error", async () => {
    const { output, writes } = failingOutput(500);
    await expect(output.write(owner, desired, output.memory())).rejects.toThrow();
    expect(writes).toEqual(["error"]);
  });

  it("over its rate, defers without a request and says when to look again", async () => {
    let now = 0;
    const client = fakeClient({ metadata: { resourceVersion: "6" } });
    const deferred: string[] = [];
    const policy = new WritePolicy({ rate: 10, burst: 1, budget: 0 }, () => now);
    const output = new StatusOutput({ client, policy, onDeferred: (r) => void deferred.push(r) });
    const memory = output.memory();
    expect(await output.write(owner, desired, memory)).toMatchObject({ result: "written" });
    now = 30;
    expect(await output.write(owner, desired, memory)).toEqual({ result: "deferred", retryAfterMs: 70 });
    expect({ requests: client.calls.length, deferred }).toEqual({ requests: 1, deferred: ["rate"] });
  });

  it("keeps no gate after a write from a full one: made again from when it was admitted, it answers the same", async () => {
    let now = 0;
    const client = fakeClient({ metadata: { resourceVersion: "6" } });
    const policy = new WritePolicy({ rate: 10, burst: 2, budget: 0 }, () => now);
    const output = new StatusOutput({ client, policy });
    const memory = output.memory();
    const step = async () => ({
      outcome: await output.write(owner, desired, memory),
      kept: memory.gate !== undefined,
    });
    expect(await step()).toEqual({ outcome: { result: "written", resourceVersion: "6" }, kept: false });
    expect(memory.admittedAt).toBe(0);
    now = 40; // the gate made again holds 1.4 tokens: one write, from a gate no longer full
    expect(await step()).toEqual({ outcome: { result: "written", resourceVersion: "6" }, kept: true });
    expect(await step()).toEqual({ outcome: { result: "deferred", retryAfterMs: 60 }, kept: true });
    now = 1000.5; // full again: the write lets the gate go, from the whole ms after it
    expect(await step()).toEqual({ outcome: { result: "written", resourceVersion: "6" }, kept: false });
    expect(memory.admittedAt).toBe(1001);
    expect(client.calls).toHaveLength(3);
  });

  it("over the controller's budget, keeps the place it reserved and writes in it when due", async () => {
    let now = 0;
    const client = fakeClient({ metadata: { resourceVersion: "6" } });
    const deferred: string[] = [];
    const policy = new WritePolicy({ rate: 100, burst: 10, budget: 10, budgetBurst: 1 }, () => now);
    const output = new StatusOutput({ client, policy, onDeferred: (r) => void deferred.push(r) });
    const [a, b] = [output.memory(), output.memory()];
    expect(await output.write(owner, desired, a)).toMatchObject({ result: "written" });
    // The budget is spent: b's place is the next token, 100 ms on.
    expect(await output.write(owner, desired, b)).toEqual({ result: "deferred", retryAfterMs: 100 });
    now = 50;
    expect(await output.write(owner, desired, b)).toEqual({ result: "deferred", retryAfterMs: 50 });
    now = 100;
    expect(await output.write(owner, desired, b)).toMatchObject({ result: "written" });
    expect({ requests: client.calls.length, deferred }).toEqual({ requests: 2, deferred: ["budget"] });
  });
});

describe("statusPatch", () => {
  it("replaces the whole status behind a uid precondition, so keys a value object lost do not linger", () => {
    expect(statusPatch("u1", { value: { a: 1 } })).toEqual([
      { op: "test", path: "/metadata/uid", value: "u1" },
      { op: "add", path: "/status", value: { value: { a: 1 } } },
    ]);
  });

  it("carries the resourceVersion the status was computed from, so a stale write is a 409", () => {
    expect(statusPatch("u1", { value: 1 }, "42")).toEqual([
      { op: "test", path: "/metadata/uid", value: "u1" },
      { op: "replace", path: "/metadata/resourceVersion", value: "42" },
      { op: "add", path: "/status", value: { value: 1 } },
    ]);
  });
});
