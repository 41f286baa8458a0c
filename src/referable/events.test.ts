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
});
