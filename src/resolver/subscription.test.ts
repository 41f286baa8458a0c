import { compileRequest } from "./request.ts";
import { Sub } from "./subscription.ts";

const FLAGS = ["closed", "followsCrd", "attaching", "transforming", "retransform"] as const;

describe("a subscription's flags, kept as bits of one field", () => {
  it.each(FLAGS)("%s is set and cleared on its own, the others left as they are", (flag) => {
    const request = compileRequest({ apiVersion: "v1", kind: "ConfigMap", name: "a", fieldPath: "data.k" });
    const sub = new Sub(
      request,
      () => undefined,
      () => undefined,
    );
    const read = () => Object.fromEntries(FLAGS.map((f) => [f, sub[f]]));
    const none = Object.fromEntries(FLAGS.map((f) => [f, false]));
    expect(read()).toEqual(none);
    for (const other of FLAGS) if (other !== flag) sub[other] = true;
    sub[flag] = true;
    sub[flag] = false;
    expect(read()).toEqual({ ...Object.fromEntries(FLAGS.map((f) => [f, true])), [flag]: false });
    for (const other of FLAGS) sub[other] = false;
    sub[flag] = true;
    expect(read()).toEqual({ ...none, [flag]: true });
  });

  it("close() sets closed once and tells the resolver once", () => {
    const closed: Sub[] = [];
    const request = compileRequest({ apiVersion: "v1", kind: "ConfigMap", name: "a", fieldPath: "data.k" });
    const sub = new Sub(
      request,
      () => undefined,
      (s) => void closed.push(s),
    );
    sub.close();
    sub.close();
    expect({ closed: sub.closed, told: closed.length }).toEqual({ closed: true, told: 1 });
  });
});
