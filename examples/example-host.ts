/**
 * What the example host controllers share and is no part of the library: a console logger, the
 * envelope of a namespaced CRD with a status subresource, creating a CRD, a base class that hands
 * a kind to the library's `createReferenceController`, and a `main` that runs one until Ctrl-C.
 * Each example keeps only its own kind's schema and reconcile logic.
 */
import {
  ApiException,
  ApiextensionsV1Api,
  CustomObjectsApi,
  loadYaml,
  PatchStrategy,
  setHeaderOptions,
  type KubeConfig,
  type KubernetesObject,
  type V1CustomResourceDefinition,
} from "@kubernetes/client-node";
import {
  createReferenceController,
  createResolver,
  type HostControllerOptions,
  type JSONSchemaProps,
  type Logger,
  type ReferenceController,
  type ReferenceControllerOptions,
  type ReferenceWatcher,
  type Resolver,
} from "../src/index.ts";

/** A logger that prints one JSON line per message (debug dropped). */
export function consoleLogger(): Logger {
  const log = (level: string) => (fields: Record<string, unknown>, message: string) =>
    console.log(JSON.stringify({ level, message, ...fields }));
  return { debug: () => undefined, info: log("info"), warn: log("warn"), error: log("error") };
}

/** What {@link namespacedCrd} needs of a kind. */
export interface CrdShape {
  group: string;
  version: string;
  kind: string;
  plural: string;
  spec: JSONSchemaProps;
  status: JSONSchemaProps;
  /** kubectl's columns before Age. */
  columns: Array<Record<string, unknown>>;
}

/** A namespaced CRD of one served and stored version, with the status subresource and an Age column. */
export function namespacedCrd(shape: CrdShape): Record<string, unknown> {
  const { group, version, kind, plural, spec, status, columns } = shape;
  return {
    apiVersion: "apiextensions.k8s.io/v1",
    kind: "CustomResourceDefinition",
    metadata: { name: `${plural}.${group}` },
    spec: {
      group,
      scope: "Namespaced",
      names: { kind, listKind: `${kind}List`, plural, singular: kind.toLowerCase() },
      versions: [
        {
          name: version,
          served: true,
          storage: true,
          subresources: { status: {} },
          additionalPrinterColumns: [
            ...columns,
            { name: "Age", type: "date", jsonPath: ".metadata.creationTimestamp" },
          ],
          schema: { openAPIV3Schema: { type: "object", properties: { spec, status } } },
        },
      ],
    },
  };
}

/** Creates `crd` with `@kubernetes/client-node`; one that exists already is kept. */
export async function createCrd(kubeConfig: KubeConfig, crd: Record<string, unknown>): Promise<void> {
  try {
    // loadYaml turns the CRD's wire names (`x-kubernetes-validations`) into client-node's model,
    // which the typed API writes back out; JSON is YAML.
    const body = loadYaml<V1CustomResourceDefinition>(JSON.stringify(crd));
    await kubeConfig.makeApiClient(ApiextensionsV1Api).createCustomResourceDefinition({ body });
  } catch (err) {
    if (!(err instanceof ApiException && err.code === 409)) throw err; // 409: already installed
  }
}

/** The kind a {@link HostController} serves: where its objects are, and what they reference. */
export type HostKind<T extends KubernetesObject> = Pick<
  ReferenceControllerOptions<T>,
  "group" | "version" | "plural" | "referencesOf"
>;

/**
 * The base of an example controller: the library's loop lists and watches the kind, keeps a
 * subscription per reference `referencesOf` names, and runs {@link reconcile} one object at a
 * time, with backoff on a throw; {@link mergePatch} writes the objects and their status.
 */
export abstract class HostController<T extends KubernetesObject, R extends ReferenceWatcher> {
  private readonly api: CustomObjectsApi;
  protected readonly resolver: R;
  protected readonly loop: ReferenceController;
  private readonly kind: HostKind<T>;

  constructor(options: HostControllerOptions<R>, kind: HostKind<T>) {
    this.api = options.kubeConfig.makeApiClient(CustomObjectsApi);
    this.resolver = options.resolver;
    this.kind = kind;
    this.loop = createReferenceController<T>({ ...options, ...kind, reconcile: (o) => this.reconcile(o) });
  }

  /** Lists the objects (waiting out a CRD whose storage is still starting), then watches them. */
  start(): Promise<void> {
    return this.loop.start();
  }

  /** Stops watching, closes every subscription and waits for in-flight reconciles. */
  stop(): Promise<void> {
    return this.loop.stop();
  }

  /** Applies `body` to `object` (its status with `subresource: "status"`) as a JSON merge patch. */
  protected async mergePatch(object: T, body: object, subresource?: "status"): Promise<void> {
    const request = {
      group: this.kind.group,
      version: this.kind.version,
      plural: this.kind.plural,
      namespace: object.metadata?.namespace ?? "",
      name: object.metadata?.name ?? "",
      body,
    };
    const merge = setHeaderOptions("Content-Type", PatchStrategy.MergePatch);
    if (subresource === "status") await this.api.patchNamespacedCustomObjectStatus(request, merge);
    else await this.api.patchNamespacedCustomObject(request, merge);
  }

  /** Brings the world in line with `object`, the latest the watch delivered. */
  protected abstract reconcile(object: T): Promise<void>;
}

/**
 * Runs an example: a resolver from `kubeConfig` (its own connection, closed on stop) and the
 * controller `build` makes with it, both stopped (the controller first) on SIGINT or SIGTERM.
 */
export async function runUntilSignal(
  kubeConfig: KubeConfig,
  logger: Logger,
  build: (options: HostControllerOptions<Resolver>) => { start(): Promise<void>; stop(): Promise<void> },
  watching: string,
): Promise<void> {
  const resolver = createResolver({ kubeConfig, logger });
  await resolver.start();
  const controller = build({ kubeConfig, resolver, logger });
  await controller.start(); // waits out the 429s of a CRD whose storage is still starting
  logger.info({}, `watching ${watching}`);
  for (const signal of ["SIGINT", "SIGTERM"] as const) {
    process.once(signal, () => {
      void (async () => {
        await controller.stop();
        await resolver.stop();
      })();
    });
  }
}
