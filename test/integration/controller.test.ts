/**
 * The Referable controller against the real API server: every reason of the contract reached
 * from a real situation and recovering once the situation is fixed, spec edits, deletion,
 * Events, and statuses written only when they change.
 */
import type { KubeClient } from "../../src/kube/client.ts";
import {
  getReferable,
  startTestController,
  waitForReason,
  type TestController,
  createReferable as createReferableAs,
} from "../harness/controller.ts";
import {
  installTestCrd,
  uniqueName,
  waitFor,
  createConfigMap as createConfigMapIn,
  mergePatch as mergePatchAs,
  openScope,
  closeScope,
  createSecret,
  configMapField,
  configMapsLabelled,
} from "../harness/kube.ts";

let admin: KubeClient;
let ns: string;
let tc: TestController;

beforeAll(async () => {
  ({
    admin,
    ns,
    started: tc,
  } = await openScope("controller", () => startTestController({ maxValueBytes: 4096 })));
});
afterAll(() => closeScope(tc));

const RF = "/apis/referable.dev/v1alpha1/referables";
const cmPath = (name = "") => `/api/v1/namespaces/${ns}/configmaps${name ? `/${name}` : ""}`;

const createReferable = (spec: Record<string, unknown>, name = uniqueName("rf")) =>
  createReferableAs(admin, spec, { shard: tc.shard, name });

const createConfigMap = (name: string, data: Record<string, string>, labels?: Record<string, string>) =>
  createConfigMapIn(admin, ns, name, data, labels);

const mergePatch = (path: string, body: unknown) => mergePatchAs(admin, path, body);

const cmSource = (name: string, fieldPath?: string) => configMapField(ns, name, fieldPath);

/** A new ConfigMap holding `data`, and a Referable of its `fieldPath`; resolves with both names. */
async function referableOfNewConfigMap(
  data: Record<string, string>,
  fieldPath?: string,
): Promise<{ cm: string; rf: string }> {
  const cm = uniqueName("cm");
  await createConfigMap(cm, data);
  const rf = await createReferable({ source: cmSource(cm, fieldPath) });
  return { cm, rf };
}

describe("every reason from a real situation, and recovery", () => {
  it("Available, and the value follows the source", async () => {
    const { cm, rf } = await referableOfNewConfigMap({ v: "one" });
    const first = await waitForReason(admin, rf, "Available", (v) => v.status.value === "one");
    expect(first.ready).toBe("True");
    expect(first.status.observedGeneration).toBe(1);
    expect(first.status.sources?.[0]).toMatchObject({ kind: "ConfigMap", name: cm, namespace: ns });
    expect(first.status.text).toBe("one");
    await mergePatch(cmPath(cm), { data: { v: "two" } });
    const second = await waitForReason(admin, rf, "Available", (v) => v.status.value === "two");
    expect(second.status.text).toBe("two");
  });

  it("status.text is a number value as its JSON text, written in the same status write as the value", async () => {
    const svc = uniqueName("svc");
    const svcPath = `/api/v1/namespaces/${ns}/services`;
    await admin.request("POST", svcPath, {
      body: { apiVersion: "v1", kind: "Service", metadata: { name: svc }, spec: { ports: [{ port: 5432 }] } },
    });
    const rf = await createReferable({
      source: {
        apiVersion: "v1",
        kind: "Service",
        namespace: ns,
        name: svc,
        fieldPath: "spec.ports[0].port",
      },
    });
    const first = await waitForReason(admin, rf, "Available", (v) => v.status.value === 5432);
    expect(first.status.text).toBe("5432");
    await mergePatch(`${svcPath}/${svc}`, { spec: { ports: [{ port: 6543 }] } });
    // Every status read that has the new value has its text: never one without the other.
    const second = await waitForReason(admin, rf, "Available", (v) => v.status.value === 6543);
    expect(second.status.text).toBe("6543");
  });

  it("SourceNotFound clears the value, and recovers when the source comes back", async () => {
    const { cm, rf } = await referableOfNewConfigMap({ v: "here" });
    await waitForReason(admin, rf, "Available");
    await admin.request("DELETE", cmPath(cm));
    const gone = await waitForReason(admin, rf, "SourceNotFound");
    expect(gone.ready).toBe("False");
    expect(gone.status.value).toBeUndefined();
    expect(gone.status.text).toBeUndefined();
    expect(gone.message).toContain(`${ns}/${cm} does not exist`);
    await createConfigMap(cm, { v: "back" });
    await waitForReason(admin, rf, "Available", (v) => v.status.value === "back");
  });

  it("FieldNotFound until the field appears", async () => {
    const { cm, rf } = await referableOfNewConfigMap({ other: "x" }, "data.later");
    const missing = await waitForReason(admin, rf, "FieldNotFound");
    expect(missing.message).toContain("data.later");
    await mergePatch(cmPath(cm), { data: { later: "now" } });
    await waitForReason(admin, rf, "Available", (v) => v.status.value === "now");
  });

  it("SourceNotReady until the source reports requireConditions", async () => {
    const group = `${uniqueName("ctl")}.test.referable.dev`;
    const apiVersion = await installTestCrd(admin, group, "Database");
    const path = `/apis/${group}/v1/namespaces/${ns}/databases`;
    await admin.request("POST", path, {
      body: { apiVersion, kind: "Database", metadata: { name: "db" }, spec: {} },
    });
    const rf = await createReferable({
      source: {
        apiVersion,
        kind: "Database",
        namespace: ns,
        name: "db",
        fieldPath: "status.endpoint",
        requireConditions: [{ type: "Ready", status: "True" }],
      },
    });
    await waitForReason(admin, rf, "SourceNotReady");
    await mergePatch(`${path}/db/status`, {
      status: { endpoint: "db:5432", conditions: [{ type: "Ready", status: "True" }] },
    });
    await waitForReason(admin, rf, "Available", (v) => v.status.value === "db:5432");
  });

  it("KindNotFound until the CRD is installed, without a restart", async () => {
    const group = `${uniqueName("kind")}.test.referable.dev`;
    const rf = await createReferable({
      source: { apiVersion: `${group}/v1`, kind: "Queue", namespace: ns, name: "q", fieldPath: "spec.url" },
    });
    const notFound = await waitForReason(admin, rf, "KindNotFound");
    expect(notFound.message).toContain(`${group}/v1`);
    await installTestCrd(admin, group, "Queue");
    await admin.request("POST", `/apis/${group}/v1/namespaces/${ns}/queues`, {
      body: { apiVersion: `${group}/v1`, kind: "Queue", metadata: { name: "q" }, spec: { url: "amqp://q" } },
    });
    await waitForReason(admin, rf, "Available", (v) => v.status.value === "amqp://q");
  });

  it("AmbiguousSelector while two objects match in Single mode", async () => {
    const app = uniqueName("app");
    await createConfigMap(uniqueName("a"), { v: "a" }, { app });
    const b = uniqueName("b");
    await createConfigMap(b, { v: "b" }, { app });
    const rf = await createReferable({
      source: configMapsLabelled(ns, { app }),
    });
    const ambiguous = await waitForReason(admin, rf, "AmbiguousSelector");
    expect(ambiguous.message).toContain("2 objects match");
    await mergePatch(cmPath(b), { metadata: { labels: { app: "elsewhere" } } });
    await waitForReason(admin, rf, "Available", (v) => v.status.value === "a");
  });

  it("TooFewMatches in Multiple mode until minMatch objects match; values keep their order", async () => {
    const tier = uniqueName("tier");
    await createConfigMap(`${tier}-b`, { v: "b" }, { tier });
    const rf = await createReferable({
      source: configMapsLabelled(ns, { tier }),
      selection: { mode: "Multiple", minMatch: 2 },
    });
    const few = await waitForReason(admin, rf, "TooFewMatches");
    expect(few.message).toContain("minMatch is 2");
    await createConfigMap(`${tier}-a`, { v: "a" }, { tier });
    const two = await waitForReason(admin, rf, "Available");
    expect(two.status.values).toEqual(["a", "b"]);
    expect(two.status.value).toBeUndefined();
    expect(two.status.text).toBe('["a","b"]');
    expect(two.status.sources?.map((s) => s.name)).toEqual([`${tier}-a`, `${tier}-b`]);
  });

  it("Multiple mode: matches without the field leave the selection missing, so spec.default is published until one has it", async () => {
    const tier = uniqueName("tier");
    await createConfigMap(`${tier}-a`, { other: "x" }, { tier });
    const rf = await createReferable({
      source: configMapsLabelled(ns, { tier }),
      selection: { mode: "Multiple" },
      default: ["fallback"],
    });
    const defaulted = await waitForReason(admin, rf, "Defaulted");
    expect(defaulted.status.values).toEqual(["fallback"]);
    await mergePatch(cmPath(`${tier}-a`), { data: { v: "a" } });
    const available = await waitForReason(admin, rf, "Available");
    expect(available.status.values).toEqual(["a"]);
    expect(available.status.sources?.map((s) => s.name)).toEqual([`${tier}-a`]);
  });

  it("InvalidSpec for a fieldPath that does not parse, and recovery when the spec is fixed", async () => {
    const { rf } = await referableOfNewConfigMap({ v: "ok" }, "data[unclosed");
    const invalid = await waitForReason(admin, rf, "InvalidSpec");
    expect(invalid.message).toContain("position");
    await mergePatch(`${RF}/${rf}`, { spec: { source: { fieldPath: "data.v" } } });
    const fixed = await waitForReason(admin, rf, "Available", (v) => v.status.value === "ok");
    expect(fixed.status.observedGeneration).toBe(2);
  });

  it("Forbidden for a Secret source (the controller's own policy), recovering when the spec points elsewhere", async () => {
    await createSecret(admin, ns, "creds", { password: "hunter2" });
    const rf = await createReferable({
      source: { apiVersion: "v1", kind: "Secret", namespace: ns, name: "creds", fieldPath: "data.password" },
    });
    const forbidden = await waitForReason(admin, rf, "Forbidden");
    expect(forbidden.message).toContain("--allow-secrets");
    expect(JSON.stringify(forbidden.object)).not.toContain("hunter2");
    const cm = uniqueName("cm");
    await createConfigMap(cm, { v: "public" });
    await mergePatch(`${RF}/${rf}`, { spec: { source: cmSource(cm) } });
    await waitForReason(admin, rf, "Available", (v) => v.status.value === "public");
  });

  it("ValueTooLarge over the size limit, recovering when the value shrinks", async () => {
    const { cm, rf } = await referableOfNewConfigMap({ v: "x".repeat(5000) });
    const large = await waitForReason(admin, rf, "ValueTooLarge");
    expect(large.message).toContain("4096");
    expect(large.status.value).toBeUndefined();
    await mergePatch(cmPath(cm), { data: { v: "small" } });
    await waitForReason(admin, rf, "Available", (v) => v.status.value === "small");
  });

  it("Defaulted and Optional when the source is missing, Available once it exists", async () => {
    const cm = uniqueName("cm");
    const defaulted = await createReferable({ source: cmSource(cm), default: { port: 5432 } });
    const optional = await createReferable({ source: cmSource(cm), policy: { resolution: "Optional" } });
    const d = await waitForReason(admin, defaulted, "Defaulted");
    expect(d.ready).toBe("True");
    expect(d.status.value).toEqual({ port: 5432 });
    expect(d.status.text).toBe('{"port":5432}');
    const o = await waitForReason(admin, optional, "Optional");
    expect(o.ready).toBe("True");
    expect(o.status.value).toBeUndefined();
    expect(o.status.text).toBeUndefined();
    await createConfigMap(cm, { v: "real" });
    await waitForReason(admin, defaulted, "Available", (v) => v.status.value === "real");
    await waitForReason(admin, optional, "Available", (v) => v.status.value === "real");
  });
});

describe("lifecycle", () => {
  it("a spec edit changes the value; deleting the Referable leaves no subscription or informer behind", async () => {
    const [a, b] = [uniqueName("cm"), uniqueName("cm")];
    await createConfigMap(a, { v: "from-a" });
    await createConfigMap(b, { v: "from-b" });
    const rf = await createReferable({ source: cmSource(a) });
    await waitForReason(admin, rf, "Available", (v) => v.status.value === "from-a");
    await mergePatch(`${RF}/${rf}`, { spec: { source: { name: b } } });
    await waitForReason(
      admin,
      rf,
      "Available",
      (v) => v.status.value === "from-b" && v.status.sources?.[0]?.name === b,
    );

    const before = tc.resolver.subscriptionCount;
    await admin.request("DELETE", `${RF}/${rf}`);
    await waitFor("the subscription to be closed", () => tc.resolver.subscriptionCount === before - 1);
    const object = await admin
      .request("GET", `${RF}/${rf}`)
      .catch((e: { statusCode?: number }) => e.statusCode);
    expect(object).toBe(404); // no finalizer holds it
  });

  it("writes the status only when it changes: an unrelated source update writes nothing", async () => {
    const { cm, rf } = await referableOfNewConfigMap({ v: "steady" });
    const settled = await waitForReason(admin, rf, "Available");
    const rv = settled.object.metadata?.resourceVersion;
    const readAt = settled.status.sources?.[0]?.resourceVersion;
    await mergePatch(cmPath(cm), { metadata: { annotations: { unrelated: "change" } } });
    // A later, real change proves the unrelated one was processed first (events are ordered).
    const marker = uniqueName("cm");
    await createConfigMap(marker, { v: "m" });
    const markerRf = await createReferable({ source: cmSource(marker) });
    await waitForReason(admin, markerRf, "Available");
    const after = await getReferable(admin, rf);
    expect(after.object.metadata?.resourceVersion).toBe(rv);
    expect(after.status.sources?.[0]?.resourceVersion).toBe(readAt);
  });

  it("records Events for Ready transitions, without the value", async () => {
    const cm = uniqueName("cm");
    const rf = await createReferable({ source: cmSource(cm) });
    await waitForReason(admin, rf, "SourceNotFound");
    await createConfigMap(cm, { v: "classified-value" });
    await waitForReason(admin, rf, "Available");
    const events = await waitFor("both Events", async () => {
      const list = await admin.request<{ items: Array<{ reason: string; type: string; message: string }> }>(
        "GET",
        "/api/v1/namespaces/default/events",
        { query: { fieldSelector: `involvedObject.name=${rf}` } },
      );
      return list.items.length >= 2 ? list.items : undefined;
    });
    expect(events.map((e) => [e.type, e.reason]).sort()).toEqual([
      ["Normal", "Available"],
      ["Warning", "SourceNotFound"],
    ]);
    expect(JSON.stringify(events)).not.toContain("classified-value");
  });
});
