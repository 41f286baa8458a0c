/**
 * The Referable CRD (crds/referable.dev_referables.yaml) as the real API server applies it: which
 * specs and statuses it stores, what it refuses and with which message, what `kubectl explain`
 * documents and what `kubectl get rf` prints.
 *
 * The cluster is shared with other test files, so every Referable has a name of its own and is
 * deleted afterwards. Status assertions read the PATCH response, which is the stored object at
 * that write, so a controller running elsewhere in the same cluster cannot race them.
 */
import { execFile } from "node:child_process";
import { join } from "node:path";
import { promisify } from "node:util";
import { keysSorted } from "../../src/api/stable-json.ts";
import { isApiError, type KubeClient, type KubeObject } from "../../src/kube/client.ts";
import { adminClient, closeTestClients, uniqueName, waitFor } from "../harness/kube.ts";
import { describeIf } from "../harness/availability.ts";
import { keysReversed as reversed } from "../harness/json.ts";

const execFileAsync = promisify(execFile);
const RESOURCE = "/apis/referable.dev/v1alpha1/referables";

let admin: KubeClient;
const created: string[] = [];

beforeAll(() => {
  admin = adminClient();
});
afterAll(async () => {
  await Promise.all(
    created.map((name) => admin.request("DELETE", `${RESOURCE}/${name}`).catch(() => undefined)),
  );
  await closeTestClients();
});

type Spec = Record<string, unknown>;

/** A source by name that needs nothing else to be valid. */
const byName = { apiVersion: "v1", kind: "ConfigMap", namespace: "crd-test", name: "x", fieldPath: "data.k" };
/** An export target that needs nothing else to be valid. */
const exportTarget = { kind: "ConfigMap", namespace: "team-b", name: "app-settings", key: "DB_HOST" };
/** A source by selector that needs nothing else to be valid. */
const bySelector = {
  apiVersion: "v1",
  kind: "ConfigMap",
  namespace: "crd-test",
  selector: { matchLabels: { app: "storage" } },
  fieldPath: "data.k",
};

function referable(name: string, spec: Spec): KubeObject {
  return { apiVersion: "referable.dev/v1alpha1", kind: "Referable", metadata: { name }, spec };
}

async function create(prefix: string, spec: Spec): Promise<KubeObject> {
  const name = uniqueName(prefix);
  const got = await admin.request<KubeObject>("POST", RESOURCE, { body: referable(name, spec) });
  created.push(name);
  return got;
}

async function patchStatus(name: string, status: Record<string, unknown>): Promise<KubeObject> {
  return admin.request<KubeObject>("PATCH", `${RESOURCE}/${name}/status`, {
    body: { status },
    contentType: "application/merge-patch+json",
  });
}

/** The error a request failed with, or a failure that says it succeeded. */
async function refusal(request: Promise<unknown>): Promise<unknown> {
  return request.then(
    (got) => {
      throw new Error(`the API server accepted it: ${JSON.stringify(got).slice(0, 300)}`);
    },
    (err: unknown) => err,
  );
}

function readyCondition(reason: string, status = "True") {
  return {
    type: "Ready",
    status,
    reason,
    message: "",
    observedGeneration: 1,
    lastTransitionTime: "2024-01-01T00:00:00Z",
  };
}

describe("the Referable CRD stores valid specs", () => {
  const cases: Array<{ reason: string; spec: Spec; want?: Spec }> = [
    { reason: "a source by name is the basic form", spec: { source: byName } },
    {
      reason: "a cluster-scoped source has no namespace",
      spec: { source: { apiVersion: "v1", kind: "Namespace", name: "team-a", fieldPath: "metadata.uid" } },
    },
    {
      reason: "a selector source may take every match in order, bounded",
      spec: {
        source: {
          ...bySelector,
          selector: {
            matchLabels: { "app.kubernetes.io/name": "storage" },
            matchExpressions: [
              { key: "tier", operator: "In", values: ["a", "b"] },
              { key: "example.com/legacy", operator: "DoesNotExist" },
            ],
          },
          requireConditions: [{ type: "Ready", status: "True" }],
        },
        selection: { mode: "Multiple", sortByFieldPath: "metadata.name", minMatch: 0, maxMatch: 10 },
      },
    },
    {
      reason: "an empty selector matches every object of the kind",
      spec: { source: { ...bySelector, selector: {} } },
    },
    {
      reason: "selection defaults mode to Single when it is present",
      spec: { source: bySelector, selection: {} },
      want: { source: bySelector, selection: { mode: "Single" } },
    },
    {
      reason: "policy defaults resolution to Required when it is present",
      spec: { source: byName, policy: {} },
      want: { source: byName, policy: { resolution: "Required" } },
    },
    {
      reason: "resolution Optional is kept",
      spec: { source: byName, policy: { resolution: "Optional" } },
    },
    {
      reason: "a JSONPath fieldPath of the maximum length is accepted",
      spec: { source: { ...byName, fieldPath: `{.${"a".repeat(1021)}}` } },
    },
    { reason: "a string default", spec: { source: byName, default: "fallback" } },
    { reason: "an empty string default", spec: { source: byName, default: "" } },
    { reason: "an integer default", spec: { source: byName, default: 42 } },
    { reason: "a number default", spec: { source: byName, default: 1.5 } },
    { reason: "a boolean default, false included", spec: { source: byName, default: false } },
    {
      reason: "an object default keeps its nested fields",
      spec: { source: byName, default: { host: "db", port: 5432, tags: { a: [1, true, null] } } },
    },
    { reason: "a list default", spec: { source: byName, default: ["a", 1, { b: false }] } },
    {
      reason: "export into a ConfigMap and a Secret, keys of the API server's alphabet, up to 16",
      spec: {
        source: byName,
        export: [
          exportTarget,
          { kind: "Secret", namespace: "team-b", name: "db.creds", key: "password_1.txt" },
          ...Array.from({ length: 14 }, (_, i) => ({ ...exportTarget, key: `K-${i}` })),
        ],
      },
    },
    {
      reason: "a null default is dropped by the API server: it means no default",
      spec: { source: byName, default: null },
      want: { source: byName },
    },
  ];

  it.each(cases)("$reason", async ({ spec, want }) => {
    const got = await create("crd-valid", spec);
    expect(got.spec).toEqual(want ?? spec);
  });

  it("ignores a status sent with the object: status is a subresource", async () => {
    const name = uniqueName("crd-status-ignored");
    const got = await admin.request<KubeObject>("POST", RESOURCE, {
      body: { ...referable(name, { source: byName }), status: { value: "sneaked in" } },
    });
    created.push(name);
    expect(got.status).toBeUndefined();
  });
});

describe("the Referable CRD stores a status written through /status", () => {
  const cases: Array<{ reason: string; status: Record<string, unknown> }> = [
    { reason: "a string value", status: { value: "arn:aws:s3:::bucket" } },
    { reason: "an empty string value", status: { value: "" } },
    { reason: "an integer value", status: { value: 8080 } },
    { reason: "a number value", status: { value: 0.25 } },
    { reason: "a boolean value, false included", status: { value: false } },
    { reason: "an object value keeps its nested fields", status: { value: { a: { b: [1, "c"] } } } },
    { reason: "a list value", status: { value: [1, "two", { three: 3 }] } },
    { reason: "values of mixed JSON types in mode Multiple", status: { values: ["a", 2, true, { d: [] }] } },
    {
      reason: "the full status of the contract",
      status: {
        value: "arn:aws:datasync:us-east-2:111222333444:location/loc-07db7abfc326c50aa",
        sources: [
          {
            apiVersion: "datasync.aws.upbound.io/v1beta1",
            kind: "LocationS3",
            namespace: "team-a",
            name: "source-location",
            uid: "3f0f6f4e-6b1b-4c1e-9d7e-2f0c2b0b9a11",
            resourceVersion: "12345",
          },
        ],
        observedGeneration: 1,
        conditions: [readyCondition("Available")],
      },
    },
  ];

  it.each(cases)("$reason", async ({ status }) => {
    const rf = await create("crd-status", { source: byName });
    const got = await patchStatus(rf.metadata!.name!, status);
    expect(got.status).toEqual(status);
  });

  it("sends every object of a status back with its keys sorted, whatever their order when written", async () => {
    // What a shard's status digest counts on for its fast path (stableStringify, compact.ts):
    // a status read from the API server, in a GET, a list or a watch event, is written by
    // JSON.stringify as it comes. Written here in reverse order at every level.
    const status = reversed({
      conditions: [readyCondition("Available")],
      observedGeneration: 1,
      sources: [
        { apiVersion: "v1", kind: "ConfigMap", name: "x", namespace: "crd-test", resourceVersion: "7" },
      ],
      text: "t",
      value: { a: { b: [1, { c: 2, d: 3 }] }, z: "last" },
    }) as Record<string, unknown>;
    expect(keysSorted(status)).toBe(false);
    const rf = await create("crd-sorted", { source: byName });
    const name = rf.metadata!.name!;
    const events: KubeObject[] = [];
    const watch = admin.watch(
      RESOURCE,
      { fieldSelector: `metadata.name=${name}`, resourceVersion: rf.metadata!.resourceVersion },
      (e) => void events.push(e.object),
    );
    try {
      const patched = await patchStatus(name, status);
      const got = await admin.request<KubeObject>("GET", `${RESOURCE}/${name}`);
      const list = await admin.request<{ items: KubeObject[] }>("GET", RESOURCE, {
        query: { fieldSelector: `metadata.name=${name}` },
      });
      const echo = await waitFor("the watch event of the status write", () =>
        events.find((e) => e.status !== undefined),
      );
      for (const [read, obj] of [
        ["the PATCH response", patched],
        ["a GET", got],
        ["a list", list.items[0]],
        ["a watch event", echo],
      ] as const) {
        expect([read, obj?.status]).toEqual([read, status]);
        expect([read, keysSorted(obj?.status)]).toEqual([read, true]);
      }
    } finally {
      watch.close();
      await watch.done.catch(() => undefined);
    }
  });

  const invalid: Array<{ reason: string; status: Record<string, unknown>; messages: string[] }> = [
    {
      reason: "a condition status outside True, False, Unknown",
      status: { conditions: [{ ...readyCondition("Available"), status: "Maybe" }] },
      messages: ['status.conditions[0].status: Unsupported value: "Maybe"'],
    },
    {
      reason: "a condition without a reason",
      status: { conditions: [{ ...readyCondition("Available"), reason: undefined }] },
      messages: ["status.conditions[0].reason: Required value"],
    },
    {
      reason: "a reason that is not CamelCase",
      status: { conditions: [readyCondition("not a reason")] },
      messages: ['status.conditions[0].reason: Invalid value: "not a reason"', "should match"],
    },
    {
      reason: "two conditions of one type",
      status: { conditions: [readyCondition("Available"), readyCondition("Defaulted")] },
      messages: ["status.conditions[1]: Duplicate value"],
    },
    {
      reason: "a negative observedGeneration",
      status: { observedGeneration: -1 },
      messages: ["status.observedGeneration: Invalid value: -1", "should be greater than or equal to 0"],
    },
  ];

  it.each(invalid)("refuses $reason", async ({ status, messages }) => {
    const rf = await create("crd-bad-status", { source: byName });
    const err = await refusal(patchStatus(rf.metadata!.name!, status));
    expect(isApiError(err, 422)).toBe(true);
    for (const message of messages) expect((err as Error).message).toContain(message);
  });
});

describe("the Referable CRD refuses invalid specs with a clear message", () => {
  const matchExpression = (e: Record<string, unknown>) => ({
    source: { ...bySelector, selector: { matchExpressions: [e] } },
  });
  const cases: Array<{ reason: string; spec: Spec | undefined; messages: string[] }> = [
    {
      reason: "both name and selector",
      spec: { source: { ...bySelector, name: "x" } },
      messages: ["spec.source: Forbidden: name and selector are mutually exclusive: set exactly one of them"],
    },
    {
      reason: "neither name nor selector",
      spec: { source: { apiVersion: "v1", kind: "ConfigMap", namespace: "crd-test", fieldPath: "data.k" } },
      messages: ["spec.source: Required value: one of name and selector is required"],
    },
    {
      reason: "selection without a selector",
      spec: { source: byName, selection: { mode: "Single" } },
      messages: ["spec.selection: Forbidden: selection applies only to a source with a selector"],
    },
    {
      reason: "minMatch greater than maxMatch",
      spec: { source: bySelector, selection: { mode: "Multiple", minMatch: 3, maxMatch: 2 } },
      messages: ["spec.selection: Invalid value: minMatch must not be greater than maxMatch"],
    },
    {
      reason: "minMatch with mode Single",
      spec: { source: bySelector, selection: { mode: "Single", minMatch: 1 } },
      messages: ["minMatch, maxMatch and sortByFieldPath apply only with mode Multiple"],
    },
    {
      reason: "sortByFieldPath without a mode, which defaults to Single",
      spec: { source: bySelector, selection: { sortByFieldPath: "metadata.name" } },
      messages: ["minMatch, maxMatch and sortByFieldPath apply only with mode Multiple"],
    },
    {
      reason: "a mode that does not exist",
      spec: { source: bySelector, selection: { mode: "Many" } },
      messages: ['spec.selection.mode: Unsupported value: "Many"'],
    },
    {
      reason: "a negative minMatch",
      spec: { source: bySelector, selection: { mode: "Multiple", minMatch: -1 } },
      messages: ["spec.selection.minMatch in body should be greater than or equal to 0"],
    },
    {
      reason: "maxMatch 0",
      spec: { source: bySelector, selection: { mode: "Multiple", maxMatch: 0 } },
      messages: ["spec.selection.maxMatch in body should be greater than or equal to 1"],
    },
    {
      reason: "an empty fieldPath",
      spec: { source: { ...byName, fieldPath: "" } },
      messages: ["spec.source.fieldPath in body should be at least 1 chars long"],
    },
    {
      reason: "a fieldPath over 1024 characters",
      spec: { source: { ...byName, fieldPath: "a".repeat(1025) } },
      messages: ["spec.source.fieldPath: Too long: may not be more than 1024"],
    },
    {
      reason: "no fieldPath",
      spec: { source: { apiVersion: "v1", kind: "ConfigMap", name: "x" } },
      messages: ["spec.source.fieldPath: Required value"],
    },
    {
      reason: "no spec",
      spec: undefined,
      messages: ["spec: Required value"],
    },
    {
      reason: "no source",
      spec: { policy: { resolution: "Optional" } },
      messages: ["spec.source: Required value"],
    },
    {
      reason: "an apiVersion with two slashes",
      spec: { source: { ...byName, apiVersion: "apps/v1/extra" } },
      messages: ["spec.source.apiVersion in body should match"],
    },
    {
      reason: "an apiVersion in upper case",
      spec: { source: { ...byName, apiVersion: "Apps/V1" } },
      messages: ["spec.source.apiVersion in body should match"],
    },
    {
      reason: "a kind with a space",
      spec: { source: { ...byName, kind: "Config Map" } },
      messages: ["spec.source.kind in body should match"],
    },
    {
      reason: "a namespace that is not a DNS label",
      spec: { source: { ...byName, namespace: "Team_A" } },
      messages: ["spec.source.namespace in body should match"],
    },
    {
      reason: "an operator that does not exist",
      spec: matchExpression({ key: "tier", operator: "Bogus", values: ["a"] }),
      messages: ['spec.source.selector.matchExpressions[0].operator: Unsupported value: "Bogus"'],
    },
    {
      reason: "operator In without values",
      spec: matchExpression({ key: "tier", operator: "In" }),
      messages: ["operator In needs at least one value"],
    },
    {
      reason: "operator Exists with values",
      spec: matchExpression({ key: "tier", operator: "Exists", values: ["a"] }),
      messages: ["operator Exists takes no values"],
    },
    {
      reason: "a matchExpressions key that is not a label key",
      spec: matchExpression({ key: "not a key", operator: "Exists" }),
      messages: ["spec.source.selector.matchExpressions[0].key in body should match"],
    },
    {
      reason: "a matchLabels key that is not a label key",
      spec: { source: { ...bySelector, selector: { matchLabels: { "not a key!": "x" } } } },
      messages: ["spec.source.selector.matchLabels: Invalid value: matchLabels keys must be label keys"],
    },
    {
      reason: "a matchLabels value that is not a label value",
      spec: { source: { ...bySelector, selector: { matchLabels: { app: "-bad-" } } } },
      messages: ["spec.source.selector.matchLabels.app in body should match"],
    },
    {
      reason: "two requireConditions of one type",
      spec: {
        source: {
          ...byName,
          requireConditions: [
            { type: "Ready", status: "True" },
            { type: "Ready", status: "False" },
          ],
        },
      },
      messages: ["spec.source.requireConditions[1]: Duplicate value"],
    },
    {
      reason: "a requireConditions status outside True, False, Unknown",
      spec: { source: { ...byName, requireConditions: [{ type: "Ready", status: "true" }] } },
      messages: ['spec.source.requireConditions[0].status: Unsupported value: "true"'],
    },
    {
      reason: "more than 16 requireConditions",
      spec: {
        source: {
          ...byName,
          requireConditions: Array.from({ length: 17 }, (_, i) => ({ type: `C${i}`, status: "True" })),
        },
      },
      messages: ["spec.source.requireConditions: Too many: 17: must have at most 16 items"],
    },
    {
      reason: "a resolution that does not exist",
      spec: { source: byName, policy: { resolution: "Sometimes" } },
      messages: ['spec.policy.resolution: Unsupported value: "Sometimes"'],
    },
    {
      reason: "a key of a kind other than ConfigMap or Secret (a Deployment takes a fieldPath)",
      spec: { source: byName, export: [{ ...exportTarget, kind: "Deployment" }] },
      messages: ["spec.export[0]: Invalid value", "a key is exported into a ConfigMap or a Secret"],
    },
    {
      reason: "an export key that is not a ConfigMap key",
      spec: { source: byName, export: [{ ...exportTarget, key: "DB HOST" }] },
      messages: ["spec.export[0].key in body should match '^[-._a-zA-Z0-9]+$'"],
    },
    {
      reason: "an export key of '..'",
      spec: { source: byName, export: [{ ...exportTarget, key: ".." }] },
      messages: ["spec.export[0].key: Invalid value", "key must not be '.' or '..'"],
    },
    {
      reason: "an export key over 253 characters",
      spec: { source: byName, export: [{ ...exportTarget, key: "k".repeat(254) }] },
      messages: ["spec.export[0].key: Too long: may not be more than 253"],
    },
    {
      reason: "an export namespace that is not a DNS label",
      spec: { source: byName, export: [{ ...exportTarget, namespace: "Team_B" }] },
      messages: ["spec.export[0].namespace in body should match"],
    },
    {
      reason: "an export object name that is not a DNS subdomain",
      spec: { source: byName, export: [{ ...exportTarget, name: "App_Settings" }] },
      messages: ["spec.export[0].name in body should match"],
    },
    {
      reason: "an export without a key",
      spec: { source: byName, export: [{ ...exportTarget, key: undefined }] },
      messages: ["set exactly one of key (a ConfigMap or Secret key) and fieldPath (a field of any object)"],
    },
    {
      reason: "an export with both a key and a fieldPath",
      spec: { source: byName, export: [{ ...exportTarget, apiVersion: "v1", fieldPath: "data.x" }] },
      messages: ["set exactly one of key (a ConfigMap or Secret key) and fieldPath (a field of any object)"],
    },
    {
      reason: "a field target without its apiVersion",
      spec: {
        source: byName,
        export: [{ kind: "Task", namespace: "team-b", name: "t", fieldPath: "spec.forProvider.x" }],
      },
      messages: ["a field target names the apiVersion of its object"],
    },
    {
      reason: "more than 16 export targets",
      spec: {
        source: byName,
        export: Array.from({ length: 17 }, (_, i) => ({ ...exportTarget, key: `K${i}` })),
      },
      messages: ["spec.export: Too many: 17: must have at most 16 items"],
    },
  ];

  it.each(cases)("refuses $reason", async ({ spec, messages }) => {
    const name = uniqueName("crd-invalid");
    const body = spec === undefined ? { ...referable(name, {}), spec: undefined } : referable(name, spec);
    const err = await refusal(admin.request("POST", RESOURCE, { body }));
    expect(isApiError(err, 422)).toBe(true);
    for (const message of messages) expect((err as Error).message).toContain(message);
  });

  it("refuses an update that breaks a rule, not only a create", async () => {
    const rf = await create("crd-update", { source: byName });
    const err = await refusal(
      admin.request("PATCH", `${RESOURCE}/${rf.metadata!.name!}`, {
        body: { spec: { source: { selector: { matchLabels: { app: "x" } } } } },
        contentType: "application/merge-patch+json",
      }),
    );
    expect(isApiError(err, 422)).toBe(true);
    expect((err as Error).message).toContain("name and selector are mutually exclusive");
  });
});

interface SchemaNode {
  description?: string;
  properties?: Record<string, SchemaNode>;
  items?: SchemaNode;
  additionalProperties?: SchemaNode | boolean;
}

/** Paths of the fields under `node` that have no description (metadata excepted: it may not have one). */
function undocumented(node: SchemaNode, path: string): string[] {
  const missing = node.description ? [] : [path];
  for (const [name, child] of Object.entries(node.properties ?? {}))
    if (path !== "" || name !== "metadata") missing.push(...undocumented(child, `${path}.${name}`));
  if (node.items) missing.push(...undocumented(node.items, `${path}[]`));
  if (typeof node.additionalProperties === "object")
    missing.push(...undocumented(node.additionalProperties, `${path}{}`));
  return missing;
}

describe("the installed Referable CRD", () => {
  it("documents every field, so kubectl explain is useful everywhere", async () => {
    const crd = await admin.request<{
      spec: { versions: Array<{ name: string; schema: { openAPIV3Schema: SchemaNode } }> };
    }>("GET", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/referables.referable.dev");
    const version = crd.spec.versions.find((v) => v.name === "v1alpha1");
    expect(undocumented(version!.schema.openAPIV3Schema, "")).toEqual([]);
  });
});

const binDir = process.env.REFERABLE_TEST_BIN_DIR;
// Skipped (and reported so) against an existing cluster, where the harness built no kubectl;
// failed in CI, where it always does.
const withKubectl = describeIf(
  binDir
    ? undefined
    : "no kubectl: REFERABLE_TEST_BIN_DIR is set only when the harness starts the control plane",
);

async function kubectl(...args: string[]): Promise<string> {
  const { stdout } = await execFileAsync(join(binDir!, "kubectl"), args, {
    env: { ...process.env, KUBECONFIG: process.env.REFERABLE_TEST_KUBECONFIG },
  });
  return stdout;
}

/**
 * Splits kubectl's table output into cells by the header's column offsets, so an empty cell
 * does not shift the ones after it.
 */
function parseTable(text: string): Array<Record<string, string>> {
  const [header = "", ...rows] = text.split("\n").filter((line) => line.trim() !== "");
  const columns = [...header.matchAll(/\S+/g)].map((m) => ({ name: m[0], start: m.index }));
  return rows.map((row) =>
    Object.fromEntries(
      columns.map((c, i) => [c.name, row.slice(c.start, columns[i + 1]?.start ?? row.length).trim()]),
    ),
  );
}

withKubectl("kubectl with the Referable CRD", () => {
  it("explain referable.spec.source documents fieldPath", async () => {
    const out = await kubectl("explain", "referable.spec.source");
    expect(out).toContain("fieldPath");
    expect(out).toContain("Where the value sits in the source");
    expect(out).toContain("Exactly one of name and selector is set.");
  });

  it("explain referable.spec.transform documents the variables, the errors and examples", async () => {
    const out = await kubectl("explain", "referable.spec.transform");
    expect(out).toContain("A CEL expression that shapes the value");
    for (const part of ["value", "values", "sources", "TransformFailed", "InvalidSpec", "Examples:"])
      expect(out).toContain(part);
    expect(out).toContain("base64.decode(value)");
  });

  it("explain referable.spec.export documents the write, the conflict, removal and the opt-in", async () => {
    const out = await kubectl("explain", "referable.spec.export");
    for (const part of [
      "server-side apply",
      "ExportConflict",
      "removed",
      "--allow-secret-export",
      "opted in",
    ])
      expect(out).toContain(part);
    const key = await kubectl("explain", "referable.spec.export.key");
    expect(key).toContain("letters, digits");
  });

  it("get rf shows READY, REASON, VALUE (values in mode Multiple), SOURCE, EXPORTED and AGE; -o wide adds KIND", async () => {
    const named = await create("crd-get-name", { source: byName });
    const selected = await create("crd-get-selector", {
      source: bySelector,
      selection: { mode: "Multiple" },
    });
    const counted = await create("crd-get-number", { source: byName });
    const names = [named, selected, counted].map((rf) => rf.metadata!.name!);
    const statuses = [
      { value: "arn:aws:s3:::bucket", conditions: [readyCondition("Available")] },
      { values: ["a", "b"], conditions: [readyCondition("TooFewMatches", "False")] },
      { value: { port: 5432 }, conditions: [readyCondition("Defaulted")] },
    ];
    // Re-written on each try: a controller running in the same cluster may own these objects.
    const rows = await waitFor("kubectl get rf to show the statuses", async () => {
      await Promise.all(names.map((name, i) => patchStatus(name, statuses[i]!)));
      const table = parseTable(await kubectl("get", "rf", ...names));
      return table.every((row) => row.READY !== "") && table;
    });
    // EXPORTED stays empty for a Referable without spec.export (export.test.ts fills it).
    expect(Object.keys(rows[0]!)).toEqual(["NAME", "READY", "REASON", "VALUE", "SOURCE", "EXPORTED", "AGE"]);
    const byRowName = Object.fromEntries(rows.map((row) => [row.NAME, row]));
    expect(byRowName[names[0]!]).toMatchObject({
      READY: "True",
      REASON: "Available",
      VALUE: "arn:aws:s3:::bucket",
      SOURCE: "x",
    });
    // Mode Multiple: the values, in the default columns (not only in -o wide).
    expect(byRowName[names[1]!]).toMatchObject({
      READY: "False",
      REASON: "TooFewMatches",
      VALUE: '["a","b"]',
      SOURCE: '{"matchLabels":{"app":"storage"}}',
    });
    expect(byRowName[names[2]!]).toMatchObject({
      READY: "True",
      REASON: "Defaulted",
      VALUE: '{"port":5432}',
      SOURCE: "x",
    });
    for (const row of rows) expect(row.AGE).toMatch(/^\d+[smhd]/);

    const wide = parseTable(await kubectl("get", "rf", names[1]!, "-o", "wide"));
    expect(Object.keys(wide[0]!)).toEqual([
      "NAME",
      "READY",
      "REASON",
      "VALUE",
      "SOURCE",
      "EXPORTED",
      "AGE",
      "KIND",
      "SERVICEACCOUNT",
      "SA-NAMESPACE",
    ]);
    expect(wide[0]).toMatchObject({ KIND: "ConfigMap", VALUE: '["a","b"]' });
  });
});
