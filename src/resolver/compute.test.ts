import type { InformerState } from "../informers/informer.ts";
import { objectKey } from "../informers/informer.ts";
import { LabelKeys } from "../informers/label-keys.ts";
import { project, type Extractor, type Projection } from "../informers/projection.ts";
import type { KubeObject } from "../kube/client.ts";
import { computeResult, NOT_KEPT, type ComputeLimits, type SourceView } from "./compute.ts";
import { compileRequest, type AnyReference, type CompiledRequest } from "./request.ts";
import type { ResolutionResult } from "./types.ts";

/**
 * A source view over a fixed set of objects, as the source cache would give it: each object
 * projected with `extractors` (what the cache's users asked to keep), read values capped at
 * `maxBytes`, keeping the labels `labelKeys` names.
 */
function view(
  objects: KubeObject[],
  extractors: readonly Extractor[],
  maxBytes: number,
  state: InformerState = { phase: "Synced" },
  labelKeys: readonly string[] = [],
): SourceView {
  const keys = new LabelKeys(labelKeys);
  const projected = objects.map((o) =>
    project(structuredClone(o), extractors, maxBytes, { labelKeys: keys }),
  );
  const byKey = new Map<string, Projection>(
    projected.map((p) => [objectKey(p.metadata.namespace, p.metadata.name), p]),
  );
  return {
    state,
    get: (namespace, name) => byKey.get(objectKey(namespace, name)),
    *list(namespace) {
      for (const p of projected) if (namespace === undefined || p.metadata.namespace === namespace) yield p;
    },
  };
}

/** Resolves `ref` over `objects` projected for it, as the resolver does once its interest is registered. */
function resolveIn(
  ref: AnyReference,
  objects: KubeObject[],
  caseLimits: ComputeLimits,
  state?: InformerState,
): ResolutionResult {
  const req: CompiledRequest = compileRequest(ref);
  const got = computeResult(
    req,
    view(objects, req.extractors, caseLimits.maxValueBytes, state, req.selector?.keys),
    caseLimits,
  );
  if ("notKept" in got) throw new Error("the projection kept every read the request needs, yet NOT_KEPT");
  return got;
}

interface CmOptions {
  ns?: string;
  labels?: Record<string, string>;
  data?: Record<string, unknown>;
  status?: Record<string, unknown>;
  rv?: string;
}

function cm(name: string, o: CmOptions = {}): KubeObject {
  const obj: KubeObject = {
    apiVersion: "v1",
    kind: "ConfigMap",
    metadata: {
      name,
      namespace: o.ns ?? "team-a",
      uid: `uid-${name}`,
      resourceVersion: o.rv ?? "7",
      labels: o.labels ?? { app: "web" },
    },
  };
  if (o.data) obj.data = o.data;
  if (o.status) obj.status = o.status;
  return obj;
}

const ready = { conditions: [{ type: "Ready", status: "True" }] };
const notReady = { conditions: [{ type: "Ready", status: "False" }] };

const named = (extra: Record<string, unknown> = {}): AnyReference =>
  ({
    apiVersion: "v1",
    kind: "ConfigMap",
    namespace: "team-a",
    name: "db",
    fieldPath: "data.url",
    ...extra,
  }) as AnyReference;

const selector = (extra: Record<string, unknown> = {}): AnyReference =>
  ({
    apiVersion: "v1",
    kind: "ConfigMap",
    namespace: "team-a",
    matchLabels: { app: "web" },
    fieldPath: "data.url",
    ...extra,
  }) as AnyReference;

const multiple = (extra: Record<string, unknown> = {}) => selector({ mode: "Multiple", ...extra });

/** What a case checks: the reason, the value(s), the names of the sources, and message fragments. */
interface Want {
  reason: string;
  value?: unknown;
  values?: unknown[];
  sources?: string[];
  message?: string[];
  notInMessage?: string[];
}

function summarise(result: ResolutionResult): Want & { message?: string[] } {
  if (!result.ok) return { reason: result.error.reason, message: [result.error.message] };
  const out: Want = { reason: result.reason };
  if ("values" in result) {
    out.values = result.values;
    out.sources = result.sources.map((s) => s.name);
  } else {
    if ("value" in result && result.value !== undefined) out.value = result.value;
    if (result.source) out.sources = [result.source.name];
  }
  return out;
}

interface Case {
  reason: string;
  ref: AnyReference;
  objects?: KubeObject[];
  state?: InformerState;
  limits?: ComputeLimits;
  want: Want;
}

/** The parts of the message of a selection short of minMatch: what matched, what lacked the field, what is left. */
const shortOfMinMatch = (matches: number, without: number, values: number, minMatch: number) => [
  `${matches} objects match`,
  `(${without} without data.url)`,
  `giving ${values} value(s)`,
  `minMatch is ${minMatch}`,
];

const limits: ComputeLimits = { maxValueBytes: 1024 };

const cases: Case[] = [
  // The informer's state comes first.
  {
    reason: "before the first list completes the result is Pending",
    ref: named(),
    objects: [cm("db", { data: { url: "x" } })],
    state: { phase: "Pending" },
    want: { reason: "Pending", message: ["ConfigMap"] },
  },
  {
    reason: "an informer refused by RBAC gives Forbidden with its message",
    ref: named(),
    state: { phase: "Failed", reason: "Forbidden", message: "may not list configmaps" },
    want: { reason: "Forbidden", message: ["may not list configmaps"] },
  },
  {
    reason: "an informer whose resource is gone gives KindNotFound with its message",
    ref: named(),
    state: { phase: "Failed", reason: "KindNotFound", message: "no longer serves widgets" },
    want: { reason: "KindNotFound", message: ["no longer serves widgets"] },
  },
  {
    reason: "an external literal resolves whatever the informer's state",
    ref: { apiVersion: "v1", kind: "ConfigMap", external: { arn: "a:b" } } as AnyReference,
    state: { phase: "Pending" },
    want: { reason: "Available", value: { arn: "a:b" } },
  },
  // A named source.
  {
    reason: "a named source that exists gives its value, Available",
    ref: named(),
    objects: [cm("db", { data: { url: "postgres://db" } })],
    want: { reason: "Available", value: "postgres://db", sources: ["db"] },
  },
  {
    reason: "a value keeps its JSON type (a number stays a number)",
    ref: named({ fieldPath: "data.port" }),
    objects: [cm("db", { data: { port: 5432 } })],
    want: { reason: "Available", value: 5432, sources: ["db"] },
  },
  {
    reason: "a value keeps its JSON type (an object stays an object)",
    ref: named({ fieldPath: "data.conn" }),
    objects: [cm("db", { data: { conn: { host: "h", tls: true } } })],
    want: { reason: "Available", value: { host: "h", tls: true }, sources: ["db"] },
  },
  {
    reason: "an object of the same name in another namespace is not the source",
    ref: named(),
    objects: [cm("db", { ns: "team-b", data: { url: "x" } })],
    want: { reason: "SourceNotFound", message: ["ConfigMap team-a/db does not exist"] },
  },
  {
    reason: "a missing field is FieldNotFound, naming the object and the path",
    ref: named(),
    objects: [cm("db", { data: { other: "x" } })],
    want: { reason: "FieldNotFound", message: ["team-a/db", "data.url"] },
  },
  {
    reason: "requireConditions unmet gives SourceNotReady, naming the condition",
    ref: named({ requireConditions: [{ type: "Ready", status: "True" }] }),
    objects: [cm("db", { data: { url: "x" }, status: notReady })],
    want: { reason: "SourceNotReady", message: ["team-a/db", "Ready=True"] },
  },
  {
    reason: "requireConditions unmet when the object has no conditions at all",
    ref: named({ requireConditions: [{ type: "Ready" }] }),
    objects: [cm("db", { data: { url: "x" } })],
    want: { reason: "SourceNotReady", message: ["Ready=True"] },
  },
  {
    reason: "requireConditions met gives the value",
    ref: named({ requireConditions: [{ type: "Ready", status: "True" }] }),
    objects: [cm("db", { data: { url: "x" }, status: ready })],
    want: { reason: "Available", value: "x", sources: ["db"] },
  },
  // The policy for a missing source or field.
  {
    reason: "a missing source with a default is Defaulted",
    ref: named({ default: "fallback" }),
    want: { reason: "Defaulted", value: "fallback" },
  },
  {
    reason: "a missing field with a default is Defaulted",
    ref: named({ default: 3 }),
    objects: [cm("db", { data: {} })],
    want: { reason: "Defaulted", value: 3 },
  },
  {
    reason: "a default wins over Optional",
    ref: named({ default: "fallback", policy: { resolution: "Optional" } }),
    want: { reason: "Defaulted", value: "fallback" },
  },
  {
    reason: "a missing source with Optional and no default is Optional with no value",
    ref: named({ policy: { resolution: "Optional" } }),
    want: { reason: "Optional" },
  },
  {
    reason: "a missing field with Optional is Optional with no value",
    ref: named({ policy: { resolution: "Optional" } }),
    objects: [cm("db", { data: {} })],
    want: { reason: "Optional" },
  },
  {
    reason: "a source that is not ready is not 'missing': the default does not hide it",
    ref: named({ default: "fallback", requireConditions: [{ type: "Ready" }] }),
    objects: [cm("db", { data: { url: "x" }, status: notReady })],
    want: { reason: "SourceNotReady" },
  },
  // Size.
  {
    reason: "a value over the limit is ValueTooLarge with its size and the limit, never the value",
    ref: named(),
    objects: [cm("db", { data: { url: "s3cr3t-".repeat(20) } })],
    limits: { maxValueBytes: 50 },
    want: { reason: "ValueTooLarge", message: ["142 bytes", "limit of 50"], notInMessage: ["s3cr3t"] },
  },
  {
    reason: "a value exactly at the limit is accepted (JSON bytes, quotes included)",
    ref: named(),
    objects: [cm("db", { data: { url: "abc" } })],
    limits: { maxValueBytes: 5 },
    want: { reason: "Available", value: "abc", sources: ["db"] },
  },
  {
    reason: "a default over the limit is ValueTooLarge too, and the message says it is the default",
    ref: named({ default: "x".repeat(100) }),
    limits: { maxValueBytes: 10 },
    want: {
      reason: "ValueTooLarge",
      message: ["102 bytes", "the default of", "set a smaller default"],
      notInMessage: ["value read from"],
    },
  },
  {
    reason: "an external literal over the limit is ValueTooLarge",
    ref: { apiVersion: "v1", kind: "ConfigMap", external: "y".repeat(64) } as AnyReference,
    limits: { maxValueBytes: 10 },
    want: { reason: "ValueTooLarge", message: ["66 bytes", "external"], notInMessage: ["yyy"] },
  },
  {
    reason: "a JSONPath that selects too much is ValueTooLarge, not a throw",
    ref: named({ fieldPath: "$..*" }),
    objects: [cm("db", { data: { big: Array.from({ length: 10_001 }, (_, i) => i) } })],
    want: { reason: "ValueTooLarge" },
  },
  {
    reason: "a sortByFieldPath that selects too much is ValueTooLarge, not a throw",
    ref: multiple({ sortByFieldPath: "$..*" }),
    objects: [
      cm("a", { data: { url: "a", big: Array.from({ length: 10_001 }, (_, i) => i) } }),
      cm("b", { data: { url: "b" } }),
    ],
    want: { reason: "ValueTooLarge", message: ["$..*"] },
  },
  // Single-mode selectors.
  {
    reason: "a selector matching exactly one object gives its value",
    ref: selector(),
    objects: [cm("a", { data: { url: "x" } }), cm("b", { labels: { app: "api" }, data: { url: "y" } })],
    want: { reason: "Available", value: "x", sources: ["a"] },
  },
  {
    reason: "a selector matching nothing is SourceNotFound",
    ref: selector(),
    objects: [cm("b", { labels: { app: "api" }, data: { url: "y" } })],
    want: { reason: "SourceNotFound", message: ["no object matches", "app=web"] },
  },
  {
    reason: "a selector only looks in its namespace",
    ref: selector(),
    objects: [cm("a", { ns: "team-b", data: { url: "x" } })],
    want: { reason: "SourceNotFound" },
  },
  {
    reason: "a selector matching nothing, with Optional, is Optional",
    ref: selector({ policy: { resolution: "Optional" } }),
    want: { reason: "Optional" },
  },
  {
    reason: "Single mode with two matches is AmbiguousSelector, naming both in order",
    ref: selector(),
    objects: [cm("b", { data: { url: "y" } }), cm("a", { data: { url: "x" } })],
    want: { reason: "AmbiguousSelector", message: ["2 objects match", "(team-a/a, team-a/b)"] },
  },
  {
    reason: "AmbiguousSelector names at most five objects, then '...'",
    ref: selector(),
    objects: ["g", "f", "e", "d", "c", "b", "a"].map((n) => cm(n, { data: { url: n } })),
    want: {
      reason: "AmbiguousSelector",
      message: ["7 objects match", "(team-a/a, team-a/b, team-a/c, team-a/d, team-a/e, ...)"],
      notInMessage: ["team-a/f"],
    },
  },
  {
    reason: "AmbiguousSelector with exactly five names has no '...'",
    ref: selector(),
    objects: ["e", "d", "c", "b", "a"].map((n) => cm(n, { data: { url: n } })),
    want: { reason: "AmbiguousSelector", message: ["team-a/e)"], notInMessage: ["..."] },
  },
  // Multiple-mode selectors.
  {
    reason: "Multiple sorts by name by default",
    ref: multiple(),
    objects: [cm("c", { data: { url: 3 } }), cm("a", { data: { url: 1 } }), cm("b", { data: { url: 2 } })],
    want: { reason: "Available", values: [1, 2, 3], sources: ["a", "b", "c"] },
  },
  {
    reason: "Multiple across namespaces sorts by name, then by namespace",
    ref: multiple({ namespace: undefined }),
    objects: [
      cm("b", { ns: "ns1", data: { url: "ns1/b" } }),
      cm("a", { ns: "ns2", data: { url: "ns2/a" } }),
      cm("a", { ns: "ns1", data: { url: "ns1/a" } }),
    ],
    want: { reason: "Available", values: ["ns1/a", "ns2/a", "ns1/b"], sources: ["a", "a", "b"] },
  },
  {
    reason: "sortByFieldPath compares numbers numerically (2 before 10)",
    ref: multiple({ sortByFieldPath: "data.rank" }),
    objects: [
      cm("a", { data: { url: "ten", rank: 10 } }),
      cm("b", { data: { url: "two", rank: 2 } }),
      cm("c", { data: { url: "one", rank: 1 } }),
    ],
    want: { reason: "Available", values: ["one", "two", "ten"], sources: ["c", "b", "a"] },
  },
  {
    reason: "sortByFieldPath compares strings as text ('10' before '2')",
    ref: multiple({ sortByFieldPath: "data.rank" }),
    objects: [cm("a", { data: { url: "two", rank: "2" } }), cm("b", { data: { url: "ten", rank: "10" } })],
    want: { reason: "Available", values: ["ten", "two"], sources: ["b", "a"] },
  },
  {
    reason: "objects without the sort field come last, by name",
    ref: multiple({ sortByFieldPath: "data.rank" }),
    objects: [
      cm("a", { data: { url: "a" } }),
      cm("z", { data: { url: "z", rank: 5 } }),
      cm("m", { data: { url: "m" } }),
    ],
    want: { reason: "Available", values: ["z", "a", "m"], sources: ["z", "a", "m"] },
  },
  {
    reason: "equal sort values fall back to the name",
    ref: multiple({ sortByFieldPath: "data.rank" }),
    objects: [cm("b", { data: { url: "b", rank: 1 } }), cm("a", { data: { url: "a", rank: 1 } })],
    want: { reason: "Available", values: ["a", "b"], sources: ["a", "b"] },
  },
  {
    reason: "objects not ready or without the field are skipped, not blocking the rest",
    ref: multiple({ requireConditions: [{ type: "Ready" }] }),
    objects: [
      cm("a", { data: { url: "a" }, status: ready }),
      cm("b", { data: { url: "b" }, status: notReady }),
      cm("c", { data: {}, status: ready }),
      cm("d", { data: { url: "d" }, status: ready }),
    ],
    want: { reason: "Available", values: ["a", "d"], sources: ["a", "d"] },
  },
  {
    reason: "maxMatch keeps the first N after sorting",
    ref: multiple({ maxMatch: 2 }),
    objects: ["d", "c", "b", "a"].map((n) => cm(n, { data: { url: n } })),
    want: { reason: "Available", values: ["a", "b"], sources: ["a", "b"] },
  },
  {
    reason: "maxMatch counts values, so a skipped object does not use up a slot",
    ref: multiple({ maxMatch: 2 }),
    objects: [cm("a", { data: {} }), cm("b", { data: { url: "b" } }), cm("c", { data: { url: "c" } })],
    want: { reason: "Available", values: ["b", "c"], sources: ["b", "c"] },
  },
  {
    reason: "fewer values than minMatch is TooFewMatches, with the counts",
    ref: multiple({ minMatch: 3 }),
    objects: [cm("a", { data: { url: "a" } }), cm("b", { data: {} })],
    want: { reason: "TooFewMatches", message: shortOfMinMatch(2, 1, 1, 3) },
  },
  // Mode Multiple: what a selection that falls short of minMatch means (docs/api.md, "Mode
  // Multiple: matches without the field").
  {
    reason: "every match lacking the field is FieldNotFound, as one named source lacking it would be",
    ref: multiple(),
    objects: [cm("a", { data: {} }), cm("b", { data: {} })],
    want: { reason: "FieldNotFound", message: shortOfMinMatch(2, 2, 0, 1) },
  },
  {
    reason: "matches lacking the field with a list default are Defaulted, as no match at all is",
    ref: multiple({ default: ["x", "y"] }),
    objects: [cm("a", { data: {} })],
    want: { reason: "Defaulted", values: ["x", "y"], sources: [] },
  },
  {
    reason: "matches lacking the field under Optional are Optional with empty lists",
    ref: multiple({ policy: { resolution: "Optional" } }),
    objects: [cm("a", { data: {} })],
    want: { reason: "Optional", values: [], sources: [] },
  },
  {
    reason: "enough matches but too few with the field is FieldNotFound, with the counts",
    ref: multiple({ minMatch: 2 }),
    objects: [cm("a", { data: { url: "a" } }), cm("b", { data: {} })],
    want: { reason: "FieldNotFound", message: shortOfMinMatch(2, 1, 1, 2) },
  },
  {
    reason: "too few matches with a default is Defaulted, the default standing for the whole list",
    ref: multiple({ minMatch: 2, default: ["x"] }),
    objects: [cm("a", { data: { url: "a" } })],
    want: { reason: "Defaulted", values: ["x"], sources: [] },
  },
  {
    reason: "too few matches under Optional is Optional with empty lists, not a partial list",
    ref: multiple({ minMatch: 2, policy: { resolution: "Optional" } }),
    objects: [cm("a", { data: { url: "a" } })],
    want: { reason: "Optional", values: [], sources: [] },
  },
  {
    reason: "a shortfall the not-ready matches would make up is SourceNotReady, and the default waits",
    ref: multiple({ requireConditions: [{ type: "Ready" }], default: ["x"] }),
    objects: [cm("a", { data: { url: "a" }, status: notReady })],
    want: {
      reason: "SourceNotReady",
      message: ["1 object matches", "(1 not ready)", "ConfigMap team-a/a does not report"],
      notInMessage: ["nor do"],
    },
  },
  {
    reason: "several not-ready matches are named by the first in order and a count",
    ref: multiple({ requireConditions: [{ type: "Ready" }], minMatch: 2 }),
    objects: [
      cm("c", { data: { url: "c" }, status: notReady }),
      cm("b", { data: { url: "b" }, status: notReady }),
    ],
    want: {
      reason: "SourceNotReady",
      message: ["(2 not ready)", "ConfigMap team-a/b does not report", "yet, nor do 1 more"],
    },
  },
  {
    reason: "not-ready matches that could not make up the shortfall leave the field missing",
    ref: multiple({ requireConditions: [{ type: "Ready" }], minMatch: 3 }),
    objects: [
      cm("a", { data: { url: "a" }, status: ready }),
      cm("b", { data: { url: "b" }, status: notReady }),
      cm("c", { data: {}, status: ready }),
    ],
    want: {
      reason: "FieldNotFound",
      message: ["3 objects match", "(1 not ready, 1 without data.url)", "giving 1 value(s)"],
    },
  },
  {
    reason: "one match under minMatch says 'object matches' in the singular",
    ref: multiple({ minMatch: 2 }),
    objects: [cm("a", { data: { url: "a" } })],
    want: {
      reason: "TooFewMatches",
      message: ["1 object matches", "giving 1 value(s)"],
      notInMessage: ["of them"],
    },
  },
  {
    reason: "minMatch 0 with no match is Available with empty lists",
    ref: multiple({ minMatch: 0 }),
    want: { reason: "Available", values: [], sources: [] },
  },
  {
    reason: "Multiple with no match and the default minMatch is SourceNotFound",
    ref: multiple(),
    want: { reason: "SourceNotFound", message: ["no object matches"] },
  },
  {
    reason: "Multiple with no match and a list default is Defaulted with that list",
    ref: multiple({ default: ["x", "y"] }),
    want: { reason: "Defaulted", values: ["x", "y"], sources: [] },
  },
  {
    reason: "Multiple with no match wraps a non-list default in a list",
    ref: multiple({ default: "x" }),
    want: { reason: "Defaulted", values: ["x"], sources: [] },
  },
  {
    reason: "Multiple with no match and Optional is Optional with empty lists",
    ref: multiple({ policy: { resolution: "Optional" } }),
    want: { reason: "Optional", values: [], sources: [] },
  },
  {
    reason: "Multiple values over the limit together are ValueTooLarge",
    ref: multiple(),
    objects: ["a", "b", "c"].map((n) => cm(n, { data: { url: n.repeat(10) } })),
    limits: { maxValueBytes: 20 },
    want: { reason: "ValueTooLarge", message: ["40 bytes", "limit of 20"], notInMessage: ["aaaa"] },
  },
  {
    reason: "Multiple with more values than a status holds is ValueTooLarge, however small they are",
    ref: multiple(),
    objects: ["a", "b", "c", "d"].map((n) => cm(n, { data: { url: n } })),
    limits: { maxValueBytes: 1024, maxValues: 3 },
    want: {
      reason: "ValueTooLarge",
      message: ["4 objects match", "more than 3 values", "set maxMatch"],
      notInMessage: ['"a"'],
    },
  },
  {
    reason: "maxMatch within the most values a status holds keeps the selector usable",
    ref: multiple({ maxMatch: 3 }),
    objects: ["a", "b", "c", "d"].map((n) => cm(n, { data: { url: n } })),
    limits: { maxValueBytes: 1024, maxValues: 3 },
    want: { reason: "Available", values: ["a", "b", "c"], sources: ["a", "b", "c"] },
  },
];

describe("computeResult", () => {
  it.each(cases)("$reason", ({ ref, objects, state, limits: caseLimits, want }) => {
    const got = resolveIn(ref, objects ?? [], caseLimits ?? limits, state);
    const summary = summarise(got);
    const { message: wantMessage, notInMessage, ...wantShape } = want;
    const { message: gotMessage, ...gotShape } = summary;
    expect(gotShape).toEqual(wantShape);
    const text = gotMessage?.[0] ?? "";
    for (const part of wantMessage ?? []) expect(text).toContain(part);
    for (const part of notInMessage ?? []) expect(text).not.toContain(part);
  });

  it("a source ref carries apiVersion, kind, namespace, uid and the resourceVersion read", () => {
    const got = resolveIn(named(), [cm("db", { rv: "42", data: { url: "x" } })], limits);
    expect(got).toEqual({
      ok: true,
      reason: "Available",
      value: "x",
      source: {
        apiVersion: "v1",
        kind: "ConfigMap",
        namespace: "team-a",
        name: "db",
        uid: "uid-db",
        resourceVersion: "42",
      },
    });
  });

  it("a cluster-scoped source ref has no namespace", () => {
    const node: KubeObject = {
      metadata: { name: "n1", uid: "u1", resourceVersion: "3", labels: {} },
      spec: { podCIDR: "10.0.0.0/24" },
    };
    const got = resolveIn(
      { apiVersion: "v1", kind: "Node", name: "n1", fieldPath: "spec.podCIDR" },
      [node],
      limits,
    );
    expect(got.ok && "source" in got && got.source).toEqual({
      apiVersion: "v1",
      kind: "Node",
      name: "n1",
      uid: "u1",
      resourceVersion: "3",
    });
  });

  it("Multiple pairs values[i] with sources[i], each with its own resourceVersion", () => {
    const got = resolveIn(
      multiple(),
      [cm("b", { rv: "9", data: { url: "B" } }), cm("a", { rv: "8", data: { url: "A" } })],
      limits,
    );
    if (!got.ok || !("values" in got)) throw new Error(`want Multiple values, got ${JSON.stringify(got)}`);
    expect(got.values).toEqual(["A", "B"]);
    expect(got.sources.map((s) => [s.name, s.resourceVersion, s.uid])).toEqual([
      ["a", "8", "uid-a"],
      ["b", "9", "uid-b"],
    ]);
  });

  it("failures carry the ResolutionError's retryable flag", () => {
    const got = resolveIn(named(), [], limits);
    expect(got.ok).toBe(false);
    if (!got.ok) expect(got.error.retryable).toBe(true);
  });

  it.each([
    {
      reason: "a named object projected without the fieldPath's read is not guessed at",
      ref: () => named(),
      keep: [] as Extractor[],
    },
    {
      reason: "a selector's match projected without the read is not skipped as if it lacked the field",
      ref: () => multiple(),
      keep: [] as Extractor[],
    },
    {
      reason: "a required condition whose check was not kept is not taken as met",
      ref: () => ({ ...named(), requireConditions: [{ type: "Ready", status: "True" }] }),
      keep: compileRequest({ ...named(), requireConditions: [] }).extractors,
    },
    {
      reason: "a selector over objects decoded without its label key is not decided on absent labels",
      ref: () => multiple(),
      keep: compileRequest(multiple()).extractors,
      labelKeys: [] as string[],
    },
    {
      reason: "a DoesNotExist selector does not take a label that was not kept for an absent one",
      ref: () => ({
        ...multiple(),
        matchLabels: undefined,
        matchExpressions: [{ key: "app", operator: "DoesNotExist" }],
      }),
      keep: compileRequest(multiple()).extractors,
      labelKeys: ["tier"],
    },
  ])("NOT_KEPT: $reason", ({ ref, keep, labelKeys }) => {
    const req = compileRequest(ref() as AnyReference);
    const objects = [cm("db", { labels: { app: "web" }, data: { url: "x" } })];
    const v = view(objects, keep, limits.maxValueBytes, undefined, labelKeys ?? req.selector?.keys);
    expect(computeResult(req, v, limits)).toBe(NOT_KEPT);
  });

  it("a value over the byte cap is not kept by the cache, only its size, and resolves to ValueTooLarge", () => {
    const req = compileRequest(named());
    const big = "x".repeat(5000);
    const v = view([cm("db", { data: { url: big } })], req.extractors, 1024);
    const p = v.get("team-a", "db");
    expect(p?.reads?.get(req.fieldKey!)).toEqual({ kind: "TooLarge", bytes: 5002, limit: 1024 });
    const got = computeResult(req, v, { maxValueBytes: 1024 });
    expect(got).toMatchObject({ ok: false, error: { reason: "ValueTooLarge" } });
  });
});

describe("__proto__, constructor and prototype are ordinary keys in what is read", () => {
  // Keys as a decoded object has them: own data properties (JSON.parse defines them so).
  const data = () =>
    JSON.parse('{"__proto__":"p","constructor":"c","prototype":"t","url":"u"}') as Record<string, string>;

  it.each([
    { reason: "a read of the whole map keeps __proto__ as its own key", fieldPath: "data", key: "__proto__" },
    { reason: "a read of the whole map keeps constructor", fieldPath: "data", key: "constructor" },
    { reason: "a read of the whole map keeps prototype", fieldPath: "data", key: "prototype" },
  ])("$reason", ({ fieldPath, key }) => {
    const got = resolveIn(named({ fieldPath }), [cm("db", { data: data() })], limits);
    if (!got.ok || !("value" in got)) throw new Error(`want a value, got ${JSON.stringify(got)}`);
    const value = got.value as Record<string, unknown>;
    expect(Object.getPrototypeOf(value)).toBe(Object.prototype);
    expect(Object.hasOwn(value, key)).toBe(true);
    expect(JSON.stringify(value)).toBe('{"__proto__":"p","constructor":"c","prototype":"t","url":"u"}');
  });

  it.each([
    { fieldPath: "data.__proto__", want: "p" },
    { fieldPath: "data.constructor", want: "c" },
    { fieldPath: "data.prototype", want: "t" },
  ])("$fieldPath reads the own key's value", ({ fieldPath, want }) => {
    const got = resolveIn(named({ fieldPath }), [cm("db", { data: data() })], limits);
    expect(got).toMatchObject({ ok: true, value: want });
  });

  it("a selector on constructor matches the label, not the prototype's property", () => {
    const sel = multiple({
      matchLabels: undefined,
      matchExpressions: [{ key: "constructor", operator: "Exists" }],
    });
    const got = resolveIn(
      sel,
      [
        cm("a", { labels: { constructor: "x" }, data: { url: "A" } }),
        cm("b", { labels: {}, data: { url: "B" } }),
      ],
      limits,
    );
    expect(got).toMatchObject({ ok: true, values: ["A"] });
  });
});
