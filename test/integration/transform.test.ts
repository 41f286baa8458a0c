/**
 * Transforms on the real control plane: a Referable whose spec.transform shapes the value read
 * from a ConfigMap, for each outcome the API document names. Successes land in status.value or
 * status.values; a transform that does not compile is InvalidSpec with its position; one that
 * fails at run time, runs over its cost budget or builds too much is TransformFailed, promptly,
 * and the controller writes once and stays settled (no retry loop, no crash).
 *
 * The admission webhook is not running here (see admission.test.ts for its refusal), so a bad
 * expression reaches the controller, as it does on a cluster without the webhook.
 */
import { jest } from "@jest/globals";
import type { KubeClient } from "../../src/kube/client.ts";
import {
  startTestController,
  waitForReason,
  type TestController,
  createReferable as createReferableAs,
  settlesAt as settlesAtIn,
} from "../harness/controller.ts";
import {
  uniqueName,
  createConfigMap as createConfigMapIn,
  openScope,
  closeScope,
  configMapsLabelled,
} from "../harness/kube.ts";

jest.setTimeout(30_000);

let admin: KubeClient;
let ns: string;
let ctl: TestController;

beforeAll(async () => {
  ({ admin, ns, started: ctl } = await openScope("transform", () => startTestController()));
}, 60_000);
afterAll(() => closeScope(ctl));

const createConfigMap = (name: string, data: Record<string, string>, labels?: Record<string, string>) =>
  createConfigMapIn(admin, ns, name, data, labels);

const createReferable = (spec: Record<string, unknown>) =>
  createReferableAs(admin, spec, { shard: ctl.shard });

const byName = (name: string, fieldPath: string) => ({
  apiVersion: "v1",
  kind: "ConfigMap",
  namespace: ns,
  name,
  fieldPath,
});

const settlesAt = (name: string, reason: string) =>
  settlesAtIn(admin, { ns, shard: ctl.shard }, name, reason);

describe("a transform shapes the value", () => {
  let db: string;
  let secretish: string;
  beforeAll(async () => {
    db = uniqueName("db");
    secretish = uniqueName("creds");
    await createConfigMap(db, { host: "db.internal", port: "5432" });
    // A base64 field, as a ConfigMap copied from a Secret's data holds it.
    await createConfigMap(secretish, { password: Buffer.from("s3cr3t-pass").toString("base64") });
  });

  it("formats a string, and follows the source when it changes", async () => {
    const rf = await createReferable({
      source: byName(db, "data.host"),
      transform: "'postgres://' + value + ':5432/app'",
    });
    const view = await waitForReason(admin, rf, "Available");
    expect(view.ready).toBe("True");
    expect(view.status.value).toBe("postgres://db.internal:5432/app");
    expect(view.status.sources?.[0]?.name).toBe(db);
    await admin.request("PATCH", `/api/v1/namespaces/${ns}/configmaps/${db}`, {
      body: { data: { host: "db2.internal" } },
      contentType: "application/merge-patch+json",
    });
    await waitForReason(admin, rf, "Available", (v) => v.status.value === "postgres://db2.internal:5432/app");
  });

  it("decodes a base64 field of a ConfigMap", async () => {
    const rf = await createReferable({
      source: byName(secretish, "data.password"),
      transform: "string(base64.decode(value))",
    });
    const view = await waitForReason(admin, rf, "Available");
    expect(view.status.value).toBe("s3cr3t-pass");
  });

  it("gives a number from values.size() in mode Multiple, published as status.value", async () => {
    const app = uniqueName("app");
    for (const i of [1, 2, 3]) await createConfigMap(`${app}-${i}`, { v: String(i) }, { app });
    const rf = await createReferable({
      source: configMapsLabelled(ns, { app }),
      selection: { mode: "Multiple" },
      transform: "values.size()",
    });
    const view = await waitForReason(admin, rf, "Available");
    // A Multiple-mode transform that returns one value publishes it as status.value, with
    // every source it was computed from.
    expect(view.status.value).toBe(3);
    expect(view.status.values).toBeUndefined();
    expect(view.status.sources?.map((s) => s.name)).toEqual([`${app}-1`, `${app}-2`, `${app}-3`]);
  });

  it("builds an object with a map literal", async () => {
    const rf = await createReferable({
      source: byName(db, "data"),
      transform:
        "{'host': value.host, 'port': int(value.port), 'tls': value.?tls.orValue('false') == 'true'}",
    });
    const view = await waitForReason(admin, rf, "Available", (v) => typeof v.status.value === "object");
    expect(view.status.value).toEqual({
      host: expect.stringMatching(/^db2?\.internal$/),
      port: 5432,
      tls: false,
    });
  });

  it("leaves a Defaulted value as written", async () => {
    const rf = await createReferable({
      source: byName(uniqueName("absent"), "data.v"),
      default: "as-written",
      transform: "value + '-transformed'",
    });
    const view = await waitForReason(admin, rf, "Defaulted");
    expect(view.status.value).toBe("as-written");
  });
});

describe("a transform that fails says why, once", () => {
  let cm: string;
  let big: string;
  beforeAll(async () => {
    cm = uniqueName("data");
    big = uniqueName("big");
    await createConfigMap(cm, { v: "text", list: "a,b,c,d,e,f,g,h,i,j,k,l,m,n,o,p,q,r,s,t,u,v,w,x,y,z" });
    await createConfigMap(big, { v: "x".repeat(30_000) });
  });

  it("a parse error is InvalidSpec with the position", async () => {
    const rf = await createReferable({ source: byName(cm, "data.v"), transform: "'postgres://' + value +" });
    const view = await settlesAt(rf, "InvalidSpec");
    expect(view.ready).toBe("False");
    // The controller names request fields under spec.source (its prefix for the whole request).
    expect(view.message).toMatch(/^spec(\.source)?\.transform: does not parse/);
    expect(view.message).toMatch(/line 1, column \d+/);
  });

  it("a runtime error is TransformFailed with the library's message, and no value", async () => {
    const rf = await createReferable({ source: byName(cm, "data"), transform: "value.missing + 'x'" });
    const view = await settlesAt(rf, "TransformFailed");
    expect(view.message).toContain("No such key: missing");
    expect(view.status.value).toBeUndefined();
  });

  it("bad base64 is TransformFailed, not a shorter value", async () => {
    const rf = await createReferable({
      source: byName(cm, "data.v"),
      transform: "string(base64.decode(value + '!'))",
    });
    const view = await settlesAt(rf, "TransformFailed");
    expect(view.message).toContain("not base64");
  });

  it("a transform whose estimated worst-case cost is over the budget is InvalidSpec, promptly", async () => {
    const started = Date.now();
    const rf = await createReferable({
      source: byName(cm, "data.list"),
      // 26^4 = 456,976 innermost steps, each several units: well over 1,000,000.
      transform:
        "cel.bind(l, value.split(','), l.map(a, l.map(b, l.map(c, l.map(d, a + b + c + d)))).size())",
    });
    const view = await settlesAt(rf, "InvalidSpec");
    expect(view.message).toMatch(/estimated worst-case cost is \d+, over the budget of 1000000/);
    expect(Date.now() - started).toBeLessThan(15_000);
  });

  it.each([
    {
      reason: "string doubling with nested binds",
      transform:
        "cel.bind(a, value + value, cel.bind(b, a + a, cel.bind(c, b + b, cel.bind(d, c + c, cel.bind(e, d + d, cel.bind(f, e + e, cel.bind(g, f + f, cel.bind(h, g + g, (h + h).size()))))))))",
      want: "InvalidSpec",
      message: "estimated worst-case cost",
    },
    {
      reason: "nested comprehensions over a 30,000-character split",
      transform: "value.split('').map(a, value.split('').map(b, a + b)).size()",
      want: "InvalidSpec",
      message: "estimated worst-case cost",
    },
    {
      reason: "a replace that would multiply the value by itself",
      transform: "value.replace('x', value)",
      want: "TransformFailed",
      message: "replace would build a string",
    },
    {
      reason: "a result far over the value size cap",
      transform: "[value, value, value]",
      want: "TransformFailed",
      message: "over the limit of 32768",
    },
  ])(
    "a hostile expression ($reason) is refused or TransformFailed and the controller carries on",
    async ({ transform, want, message }) => {
      const rf = await createReferable({ source: byName(big, "data.v"), transform });
      const view = await settlesAt(rf, want);
      expect(view.message).toContain(message);
      expect(view.message).not.toContain("xxxxxxxxxx");
    },
  );
});
