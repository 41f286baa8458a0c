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
import { dirname, isAbsolute, join } from "node:path";
import type { KubeConfig } from "@kubernetes/client-node";
import type { Dispatcher } from "undici";

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

/** Adapts a client-node KubeConfig (its current context). Imports nothing of client-node. */
export function accessFromKubeConfig(kubeConfig: KubeConfig): ClusterAccess {
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

const SERVICE_ACCOUNT = "/var/run/secrets/kubernetes.io/serviceaccount";

/** Options for {@link loadClusterAccess}. */
export interface LoadOptions {
  /** A kubeconfig file; when absent: in-cluster credentials in a pod, else ~/.kube/config. */
  kubeconfigPath?: string;
  /** The environment to read KUBERNETES_SERVICE_HOST/PORT and HOME from. */
  env: Readonly<Record<string, string | undefined>>;
  /** Where the pod's service account files are. @default /var/run/secrets/kubernetes.io/serviceaccount */
  serviceAccountDir?: string;
}

/**
 * Loads cluster access as client-go does: the given kubeconfig, else in-cluster credentials
 * when running in a pod, else ~/.kube/config. Throws with a message that says what is missing.
 */
export async function loadClusterAccess(options: LoadOptions): Promise<ClusterAccess> {
  const { env } = options;
  if (options.kubeconfigPath) return fromKubeconfigFile(options.kubeconfigPath);
  if (env.KUBERNETES_SERVICE_HOST && env.KUBERNETES_SERVICE_PORT) {
    return inCluster(
      env.KUBERNETES_SERVICE_HOST,
      env.KUBERNETES_SERVICE_PORT,
      options.serviceAccountDir ?? SERVICE_ACCOUNT,
    );
  }
  return fromKubeconfigFile(join(env.HOME ?? homedir(), ".kube", "config"));
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

interface KubeconfigFile {
  "current-context"?: string;
  contexts?: Array<{ name: string; context: { cluster: string; user: string } }>;
  clusters?: Array<{ name: string; cluster: Record<string, unknown> }>;
  users?: Array<{ name: string; user?: Record<string, unknown> }>;
}

async function fromKubeconfigFile(path: string): Promise<ClusterAccess> {
  const { load } = await import("js-yaml");
  let doc: KubeconfigFile;
  try {
    doc = (load(await readFile(path, "utf8")) ?? {}) as KubeconfigFile;
  } catch (err) {
    throw new Error(`cannot read the kubeconfig ${path}: ${(err as Error).message}`, { cause: err });
  }
  const contextName = doc["current-context"];
  const context = doc.contexts?.find((c) => c.name === contextName)?.context;
  const cluster = doc.clusters?.find((c) => c.name === context?.cluster)?.cluster;
  if (!context || !cluster || typeof cluster.server !== "string") {
    throw new Error(
      `the kubeconfig ${path} has no usable current-context (a context naming a cluster with a server)`,
    );
  }
  const user = doc.users?.find((u) => u.name === context.user)?.user ?? {};
  // What this loader does not do itself, client-node does: load it only then.
  if (user.exec || user["auth-provider"] || user.username || cluster["proxy-url"]) {
    const { KubeConfig } = await import("@kubernetes/client-node");
    const kc = new KubeConfig();
    kc.loadFromFile(path);
    return accessFromKubeConfig(kc);
  }
  const base = dirname(path);
  const fileOrData = async (file: unknown, data: unknown): Promise<Buffer | undefined> => {
    if (typeof data === "string" && data) return Buffer.from(data, "base64");
    if (typeof file === "string" && file) return readFile(isAbsolute(file) ? file : join(base, file));
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
  const tokenFile =
    typeof user.tokenFile === "string"
      ? isAbsolute(user.tokenFile)
        ? user.tokenFile
        : join(base, user.tokenFile)
      : undefined;
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
