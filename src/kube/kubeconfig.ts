/**
 * Kubeconfig files loaded as kubectl loads them (client-go's clientcmd loading rules):
 *
 * - `KUBECONFIG` is a list of files separated by the OS path delimiter (`:`, `;` on Windows);
 *   empty entries and repeats are dropped, and files that do not exist are skipped (but at least
 *   one must exist);
 * - clusters, users and contexts are merged by name, and the **first** file that defines a name
 *   wins (its whole entry: entries are not merged field by field);
 * - `current-context` is the first one set, in file order; a chosen context overrides it;
 * - relative file paths (`certificate-authority`, `client-certificate`, `client-key`,
 *   `tokenFile`, and an exec `command` that contains a path separator) are relative to the file
 *   that defines them.
 *
 * `@kubernetes/client-node`'s `loadFromDefault()` differs: the last file's `current-context`
 * wins, a name defined twice throws, and a missing file throws. This module is the one place
 * both the controller (`loadClusterAccess` in access.ts) and library callers
 * ({@link loadKubeConfig}) get the kubectl behaviour from.
 */
import { readFile, stat } from "node:fs/promises";
import { homedir } from "node:os";
import { delimiter, dirname, isAbsolute, join, resolve, sep } from "node:path";
import type { KubeConfig } from "@kubernetes/client-node";

/** One named entry of a kubeconfig list, its body under "cluster", "user" or "context". */
type Named = { name: string } & Record<string, unknown>;

/** A cluster, user or context entry, as written in a kubeconfig file. */
export type KubeconfigEntry<K extends "cluster" | "user" | "context"> = { name: string } & {
  [key in K]: Record<string, unknown>;
};

/** A kubeconfig merged from one or more files; relative paths in it are already absolute. */
export interface KubeconfigDocument {
  "current-context"?: string;
  clusters: Array<KubeconfigEntry<"cluster">>;
  users: Array<KubeconfigEntry<"user">>;
  contexts: Array<KubeconfigEntry<"context">>;
}

/** What {@link mergeKubeconfigFiles} read. */
export interface MergedKubeconfig {
  document: KubeconfigDocument;
  /** The files read, in order (the ones that did not exist are left out). */
  files: string[];
}

/** The parts of the context a client connects with. */
export interface SelectedContext {
  /** The context's name. */
  name: string;
  cluster: Record<string, unknown> & { server: string };
  /** The user's entry; empty when the context names none (anonymous). */
  user: Record<string, unknown>;
  /** The context's namespace, if it sets one. */
  namespace: string | undefined;
}

/**
 * The files of a kubeconfig list: a `KUBECONFIG`-style string (split on the OS path delimiter)
 * or an array, without empty entries and repeats, in order.
 */
export function kubeconfigFiles(list: string | readonly string[]): string[] {
  const entries = typeof list === "string" ? list.split(delimiter) : list;
  const seen = new Set<string>();
  const out: string[] = [];
  for (const entry of entries) {
    if (!entry || seen.has(entry)) continue;
    seen.add(entry);
    out.push(entry);
  }
  return out;
}

/** Fields of a cluster and of a user that name files, resolved against their file's folder. */
const CLUSTER_FILES = ["certificate-authority"];
const USER_FILES = ["client-certificate", "client-key", "tokenFile"];

function absolute(base: string, path: unknown): unknown {
  return typeof path === "string" && path !== "" && !isAbsolute(path) ? join(base, path) : path;
}

function resolvePaths(
  body: Record<string, unknown>,
  fields: readonly string[],
  base: string,
): Record<string, unknown> {
  const out = { ...body };
  for (const field of fields) if (field in out) out[field] = absolute(base, out[field]);
  return out;
}

function resolveUserPaths(user: Record<string, unknown>, base: string): Record<string, unknown> {
  const out = resolvePaths(user, USER_FILES, base);
  const exec = out.exec as Record<string, unknown> | undefined;
  // As client-go: a bare command name is looked up on PATH; only a path is made absolute.
  if (exec && typeof exec.command === "string" && (exec.command.includes("/") || exec.command.includes(sep)))
    out.exec = { ...exec, command: absolute(base, exec.command) };
  return out;
}

function entries(doc: Record<string, unknown>, list: string, file: string): Named[] {
  const value = doc[list];
  if (value === undefined || value === null) return [];
  if (!Array.isArray(value)) throw new Error(`the kubeconfig ${file}: ${list} is not a list`);
  return value.filter(
    (e): e is Named =>
      typeof e === "object" && e !== null && typeof (e as { name?: unknown }).name === "string",
  );
}

/**
 * Reads and merges kubeconfig files as kubectl does (see the module comment). Throws when none
 * of them exists, or when one cannot be read or parsed, naming the file.
 */
export async function mergeKubeconfigFiles(paths: readonly string[]): Promise<MergedKubeconfig> {
  const { load } = await import("js-yaml");
  const document: KubeconfigDocument = { clusters: [], users: [], contexts: [] };
  const names = { clusters: new Set<string>(), users: new Set<string>(), contexts: new Set<string>() };
  const files: string[] = [];
  for (const path of paths) {
    let text: string;
    try {
      text = await readFile(path, "utf8");
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === "ENOENT") continue;
      throw new Error(`cannot read the kubeconfig ${path}: ${(err as Error).message}`, { cause: err });
    }
    let parsed: unknown;
    try {
      // js-yaml refuses a file of only blanks and comments; kubectl reads it as an empty config.
      parsed = blank(text) ? null : load(text);
    } catch (err) {
      throw new Error(`cannot read the kubeconfig ${path}: ${(err as Error).message}`, { cause: err });
    }
    files.push(path);
    if (parsed === undefined || parsed === null) continue; // an empty file is an empty config
    if (typeof parsed !== "object" || Array.isArray(parsed))
      throw new Error(`cannot read the kubeconfig ${path}: it is not a mapping`);
    const doc = parsed as Record<string, unknown>;
    const base = dirname(resolve(path));
    const current = doc["current-context"];
    if (document["current-context"] === undefined && typeof current === "string" && current !== "")
      document["current-context"] = current;
    for (const e of entries(doc, "clusters", path)) {
      if (names.clusters.has(e.name)) continue;
      names.clusters.add(e.name);
      const body = (e.cluster ?? {}) as Record<string, unknown>;
      document.clusters.push({ name: e.name, cluster: resolvePaths(body, CLUSTER_FILES, base) });
    }
    for (const e of entries(doc, "users", path)) {
      if (names.users.has(e.name)) continue;
      names.users.add(e.name);
      document.users.push({
        name: e.name,
        user: resolveUserPaths((e.user ?? {}) as Record<string, unknown>, base),
      });
    }
    for (const e of entries(doc, "contexts", path)) {
      if (names.contexts.has(e.name)) continue;
      names.contexts.add(e.name);
      document.contexts.push({
        name: e.name,
        context: { ...((e.context ?? {}) as Record<string, unknown>) },
      });
    }
  }
  if (files.length === 0) {
    throw new Error(
      paths.length === 0
        ? "no kubeconfig file given"
        : `no kubeconfig file exists of ${paths.join(delimiter)}`,
    );
  }
  return { document, files };
}

/**
 * The context to connect with: `context` when given, else the document's `current-context`.
 * Throws, naming what is missing, when there is none, or it names a cluster that is not defined.
 */
export function selectContext(
  doc: KubeconfigDocument,
  context: string | undefined,
  where: string,
): SelectedContext {
  const name = context ?? doc["current-context"];
  if (!name) throw new Error(`the kubeconfig ${where} sets no current-context: set one, or choose a context`);
  const ctx = doc.contexts.find((c) => c.name === name)?.context;
  if (!ctx) {
    const known = doc.contexts.map((c) => c.name).join(", ") || "none";
    throw new Error(`the kubeconfig ${where} has no context "${name}" (it has: ${known})`);
  }
  const clusterName = ctx.cluster;
  const cluster = doc.clusters.find((c) => c.name === clusterName)?.cluster;
  if (!cluster || typeof cluster.server !== "string" || cluster.server === "") {
    throw new Error(
      `the kubeconfig ${where}: context "${name}" names cluster "${String(clusterName)}", which is not defined with a server`,
    );
  }
  const userName = ctx.user;
  let user: Record<string, unknown> = {};
  if (typeof userName === "string" && userName !== "") {
    const found = doc.users.find((u) => u.name === userName)?.user;
    if (!found)
      throw new Error(
        `the kubeconfig ${where}: context "${name}" names user "${userName}", which is not defined`,
      );
    user = found;
  }
  return {
    name,
    cluster: cluster as SelectedContext["cluster"],
    user,
    namespace: typeof ctx.namespace === "string" && ctx.namespace ? ctx.namespace : undefined,
  };
}

/** Makes a client-node KubeConfig of a merged document, with `context` as its current context. */
export async function toKubeConfig(doc: KubeconfigDocument, context: string): Promise<KubeConfig> {
  const { KubeConfig } = await import("@kubernetes/client-node");
  const kc = new KubeConfig();
  // JSON is YAML; every relative path in `doc` is already absolute, so nothing depends on a folder.
  // An entry client-node finds invalid (a cluster without a server) is left out, not fatal:
  // kubectl too only minds the entries of the context it uses, which selectContext checked.
  kc.loadFromString(JSON.stringify({ ...doc, "current-context": context }), { onInvalidEntry: "filter" });
  return kc;
}

/** Options for {@link loadKubeConfig}. */
export interface LoadKubeConfigOptions {
  /**
   * The kubeconfig files: a list as `KUBECONFIG` holds it (separated by the OS path delimiter),
   * or an array. Pass `process.env.KUBECONFIG` to behave as kubectl does (the library reads no
   * environment variable itself). @default `~/.kube/config`, else (in a pod) the service account
   */
  kubeconfig?: string | readonly string[] | undefined;
  /**
   * The context to use instead of the files' `current-context` (kubectl's `--context`).
   * @default the first `current-context` the files set
   */
  context?: string | undefined;
}

const SERVICE_ACCOUNT_TOKEN = "/var/run/secrets/kubernetes.io/serviceaccount/token";

/**
 * Loads a `KubeConfig` as kubectl does: the files merged first-wins, `current-context` from the
 * first file that sets one, `context` over it. Without files, `~/.kube/config`; without that,
 * in a pod, the pod's service account (as client-node's `loadFromDefault()`). Throws when the
 * chosen context is not defined, or names a cluster that is not. Imports client-node on call.
 */
export async function loadKubeConfig(options: LoadKubeConfigOptions = {}): Promise<KubeConfig> {
  let files = options.kubeconfig === undefined ? [] : kubeconfigFiles(options.kubeconfig);
  if (files.length === 0) {
    const home = join(homedir(), ".kube", "config");
    if (await exists(home)) files = [home];
    else if (options.context === undefined && (await exists(SERVICE_ACCOUNT_TOKEN))) {
      const { KubeConfig } = await import("@kubernetes/client-node");
      const kc = new KubeConfig();
      kc.loadFromCluster();
      return kc;
    } else throw new Error(`no kubeconfig given and ${home} does not exist`);
  }
  const { document, files: read } = await mergeKubeconfigFiles(files);
  const selected = selectContext(document, options.context, read.join(delimiter));
  return toKubeConfig(document, selected.name);
}

function blank(text: string): boolean {
  return text.split("\n").every((line) => {
    const t = line.trim();
    return t === "" || t.startsWith("#");
  });
}

async function exists(path: string): Promise<boolean> {
  try {
    await stat(path);
    return true;
  } catch {
    return false;
  }
}
