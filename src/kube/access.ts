/**
 * How to reach and authenticate to an API server: what {@link KubeClient} needs, and nothing
 * of the typed API.
 *
 * Why not always `@kubernetes/client-node`'s KubeConfig: importing it loads every generated
 * model, about 85 MiB of resident memory and 30 MiB of heap before the controller does
 * anything (measured on Node 24). The controller loads its configuration with
 * {@link loadClusterAccess}, which reads in-cluster credentials and kubeconfig files itself and
 * imports client-node only for what it does not handle (exec plugins, auth providers, proxies).
 * A library caller who already has a KubeConfig passes it, through {@link accessFromKubeConfig}.
 */
import { readFile } from "node:fs/promises";
import { homedir } from "node:os";
import { delimiter, join } from "node:path";
import type { KubeConfig } from "@kubernetes/client-node";
import type { Dispatcher } from "undici";
import { kubeconfigFiles, mergeKubeconfigFiles, selectContext, toKubeConfig } from "./kubeconfig.ts";

/** TLS settings of the connection to the API server. */
export interface TlsSettings {
  ca?: Buffer | string;
  cert?: Buffer | string;
  key?: Buffer | string;
  rejectUnauthorized?: boolean;
  servername?: string;
}

/** Where an API server is and how to authenticate to it. */
export interface ClusterAccess {
  /** The server's base URL, e.g. https://10.0.0.1:443. */
  readonly server: string;
  /** TLS settings; read once, when the connection pool is made. */
  tls(): Promise<TlsSettings>;
  /** Authentication headers; asked again whenever the client's cache of them expires. */
  headers(): Promise<Record<string, string>>;
  /** A connection pool of the access's own (e.g. through a proxy), instead of one from {@link tls}. */
  dispatcher?(): Promise<Dispatcher | undefined>;
}

/**
 * Adapts a client-node KubeConfig: its current context, or `context` when given (the KubeConfig
 * itself is left as it is). Imports nothing of client-node.
 */
export function accessFromKubeConfig(given: KubeConfig, context?: string): ClusterAccess {
  const kubeConfig = context === undefined ? given : withContext(given, context);
  const cluster = kubeConfig.getCurrentCluster();
  if (!cluster) throw new Error("the kubeconfig has no current cluster: set a current-context");
  const viaSecurityAuthentication = async () => {
    const headers: Record<string, string> = {};
    let dispatcher: Dispatcher | undefined;
    // applySecurityAuthentication needs only these two methods of its context.
    const context = {
      setHeaderParam: (key: string, value: string) => void (headers[key] = value),
      setDispatcher: (d: Dispatcher) => void (dispatcher = d),
    };
    await kubeConfig.applySecurityAuthentication(
      context as unknown as Parameters<KubeConfig["applySecurityAuthentication"]>[0],
    );
    return { headers, dispatcher };
  };
  const access: ClusterAccess = {
    server: cluster.server.replace(/\/+$/, ""),
    tls: async () => {
      const opts: Record<string, unknown> = {};
      await kubeConfig.applyToHTTPSOptions(opts as Parameters<KubeConfig["applyToHTTPSOptions"]>[0]);
      const tls: TlsSettings = {};
      for (const key of ["ca", "cert", "key", "rejectUnauthorized", "servername"] as const) {
        if (opts[key] !== undefined && opts[key] !== null) (tls as Record<string, unknown>)[key] = opts[key];
      }
      return tls;
    },
    headers: async () => {
      const { headers, dispatcher } = await viaSecurityAuthentication();
      void dispatcher?.close().catch(() => undefined); // a pool per call: not ours to keep
      return headers;
    },
  };
  if (cluster.proxyUrl) access.dispatcher = async () => (await viaSecurityAuthentication()).dispatcher;
  return access;
}

/** A copy of `kc` whose current context is `context`; throws when `kc` has no such context. */
function withContext(kc: KubeConfig, context: string): KubeConfig {
  if (!kc.getContextObject(context)) {
    const known =
      kc
        .getContexts()
        .map((c) => c.name)
        .join(", ") || "none";
    throw new Error(`the kubeconfig has no context "${context}" (it has: ${known})`);
  }
  // The given object's own class: this module loads nothing of client-node at run time.
  const copy = new (kc.constructor as new () => KubeConfig)();
  copy.loadFromOptions({
    clusters: kc.getClusters(),
    users: kc.getUsers(),
    contexts: kc.getContexts(),
    currentContext: context,
  });
  return copy;
}

const SERVICE_ACCOUNT = "/var/run/secrets/kubernetes.io/serviceaccount";

/** Options for {@link loadClusterAccess}. */
export interface LoadOptions {
  /**
   * Kubeconfig files, a list as `KUBECONFIG` holds it (separated by the OS path delimiter),
   * merged as kubectl merges them (see kubeconfig.ts). When absent: in-cluster credentials in a
   * pod, else ~/.kube/config.
   */
  kubeconfig?: string | readonly string[] | undefined;
  /**
   * The context to use instead of the kubeconfig's current-context (kubectl's `--context`).
   * @default the first current-context the files set
   */
  context?: string | undefined;
  /** The environment to read KUBERNETES_SERVICE_HOST/PORT and HOME from. */
  env: Readonly<Record<string, string | undefined>>;
  /** Where the pod's service account files are. @default /var/run/secrets/kubernetes.io/serviceaccount */
  serviceAccountDir?: string;
}

/**
 * Loads cluster access as client-go does: the given kubeconfig files, else in-cluster credentials
 * when running in a pod (and no context is asked for), else ~/.kube/config. Throws with a message
 * that says what is missing.
 */
export async function loadClusterAccess(options: LoadOptions): Promise<ClusterAccess> {
  const { env } = options;
  const files = options.kubeconfig === undefined ? [] : kubeconfigFiles(options.kubeconfig);
  if (files.length > 0) return fromKubeconfigFiles(files, options.context);
  if (options.context === undefined && env.KUBERNETES_SERVICE_HOST && env.KUBERNETES_SERVICE_PORT) {
    return inCluster(
      env.KUBERNETES_SERVICE_HOST,
      env.KUBERNETES_SERVICE_PORT,
      options.serviceAccountDir ?? SERVICE_ACCOUNT,
    );
  }
  return fromKubeconfigFiles([join(env.HOME ?? homedir(), ".kube", "config")], options.context);
}

function inCluster(host: string, port: string, dir: string): ClusterAccess {
  const server = `https://${host.includes(":") ? `[${host}]` : host}:${port}`;
  return {
    server,
    tls: async () => ({ ca: await readFile(join(dir, "ca.crt")) }),
    // The projected token rotates: read it again each time the client asks.
    headers: async () => ({ Authorization: `Bearer ${(await readFile(join(dir, "token"), "utf8")).trim()}` }),
  };
}

async function fromKubeconfigFiles(paths: string[], context: string | undefined): Promise<ClusterAccess> {
  const { document, files } = await mergeKubeconfigFiles(paths);
  const { name, cluster, user } = selectContext(document, context, files.join(delimiter));
  // What this loader does not do itself, client-node does: load it only then.
  if (user.exec || user["auth-provider"] || user.username || cluster["proxy-url"]) {
    return accessFromKubeConfig(await toKubeConfig(document, name));
  }
  // Every relative path in the merged document is already absolute (against its own file).
  const fileOrData = async (file: unknown, data: unknown): Promise<Buffer | undefined> => {
    if (typeof data === "string" && data) return Buffer.from(data, "base64");
    if (typeof file === "string" && file) return readFile(file);
    return undefined;
  };
  const tls: TlsSettings = {};
  const ca = await fileOrData(cluster["certificate-authority"], cluster["certificate-authority-data"]);
  const cert = await fileOrData(user["client-certificate"], user["client-certificate-data"]);
  const key = await fileOrData(user["client-key"], user["client-key-data"]);
  if (ca) tls.ca = ca;
  if (cert) tls.cert = cert;
  if (key) tls.key = key;
  if (cluster["insecure-skip-tls-verify"] === true) tls.rejectUnauthorized = false;
  if (typeof cluster["tls-server-name"] === "string") tls.servername = cluster["tls-server-name"];
  const token = typeof user.token === "string" ? user.token : undefined;
  const tokenFile = typeof user.tokenFile === "string" && user.tokenFile ? user.tokenFile : undefined;
  return {
    server: cluster.server.replace(/\/+$/, ""),
    tls: async () => tls,
    headers: async (): Promise<Record<string, string>> => {
      if (token) return { Authorization: `Bearer ${token}` };
      if (tokenFile) return { Authorization: `Bearer ${(await readFile(tokenFile, "utf8")).trim()}` };
      return {};
    },
  };
}
