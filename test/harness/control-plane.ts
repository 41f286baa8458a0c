/**
 * A real control plane for tests: etcd and kube-apiserver on free loopback ports, as
 * controller-runtime's envtest starts them, with RBAC on, a client CA, an admin client
 * certificate (group system:masters) and a service-account signing key so TokenRequest works.
 *
 * Runs under Jest's global setup and from `npm run cluster` (Node runs this file directly).
 */
import { spawn, execFile, type ChildProcess } from "node:child_process";
import { mkdtemp, rm, writeFile, readFile, mkdir } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { randomBytes } from "node:crypto";
import { freePort } from "./ports.ts";

const execFileAsync = promisify(execFile);
const here = dirname(fileURLToPath(import.meta.url));
export const repoRoot = join(here, "..", "..");

/** A running (or borrowed) control plane. */
export interface ControlPlane {
  /** Path of an admin kubeconfig. */
  kubeconfigPath: string;
  /** https://127.0.0.1:PORT, or the existing cluster's server. */
  server: string;
  /** `gitVersion` reported by `/version`. */
  version: string;
  /** Folder of the binaries (kubectl is there too), when the harness started them. */
  binDir: string | undefined;
  /** Whether this harness started the processes (false with USE_EXISTING_CLUSTER). */
  owned: boolean;
  /** Stops both processes and removes the temporary folder; safe to call twice. */
  stop(): Promise<void>;
}

export interface StartOptions {
  /** Printed progress lines go here. @default process.stderr */
  log?: (line: string) => void;
  /** Install every manifest of crds/ and wait until each CRD is Established. @default true */
  installCrds?: boolean;
  /**
   * Always start an etcd and kube-apiserver of our own, even with USE_EXISTING_CLUSTER, and
   * return the controls of a {@link PrivateControlPlane} (for fault tests, which must never
   * kill or compact a control plane that other tests share). @default false
   */
  private?: boolean;
  /**
   * An `audit.k8s.io/v1` Policy; when given, kube-apiserver writes its audit log (JSON lines,
   * blocking mode, so an event is on disk before the response is sent) to
   * {@link PrivateControlPlane.auditLogPath}. Only with `private`. @default no audit log
   */
  auditPolicy?: Record<string, unknown>;
  /**
   * Flags added to etcd's and kube-apiserver's when this harness starts them (ignored with
   * USE_EXISTING_CLUSTER): the bench's scale scenario raises etcd's backend quota
   * ({@link SCALE_FLAGS}); the tests keep the defaults. @default none
   */
  extraFlags?: { etcd?: readonly string[]; apiServer?: readonly string[] };
}

/**
 * Flags of a control plane that holds 100,000 Referables and as many sources, each Referable
 * written several times before the next compaction (the bench's scale scenario):
 * - etcd's backend quota from the default 2 GiB to 8 GiB (the largest etcd recommends): a
 *   database past its quota raises the NOSPACE alarm and refuses every write from then on,
 *   and bbolt does not shrink after a compaction (freed pages are only reused);
 * - kube-apiserver compacts etcd at its default, every 5 minutes, as a real cluster does: at
 *   100,000 a run writes about 600,000 revisions of a few KB (well under the quota), and a
 *   one-minute compaction (tried) expired the continue tokens of the controllers' paged lists
 *   and re-initialised the API server's own watch cache under load (429s to every watch): a
 *   stress a cluster does not put on them (BENCHMARKS.md, "100,000 Referables").
 * (etcd 3.6's raft snapshot every 10,000 entries already bounds the log it keeps in memory.)
 * Request limits stay the defaults: the bench and the controller both use the admin
 * certificate (group system:masters), which API Priority and Fairness exempts, so the floor
 * and the controller are never throttled, and never differently.
 */
export const SCALE_FLAGS = {
  etcd: ["--quota-backend-bytes=8589934592"],
  apiServer: ["--etcd-compaction-interval=5m"],
} as const;

/** A control plane this process owns, with the controls fault tests need. */
export interface PrivateControlPlane extends ControlPlane {
  owned: true;
  /** http://127.0.0.1:PORT: etcd's client URL (it serves the v3 JSON gateway under /v3/). */
  etcdUrl: string;
  /** The audit log file, when `auditPolicy` was given. */
  auditLogPath: string | undefined;
  /** The running kube-apiserver's pid, or undefined while it is down. */
  readonly apiServerPid: number | undefined;
  /** etcd's pid (the bench reads its CPU from /proc). */
  readonly etcdPid: number | undefined;
  /** SIGKILLs kube-apiserver (no graceful shutdown) and resolves once it has exited; etcd keeps running. */
  killApiServer(): Promise<void>;
  /** Starts kube-apiserver again, on the same port, etcd and certificates; resolves once /readyz is ok. */
  startApiServer(): Promise<void>;
}

/**
 * Starts etcd and kube-apiserver, or, with USE_EXISTING_CLUSTER=true, uses the current
 * kubeconfig. Throws with the tail of the server logs when the control plane does not come up.
 */
export async function startControlPlane(
  options: StartOptions & { private: true },
): Promise<PrivateControlPlane>;
export async function startControlPlane(options?: StartOptions): Promise<ControlPlane>;
export async function startControlPlane(options: StartOptions = {}): Promise<ControlPlane> {
  const log = options.log ?? ((line: string) => process.stderr.write(`[control-plane] ${line}\n`));
  let plane: ControlPlane;
  if (options.private) {
    plane = await startOwned(log, options.auditPolicy, options.extraFlags);
  } else if (process.env.USE_EXISTING_CLUSTER === "true") {
    const kubeconfigPath =
      process.env.KUBECONFIG?.split(":")[0] ?? join(process.env.HOME ?? "/root", ".kube", "config");
    const { server, version } = await probeExisting(kubeconfigPath);
    log(`USE_EXISTING_CLUSTER=true: using ${kubeconfigPath} (${server}, ${version})`);
    plane = { kubeconfigPath, server, version, binDir: undefined, owned: false, stop: async () => undefined };
  } else {
    plane = await startOwned(log, undefined, options.extraFlags);
  }
  try {
    if (options.installCrds ?? true) await installCrds(plane.kubeconfigPath, log);
  } catch (err) {
    await plane.stop();
    throw err;
  }
  return plane;
}

/** Builds (once) or finds the binaries; returns their folder. */
export function ensureBinaries(log: (line: string) => void): Promise<string> {
  return runBuildScript("control-plane-binaries.sh", "the control-plane binaries", (line) =>
    log(line.replace(/^\[control-plane\] /, "")),
  );
}

/**
 * Runs scripts/`script` (a build-or-reuse script of a Go-built tool), passing its stderr lines
 * to `log`; resolves with the last line it prints on stdout (the path it built or found).
 */
export function runBuildScript(script: string, what: string, log: (line: string) => void): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn("bash", [join(repoRoot, "scripts", script)], { stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    child.stdout.on("data", (d: Buffer) => (out += d.toString()));
    child.stderr.on("data", (d: Buffer) => {
      for (const line of d.toString().split("\n")) if (line.trim()) log(line);
    });
    child.on("error", reject);
    child.on("exit", (code) => {
      const path = out.trim().split("\n").pop();
      if (code === 0 && path) resolve(path);
      else reject(new Error(`building ${what} failed (exit ${code}); see the lines above`));
    });
  });
}

async function startOwned(
  log: (line: string) => void,
  auditPolicy?: Record<string, unknown>,
  extraFlags: StartOptions["extraFlags"] = {},
): Promise<PrivateControlPlane> {
  const binDir = await ensureBinaries(log);
  const etcdBin = process.env.TEST_ASSET_ETCD ?? join(binDir, "etcd");
  const apiserverBin = process.env.TEST_ASSET_KUBE_APISERVER ?? join(binDir, "kube-apiserver");
  const dir = await mkdtemp(join(tmpdir(), "referable-control-plane-"));
  const reaper = startReaper(dir);
  let etcd: ChildProcess | undefined;
  let apiserver: ChildProcess | undefined;
  let stopped = false;

  const stop = async (): Promise<void> => {
    if (stopped) return;
    stopped = true;
    // API server first, so it does not log etcd errors on its way down.
    for (const child of [apiserver, etcd]) if (child) await terminate(child);
    await rm(dir, { recursive: true, force: true });
    reaper.stdin?.end();
  };

  try {
    const [etcdPort, peerPort, apiPort] = await Promise.all([freePort(), freePort(), freePort()]);
    const pki = await makePki(join(dir, "pki"));
    const etcdUrl = `http://127.0.0.1:${etcdPort}`;
    etcd = launch(
      etcdBin,
      [
        `--data-dir=${join(dir, "etcd")}`,
        `--listen-client-urls=${etcdUrl}`,
        `--advertise-client-urls=${etcdUrl}`,
        `--listen-peer-urls=http://127.0.0.1:${peerPort}`,
        `--initial-advertise-peer-urls=http://127.0.0.1:${peerPort}`,
        `--initial-cluster=default=http://127.0.0.1:${peerPort}`,
        // Test data is thrown away: no fsync makes every write several times faster.
        "--unsafe-no-fsync=true",
        "--log-level=warn",
        ...(extraFlags.etcd ?? []),
      ],
      join(dir, "etcd.log"),
    );
    reaper.stdin?.write(`${etcd.pid}\n`);

    const server = `https://127.0.0.1:${apiPort}`;
    let auditLogPath: string | undefined;
    const auditArgs: string[] = [];
    if (auditPolicy) {
      auditLogPath = join(dir, "audit.log");
      await writeFile(join(dir, "audit-policy.json"), JSON.stringify(auditPolicy));
      auditArgs.push(
        `--audit-policy-file=${join(dir, "audit-policy.json")}`,
        `--audit-log-path=${auditLogPath}`,
        "--audit-log-format=json",
        "--audit-log-mode=blocking",
        "--audit-log-maxbackup=0",
      );
    }
    const apiserverArgs = [
      `--etcd-servers=${etcdUrl}`,
      "--bind-address=127.0.0.1",
      "--advertise-address=127.0.0.1",
      `--secure-port=${apiPort}`,
      `--cert-dir=${join(dir, "apiserver-certs")}`,
      `--tls-cert-file=${pki.servingCert}`,
      `--tls-private-key-file=${pki.servingKey}`,
      `--client-ca-file=${pki.caCert}`,
      "--authorization-mode=RBAC",
      "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
      `--service-account-key-file=${pki.saPublicKey}`,
      `--service-account-signing-key-file=${pki.saPrivateKey}`,
      "--service-cluster-ip-range=10.0.0.0/24",
      "--allow-privileged=true",
      // No controller-manager runs here, so nothing would create the `default` ServiceAccount
      // that this admission plugin insists on for pods (as envtest does).
      "--disable-admission-plugins=ServiceAccount",
      "--v=0",
      ...auditArgs,
      ...(extraFlags.apiServer ?? []),
    ];
    // The same arguments every time, so a restarted server has the same port, etcd and certificates.
    const launchApiServer = (): ChildProcess => {
      const child = launch(apiserverBin, apiserverArgs, join(dir, "kube-apiserver.log"));
      reaper.stdin?.write(`${child.pid}\n`);
      return child;
    };
    apiserver = launchApiServer();

    const kubeconfigPath = join(dir, "kubeconfig");
    await writeFile(kubeconfigPath, await adminKubeconfig(server, pki));
    const version = await waitReady(server, pki, [etcd, apiserver], dir);
    log(`kube-apiserver ${version} ready at ${server} (etcd ${etcdUrl})`);
    const killApiServer = async (): Promise<void> => {
      const child = apiserver;
      if (!child) return;
      if (child.exitCode === null && child.signalCode === null) {
        const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
        child.kill("SIGKILL");
        await exited;
      }
      apiserver = undefined;
    };
    const startApiServer = async (): Promise<void> => {
      if (stopped) throw new Error("the control plane is stopped");
      if (apiserver) throw new Error("kube-apiserver is already running: kill it first");
      apiserver = launchApiServer();
      await waitReady(server, pki, [etcd!, apiserver], dir);
      log(`kube-apiserver restarted at ${server}`);
    };
    return {
      kubeconfigPath,
      server,
      version,
      binDir,
      owned: true,
      stop,
      etcdUrl,
      auditLogPath,
      get apiServerPid() {
        return apiserver?.pid;
      },
      etcdPid: etcd.pid,
      killApiServer,
      startApiServer,
    };
  } catch (err) {
    for (const name of ["etcd.log", "kube-apiserver.log"]) {
      const text = await readFile(join(dir, name), "utf8").catch(() => "");
      if (text) log(`last lines of ${name}:\n${text.split("\n").slice(-25).join("\n")}`);
    }
    await stop();
    throw err;
  }
}

function launch(bin: string, args: string[], logFile: string): ChildProcess {
  const child = spawn("bash", ["-c", 'exec "$0" "$@" >>"$LOG_FILE" 2>&1', bin, ...args], {
    stdio: "ignore",
    env: { ...process.env, LOG_FILE: logFile },
  });
  child.on("error", () => undefined);
  return child;
}

async function terminate(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  child.kill("SIGTERM");
  const timer = setTimeout(() => child.kill("SIGKILL"), 10_000);
  await exited;
  clearTimeout(timer);
}

/**
 * A detached process that outlives us: when our end of its stdin closes (we exited, were
 * killed, or Jest was interrupted), it ends every process we registered and removes `dir`.
 */
function startReaper(dir: string): ChildProcess {
  const script = `
    pids=""
    while read -r pid; do pids="$pids $pid"; done
    for p in $pids; do kill -TERM "$p" 2>/dev/null; done
    for i in $(seq 100); do
      alive=""
      for p in $pids; do kill -0 "$p" 2>/dev/null && alive=1; done
      [ -z "$alive" ] && break
      sleep 0.1
    done
    for p in $pids; do kill -KILL "$p" 2>/dev/null; done
    rm -rf "$0"
  `;
  const reaper = spawn("bash", ["-c", script, dir], { detached: true, stdio: ["pipe", "ignore", "ignore"] });
  reaper.unref();
  (reaper.stdin as unknown as { unref?: () => void } | null)?.unref?.();
  return reaper;
}

interface Pki {
  caCert: string;
  caKey: string;
  servingCert: string;
  servingKey: string;
  adminCert: string;
  adminKey: string;
  saPublicKey: string;
  saPrivateKey: string;
}

async function openssl(args: string[]): Promise<void> {
  await execFileAsync("openssl", args);
}

async function makePki(dir: string): Promise<Pki> {
  await mkdir(dir, { recursive: true });
  const p = (name: string) => join(dir, name);
  const ec = (key: string) => openssl(["ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", key]);
  await Promise.all([ec(p("ca.key")), ec(p("serving.key")), ec(p("admin.key")), ec(p("sa.key"))]);
  await openssl([
    "req",
    "-x509",
    "-new",
    "-key",
    p("ca.key"),
    "-days",
    "2",
    "-subj",
    "/CN=referable-test-ca",
    "-out",
    p("ca.crt"),
  ]);
  await writeFile(
    p("serving.ext"),
    "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n",
  );
  await writeFile(p("admin.ext"), "extendedKeyUsage=clientAuth\n");
  // Each certificate gets its own random serial: the two signs run at once, and -CAcreateserial
  // made both read and write one ca.srl ("unable to load number" when they overlapped).
  const sign = async (name: string, subject: string) => {
    await openssl(["req", "-new", "-key", p(`${name}.key`), "-subj", subject, "-out", p(`${name}.csr`)]);
    await openssl([
      "x509",
      "-req",
      "-in",
      p(`${name}.csr`),
      "-CA",
      p("ca.crt"),
      "-CAkey",
      p("ca.key"),
      "-set_serial",
      `0x${randomBytes(16).toString("hex")}`,
      "-days",
      "2",
      "-extfile",
      p(`${name}.ext`),
      "-out",
      p(`${name}.crt`),
    ]);
  };
  await Promise.all([
    sign("serving", "/CN=127.0.0.1"),
    sign("admin", "/O=system:masters/CN=referable-test-admin"),
  ]);
  await openssl(["ec", "-in", p("sa.key"), "-pubout", "-out", p("sa.pub")]);
  return {
    caCert: p("ca.crt"),
    caKey: p("ca.key"),
    servingCert: p("serving.crt"),
    servingKey: p("serving.key"),
    adminCert: p("admin.crt"),
    adminKey: p("admin.key"),
    saPublicKey: p("sa.pub"),
    saPrivateKey: p("sa.key"),
  };
}

async function adminKubeconfig(server: string, pki: Pki): Promise<string> {
  const b64 = async (file: string) => (await readFile(file)).toString("base64");
  return JSON.stringify(
    {
      apiVersion: "v1",
      kind: "Config",
      clusters: [
        { name: "referable-test", cluster: { server, "certificate-authority-data": await b64(pki.caCert) } },
      ],
      users: [
        {
          name: "admin",
          user: {
            "client-certificate-data": await b64(pki.adminCert),
            "client-key-data": await b64(pki.adminKey),
          },
        },
      ],
      contexts: [{ name: "referable-test", context: { cluster: "referable-test", user: "admin" } }],
      "current-context": "referable-test",
    },
    null,
    2,
  );
}

/** Polls /readyz until the server answers ok, a child exits, or 90 s pass. */
async function waitReady(server: string, pki: Pki, children: ChildProcess[], dir: string): Promise<string> {
  const { Agent, fetch } = await import("undici");
  const dispatcher = new Agent({
    connect: {
      ca: await readFile(pki.caCert),
      cert: await readFile(pki.adminCert),
      key: await readFile(pki.adminKey),
    },
  });
  const deadline = Date.now() + 90_000;
  let last = "no answer yet";
  try {
    while (Date.now() < deadline) {
      const dead = children.find((c) => c.exitCode !== null || c.signalCode !== null);
      if (dead) throw new Error(`a control-plane process exited early (logs in ${dir})`);
      try {
        const ready = await fetch(`${server}/readyz`, { dispatcher, signal: AbortSignal.timeout(5000) });
        last = `${ready.status} ${(await ready.text()).slice(0, 200)}`;
        if (ready.status === 200) {
          const version = (await (await fetch(`${server}/version`, { dispatcher })).json()) as {
            gitVersion: string;
          };
          return version.gitVersion;
        }
      } catch (err) {
        last = (err as Error).message;
      }
      await new Promise((r) => setTimeout(r, 200));
    }
    throw new Error(`kube-apiserver did not become ready within 90 s: ${last}`);
  } finally {
    await dispatcher.close();
  }
}

/** A client with the credentials of the kubeconfig file at `path`. */
async function clientOfFile(path: string) {
  const { KubeConfig } = await import("@kubernetes/client-node");
  const { KubeClient } = await import("../../src/kube/client.ts");
  const kc = new KubeConfig();
  kc.loadFromFile(path);
  return new KubeClient({ kubeConfig: kc });
}

async function probeExisting(kubeconfigPath: string): Promise<{ server: string; version: string }> {
  const client = await clientOfFile(kubeconfigPath);
  try {
    const version = await client.request<{ gitVersion: string }>("GET", "/version");
    return { server: client.server, version: version.gitVersion };
  } finally {
    await client.close();
  }
}

/** Server-side applies every manifest of crds/ and waits until each CRD is Established. */
async function installCrds(kubeconfigPath: string, log: (line: string) => void): Promise<void> {
  // js-yaml directly: client-node's loadAllYaml turns manifests into typed models, which
  // renames x-kubernetes-* keys.
  const { loadAll } = await import("js-yaml");
  const { readdir } = await import("node:fs/promises");
  const client = await clientOfFile(kubeconfigPath);
  try {
    const crdDir = join(repoRoot, "crds");
    const files = (await readdir(crdDir)).filter((f) => /\.ya?ml$/.test(f)).sort();
    const names: string[] = [];
    for (const file of files) {
      for (const doc of loadAll(await readFile(join(crdDir, file), "utf8")) as Array<Record<
        string,
        unknown
      > | null>) {
        if (!doc) continue;
        const name = (doc.metadata as { name: string }).name;
        await client.request("PATCH", `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${name}`, {
          query: { fieldManager: "referable-test-harness", force: true },
          body: doc,
          contentType: "application/apply-patch+yaml",
        });
        names.push(name);
      }
    }
    await Promise.all(names.map((name) => waitEstablished(client, name)));
    log(`installed ${names.length} CRD(s) from crds/: ${names.join(", ")}`);
  } finally {
    await client.close();
  }
}

async function waitEstablished(
  client: { request: <T>(m: string, p: string) => Promise<T> },
  name: string,
): Promise<void> {
  const deadline = Date.now() + 30_000;
  while (Date.now() < deadline) {
    const crd = await client.request<{ status?: { conditions?: Array<{ type: string; status: string }> } }>(
      "GET",
      `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${name}`,
    );
    if (crd.status?.conditions?.some((c) => c.type === "Established" && c.status === "True")) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`CRD ${name} was not Established within 30 s`);
}
