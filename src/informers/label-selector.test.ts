import { isResolutionError } from "../errors.ts";
import type { LabelSelector } from "./label-selector.ts";
import { compileLabelSelector } from "./label-selector.ts";

describe("compileLabelSelector matches as apimachinery does", () => {
  const web = { app: "web", tier: "frontend" };
  const cases: {
    reason: string;
    selector: LabelSelector;
    labels: Record<string, string> | undefined;
    want: boolean;
  }[] = [
    { reason: "the empty selector matches everything", selector: {}, labels: web, want: true },
    {
      reason: "the empty selector matches an object without labels",
      selector: {},
      labels: undefined,
      want: true,
    },
    {
      reason: "null fields are the empty selector, as JSON from the API server may carry",
      selector: { matchLabels: null, matchExpressions: null },
      labels: undefined,
      want: true,
    },
    {
      reason: "matchLabels with every pair present",
      selector: { matchLabels: { app: "web" } },
      labels: web,
      want: true,
    },
    {
      reason: "matchLabels is an AND of every pair",
      selector: { matchLabels: { app: "web", tier: "backend" } },
      labels: web,
      want: false,
    },
    {
      reason: "matchLabels fails on an object without labels",
      selector: { matchLabels: { app: "web" } },
      labels: undefined,
      want: false,
    },
    {
      reason: "an empty label value matches only a label set to the empty string",
      selector: { matchLabels: { canary: "" } },
      labels: { canary: "" },
      want: true,
    },
    {
      reason: "an empty label value does not match a missing label",
      selector: { matchLabels: { canary: "" } },
      labels: {},
      want: false,
    },
    {
      reason: "In matches when the value is one of the values",
      selector: { matchExpressions: [{ key: "tier", operator: "In", values: ["backend", "frontend"] }] },
      labels: web,
      want: true,
    },
    {
      reason: "In does not match another value",
      selector: { matchExpressions: [{ key: "tier", operator: "In", values: ["backend"] }] },
      labels: web,
      want: false,
    },
    {
      reason: "In does not match an object without the key",
      selector: { matchExpressions: [{ key: "zone", operator: "In", values: ["a"] }] },
      labels: web,
      want: false,
    },
    {
      reason: "NotIn does not match a listed value",
      selector: { matchExpressions: [{ key: "tier", operator: "NotIn", values: ["frontend"] }] },
      labels: web,
      want: false,
    },
    {
      reason: "NotIn matches another value",
      selector: { matchExpressions: [{ key: "tier", operator: "NotIn", values: ["backend"] }] },
      labels: web,
      want: true,
    },
    {
      reason: "NotIn matches an object without the key",
      selector: { matchExpressions: [{ key: "zone", operator: "NotIn", values: ["a"] }] },
      labels: web,
      want: true,
    },
    {
      reason: "NotIn matches an object without labels",
      selector: { matchExpressions: [{ key: "zone", operator: "NotIn", values: ["a"] }] },
      labels: undefined,
      want: true,
    },
    {
      reason: "Exists matches whatever the value",
      selector: { matchExpressions: [{ key: "tier", operator: "Exists" }] },
      labels: web,
      want: true,
    },
    {
      reason: "Exists matches a label with an empty value",
      selector: { matchExpressions: [{ key: "canary", operator: "Exists", values: [] }] },
      labels: { canary: "" },
      want: true,
    },
    {
      reason: "Exists does not match a missing key",
      selector: { matchExpressions: [{ key: "zone", operator: "Exists" }] },
      labels: web,
      want: false,
    },
    {
      reason: "DoesNotExist matches a missing key",
      selector: { matchExpressions: [{ key: "legacy", operator: "DoesNotExist" }] },
      labels: web,
      want: true,
    },
    {
      reason: "DoesNotExist matches an object without labels",
      selector: { matchExpressions: [{ key: "legacy", operator: "DoesNotExist" }] },
      labels: undefined,
      want: true,
    },
    {
      reason: "DoesNotExist does not match a present key, even with an empty value",
      selector: { matchExpressions: [{ key: "legacy", operator: "DoesNotExist" }] },
      labels: { legacy: "" },
      want: false,
    },
    {
      reason: "matchLabels and matchExpressions are ANDed",
      selector: {
        matchLabels: { app: "web" },
        matchExpressions: [{ key: "tier", operator: "In", values: ["backend"] }],
      },
      labels: web,
      want: false,
    },
    {
      reason: "every requirement holding matches",
      selector: {
        matchLabels: { app: "web" },
        matchExpressions: [
          { key: "tier", operator: "In", values: ["frontend"] },
          { key: "legacy", operator: "DoesNotExist" },
          { key: "app", operator: "Exists" },
        ],
      },
      labels: web,
      want: true,
    },
    {
      reason: "keys are looked up as own labels, never on the prototype",
      selector: { matchExpressions: [{ key: "constructor", operator: "Exists" }] },
      labels: web,
      want: false,
    },
    {
      reason: "keys are case-sensitive",
      selector: { matchLabels: { App: "web" } },
      labels: web,
      want: false,
    },
    {
      reason: "prefixed keys match exactly",
      selector: { matchLabels: { "app.kubernetes.io/name": "web" } },
      labels: { "app.kubernetes.io/name": "web" },
      want: true,
    },
  ];

  it.each(cases)("$reason", ({ selector, labels, want }) => {
    const got = compileLabelSelector(selector).matches(labels);
    if (got !== want) {
      throw new Error(
        `matches(${JSON.stringify(labels)}) for ${JSON.stringify(selector)}: want ${want}, got ${got}`,
      );
    }
  });
});

describe("compileLabelSelector refuses what the API server refuses", () => {
  const long = (n: number): string => "a".repeat(n);
  const cases: { reason: string; selector: unknown; path?: string; message: string }[] = [
    {
      reason: "In needs values",
      selector: {
        matchExpressions: [
          { key: "a", operator: "Exists" },
          { key: "tier", operator: "In", values: [] },
        ],
      },
      message: 'selector.matchExpressions[1]: operator "In" needs at least one value',
    },
    {
      reason: "NotIn needs values, and absent values are no values",
      selector: { matchExpressions: [{ key: "tier", operator: "NotIn" }] },
      message: 'selector.matchExpressions[0]: operator "NotIn" needs at least one value',
    },
    {
      reason: "Exists takes no values",
      selector: { matchExpressions: [{ key: "tier", operator: "Exists", values: ["a"] }] },
      message: 'selector.matchExpressions[0]: operator "Exists" takes no values; remove values',
    },
    {
      reason: "DoesNotExist takes no values",
      selector: { matchExpressions: [{ key: "tier", operator: "DoesNotExist", values: ["a"] }] },
      message: 'selector.matchExpressions[0]: operator "DoesNotExist" takes no values; remove values',
    },
    {
      reason: "operators are case-sensitive, as in Kubernetes",
      selector: { matchExpressions: [{ key: "tier", operator: "in", values: ["a"] }] },
      message:
        'selector.matchExpressions[0]: operator "in" is not a label selector operator; use one of In, NotIn, Exists, DoesNotExist',
    },
    {
      reason: "Gt and Lt exist in labels.Selector but not in metav1.LabelSelector",
      selector: { matchExpressions: [{ key: "tier", operator: "Gt", values: ["1"] }] },
      message:
        'selector.matchExpressions[0]: operator "Gt" is not a label selector operator; use one of In, NotIn, Exists, DoesNotExist',
    },
    {
      reason: "a missing operator",
      selector: { matchExpressions: [{ key: "tier" }] },
      message:
        "selector.matchExpressions[0]: operator undefined is not a label selector operator; use one of In, NotIn, Exists, DoesNotExist",
    },
    {
      reason: "a key with a space",
      selector: { matchLabels: { "my app": "web" } },
      message:
        'selector.matchLabels["my app"]: label key "my app" is not valid: the name part must consist of',
    },
    {
      reason: "an empty key",
      selector: { matchExpressions: [{ key: "", operator: "Exists" }] },
      message: 'selector.matchExpressions[0]: label key "" is not valid: the name part must not be empty',
    },
    {
      reason: "a key starting with a non-alphanumeric",
      selector: { matchExpressions: [{ key: "-app", operator: "Exists" }] },
      message: 'label key "-app" is not valid: the name part must consist of',
    },
    {
      reason: "a key name over 63 characters",
      selector: { matchLabels: { [long(64)]: "x" } },
      message: "the name part must be at most 63 characters",
    },
    {
      reason: "a key with two slashes",
      selector: { matchLabels: { "a/b/c": "x" } },
      message: "it may contain at most one '/'",
    },
    {
      reason: "a key with an empty prefix",
      selector: { matchLabels: { "/app": "x" } },
      message: "the prefix before '/' must not be empty",
    },
    {
      reason: "a key with an empty name after the prefix",
      selector: { matchLabels: { "example.com/": "x" } },
      message: "the name part must not be empty",
    },
    {
      reason: "a prefix must be a lowercase DNS subdomain",
      selector: { matchLabels: { "Example.com/app": "x" } },
      message: "the prefix must be a DNS subdomain",
    },
    {
      reason: "a prefix over 253 characters",
      selector: { matchLabels: { [`${long(63)}.${long(63)}.${long(63)}.${long(63)}/app`]: "x" } },
      message: "the prefix must be at most 253 characters",
    },
    {
      reason: "a value over 63 characters",
      selector: { matchLabels: { app: long(64) } },
      message: "it must be at most 63 characters",
    },
    {
      reason: "a value with a slash",
      selector: { matchLabels: { app: "a/b" } },
      message: 'selector.matchLabels["app"]: label value "a/b" is not valid: it must be empty or consist of',
    },
    {
      reason: "a value ending with a dash, in an expression",
      selector: { matchExpressions: [{ key: "app", operator: "In", values: ["ok", "bad-"] }] },
      message: 'selector.matchExpressions[0].values[1]: label value "bad-" is not valid',
    },
    {
      reason: "a matchLabels value that is not a string",
      selector: { matchLabels: { replicas: 3 } },
      message: 'selector.matchLabels["replicas"]: the value must be a string, not a number',
    },
    {
      reason: "a value in an expression that is not a string",
      selector: { matchExpressions: [{ key: "app", operator: "In", values: [true] }] },
      message: "selector.matchExpressions[0].values[0]: must be a string, not a boolean",
    },
    {
      reason: "values that are not a list",
      selector: { matchExpressions: [{ key: "app", operator: "In", values: "web" }] },
      message: "selector.matchExpressions[0]: values must be a list of strings, not a string",
    },
    {
      reason: "matchExpressions that are not a list",
      selector: { matchExpressions: { key: "app", operator: "Exists" } },
      message: "selector.matchExpressions: must be a list",
    },
    {
      reason: "matchLabels that are not a map",
      selector: { matchLabels: ["app=web"] },
      message: "selector.matchLabels: must be a map",
    },
    {
      reason: "a selector that is not an object",
      selector: "app=web",
      message: "selector: must be an object",
    },
    {
      reason: "the path option names where the selector sits",
      selector: { matchExpressions: [{ key: "tier", operator: "In" }] },
      path: "spec.source.selector",
      message: 'spec.source.selector.matchExpressions[0]: operator "In" needs at least one value',
    },
    {
      reason: "an empty path is a selector inlined at the top level",
      selector: { matchExpressions: [{ key: "tier", operator: "In" }] },
      path: "",
      message: 'matchExpressions[0]: operator "In" needs at least one value',
    },
  ];

  it.each(cases)("$reason", ({ selector, path, message }) => {
    let thrown: unknown;
    try {
      compileLabelSelector(selector as LabelSelector, path === undefined ? {} : { path });
    } catch (err) {
      thrown = err;
    }
    if (!isResolutionError(thrown))
      throw new Error(`want an InvalidSpec ResolutionError, got ${String(thrown)}`);
    expect(thrown.reason).toBe("InvalidSpec");
    expect(thrown.retryable).toBe(false);
    if (!thrown.message.startsWith(message) && !thrown.message.includes(message)) {
      throw new Error(`want a message containing\n  ${message}\ngot\n  ${thrown.message}`);
    }
  });

  it.each([
    { reason: "a plain key", key: "app" },
    { reason: "a prefixed key", key: "app.kubernetes.io/name" },
    { reason: "a key with underscores, dots and dashes inside", key: "a_b.c-d" },
    { reason: "a one-character key", key: "a" },
    { reason: "a 63-character name", key: "a".repeat(63) },
    { reason: "a key that is a property of Object.prototype", key: "constructor" },
  ])("accepts $reason", ({ key }) => {
    expect(() => compileLabelSelector({ matchLabels: { [key]: "v" } })).not.toThrow();
  });

  it.each([
    { reason: "the empty string", value: "" },
    { reason: "mixed case with inner punctuation", value: "My_Value.v-1" },
    { reason: "63 characters", value: "a".repeat(63) },
  ])("accepts a value of $reason", ({ value }) => {
    expect(() => compileLabelSelector({ matchLabels: { app: value } })).not.toThrow();
  });
});

describe("compileLabelSelector canonical key and description", () => {
  const cases: { reason: string; a: LabelSelector; b: LabelSelector; same: boolean }[] = [
    {
      reason: "the order of matchLabels keys does not matter",
      a: { matchLabels: { app: "web", tier: "frontend" } },
      b: { matchLabels: { tier: "frontend", app: "web" } },
      same: true,
    },
    {
      reason: "the order of values does not matter",
      a: { matchExpressions: [{ key: "tier", operator: "In", values: ["a", "b"] }] },
      b: { matchExpressions: [{ key: "tier", operator: "In", values: ["b", "a"] }] },
      same: true,
    },
    {
      reason: "duplicate values do not matter",
      a: { matchExpressions: [{ key: "tier", operator: "NotIn", values: ["a", "a", "b"] }] },
      b: { matchExpressions: [{ key: "tier", operator: "NotIn", values: ["b", "a"] }] },
      same: true,
    },
    {
      reason: "the order of expressions does not matter",
      a: {
        matchExpressions: [
          { key: "b", operator: "Exists" },
          { key: "a", operator: "DoesNotExist" },
        ],
      },
      b: {
        matchExpressions: [
          { key: "a", operator: "DoesNotExist" },
          { key: "b", operator: "Exists" },
        ],
      },
      same: true,
    },
    {
      reason: "requirements on one key are ordered whatever their order",
      a: {
        matchExpressions: [
          { key: "a", operator: "NotIn", values: ["x"] },
          { key: "a", operator: "Exists" },
        ],
      },
      b: {
        matchExpressions: [
          { key: "a", operator: "Exists" },
          { key: "a", operator: "NotIn", values: ["x"] },
        ],
      },
      same: true,
    },
    {
      reason: "matchLabels and a one-value In require the same thing",
      a: { matchLabels: { app: "web" } },
      b: { matchExpressions: [{ key: "app", operator: "In", values: ["web"] }] },
      same: true,
    },
    {
      reason: "a requirement written twice is one requirement",
      a: { matchLabels: { app: "web" }, matchExpressions: [{ key: "app", operator: "In", values: ["web"] }] },
      b: { matchLabels: { app: "web" } },
      same: true,
    },
    {
      reason: "absent, null and empty fields are all the empty selector",
      a: { matchLabels: {}, matchExpressions: [] },
      b: { matchLabels: null },
      same: true,
    },
    {
      reason: "different values differ",
      a: { matchLabels: { app: "web" } },
      b: { matchLabels: { app: "api" } },
      same: false,
    },
    {
      reason: "In and NotIn differ",
      a: { matchExpressions: [{ key: "a", operator: "In", values: ["x"] }] },
      b: { matchExpressions: [{ key: "a", operator: "NotIn", values: ["x"] }] },
      same: false,
    },
    {
      reason: "Exists and DoesNotExist differ",
      a: { matchExpressions: [{ key: "a", operator: "Exists" }] },
      b: { matchExpressions: [{ key: "a", operator: "DoesNotExist" }] },
      same: false,
    },
    {
      reason: "the empty selector differs from any requirement",
      a: {},
      b: { matchExpressions: [{ key: "a", operator: "Exists" }] },
      same: false,
    },
  ];

  it.each(cases)("$reason", ({ a, b, same }) => {
    const ka = compileLabelSelector(a).key;
    const kb = compileLabelSelector(b).key;
    if ((ka === kb) !== same) {
      throw new Error(
        `want keys ${same ? "equal" : "different"}, got ${JSON.stringify(ka)} and ${JSON.stringify(kb)}`,
      );
    }
  });

  it.each([
    { reason: "the empty selector is the empty string, as labels.Everything()", selector: {}, want: "" },
    {
      reason: "every operator in kubectl form, sorted by key",
      selector: {
        matchLabels: { app: "web" },
        matchExpressions: [
          { key: "tier", operator: "In" as const, values: ["b", "a"] },
          { key: "legacy", operator: "DoesNotExist" as const },
          { key: "zone", operator: "NotIn" as const, values: ["z2", "z1"] },
          { key: "canary", operator: "Exists" as const },
          { key: "env", operator: "NotIn" as const, values: ["prod"] },
        ],
      },
      want: "app=web,canary,env!=prod,!legacy,tier in (a,b),zone notin (z1,z2)",
    },
  ])("describe: $reason", ({ selector, want }) => {
    const compiled = compileLabelSelector(selector);
    expect(compiled.describe()).toBe(want);
    expect(compiled.key).toBe(want);
  });
});
