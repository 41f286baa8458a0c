/**
 * Bad input, tried deliberately against the real API server: hostile fieldPaths, selectors that
 * match thousands of objects, sources that cannot be read (malformed apiVersions, kinds without
 * watch, subresources, an aggregated API whose discovery fails), Referables reading Referables
 * (chains, themselves, cycles), and a source that changes hundreds of times a second. Each must
 * end in a clear reason and message, and none may crash the controller, write in a loop, or
 * retry faster than the backoff.
 *
 * Unhandled rejections: Jest fails the running test on one (its environment listens on the real
 * process; a listener added here on the sandbox's `process` is never called, which we checked),
 * so every test below passing is the proof that none happened.
 */
import { jest } from "@jest/globals";
import { isResolutionError } from "../../src/api/errors.ts";
import { isApiError, KubeClient, type KubeObject, type RequestOptions } from "../../src/kube/client.ts";
import type { Logger } from "../../src/api/log.ts";
import {
  getReferable,
  startTestController,
  type TestController,
  waitForReason,
  barrier,
  createReferable as createReferableAs,
  settlesAt as settlesAtIn,
} from "../harness/controller.ts";
import {
  createNamespace,
  testKubeConfig,
  uniqueName,
  waitFor,
  openScope,
  closeScope,
  createSecret,
  createConfigMap as createConfigMapIn,
  mergePatch as mergePatchAs,
} from "../harness/kube.ts";

// Every wait below has its own deadline, with a message; the test's must be longer.
jest.setTimeout(30_000);

const FLAG = "__referableHostilePwned";

/** A KubeClient that counts the GETs of each path, to tell a backoff from a retry storm. */
class CountingClient extends KubeClient {
  readonly gets = new Map<string, number>();
  override request<T = KubeObject>(method: string, path: string, options?: RequestOptions): Promise<T> {
    if (method === "GET" && !options?.query?.watch) this.gets.set(path, (this.gets.get(path) ?? 0) + 1);
    return super.request<T>(method, path, options);
  }
}

/** The controller as src/process/main.ts wires it (see test/harness/controller.ts), on a counting client. */
type Stack = TestController & { client: CountingClient };

async function startStack(options: { maxValueBytes?: number; logger?: Logger } = {}): Promise<Stack> {
  const client = new CountingClient({ kubeConfig: testKubeConfig() });
  const started = await startTestController({
    client,
    ...(options.maxValueBytes !== undefined ? { maxValueBytes: options.maxValueBytes } : {}),
    ...(options.logger ? { build: { logger: options.logger } } : {}),
  });
  return {
    ...started,
    client,
    stop: async () => {
      await started.stop();
      await client.close();
    },
  };
}

async function statusWrites(stack: Stack, result: "success" | "error" | "conflict"): Promise<number> {
  const metric = await stack.metrics.statusWrites.get();
  return metric.values.find((v) => v.labels.result === result)?.value ?? 0;
}

let admin: KubeClient;
let ns: string;
let stack: Stack;

beforeAll(async () => {
  ({ admin, ns, started: stack } = await openScope("hostile", startStack));
});
afterAll(() => closeScope(stack));
afterEach(() => {
  // Nothing a path says may run: no global written, no prototype polluted.
  expect((globalThis as Record<string, unknown>)[FLAG]).toBeUndefined();
  expect(({} as Record<string, unknown>).polluted).toBeUndefined();
});

const createReferable = (
  spec: Record<string, unknown>,
  options: { name?: string; labels?: Record<string, string>; shard?: string } = {},
) => createReferableAs(admin, spec, { ...options, shard: options.shard ?? stack.shard });

const createConfigMap = (
  name: string,
  data: Record<string, string>,
  labels?: Record<string, string>,
  namespace = ns,
) => createConfigMapIn(admin, namespace, name, data, labels);

const mergePatch = (path: string, body: unknown) => mergePatchAs(admin, path, body);

const scope = () => ({ ns, shard: stack.shard });
const settlesAt = (name: string, reason: string) => settlesAtIn(admin, scope(), name, reason);

describe("hostile fieldPaths", () => {
  let cm: string;
  beforeAll(async () => {
    cm = uniqueName("target");
    // `__proto__` and `constructor` are valid ConfigMap keys: as data they must read as data.
    // (JSON.parse, because `__proto__` in an object literal sets the prototype, not a key.)
    await createConfigMap(cm, JSON.parse('{"v":"x","__proto__":"proto-value","constructor":"ctor-value"}'));
  });
  const source = (fieldPath: string) => ({
    source: { apiVersion: "v1", kind: "ConfigMap", namespace: ns, name: cm, fieldPath },
  });

  const cases: Array<{ reason: string; path: string; want: string; value?: unknown; message?: string }> = [
    {
      reason: "the classic sandbox escape through a filter",
      path: "$..[?(@.constructor.constructor('return process')().exit())]",
      want: "InvalidSpec",
    },
    {
      reason: "a Function constructor writing a global",
      path: `$..[?(@.constructor.constructor('globalThis.${FLAG}=1')())]`,
      want: "InvalidSpec",
    },
    { reason: "a script index", path: "$.data[(@.length-1)]", want: "InvalidSpec" },
    {
      reason: "a call on the right of == in kubectl style",
      path: "{.data[?(@.x==process.exit())]}",
      want: "InvalidSpec",
    },
    {
      reason: "a boolean operator smuggling a script in a field path",
      path: `metadata.managedFields[?(@.manager=="x" || (globalThis.${FLAG}=1))]`,
      want: "InvalidSpec",
    },
    {
      reason: "prototype pollution through an assignment in a filter",
      path: "$.data[?(@.__proto__.polluted='yes')]",
      want: "InvalidSpec",
    },
    {
      reason: "__proto__ as a real key of data is data",
      path: "data.__proto__",
      want: "Available",
      value: "proto-value",
    },
    {
      reason: "constructor as a real key of data is data",
      path: "data['constructor']",
      want: "Available",
      value: "ctor-value",
    },
    {
      reason: "__proto__ where no such key exists reads nothing",
      path: "metadata.__proto__",
      want: "FieldNotFound",
    },
    {
      reason: "the prototype chain is never followed",
      path: "metadata.constructor.name",
      want: "FieldNotFound",
    },
    { reason: "nor in JSONPath", path: "$.metadata.__proto__.toString", want: "FieldNotFound" },
    {
      reason: "a 1024-character path, the longest allowed",
      path: `data.${"a".repeat(1019)}`,
      want: "FieldNotFound",
    },
    { reason: "200 nested names", path: Array(200).fill("a").join("."), want: "InvalidSpec", message: "128" },
    { reason: "300 nested indexes", path: `data${"[0]".repeat(300)}`, want: "InvalidSpec", message: "128" },
    { reason: "500 open brackets", path: `$${"[".repeat(500)}`, want: "InvalidSpec" },
    { reason: "three recursive descents", path: "$..a..b..c", want: "InvalidSpec" },
  ];

  it.each(cases)("$reason → $want", async ({ path, want, value, message }) => {
    expect(path.length).toBeLessThanOrEqual(1024);
    const rf = await createReferable(source(path));
    const view = await waitForReason(admin, rf, want);
    if (value !== undefined) expect(view.status.value).toEqual(value);
    else expect(view.status.value).toBeUndefined();
    if (message) expect(view.message).toContain(message);
    // The message may quote the path and the key it stopped at, both bounded by the path's length.
    expect(view.message?.length ?? 0).toBeLessThan(2 * 1024 + 200);
  });

  it("a path over 1024 characters is refused by the API server", async () => {
    const err = await createReferable(source(`data.${"a".repeat(1020)}`)).catch((e: unknown) => e);
    expect(isApiError(err, 422)).toBe(true);
  });

  it("an object value with a __proto__ key follows a change of that key alone", async () => {
    // Regression: status comparison went through an object assignment that dropped "__proto__"
    // keys, so a change there compared equal and was never written.
    const name = uniqueName("proto");
    await createConfigMap(name, JSON.parse('{"__proto__":"one","v":"same"}'));
    const rf = await createReferable({
      source: { apiVersion: "v1", kind: "ConfigMap", namespace: ns, name, fieldPath: "data" },
    });
    const first = await waitForReason(admin, rf, "Available");
    expect(Object.getOwnPropertyDescriptor(first.status.value, "__proto__")?.value).toBe("one");
    await admin.request("PATCH", `/api/v1/namespaces/${ns}/configmaps/${name}`, {
      body: [{ op: "replace", path: "/data/__proto__", value: "two" }],
      contentType: "application/json-patch+json",
    });
    await waitForReason(
      admin,
      rf,
      "Available",
      (v) => Object.getOwnPropertyDescriptor(v.status.value, "__proto__")?.value === "two",
    );
  });
});

describe("a selector matching thousands of objects", () => {
  const COUNT = 2000;
  let bulk: string;
  beforeAll(async () => {
    bulk = await createNamespace(admin, "bulk");
    const names = Array.from({ length: COUNT }, (_, i) => `cm-${String(i).padStart(4, "0")}`);
    // A bounded number of creates in flight: fast, without flooding a 2-core machine.
    let next = 0;
    await Promise.all(
      Array.from({ length: 24 }, async () => {
        while (next < names.length) {
          const name = names[next++]!;
          await createConfigMap(name, { v: `value-${name}` }, { bulk: "yes" }, bulk);
        }
      }),
    );
  }, 180_000);
  afterAll(async () => {
    await admin
      .request("DELETE", `/api/v1/namespaces/${bulk}/configmaps`, { query: { labelSelector: "bulk=yes" } })
      .catch(() => undefined);
  }, 60_000);

  const selector = (extra: Record<string, unknown> = {}, fieldPath = "data.v") => ({
    source: {
      apiVersion: "v1",
      kind: "ConfigMap",
      namespace: bulk,
      selector: { matchLabels: { bulk: "yes" } },
      fieldPath,
    },
    ...extra,
  });

  it("Single: AmbiguousSelector with a bounded message", async () => {
    const rf = await createReferable(selector());
    const view = await waitForReason(admin, rf, "AmbiguousSelector", undefined, 60_000);
    expect(view.message).toContain(`${COUNT} objects match`);
    expect(view.message).toContain(
      `(${bulk}/cm-0000, ${bulk}/cm-0001, ${bulk}/cm-0002, ${bulk}/cm-0003, ${bulk}/cm-0004, ...)`,
    );
    expect(view.message!.length).toBeLessThan(600);
  }, 90_000);

  it("Multiple: every value, in order, in a status the API server accepts", async () => {
    const rf = await createReferable(selector({ selection: { mode: "Multiple" } }));
    const view = await waitForReason(admin, rf, "Available", undefined, 60_000);
    expect(view.status.values).toHaveLength(COUNT);
    expect(view.status.values?.[0]).toBe("value-cm-0000");
    expect(view.status.values?.[COUNT - 1]).toBe(`value-cm-${COUNT - 1}`);
    expect(view.status.sources).toHaveLength(COUNT);
  }, 90_000);

  it("Multiple over the size limit: ValueTooLarge, and no value", async () => {
    const rf = await createReferable(selector({ selection: { mode: "Multiple" } }, "data"));
    const view = await waitForReason(admin, rf, "ValueTooLarge", undefined, 60_000);
    expect(view.message).toContain("over the limit of 32768");
    expect(view.status.values).toBeUndefined();
  }, 90_000);

  it("Multiple with maxMatch keeps the first N", async () => {
    const rf = await createReferable(selector({ selection: { mode: "Multiple", maxMatch: 3 } }));
    const view = await waitForReason(admin, rf, "Available", undefined, 60_000);
    expect(view.status.values).toEqual(["value-cm-0000", "value-cm-0001", "value-cm-0002"]);
  }, 90_000);

  it("the API server refused none of the statuses", async () => {
    expect(await statusWrites(stack, "error")).toBe(0);
  });
});

describe("sources that cannot be read", () => {
  it.each([
    ["a path traversal", "../../api/v1"],
    ["three parts", "apps/v1/extra"],
    ["upper case", "Apps/v1"],
    ["an empty version", "apps/"],
    ["a query string", "v1?watch=true"],
    ["white space", "v1 "],
  ])(
    "a malformed apiVersion (%s) is refused by the API server, and by the resolver without the CRD's help",
    async (_what, apiVersion) => {
      const err = await createReferable({
        source: { apiVersion, kind: "ConfigMap", namespace: ns, name: "x", fieldPath: "data.v" },
      }).catch((e: unknown) => e);
      expect(isApiError(err, 422)).toBe(true);
      const direct = await stack.resolver
        .resolve({ apiVersion, kind: "ConfigMap", namespace: ns, name: "x", fieldPath: "data.v" })
        .catch((e: unknown) => e);
      expect(isResolutionError(direct) && direct.reason).toBe("InvalidSpec");
    },
  );

  it("an apiVersion that is well formed but not served: KindNotFound", async () => {
    const rf = await createReferable({
      source: { apiVersion: "apps/v99", kind: "Deployment", namespace: ns, name: "x", fieldPath: "spec" },
    });
    const view = await waitForReason(admin, rf, "KindNotFound");
    expect(view.message).toContain("does not serve apps/v99");
  });

  it.each([
    [
      "a cluster-scoped kind offering only create",
      "authorization.k8s.io/v1",
      "SubjectAccessReview",
      undefined,
      "subjectaccessreviews",
    ],
    ["a namespaced kind offering only create", "v1", "Binding", "default", "bindings"],
  ])("%s: InvalidSpec naming the verbs", async (_what, apiVersion, kind, namespace, resource) => {
    const rf = await createReferable({
      source: { apiVersion, kind, namespace, name: "x", fieldPath: "spec" },
    });
    const view = await settlesAt(rf, "InvalidSpec");
    expect(view.message).toBe(
      `${kind} (${resource}) cannot be watched: the API server offers only create on it`,
    );
  });

  it("a kind served only as a subresource: KindNotFound", async () => {
    const rf = await createReferable({
      source: { apiVersion: "apps/v1", kind: "Scale", namespace: ns, name: "x", fieldPath: "spec.replicas" },
    });
    const view = await waitForReason(admin, rf, "KindNotFound");
    expect(view.message).toContain("no kind Scale in apps/v1");
  });

  it("an aggregated API whose discovery fails: KindNotFound with the failure, retried on the backoff", async () => {
    const group = `${uniqueName("broken")}.example.com`;
    const apiService = `/apis/apiregistration.k8s.io/v1/apiservices/v1.${group}`;
    await admin.request("POST", "/apis/apiregistration.k8s.io/v1/apiservices", {
      body: {
        apiVersion: "apiregistration.k8s.io/v1",
        kind: "APIService",
        metadata: { name: `v1.${group}` },
        spec: {
          group,
          version: "v1",
          service: { namespace: ns, name: "does-not-exist", port: 443 },
          insecureSkipTLSVerify: true,
          groupPriorityMinimum: 1000,
          versionPriority: 15,
        },
      },
    });
    try {
      await waitFor(
        `/apis/${group}/v1 to answer 503`,
        () =>
          admin.request("GET", `/apis/${group}/v1`).then(
            () => false,
            (err: unknown) => isApiError(err, 503),
          ),
        { timeoutMs: 30_000 },
      );
      const path = `/apis/${group}/v1`;
      const started = Date.now();
      const rf = await createReferable({
        source: { apiVersion: `${group}/v1`, kind: "Widget", namespace: ns, name: "w", fieldPath: "spec" },
      });
      const view = await waitForReason(admin, rf, "KindNotFound");
      expect(view.message).toContain(`discovery of ${group}/v1 failed (503`);
      // Let the retries run for a while, then count them: discovery backs off from 500 ms,
      // doubling, so a few seconds hold a handful of requests, not one per retry tick.
      await waitFor("4 seconds of retries", () => Date.now() - started >= 4000, {
        timeoutMs: 10_000,
        intervalMs: 200,
      });
      const requests = stack.client.gets.get(path) ?? 0;
      expect(requests).toBeGreaterThanOrEqual(1);
      expect(requests).toBeLessThanOrEqual(6);
    } finally {
      await admin.request("DELETE", apiService).catch(() => undefined);
    }
  }, 60_000);
});

describe("Referables reading Referables", () => {
  const referableSource = (name: string, fieldPath = "status.value") => ({
    source: { apiVersion: "referable.dev/v1alpha1", kind: "Referable", name, fieldPath },
  });

  it("a chain propagates: A ← B ← C follows a change of A's source", async () => {
    const cm = uniqueName("root");
    await createConfigMap(cm, { v: "one" });
    const a = await createReferable({
      source: { apiVersion: "v1", kind: "ConfigMap", namespace: ns, name: cm, fieldPath: "data.v" },
    });
    const b = await createReferable(referableSource(a));
    const c = await createReferable(referableSource(b));
    await waitForReason(admin, c, "Available", (v) => v.status.value === "one");
    await mergePatch(`/api/v1/namespaces/${ns}/configmaps/${cm}`, { data: { v: "two" } });
    await waitForReason(admin, c, "Available", (v) => v.status.value === "two");
  });

  it("one whose source is itself by name settles at InvalidSpec", async () => {
    const name = uniqueName("self");
    await createReferable(referableSource(name, "metadata.resourceVersion"), { name });
    const view = await settlesAt(name, "InvalidSpec");
    expect(view.message).toContain("cannot read itself");
  });

  it("one whose selector matches itself settles at InvalidSpec", async () => {
    const name = uniqueName("self-select");
    await createReferable(
      {
        source: {
          apiVersion: "referable.dev/v1alpha1",
          kind: "Referable",
          selector: { matchLabels: { "test.referable.dev/self": name } },
          fieldPath: "metadata.resourceVersion",
        },
      },
      { name, labels: { "test.referable.dev/self": name } },
    );
    const view = await settlesAt(name, "InvalidSpec");
    expect(view.message).toContain("cannot read itself");
  });

  it("a cycle of Referables settles at InvalidSpec on every member", async () => {
    const [a, b] = [uniqueName("cycle-a"), uniqueName("cycle-b")];
    await createReferable(referableSource(b, "metadata.resourceVersion"), { name: a });
    await createReferable(referableSource(a, "metadata.resourceVersion"), { name: b });
    const viewA = await settlesAt(a, "InvalidSpec");
    const viewB = await settlesAt(b, "InvalidSpec");
    expect(viewA.message).toContain(`${a} → ${b} → ${a}`);
    expect(viewB.message).toContain(`${b} → ${a} → ${b}`);
  });
});

describe("a source that changes hundreds of times a second", () => {
  it("coalesces the status writes and ends on the last value", async () => {
    const hot = await startStack();
    try {
      const cm = uniqueName("hot");
      await createConfigMap(cm, { v: "0" });
      const rf = await createReferable(
        { source: { apiVersion: "v1", kind: "ConfigMap", namespace: ns, name: cm, fieldPath: "data.v" } },
        { shard: hot.shard },
      );
      await waitForReason(admin, rf, "Available", (v) => v.status.value === "0");
      const writesBefore = await statusWrites(hot, "success");

      // A bounded loop: a few patches in flight at a time, for three seconds.
      let updates = 0;
      const started = Date.now();
      const until = started + 3000;
      await Promise.all(
        Array.from({ length: 4 }, async () => {
          while (Date.now() < until) {
            const value = String(++updates);
            await mergePatch(`/api/v1/namespaces/${ns}/configmaps/${cm}`, { data: { v: value } });
          }
        }),
      );
      const last = await admin.request<{ data: { v: string } }>(
        "GET",
        `/api/v1/namespaces/${ns}/configmaps/${cm}`,
      );
      await waitForReason(admin, rf, "Available", (v) => v.status.value === last.data.v, 20_000);
      const seconds = (Date.now() - started) / 1000;
      const writes = (await statusWrites(hot, "success")) - writesBefore;
      expect(updates).toBeGreaterThan(300);
      expect(writes).toBeGreaterThanOrEqual(1);
      // The write policy's defaults: 25 a second, 5 at once (src/controller/write-policy.ts).
      expect(writes).toBeLessThanOrEqual(5 + Math.ceil(25 * seconds));
      expect(writes).toBeLessThan(updates / 4);
      expect(await statusWrites(hot, "error")).toBe(0);
    } finally {
      await hot.stop();
    }
  }, 60_000);
});

describe("values never leak", () => {
  /** Every line logged, at every level, as JSON. */
  const lines: string[] = [];
  const record = (level: string) => (fields: Record<string, unknown>, message: string) =>
    void lines.push(JSON.stringify({ level, fields, message }));
  const logger: Logger = {
    debug: record("debug"),
    info: record("info"),
    warn: record("warn"),
    error: record("error"),
    child: () => logger,
  };

  it("into logs, Events, metrics or condition messages, whatever happens to the Referable", async () => {
    const leaky = await startStack({ logger, maxValueBytes: 1024 });
    const marker = uniqueName("s3cr3t");
    try {
      const cm = uniqueName("leak");
      const twin = uniqueName("leak");
      const labels = { leak: marker.slice(-8) };
      await createConfigMap(cm, { v: marker, big: marker.repeat(100) }, labels);
      await createConfigMap(twin, { v: marker }, labels);
      await createSecret(admin, ns, cm, { v: marker });
      const src = (fieldPath: string, kind = "ConfigMap") => ({
        source: { apiVersion: "v1", kind, namespace: ns, name: cm, fieldPath },
      });
      const shard = { shard: leaky.shard };
      const available = await createReferable(src("data.v"), shard);
      const cases: Array<[string, Record<string, unknown>]> = [
        ["ValueTooLarge", src("data.big")],
        ["FieldNotFound", src("data.v.x")],
        ["FieldNotFound", src(`metadata.labels[?(@.x=="y")]`)],
        ["Forbidden", src("data.v", "Secret")],
        [
          "AmbiguousSelector",
          {
            source: {
              apiVersion: "v1",
              kind: "ConfigMap",
              namespace: ns,
              selector: { matchLabels: labels },
              fieldPath: "data.v",
            },
          },
        ],
      ];
      const names = [available];
      for (const [reason, spec] of cases) {
        const name = await createReferable(spec, shard);
        names.push(name);
        await waitForReason(admin, name, reason);
      }
      await waitForReason(admin, available, "Available", (v) => v.status.value === marker);
      // A transition away from the value, so Events of both kinds exist.
      await mergePatch(`/api/v1/namespaces/${ns}/configmaps/${cm}`, { data: { v: null } });
      await waitForReason(admin, available, "FieldNotFound");
      const events = await waitFor("the Available and FieldNotFound Events", async () => {
        const list = await admin.request<{ items: Array<{ reason: string }> }>(
          "GET",
          "/api/v1/namespaces/default/events",
          {
            query: { fieldSelector: `involvedObject.name=${available}` },
          },
        );
        const reasons = list.items.map((e) => e.reason);
        return reasons.includes("Available") && reasons.includes("FieldNotFound") ? list : undefined;
      });

      const everything = [
        ...lines,
        JSON.stringify(events),
        await leaky.metrics.registry.metrics(),
        ...(await Promise.all(
          names.map(async (n) => JSON.stringify((await getReferable(admin, n)).status.conditions)),
        )),
      ];
      expect(lines.length).toBeGreaterThan(0);
      expect(everything.filter((text) => text.includes(marker))).toEqual([]);
    } finally {
      await leaky.stop();
    }
  });
});

describe("after all of it", () => {
  it("the controller is still healthy and reconciles a new Referable", async () => {
    await barrier(admin, scope());
  });
});
