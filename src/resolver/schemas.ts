/**
 * OpenAPI v3 schemas of `GenericReference`, `GenericSelector` and a list of references (`./types.ts`),
 * for consumers to embed in their own CRDs (`spec.bucketRef: genericReferenceSchema`).
 *
 * Each schema is structural, as `apiextensions.k8s.io/v1` requires: every node has a `type` (or
 * says it holds any JSON), every field has a description that `kubectl explain` shows, and the
 * rules that span fields are CEL `x-kubernetes-validations` (or a `oneOf` where CEL cannot see a
 * field), so the API server refuses a malformed reference when it is written instead of the
 * resolver finding out later. Lists and maps carry `maxItems`/`maxProperties` because the API
 * server refuses a CRD whose CEL rules it cannot bound in cost, and these schemas may end up
 * nested inside a consumer's own lists.
 *
 * Label keys in `matchLabels` cannot be checked by the schema (keys have no schema); the resolver
 * checks them and reports `InvalidSpec`.
 *
 * The exported objects are deeply frozen: spread one to change a description or a limit.
 */
import { Limits } from "../api/limits.ts";

/** One rule of `x-kubernetes-validations`: a CEL expression that must be true for the node. */
export interface ValidationRule {
  /** The CEL expression, with `self` bound to the node. */
  readonly rule: string;
  /** What the API server answers when the rule is false. */
  readonly message?: string;
  /** A CEL expression that builds the message, when it depends on the value. */
  readonly messageExpression?: string;
  /** The reason of the API server's error. @default "FieldValueInvalid" */
  readonly reason?:
    "FieldValueInvalid" | "FieldValueForbidden" | "FieldValueRequired" | "FieldValueDuplicate";
  /** The field the error is reported on, relative to the node (`.name`). */
  readonly fieldPath?: string;
}

/**
 * The subset of `apiextensions.k8s.io/v1` `JSONSchemaProps` these schemas use, spelled as in a
 * CRD's YAML (the `x-kubernetes-*` names, not `@kubernetes/client-node`'s camelCase models).
 */
export interface JSONSchemaProps {
  /** The JSON type of the node. */
  readonly type?: "object" | "array" | "string" | "integer" | "number" | "boolean";
  /** What `kubectl explain` shows for the node. */
  readonly description?: string;
  /** The fields of an object, by name. */
  readonly properties?: Readonly<Record<string, JSONSchemaProps>>;
  /** The fields an object must have. */
  readonly required?: readonly string[];
  /** The schema of every value of a map, or whether unknown fields are kept. */
  readonly additionalProperties?: JSONSchemaProps | boolean;
  /** The schema of every item of a list. */
  readonly items?: JSONSchemaProps;
  /** The values the node may take. */
  readonly enum?: readonly (string | number | boolean)[];
  /** A format such as `int32`, `int64` or `date-time`. */
  readonly format?: string;
  /** A regular expression a string must match. */
  readonly pattern?: string;
  /** The shortest a string may be. */
  readonly minLength?: number;
  /** The longest a string may be. */
  readonly maxLength?: number;
  /** The smallest a number may be. */
  readonly minimum?: number;
  /** The largest a number may be. */
  readonly maximum?: number;
  /** The fewest items a list may have. */
  readonly minItems?: number;
  /** The most items a list may have. */
  readonly maxItems?: number;
  /** The fewest entries a map may have. */
  readonly minProperties?: number;
  /** The most entries a map may have. */
  readonly maxProperties?: number;
  /** Whether `null` is accepted (and kept) for the node. */
  readonly nullable?: boolean;
  /** The value the API server fills in when the field is absent. */
  readonly default?: unknown;
  /** Keep fields the schema does not declare (any JSON below this node). */
  readonly "x-kubernetes-preserve-unknown-fields"?: boolean;
  /** The node is an integer or a string. */
  readonly "x-kubernetes-int-or-string"?: boolean;
  /** The node is a whole Kubernetes object (with apiVersion, kind, metadata). */
  readonly "x-kubernetes-embedded-resource"?: boolean;
  /** How server-side apply merges the list: `atomic`, `set` or `map`. */
  readonly "x-kubernetes-list-type"?: "atomic" | "set" | "map";
  /** The keys that identify an item of a `map` list. */
  readonly "x-kubernetes-list-map-keys"?: readonly string[];
  /** How server-side apply merges the map: `atomic` or `granular`. */
  readonly "x-kubernetes-map-type"?: "atomic" | "granular";
  /** CEL rules the API server checks on write. */
  readonly "x-kubernetes-validations"?: readonly ValidationRule[];
  /**
   * Value validations of which exactly one must hold.
   *
   * Structural schemas allow junctors only over value validations (`required`, `enum`, ...) of
   * fields declared outside them: never `type`, `description` or `default` inside.
   */
  readonly oneOf?: readonly JSONSchemaProps[];
  /** Value validations of which at least one must hold. */
  readonly anyOf?: readonly JSONSchemaProps[];
  /** Value validations that must all hold. */
  readonly allOf?: readonly JSONSchemaProps[];
  /** A value validation that must not hold. */
  readonly not?: JSONSchemaProps;
}

/** Bounds on lists and maps, chosen far above real use and low enough to keep CEL cost bounded. */
export const SchemaLimits = {
  /** Items of `requireConditions`. */
  requireConditions: 16,
  /** Entries of `matchLabels`. */
  matchLabels: 64,
  /** Items of `matchExpressions`. */
  matchExpressions: 32,
  /** Items of one expression's `values`. */
  expressionValues: 64,
  /** Items of a reference list (`fooRefs`). */
  referenceList: 128,
} as const;

// API machinery's formats. The object name is not constrained by a pattern: which names are valid
// depends on the kind (most are DNS subdomains, some allow more), and the API server knows best.
const DNS1123_LABEL = "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$";
const DNS1123_SUBDOMAIN_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
/** `group/version` or a core `version`; versions are DNS-1035-like labels (`v1`, `v1beta1`). */
const API_VERSION = `^(${DNS1123_SUBDOMAIN_FMT}/)?[a-z0-9]([-a-z0-9]*[a-z0-9])?$`;
/** CRD validation requires the lowercased kind to be a DNS-1035 label. */
const KIND = "^[A-Za-z]([-A-Za-z0-9]*[A-Za-z0-9])?$";
/** A label key: an optional DNS-subdomain prefix and `/`, then a name of at most 63 characters. */
const LABEL_KEY = `^(${DNS1123_SUBDOMAIN_FMT}/)?([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9]$`;
const LABEL_VALUE = "^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$";

const FIELD_PATH_DESCRIPTION =
  "Where the value sits in the source: a field path such as status.atProvider.arn, spec.ports[0].port, " +
  'metadata.annotations[crossplane.io/external-name] or status.conditions[?(@.type=="Ready")].status, ' +
  "or a JSONPath starting with $ or { (kubectl style {.status.x}). The value keeps its JSON type.";

const apiVersionSchema: JSONSchemaProps = {
  type: "string",
  description:
    "API version of the source, as group/version (datasync.aws.upbound.io/v1beta1) or v1 for the core group.",
  minLength: 1,
  maxLength: 253,
  pattern: API_VERSION,
};

const kindSchema: JSONSchemaProps = {
  type: "string",
  description: "Kind of the source, as in its manifests (LocationS3, ConfigMap).",
  minLength: 1,
  maxLength: 63,
  pattern: KIND,
};

const namespaceSchema: JSONSchemaProps = {
  type: "string",
  description:
    "Namespace of the source. Required when the kind is namespaced; must be absent when it is cluster-scoped.",
  minLength: 1,
  maxLength: 63,
  pattern: DNS1123_LABEL,
};

const requireConditionsSchema: JSONSchemaProps = {
  type: "array",
  description:
    'Conditions the source must report before its value is taken (e.g. type Ready, status "True"); ' +
    "until it does, resolution fails with SourceNotReady. Default: none.",
  maxItems: SchemaLimits.requireConditions,
  "x-kubernetes-list-type": "map",
  "x-kubernetes-list-map-keys": ["type"],
  items: {
    type: "object",
    description: "A condition the source must report with the given status.",
    required: ["type", "status"],
    properties: {
      type: {
        type: "string",
        description: "Condition type, matched exactly (Ready, ACK.ResourceSynced).",
        minLength: 1,
        maxLength: 316,
      },
      status: {
        type: "string",
        description: "Status the condition must have.",
        enum: ["True", "False", "Unknown"],
      },
    },
  },
};

const defaultSchema: JSONSchemaProps = {
  description:
    "Any JSON value to use when the source or the field is missing; it wins over resolution Optional " +
    "and resolves with reason Defaulted. Default: none.",
  "x-kubernetes-preserve-unknown-fields": true,
};

/** What `transform` means, shared by the schemas here and the Referable CRD's `spec.transform`. */
export const TRANSFORM_DESCRIPTION =
  "A CEL expression that shapes the value before it is published, as Kubernetes CEL: the standard " +
  "library, the strings extension (split, join, lowerAscii, replace, format...), base64.decode/encode " +
  "and optional types (?. and orValue). Variables: value (mode Single: the value read, with its JSON type; " +
  "a whole number is an int), values (mode Multiple: the list), sources (the objects read: apiVersion, kind, " +
  "namespace, name, uid, resourceVersion) and default (only when default is set). The result, mapped to JSON, " +
  "is the value; in mode Multiple a result that is not a list is the single value. Defaulted and Optional " +
  "results are not transformed. An expression that does not parse or type-check is InvalidSpec; an error " +
  "or a cost over budget while it runs is TransformFailed. " +
  "Examples: \"'postgres://' + value + ':5432/app'\", \"string(base64.decode(value))\", " +
  "\"values.size()\", \"{'host': value, 'port': 5432}\". Default: none (the value as read).";

const transformSchema: JSONSchemaProps = {
  type: "string",
  description: TRANSFORM_DESCRIPTION,
  minLength: 1,
  maxLength: Limits.transform,
};

/** A fieldPath-like string field. */
function pathSchema(description: string): JSONSchemaProps {
  return { type: "string", description, minLength: 1, maxLength: Limits.fieldPath };
}

const policySchema: JSONSchemaProps = {
  type: "object",
  description: "How and when the reference is resolved, with the meaning these fields have in Crossplane.",
  properties: {
    resolve: {
      type: "string",
      description:
        "IfNotPresent (default) fills the target field once and never overwrites a value already there; " +
        "Always re-resolves on every reconcile.",
      enum: ["Always", "IfNotPresent"],
    },
    resolution: {
      type: "string",
      description:
        "Required (default): a missing source or field is an error. Optional: it resolves with no value " +
        "(reason Optional), unless default is set.",
      enum: ["Required", "Optional"],
    },
  },
};

/** The OpenAPI schema of a `GenericReference` (`fooRef`). */
export const genericReferenceSchema: JSONSchemaProps = deepFreeze({
  type: "object",
  description:
    "A reference to one value: a field of an object named by apiVersion, kind, namespace and name, " +
    "or a literal external value. Exactly one of name and external is set.",
  required: ["apiVersion", "kind"],
  properties: {
    apiVersion: apiVersionSchema,
    kind: kindSchema,
    name: {
      type: "string",
      description: "Name of the source object. Exactly one of name and external is set.",
      minLength: 1,
      maxLength: 253,
    },
    namespace: namespaceSchema,
    external: {
      description:
        "The value itself, any JSON, for a source that no controller in this cluster manages; it is used " +
        "as it is. Exactly one of name and external is set.",
      "x-kubernetes-preserve-unknown-fields": true,
    },
    fieldPath: pathSchema(`${FIELD_PATH_DESCRIPTION} Required with name; not read with external.`),
    requireConditions: requireConditionsSchema,
    default: defaultSchema,
    policy: policySchema,
    transform: transformSchema,
  },
  // `external` holds any JSON, so it has no type, and CEL cannot see a field without one (the API
  // server refuses `has(self.external)` as "undefined field"). "Exactly one of name and external"
  // is therefore a oneOf on `required`, which structural schemas allow; the rules CEL can state
  // from `name` alone follow from it.
  oneOf: [{ required: ["name"] }, { required: ["external"] }],
  "x-kubernetes-validations": [
    {
      rule: "!has(self.name) || has(self.fieldPath)",
      message: "fieldPath is required unless external is set",
    },
  ],
} satisfies JSONSchemaProps);

/**
 * The OpenAPI schema of a list of `GenericReference` (`fooRefs`): order is kept, and the
 * entries are either all `external` literals or all named objects.
 */
export const genericReferenceListSchema: JSONSchemaProps = deepFreeze({
  type: "array",
  description:
    "References to values, resolved in order into a list. Entries are either all external literals " +
    "or all named objects, never a mix.",
  maxItems: SchemaLimits.referenceList,
  "x-kubernetes-list-type": "atomic",
  items: genericReferenceSchema,
  "x-kubernetes-validations": [
    {
      // Each entry has exactly one of name and external (its oneOf), so "all or none have a name"
      // is "all or none are external", in terms CEL can see.
      rule: "self.all(r, has(r.name)) || self.all(r, !has(r.name))",
      message: "entries must be either all external or all name references, not a mix",
    },
  ],
} satisfies JSONSchemaProps);

/** The OpenAPI schema of a `GenericSelector` (`fooSelector`). */
export const genericSelectorSchema: JSONSchemaProps = deepFreeze({
  type: "object",
  description:
    "A reference to the objects of a kind that match a label selector, read at fieldPath. It needs " +
    "matchLabels or matchExpressions; matchLabels: {} matches every object of the kind (in the namespace).",
  required: ["apiVersion", "kind", "fieldPath"],
  properties: {
    apiVersion: apiVersionSchema,
    kind: kindSchema,
    namespace: namespaceSchema,
    matchLabels: {
      type: "object",
      description: "Labels a source must carry with exactly these values (ANDed with matchExpressions).",
      maxProperties: SchemaLimits.matchLabels,
      additionalProperties: {
        type: "string",
        description: "The label's value.",
        maxLength: 63,
        pattern: LABEL_VALUE,
      },
    },
    matchExpressions: {
      type: "array",
      description: "Label requirements a source must meet, all of them (ANDed with matchLabels).",
      maxItems: SchemaLimits.matchExpressions,
      "x-kubernetes-list-type": "atomic",
      items: {
        type: "object",
        description: "A requirement on one label: a key, an operator and the values the operator needs.",
        required: ["key", "operator"],
        properties: {
          key: {
            type: "string",
            description: "The label key the requirement applies to.",
            minLength: 1,
            maxLength: 317,
            pattern: LABEL_KEY,
          },
          operator: {
            type: "string",
            description:
              "In: the label has one of values. NotIn: the label is absent or has none of values. " +
              "Exists: the label is present. DoesNotExist: the label is absent.",
            enum: ["In", "NotIn", "Exists", "DoesNotExist"],
          },
          values: {
            type: "array",
            description: "Label values: at least one for In and NotIn, none for Exists and DoesNotExist.",
            maxItems: SchemaLimits.expressionValues,
            "x-kubernetes-list-type": "atomic",
            items: { type: "string", description: "A label value.", maxLength: 63, pattern: LABEL_VALUE },
          },
        },
        "x-kubernetes-validations": [
          {
            rule: "self.operator in ['In', 'NotIn'] ? has(self.values) && size(self.values) > 0 : !has(self.values) || size(self.values) == 0",
            messageExpression:
              "self.operator in ['In', 'NotIn'] ? 'operator ' + self.operator + ' needs at least one value' : 'operator ' + self.operator + ' takes no values'",
          },
        ],
      },
    },
    fieldPath: pathSchema(FIELD_PATH_DESCRIPTION),
    mode: {
      type: "string",
      description:
        "Single (default): exactly one object must match, resolving to one value. Multiple: every match, " +
        "in order, resolving to a list.",
      enum: ["Single", "Multiple"],
    },
    minMatch: {
      type: "integer",
      format: "int32",
      description:
        "Multiple only: the fewest values. Matches not ready or without the field are left out; fewer " +
        "values is SourceNotReady while not-ready matches would make up the difference, else missing: " +
        "default or Optional apply, otherwise SourceNotFound, FieldNotFound or TooFewMatches. Default 1.",
      minimum: 0,
    },
    maxMatch: {
      type: "integer",
      format: "int32",
      description: "Multiple only: keep the first maxMatch objects after sorting. Default: all.",
      minimum: 1,
    },
    sortByFieldPath: pathSchema(
      "Multiple only: the field path, in each source, whose value orders the matches. " +
        "Default: metadata.name, then metadata.namespace.",
    ),
    requireConditions: requireConditionsSchema,
    default: defaultSchema,
    policy: policySchema,
    transform: transformSchema,
  },
  "x-kubernetes-validations": [
    {
      rule: "!has(self.minMatch) || !has(self.maxMatch) || self.minMatch <= self.maxMatch",
      message: "minMatch must not be greater than maxMatch",
    },
    {
      rule: "(has(self.mode) && self.mode == 'Multiple') || !(has(self.minMatch) || has(self.maxMatch) || has(self.sortByFieldPath))",
      message: "minMatch, maxMatch and sortByFieldPath apply only with mode Multiple",
    },
    {
      rule: "has(self.matchLabels) || has(self.matchExpressions)",
      message:
        "a selector needs matchLabels or matchExpressions; write matchLabels: {} to match every object",
    },
  ],
} satisfies JSONSchemaProps);

function deepFreeze<T>(value: T): T {
  if (typeof value === "object" && value !== null && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const child of Object.values(value)) deepFreeze(child);
  }
  return value;
}
