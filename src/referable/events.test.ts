import type { RequestOptions } from "../kube/client.ts";
import { EventRecorder } from "./events.ts";

describe("EventRecorder", () => {
  it("escapes control and bidi characters in the message, whoever the caller", async () => {
    const bodies: unknown[] = [];
    const client = {
      request: async <T>(_method: string, _path: string, options: RequestOptions = {}): Promise<T> => {
        bodies.push(options.body);
        return {} as T;
      },
    };
    const recorder = new EventRecorder({ client });
    recorder.transition(
      { metadata: { name: "r", uid: "u1" } },
      "InvalidSpec",
      "fieldPath data.\u202eabc\n does not parse",
    );
    await Promise.resolve();
    expect(bodies).toHaveLength(1);
    expect((bodies[0] as { message: string }).message).toBe(
      "fieldPath data.\\u202eabc\\u000a does not parse",
    );
  });

  it.each([
    { reason: "one replica spends the whole budget: its burst of 50", share: undefined, want: 50 },
    { reason: "a shard serving 4 of 16 buckets spends a quarter: 50 / 4 tokens each", share: 0.25, want: 12 },
    { reason: "a shard serving every bucket spends it all", share: 1, want: 50 },
    { reason: "serving no bucket, an Event takes the whole burst", share: 0, want: 1 },
  ])("shares the overall budget out: $reason", async ({ share, want }) => {
    let sent = 0;
    const client = {
      request: async <T>(): Promise<T> => {
        sent++;
        return {} as T;
      },
    };
    const recorder = new EventRecorder({ client, ...(share !== undefined && { share: () => share }) });
    // Distinct objects, so the per-object limit never applies: only the overall budget does.
    for (let i = 0; i < 200; i++)
      recorder.transition({ metadata: { name: `r${i}`, uid: `u${i}` } }, "Available", "");
    await Promise.resolve();
    expect(sent).toBe(want);
  });
});
