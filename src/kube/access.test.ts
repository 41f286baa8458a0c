import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { loadClusterAccess } from "./access.ts";

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "access-"));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

function kubeconfig(cluster: Record<string, unknown>, user: Record<string, unknown>): string {
  return JSON.stringify({
    apiVersion: "v1",
    kind: "Config",
    "current-context": "c",
    contexts: [
      { name: "c", context: { cluster: "k", user: "u" } },
      { name: "other", context: { cluster: "x", user: "y" } },
    ],
    clusters: [{ name: "k", cluster }],
    users: [{ name: "u", user }],
  });
}

const b64 = (s: string) => Buffer.from(s).toString("base64");

describe("loadClusterAccess from a kubeconfig file", () => {
  it.each([
    {
      reason: "embedded data and a bearer token",
      cluster: { server: "https://10.0.0.1:6443/", "certificate-authority-data": b64("CA") },
      user: { token: "tok", "client-certificate-data": b64("CERT"), "client-key-data": b64("KEY") },
      tls: { ca: "CA", cert: "CERT", key: "KEY" },
      headers: { Authorization: "Bearer tok" },
    },
    {
      reason: "files relative to the kubeconfig, insecure-skip-tls-verify and tls-server-name",
      cluster: {
        server: "https://h:1",
        "certificate-authority": "ca.crt",
        "insecure-skip-tls-verify": true,
        "tls-server-name": "api",
      },
      user: { "client-certificate": "c.crt", "client-key": "c.key" },
      tls: { ca: "CA-FILE", cert: "C-FILE", key: "K-FILE", rejectUnauthorized: false, servername: "api" },
      headers: {},
    },
  ])("$reason", async ({ cluster, user, tls, headers }) => {
    await writeFile(join(dir, "ca.crt"), "CA-FILE");
    await writeFile(join(dir, "c.crt"), "C-FILE");
    await writeFile(join(dir, "c.key"), "K-FILE");
    await writeFile(join(dir, "config"), kubeconfig(cluster, user));
    const access = await loadClusterAccess({ kubeconfig: join(dir, "config"), env: {} });
    expect(access.server).toBe(String(cluster.server).replace(/\/$/, ""));
    const got = await access.tls();
    expect(
      Object.fromEntries(Object.entries(got).map(([k, v]) => [k, Buffer.isBuffer(v) ? v.toString() : v])),
    ).toEqual(tls);
    expect(await access.headers()).toEqual(headers);
  });

  it("reads a tokenFile again on every call, so a rotated token is used", async () => {
    await writeFile(join(dir, "token"), "first\n");
    await writeFile(join(dir, "config"), kubeconfig({ server: "https://h:1" }, { tokenFile: "token" }));
    const access = await loadClusterAccess({ kubeconfig: join(dir, "config"), env: {} });
    expect(await access.headers()).toEqual({ Authorization: "Bearer first" });
    await writeFile(join(dir, "token"), "second\n");
    expect(await access.headers()).toEqual({ Authorization: "Bearer second" });
  });

  it("hands what it does not do itself (basic auth here) to client-node", async () => {
    await writeFile(
      join(dir, "config"),
      kubeconfig({ server: "https://h:1" }, { username: "u", password: "p" }),
    );
    const access = await loadClusterAccess({ kubeconfig: join(dir, "config"), env: {} });
    expect(await access.headers()).toEqual({ Authorization: `Basic ${b64("u:p")}` });
  });

  it.each([
    {
      reason: "no current-context",
      text: JSON.stringify({ clusters: [] }),
      message: "sets no current-context",
    },
    { reason: "not YAML at all", text: "{{{", message: "cannot read the kubeconfig" },
  ])("says what is wrong: $reason", async ({ text, message }) => {
    await writeFile(join(dir, "config"), text);
    await expect(loadClusterAccess({ kubeconfig: join(dir, "config"), env: {} })).rejects.toThrow(message);
  });
});

describe("loadClusterAccess in a pod", () => {
  it("uses the service account's CA and token (read on every call) and the service host and port", async () => {
    await writeFile(join(dir, "ca.crt"), "POD-CA");
    await writeFile(join(dir, "token"), "pod-token");
    const access = await loadClusterAccess({
      env: { KUBERNETES_SERVICE_HOST: "fd00::1", KUBERNETES_SERVICE_PORT: "443" },
      serviceAccountDir: dir,
    });
    expect(access.server).toBe("https://[fd00::1]:443");
    expect(String((await access.tls()).ca)).toBe("POD-CA");
    expect(await access.headers()).toEqual({ Authorization: "Bearer pod-token" });
    await writeFile(join(dir, "token"), "rotated");
    expect(await access.headers()).toEqual({ Authorization: "Bearer rotated" });
  });

  it("prefers an explicit kubeconfig over in-cluster credentials", async () => {
    await writeFile(join(dir, "config"), kubeconfig({ server: "https://explicit:1" }, {}));
    const access = await loadClusterAccess({
      kubeconfig: join(dir, "config"),
      env: { KUBERNETES_SERVICE_HOST: "10.0.0.1", KUBERNETES_SERVICE_PORT: "443" },
    });
    expect(access.server).toBe("https://explicit:1");
  });
});
