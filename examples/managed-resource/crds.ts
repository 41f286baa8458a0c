/**
 * The CustomResourceDefinitions of the managed-resource example, built in code:
 *
 * - `Database`, shaped like a Crossplane managed resource: `spec.forProvider` holds the
 *   parameters, each reference field beside the field it fills (`networkId` with `networkIdRef`
 *   and `networkIdSelector`; `subnetIds` with `subnetIdRefs` and `subnetIdSelector`), embedding
 *   the library's schemas so the API server refuses a malformed reference when it is written;
 * - `Network` and `Subnet`, the managed resources of a pretend provider that the Database points
 *   at: their cloud ID is `status.atProvider.id`, and they report a `Ready` condition.
 */
import { ApiextensionsV1Api, type KubeConfig } from "@kubernetes/client-node";
import {
  genericReferenceListSchema,
  genericReferenceSchema,
  genericSelectorSchema,
  type JSONSchemaProps,
} from "../../src/index.ts";
import { createCrd, namespacedCrd } from "../example-host.ts";

/** The API group of every kind of the example. */
export const GROUP = "demo.referable.dev";
/** Their API version. */
export const VERSION = "v1alpha1";
/** `apiVersion` of the example's objects. */
export const API_VERSION = `${GROUP}/${VERSION}`;
/** The Database's plural resource name. */
export const DATABASE_PLURAL = "databases";

const conditions: JSONSchemaProps = {
  type: "array",
  description: "Conditions of the resource, Crossplane's way: Synced (the last reconcile) and Ready.",
  "x-kubernetes-list-type": "map",
  "x-kubernetes-list-map-keys": ["type"],
  items: {
    type: "object",
    required: ["type", "status"],
    properties: {
      type: { type: "string", description: "Synced or Ready." },
      status: { type: "string", enum: ["True", "False", "Unknown"], description: "True, False or Unknown." },
      reason: { type: "string", description: "A CamelCase reason; the resolver's reason when one failed." },
      message: { type: "string", description: "What went wrong, or what to do." },
      lastTransitionTime: { type: "string", format: "date-time", description: "When status last changed." },
      observedGeneration: { type: "integer", format: "int64", description: "The generation it is for." },
    },
  },
};

const forProvider: JSONSchemaProps = {
  type: "object",
  description: "The database's parameters. Each *Ref / *Selector fills the field beside it.",
  properties: {
    region: { type: "string", description: "The region to create the database in." },
    networkId: {
      type: "string",
      description:
        "ID of the network. Given directly, or filled once from networkIdRef or networkIdSelector " +
        "(their policy.resolve IfNotPresent, the default, then keeps it; Always re-resolves it).",
    },
    networkIdRef: {
      ...genericReferenceSchema,
      description: "A reference to the network whose ID fills networkId.",
    },
    networkIdSelector: {
      ...genericSelectorSchema,
      description: "Selects the one network whose ID fills networkId (mode Single).",
    },
    subnetIds: {
      type: "array",
      description: "IDs of the subnets, given directly or filled from subnetIdRefs or subnetIdSelector.",
      "x-kubernetes-list-type": "atomic",
      items: { type: "string" },
    },
    subnetIdRefs: { ...genericReferenceListSchema, description: "References to the subnets, in order." },
    subnetIdSelector: {
      ...genericSelectorSchema,
      description: "Selects the subnets by label (mode Multiple, ordered by name).",
    },
  },
  "x-kubernetes-validations": [
    {
      rule: "!(has(self.networkIdRef) && has(self.networkIdSelector))",
      message: "set networkIdRef or networkIdSelector, not both",
    },
    {
      rule: "!(has(self.subnetIdRefs) && has(self.subnetIdSelector))",
      message: "set subnetIdRefs or subnetIdSelector, not both",
    },
  ],
};

const databaseStatus: JSONSchemaProps = {
  type: "object",
  properties: {
    atProvider: {
      type: "object",
      description: "What the (pretend) cloud database uses now.",
      properties: {
        networkId: { type: "string" },
        subnetIds: { type: "array", "x-kubernetes-list-type": "atomic", items: { type: "string" } },
      },
    },
    conditions,
  },
};

/** A source kind's schema: any spec, and the status a provider reports. */
const providerStatus: JSONSchemaProps = {
  type: "object",
  properties: {
    atProvider: {
      type: "object",
      properties: { id: { type: "string", description: "The resource's ID in the cloud." } },
    },
    conditions,
  },
};

const READY_COLUMN = {
  name: "Ready",
  type: "string",
  jsonPath: '.status.conditions[?(@.type=="Ready")].status',
};

function crd(
  kind: string,
  plural: string,
  spec: JSONSchemaProps,
  status: JSONSchemaProps,
  columns: Array<Record<string, unknown>>,
): Record<string, unknown> {
  return namespacedCrd({ group: GROUP, version: VERSION, kind, plural, spec, status, columns });
}

/** The Database CRD (`databases.demo.referable.dev`). */
export function databaseCrd(): Record<string, unknown> {
  return crd(
    "Database",
    DATABASE_PLURAL,
    { type: "object", required: ["forProvider"], properties: { forProvider } },
    databaseStatus,
    [
      { name: "Synced", type: "string", jsonPath: '.status.conditions[?(@.type=="Synced")].status' },
      READY_COLUMN,
      { name: "Network", type: "string", jsonPath: ".spec.forProvider.networkId" },
    ],
  );
}

/** The pretend provider's Network and Subnet CRDs. */
export function providerCrds(): Array<Record<string, unknown>> {
  const anySpec: JSONSchemaProps = { type: "object", "x-kubernetes-preserve-unknown-fields": true };
  const id = [READY_COLUMN, { name: "ID", type: "string", jsonPath: ".status.atProvider.id" }];
  return [
    crd("Network", "networks", anySpec, providerStatus, id),
    crd("Subnet", "subnets", anySpec, providerStatus, id),
  ];
}

/**
 * Creates the example's CRDs (existing ones are kept) and waits until each is Established, with
 * a deadline: a CRD just created serves nothing before that. Uses `@kubernetes/client-node`, as
 * the controller does for its own objects.
 */
export async function installCrds(kubeConfig: KubeConfig, timeoutMs = 30_000): Promise<void> {
  const api = kubeConfig.makeApiClient(ApiextensionsV1Api);
  for (const crd of [databaseCrd(), ...providerCrds()]) {
    const name = (crd.metadata as { name: string }).name;
    await createCrd(kubeConfig, crd);
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const got = await api.readCustomResourceDefinition({ name });
      if (got.status?.conditions?.some((c) => c.type === "Established" && c.status === "True")) break;
      if (Date.now() > deadline) throw new Error(`CRD ${name} was not Established within ${timeoutMs} ms`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
}
