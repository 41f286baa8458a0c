import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { delimiter, join } from "node:path";
import { KubeConfig } from "@kubernetes/client-node";
import { accessFromKubeConfig, loadClusterAccess } from "./access.ts";
import { kubeconfigFiles, loadKubeConfig, mergeKubeconfigFiles, selectContext } from "./kubeconfig.ts";

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "kubeconfig-"));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

interface FileSpec {
  "current-context"?: string;
  clusters?: Array<{ name: string; cluster: Record<string, unknown> }>;
  users?: Array<{ name: string; user: Record<string, unknown> }>;
  contexts?: Array<{ name: string; context: Record<string, unknown> }>;
}

/** Writes each spec as a file (a/config, b/config, ...) and returns their paths. */
async function files(...specs: Array<FileSpec | string>): Promise<string[]> {
  const paths: string[] = [];
  for (const [i, spec] of specs.entries()) {
    const sub = join(dir, String.fromCharCode(97 + i));
    await mkdir(sub, { recursive: true });
    const path = join(sub, "config");
    await writeFile(
      path,
      typeof spec === "string" ? spec : JSON.stringify({ apiVersion: "v1", kind: "Config", ...spec }),
    );
    paths.push(path);
  }
  return paths;
}

const cluster = (name: string, server: string, extra: Record<string, unknown> = {}) => ({
  name,
  cluster: { server, ...extra },
});
const user = (name: string, body: Record<string, unknown>) => ({ name, user: body });
const context = (name: string, clusterName: string, userName: string) => ({
  name,
  context: { cluster: clusterName, user: userName },
});

describe("kubeconfigFiles", () => {
  it.each([
    { reason: "one file", list: "/a", want: ["/a"] },
    {
      reason: "the OS path delimiter separates files; empty entries are dropped",
      list: ["/a", "", "/b", ""].join(delimiter),
      want: ["/a", "/b"],
    },
    {
      reason: "a file listed twice is read once, where it first appears",
      list: ["/a", "/b", "/a"],
      want: ["/a", "/b"],
    },
    { reason: "nothing at all", list: "", want: [] },
  ])("$reason", ({ list, want }) => {
    expect(kubeconfigFiles(list)).toEqual(want);
  });
});

describe("mergeKubeconfigFiles, as kubectl merges KUBECONFIG", () => {
  it("takes each cluster, user and context from the first file that defines its name", async () => {
    const paths = await files(
      {
        clusters: [cluster("shared", "https://first:1")],
        users: [user("admin", { token: "first" })],
        contexts: [context("dev", "shared", "admin")],
      },
      {
        clusters: [cluster("shared", "https://second:1"), cluster("only-second", "https://second-only:1")],
        users: [user("admin", { token: "second" }), user("ci", { token: "ci" })],
        contexts: [context("dev", "only-second", "ci"), context("ci", "only-second", "ci")],
      },
    );
    const { document, files: read } = await mergeKubeconfigFiles(paths);
    expect(read).toEqual(paths);
    expect(document.clusters).toEqual([
      cluster("shared", "https://first:1"),
      cluster("only-second", "https://second-only:1"),
    ]);
    expect(document.users).toEqual([user("admin", { token: "first" }), user("ci", { token: "ci" })]);
    expect(document.contexts).toEqual([
      context("dev", "shared", "admin"),
      context("ci", "only-second", "ci"),
    ]);
  });

  it.each([
    { reason: "the first file sets it", current: ["one", "two"], want: "one" },
    { reason: "a file that sets none is passed over", current: [undefined, "two", "three"], want: "two" },
    { reason: "an empty current-context counts as unset", current: ["", "two"], want: "two" },
    { reason: "no file sets one", current: [undefined, undefined], want: undefined },
  ])("current-context comes from the first file that sets one: $reason", async ({ current, want }) => {
    const paths = await files(
      ...current.map((c): FileSpec => (c === undefined ? {} : { "current-context": c })),
    );
    const { document } = await mergeKubeconfigFiles(paths);
    expect(document["current-context"]).toEqual(want);
  });

  it("skips files that do not exist, and reads empty ones", async () => {
    const [empty, real] = await files("# nothing yet\n", { clusters: [cluster("k", "https://k:1")] });
    const { document, files: read } = await mergeKubeconfigFiles([join(dir, "missing"), empty!, real!]);
    expect(read).toEqual([empty, real]);
    expect(document.clusters.map((c) => c.name)).toEqual(["k"]);
  });

  it("fails, naming the files, when none of them exists", async () => {
    const missing = [join(dir, "x"), join(dir, "y")];
    await expect(mergeKubeconfigFiles(missing)).rejects.toThrow(
      `no kubeconfig file exists of ${missing.join(delimiter)}`,
    );
  });

  it.each([
    { reason: "not YAML", text: "{{{" },
    { reason: "a list, not a mapping", text: "[1, 2]" },
    { reason: "clusters not a list", text: JSON.stringify({ clusters: { a: 1 } }) },
  ])("fails, naming the file, on a file it cannot read: $reason", async ({ text }) => {
    const [bad] = await files(text);
    await expect(mergeKubeconfigFiles([bad!])).rejects.toThrow(bad!);
  });

  it("makes relative paths absolute against the folder of the file that defines them", async () => {
    const paths = await files(
      {
        clusters: [cluster("one", "https://one:1", { "certificate-authority": "ca.crt" })],
        users: [
          user("u1", {
            "client-certificate": "c.crt",
            "client-key": "/abs/c.key",
            tokenFile: "token",
            exec: { command: "./bin/login", apiVersion: "client.authentication.k8s.io/v1" },
          }),
        ],
      },
      {
        clusters: [cluster("two", "https://two:1", { "certificate-authority": "sub/ca.crt" })],
        users: [
          user("u2", { exec: { command: "kubelogin", apiVersion: "client.authentication.k8s.io/v1" } }),
        ],
      },
    );
    const { document } = await mergeKubeconfigFiles(paths);
    expect(document.clusters[0]!.cluster["certificate-authority"]).toBe(join(dir, "a", "ca.crt"));
    expect(document.clusters[1]!.cluster["certificate-authority"]).toBe(join(dir, "b", "sub", "ca.crt"));
    expect(document.users[0]!.user).toMatchObject({
      "client-certificate": join(dir, "a", "c.crt"),
      "client-key": "/abs/c.key",
      tokenFile: join(dir, "a", "token"),
      exec: { command: join(dir, "a", "bin", "login") },
    });
    // A bare command is looked up on PATH, as client-go does: left as it is.
    expect(document.users[1]!.user).toMatchObject({ exec: { command: "kubelogin" } });
  });
});

describe("selectContext", () => {
  const doc = {
    "current-context": "dev",
    clusters: [cluster("k1", "https://one:1"), cluster("k2", "https://two:1"), { name: "bare", cluster: {} }],
    users: [user("u1", { token: "t1" })],
    contexts: [
      context("dev", "k1", "u1"),
      { name: "anon", context: { cluster: "k2", namespace: "team" } },
      context("broken", "nowhere", "u1"),
      context("serverless", "bare", "u1"),
      context("ghost-user", "k1", "nobody"),
    ],
  };
  it.each([
    {
      reason: "the current-context by default",
      context: undefined,
      want: { name: "dev", server: "https://one:1" },
    },
    {
      reason: "a chosen context overrides it",
      context: "anon",
      want: { name: "anon", server: "https://two:1" },
    },
  ])("$reason", ({ context: chosen, want }) => {
    const got = selectContext(doc, chosen, "f");
    expect({ name: got.name, server: got.cluster.server }).toEqual(want);
  });

  it("gives an anonymous user and the namespace of a context without a user", () => {
    expect(selectContext(doc, "anon", "f")).toMatchObject({ user: {}, namespace: "team" });
  });

  it.each([
    {
      reason: "an unknown context, listing the known ones",
      context: "nope",
      message: 'has no context "nope" (it has: dev, anon',
    },
    {
      reason: "a context whose cluster is not defined",
      context: "broken",
      message: 'names cluster "nowhere"',
    },
    { reason: "a cluster without a server", context: "serverless", message: 'names cluster "bare"' },
    { reason: "a context whose user is not defined", context: "ghost-user", message: 'names user "nobody"' },
  ])("says what is wrong: $reason", ({ context: chosen, message }) => {
    expect(() => selectContext(doc, chosen, "f")).toThrow(message);
  });

  it("says so when there is no current-context and none is chosen", () => {
    expect(() => selectContext({ ...doc, "current-context": undefined } as never, undefined, "f")).toThrow(
      "sets no current-context",
    );
  });
});

describe("loadKubeConfig and loadClusterAccess with a KUBECONFIG list", () => {
  async function twoFiles(): Promise<string> {
    const paths = await files(
      {
        "current-context": "first",
        clusters: [cluster("k1", "https://one:1")],
        users: [user("u1", { token: "t1" })],
        contexts: [context("first", "k1", "u1")],
      },
      {
        "current-context": "second",
        clusters: [cluster("k2", "https://two:1")],
        users: [user("u2", { token: "t2" })],
        contexts: [context("second", "k2", "u2")],
      },
    );
    return [join(dir, "missing"), ...paths].join(delimiter);
  }

  it("loadKubeConfig merges the files and keeps the first current-context", async () => {
    const kc = await loadKubeConfig({ kubeconfig: await twoFiles() });
    expect(kc.getCurrentContext()).toBe("first");
    expect(kc.getCurrentCluster()?.server).toBe("https://one:1");
    expect(kc.getContexts().map((c) => c.name)).toEqual(["first", "second"]);
  });

  it("loadKubeConfig takes a chosen context from the second file", async () => {
    const kc = await loadKubeConfig({ kubeconfig: await twoFiles(), context: "second" });
    expect(kc.getCurrentContext()).toBe("second");
    expect(kc.getCurrentCluster()?.server).toBe("https://two:1");
  });

  it("loadKubeConfig minds only the entries of the context it uses, as kubectl does", async () => {
    const [good, odd] = await files(
      {
        "current-context": "ok",
        clusters: [cluster("k", "https://k:1")],
        contexts: [context("ok", "k", "u")],
        users: [user("u", { token: "t" })],
      },
      { clusters: [{ name: "no-server", cluster: {} }], contexts: [{ name: "no-cluster", context: {} }] },
    );
    const kc = await loadKubeConfig({ kubeconfig: [good!, odd!] });
    expect(kc.getCurrentCluster()?.server).toBe("https://k:1");
  });

  it("loadKubeConfig refuses a context no file defines", async () => {
    await expect(loadKubeConfig({ kubeconfig: await twoFiles(), context: "third" })).rejects.toThrow(
      'has no context "third"',
    );
  });

  it.each([
    { reason: "the first file's current-context", context: undefined, server: "https://one:1", token: "t1" },
    { reason: "a chosen context", context: "second", server: "https://two:1", token: "t2" },
  ])("loadClusterAccess (the controller) uses $reason", async ({ context: chosen, server, token }) => {
    const access = await loadClusterAccess({ kubeconfig: await twoFiles(), context: chosen, env: {} });
    expect(access.server).toBe(server);
    expect(await access.headers()).toEqual({ Authorization: `Bearer ${token}` });
  });

  it("accessFromKubeConfig (a library caller's KubeConfig) connects with a chosen context, leaving the KubeConfig as it was", async () => {
    const kc = new KubeConfig();
    kc.loadFromOptions({
      clusters: [
        { name: "k1", server: "https://one:1" },
        { name: "k2", server: "https://two:1" },
      ],
      users: [
        { name: "u1", token: "t1" },
        { name: "u2", token: "t2" },
      ],
      contexts: [
        { name: "first", cluster: "k1", user: "u1" },
        { name: "second", cluster: "k2", user: "u2" },
      ],
      currentContext: "first",
    });
    const access = accessFromKubeConfig(kc, "second");
    expect(access.server).toBe("https://two:1");
    expect(await access.headers()).toEqual({ Authorization: "Bearer t2" });
    expect(kc.getCurrentContext()).toBe("first");
    expect(() => accessFromKubeConfig(kc, "third")).toThrow(
      'the kubeconfig has no context "third" (it has: first, second)',
    );
  });
});
