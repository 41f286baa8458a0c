/**
 * Helpers for integration tests: clients for the shared control plane, unique namespaces,
 * ServiceAccount tokens, and waiting for a condition with a deadline (never a bare sleep).
 */
import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import { writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { KubeConfig } from "@kubernetes/client-node";
import { loadAll } from "js-yaml";
import { isApiError, KubeClient, type KubeObject } from "../../src/kube/client.ts";
import { selfAccessReview } from "../../src/process/startup.ts";

/** NODE_OPTIONS as deploy/base/deployment.yaml ships them to the controller (its heap cap). */
export function deployBaseNodeOptions(): string {
  const path = join(dirname(fileURLToPath(import.meta.url)), "..", "..", "deploy", "base", "deployment.yaml");
  for (const doc of loadAll(readFileSync(path, "utf8"))) {
    const containers = (doc as { spec?: { template?: { spec?: { containers?: unknown[] } } } } | null)?.spec
      ?.template?.spec?.containers as Array<{ env?: Array<{ name: string; value?: string }> }> | undefined;
    for (const c of containers ?? []) {
      const value = c.env?.find((e) => e.name === "NODE_OPTIONS")?.value;
      if (value) return value;
    }
  }
  throw new Error(`no NODE_OPTIONS in ${path}`);
}

/**
 * The rules of the ClusterRoles in these files of deploy/base (e.g. "rbac-controller.yaml"), so
 * a test can grant its own ServiceAccount exactly what the shipped controller gets.
 */
export function deployBaseRules(...files: string[]): unknown[] {
  const base = join(dirname(fileURLToPath(import.meta.url)), "..", "..", "deploy", "base");
  const rules: unknown[] = [];
  for (const file of files) {
    for (const doc of loadAll(readFileSync(join(base, file), "utf8"))) {
      const obj = doc as { kind?: string; rules?: unknown[] } | null;
      if (obj?.kind === "ClusterRole") rules.push(...(obj.rules ?? []));
    }
  }
  return rules;
}

/**
 * The rules of deploy/examples/export-fields' ClusterRole (the opt-in of Tasks for field exports),
 * for `resources` of `apiGroup` instead of Tasks.
 */
export function exportFieldsOptInRules(apiGroup: string, resources: string[]): unknown[] {
  const path = join(
    dirname(fileURLToPath(import.meta.url)),
    "../../deploy/examples/export-fields/tasks.yaml",
  );
  for (const doc of loadAll(readFileSync(path, "utf8"))) {
    const obj = doc as { kind?: string; rules?: Array<Record<string, unknown>> } | null;
    if (obj?.kind === "ClusterRole")
      return (obj.rules ?? []).map((r) => ({ ...r, apiGroups: [apiGroup], resources }));
  }
  throw new Error(`no ClusterRole in ${path}`);
}

/** The message of the API server's refusal of `request`; fails the test when the request was allowed. */
export async function refusal(request: Promise<unknown>): Promise<string> {
  try {
    await request;
  } catch (err) {
    if (isApiError(err)) return err.message;
    throw err;
  }
  throw new Error("the request was allowed, but a refusal was expected");
}

/** The admin kubeconfig of the control plane that the global setup started. */
export function testKubeConfig(): KubeConfig {
  const path = process.env.REFERABLE_TEST_KUBECONFIG;
  if (!path)
    throw new Error(
      "REFERABLE_TEST_KUBECONFIG is not set: run integration tests through jest's integration project",
    );
  const kc = new KubeConfig();
  kc.loadFromFile(path);
  return kc;
}

/**
 * The test cluster's kubeconfig, reporting every request `@kubernetes/client-node` makes with it
 * when the request starts (each one is authenticated through it): `PATCH`, `get/list`, `watch`.
 * The library's own client (createReferenceController's informer) asks it for credentials only,
 * now and then, with a context that is no request: not reported.
 */
export function observedKubeConfig(onRequest: (verb: string) => void): KubeConfig {
  const kc = testKubeConfig();
  const authenticate = kc.applySecurityAuthentication.bind(kc);
  kc.applySecurityAuthentication = async (context) => {
    if (typeof context.getHttpMethod !== "function") return authenticate(context);
    const method = context.getHttpMethod().toString();
    const watch = new URL(context.getUrl()).searchParams.get("watch") === "true";
    onRequest(method !== "GET" ? method : watch ? "watch" : "get/list");
    await authenticate(context);
  };
  return kc;
}

const openClients: KubeClient[] = [];

/**
 * Whether a test client's errors quote the API server's message: yes for the clients a test reads
 * errors from, no for the controller's (as in production: see KubeClientOptions.serverMessages).
 */
export interface TestClientOptions {
  /** @default true */
  serverMessages?: boolean;
}

/** An admin client; closed by {@link closeTestClients}. */
export function adminClient(options: TestClientOptions = {}): KubeClient {
  const client = new KubeClient({
    kubeConfig: testKubeConfig(),
    serverMessages: options.serverMessages ?? true,
  });
  openClients.push(client);
  return client;
}

/** A client that authenticates with a bearer token (e.g. a ServiceAccount's). */
export function tokenClient(token: string, base?: KubeConfig, options: TestClientOptions = {}): KubeClient {
  const client = new KubeClient({
    kubeConfig: kubeConfigWithToken(token, base),
    serverMessages: options.serverMessages ?? true,
  });
  openClients.push(client);
  return client;
}

/**
 * A kubeconfig for the test cluster (or the cluster of `base`, e.g. a private control plane's)
 * that authenticates with `token` instead of the admin certificate.
 */
export function kubeConfigWithToken(token: string, base?: KubeConfig): KubeConfig {
  const admin = base ?? testKubeConfig();
  const cluster = admin.getCurrentCluster();
  if (!cluster) throw new Error("the test kubeconfig has no cluster");
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [cluster],
    users: [{ name: "token-user", token }],
    contexts: [{ name: "token", cluster: cluster.name, user: "token-user" }],
    currentContext: "token",
  });
  return kc;
}

/**
 * Writes to `path` (mode 0600) a kubeconfig for the cluster of the kubeconfig file `basePath`
 * (the test cluster's when absent) that authenticates with `token`; returns `path`.
 */
export async function writeTokenKubeconfig(path: string, token: string, basePath?: string): Promise<string> {
  let base: KubeConfig | undefined;
  if (basePath !== undefined) {
    base = new KubeConfig();
    base.loadFromFile(basePath);
  }
  await writeFile(path, kubeConfigWithToken(token, base).exportConfig(), { mode: 0o600 });
  return path;
}

/**
 * A client that acts as user `username` through impersonation (the admin certificate with an
 * `Impersonate-User` header): RBAC and admission see that user, with the group
 * `system:authenticated` the API server adds. Closed by {@link closeTestClients}.
 */
export function impersonatingClient(username: string): KubeClient {
  const client = new KubeClient({
    kubeConfig: impersonatingKubeConfig(testKubeConfig(), username),
    serverMessages: true,
  });
  openClients.push(client);
  return client;
}

/** `admin`'s cluster and credentials (its current context), acting as user `username`. */
export function impersonatingKubeConfig(admin: KubeConfig, username: string): KubeConfig {
  const cluster = admin.getCurrentCluster();
  const user = admin.getCurrentUser();
  if (!cluster || !user) throw new Error("the kubeconfig has no current cluster or user");
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [cluster],
    users: [{ ...user, name: "impersonating", impersonateUser: username }],
    contexts: [{ name: "impersonating", cluster: cluster.name, user: "impersonating" }],
    currentContext: "impersonating",
  });
  return kc;
}

/** Closes every client these helpers made; call in afterAll. */
export async function closeTestClients(): Promise<void> {
  await Promise.all(openClients.splice(0).map((c) => c.close()));
}

/** A name no other test uses: `${prefix}-${random}`. */
export function uniqueName(prefix: string): string {
  return `${prefix}-${randomBytes(4).toString("hex")}`;
}

/**
 * Creates a namespace of its own for a test and returns its name; pushes its path on `cleanup`
 * (the paths the test deletes when it is done) when given.
 */
export async function createNamespace(
  client: KubeClient,
  prefix: string,
  cleanup?: string[],
): Promise<string> {
  const name = uniqueName(prefix);
  await client.request("POST", "/api/v1/namespaces", {
    body: { apiVersion: "v1", kind: "Namespace", metadata: { name } },
  });
  cleanup?.push(`/api/v1/namespaces/${name}`);
  return name;
}

/** Creates a ServiceAccount and returns a token for it obtained through the TokenRequest API. */
export async function serviceAccountToken(
  client: KubeClient,
  namespace: string,
  name: string,
): Promise<string> {
  await client.request("POST", `/api/v1/namespaces/${namespace}/serviceaccounts`, {
    body: { apiVersion: "v1", kind: "ServiceAccount", metadata: { name } },
  });
  return requestToken(client, namespace, name);
}

/** A token for the existing ServiceAccount `namespace/name`, from the TokenRequest API (an hour long). */
export async function requestToken(client: KubeClient, namespace: string, name: string): Promise<string> {
  const review = await client.request<{ status: { token: string } }>(
    "POST",
    `/api/v1/namespaces/${namespace}/serviceaccounts/${name}/token`,
    {
      body: {
        apiVersion: "authentication.k8s.io/v1",
        kind: "TokenRequest",
        spec: { expirationSeconds: 3600 },
      },
    },
  );
  return review.status.token;
}

/**
 * Calls `probe` until it returns a value other than undefined/false, or throws when `timeoutMs`
 * passes, naming what was awaited and the last error `probe` threw.
 */
export async function waitFor<T>(
  what: string,
  probe: () => Promise<T | undefined | false> | T | undefined | false,
  { timeoutMs = 10_000, intervalMs = 50 }: { timeoutMs?: number; intervalMs?: number } = {},
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  for (;;) {
    try {
      const value = await probe();
      if (value !== undefined && value !== false) return value;
    } catch (err) {
      lastError = err;
    }
    if (Date.now() > deadline) {
      const detail = lastError instanceof Error ? `; last error: ${lastError.message}` : "";
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${detail}`);
    }
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
}

/** Waits until the object at `path` is gone: a GET answers 404. */
export async function waitForGone(client: KubeClient, path: string, timeoutMs = 10_000): Promise<void> {
  await waitFor(
    `${path} to be gone`,
    async () => {
      try {
        await client.request("GET", path);
        return false;
      } catch (err) {
        return isApiError(err, 404);
      }
    },
    { timeoutMs },
  );
}

/**
 * Installs a test CRD `<plural>.<group>` of `kind` (namespaced unless `scope` says otherwise;
 * version `options.version`, v1 by default; a status subresource; any status, and any spec
 * unless `options.spec` gives its schema) and waits until it is Established. Returns its
 * apiVersion.
 */
export async function installTestCrd(
  client: KubeClient,
  group: string,
  kind: string,
  scope: "Namespaced" | "Cluster" = "Namespaced",
  options: { version?: string; spec?: Record<string, unknown> } = {},
): Promise<string> {
  const { version = "v1", spec = { type: "object", "x-kubernetes-preserve-unknown-fields": true } } = options;
  const plural = `${kind.toLowerCase()}s`;
  const name = `${plural}.${group}`;
  await client.request("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", {
    body: {
      apiVersion: "apiextensions.k8s.io/v1",
      kind: "CustomResourceDefinition",
      metadata: { name },
      spec: {
        group,
        scope,
        names: { kind, plural, singular: kind.toLowerCase(), listKind: `${kind}List` },
        versions: [
          {
            name: version,
            served: true,
            storage: true,
            subresources: { status: {} },
            schema: {
              openAPIV3Schema: {
                type: "object",
                properties: {
                  spec,
                  status: { type: "object", "x-kubernetes-preserve-unknown-fields": true },
                },
              },
            },
          },
        ],
      },
    },
  });
  await waitFor(`CRD ${name} to be Established`, async () => {
    const crd = await client.request<{ status?: { conditions?: Array<{ type: string; status: string }> } }>(
      "GET",
      `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${name}`,
    );
    return crd.status?.conditions?.some((c) => c.type === "Established" && c.status === "True");
  });
  return `${group}/${version}`;
}

/** Creates the ConfigMap `ns/name` with `data` (and `labels`), as `client`. */
export async function createConfigMap(
  client: KubeClient,
  ns: string,
  name: string,
  data: Record<string, string>,
  labels?: Record<string, string>,
): Promise<void> {
  await client.request("POST", `/api/v1/namespaces/${ns}/configmaps`, {
    body: { apiVersion: "v1", kind: "ConfigMap", metadata: { name, labels }, data },
  });
}

/** Creates Secret `name` in `ns` with `stringData`, as `client`. */
export async function createSecret(
  client: KubeClient,
  ns: string,
  name: string,
  stringData: Record<string, string>,
): Promise<void> {
  await client.request("POST", `/api/v1/namespaces/${ns}/secrets`, {
    body: { apiVersion: "v1", kind: "Secret", metadata: { name }, stringData },
  });
}

/** A JSON merge patch of the object at `path`, as `client`; resolves with the object after it. */
export function mergePatch<T = KubeObject>(client: KubeClient, path: string, body: unknown): Promise<T> {
  return client.request<T>("PATCH", path, { body, contentType: "application/merge-patch+json" });
}

/**
 * What most test files start from: the admin client, a namespace of their own, and what `start`
 * starts once the namespace is there (for {@link closeScope} to stop).
 */
export async function openScope<T = undefined>(
  prefix: string,
  start?: () => Promise<T>,
): Promise<{ admin: KubeClient; ns: string; started: T }> {
  const admin = adminClient();
  const ns = await createNamespace(admin, prefix);
  return { admin, ns, started: (await start?.()) as T };
}

/** A test's own namespace (sources, Lease) and shard (the label value of its Referables). */
export interface ShardScope {
  ns: string;
  shard: string;
}

/** A new namespace and shard, both named after `prefix`. */
export async function newShardScope(admin: KubeClient, prefix: string): Promise<ShardScope> {
  return { ns: await createNamespace(admin, prefix), shard: uniqueName(`shard-${prefix}`) };
}

/** A ConfigMap's `data.v` in the scope's namespace, as a Referable's source. */
export function cmSource(scope: ShardScope, name: string) {
  return configMapField(scope.ns, name);
}

/** `fieldPath` of the ConfigMaps of `namespace` that carry `matchLabels`, as a Referable's source. */
export function configMapsLabelled(
  namespace: string,
  matchLabels: Record<string, string>,
  fieldPath = "data.v",
) {
  return { apiVersion: "v1", kind: "ConfigMap", namespace, selector: { matchLabels }, fieldPath };
}

/** `fieldPath` of the ConfigMap `namespace/name`, as a Referable's source. */
export function configMapField(namespace: string, name: string, fieldPath = "data.v") {
  return { apiVersion: "v1", kind: "ConfigMap", namespace, name, fieldPath };
}

/** `fieldPath` of the object `namespace/name` of a test CRD's `kind` ({@link installTestCrd}'s v1), as a Referable's source. */
export function testCrdSource(
  group: string,
  kind: string,
  namespace: string,
  name: string,
  fieldPath: string,
) {
  return { apiVersion: `${group}/v1`, kind, namespace, name, fieldPath };
}

/** Writes at `path` a kubeconfig whose current-context ("nowhere") points where nothing listens. */
export async function writeUnreachableKubeconfig(path: string): Promise<void> {
  await writeFile(
    path,
    JSON.stringify({
      apiVersion: "v1",
      kind: "Config",
      "current-context": "nowhere",
      clusters: [{ name: "nowhere", cluster: { server: "https://127.0.0.1:1" } }],
      users: [{ name: "nobody", user: { token: "x" } }],
      contexts: [{ name: "nowhere", context: { cluster: "nowhere", user: "nobody" } }],
    }),
  );
}

/** The end of a test file: stops what it started (in order), then closes every test client. */
export async function closeScope(...started: Array<{ stop(): Promise<void> } | undefined>): Promise<void> {
  for (const part of started) await part?.stop();
  await closeTestClients();
}

/** What the API server's authorizer says of the caller's request (a SelfSubjectAccessReview's status). */
export async function selfAccess(
  client: KubeClient,
  attributes: Record<string, string>,
): Promise<{ allowed: boolean; reason?: string }> {
  const status = await selfAccessReview(client, attributes);
  return { ...status, allowed: status?.allowed === true };
}
