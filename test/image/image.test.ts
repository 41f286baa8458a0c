/**
 * The container image as a user runs it (`npm run test:image`): the Dockerfile as it ships,
 * built with podman (on a stand-in for the pinned base when no registry is reachable), holds only
 * what runs; started as deploy/ runs it against the test control plane, it answers its probes,
 * serves secure metrics, reconciles a Referable, refuses through its webhook a Referable whose
 * author may not read the source, and stops on SIGTERM within the grace period.
 *
 * "As deploy/ runs it": the webhook overlay (deploy/overlays/webhook) rendered with kustomize
 * gives the Deployment; its args, env, ports, volume mounts, security context and grace period
 * become podman's flags (`podFlags`). What a kubelet would add is added the way it adds it: the
 * ServiceAccount's token, the API server's CA and the namespace at
 * /var/run/secrets/kubernetes.io/serviceaccount, KUBERNETES_SERVICE_HOST/PORT, and the Secret
 * volume of the webhook's serving certificate. Only the bind addresses change: the container
 * shares the host's network (no pod network here), so each port binds 127.0.0.1 on a free port.
 * RBAC is deploy/'s own, applied as shipped; the aggregated source reader is filled as
 * kube-controller-manager would (none runs here).
 *
 * Each step prints what it checked (lines starting with [image]).
 */
import { execFile } from "node:child_process";
import { createHash, X509Certificate } from "node:crypto";
import { chmod, mkdir, mkdtemp, readdir, readFile, lstat, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { rootCertificates } from "node:tls";
import { dump } from "js-yaml";
import { isApiError, type KubeClient, type KubeObject } from "../../src/kube/client.ts";
import { repoRoot } from "../harness/control-plane.ts";
import { controllerContainer, podEnv, type Container, type Deployment } from "../harness/deployment.ts";
import { httpsGet } from "../harness/https-get.ts";
import {
  adminClient,
  closeTestClients,
  createConfigMap,
  createNamespace,
  mergePatch,
  requestToken,
  selfAccess,
  serviceAccountToken,
  testKubeConfig,
  tokenClient,
  uniqueName,
  waitFor,
} from "../harness/kube.ts";
import { KUBECTL, kustomize } from "../harness/kubectl.ts";
import { freePort } from "../harness/ports.ts";
import { aggregateClusterRole, bindRole, createRole, serviceAccount } from "../harness/rbac.ts";
import { deleteWebhookConfiguration, makeTestCa } from "../harness/webhook.ts";
import { buildBase, buildImage, npmBuildSecrets, podman, step } from "./podman.ts";

const IMAGE = "localhost/referable-controller:image-test";
/** The install the image is run from: the base plus the admission webhook. */
const OVERLAY = "deploy/overlays/webhook";
const SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount";
const RF = "/apis/referable.dev/v1alpha1/referables";
/** Deadline of each wait: generous, the machine is shared with other test runs. */
const WAIT = { timeoutMs: 60_000, intervalMs: 200 };
const STEP_TIMEOUT_MS = 180_000;

type Obj = KubeObject & { spec?: Record<string, unknown> };

let tmp: string;
let objects: Obj[];
let deployment: Deployment;
let container: Container;
let admin: KubeClient;
let containerName: string | undefined;
let podName: string;
/** Container port name → the loopback URL it is served on. */
const urls: Record<string, string> = {};
let webhookConfigurationName: string | undefined;
/** The CA the webhook's serving certificate chains to (the configuration's caBundle). */
let webhookCaBundle: string;

/** The container's log, for a failure's message. */
async function containerLog(lines = 40): Promise<string> {
  if (!containerName) return "";
  const log = await podman(["logs", "--tail", String(lines), containerName]).catch((e: Error) => e.message);
  return `\n--- the container's log (last ${lines} lines):\n${log.trim()}`;
}

/** Runs `fn`; on failure adds the container's log to the error. */
async function withLog<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    throw new Error(`${(err as Error).message}${await containerLog()}`);
  }
}

beforeAll(async () => {
  tmp = await mkdtemp(join(tmpdir(), "referable-image-"));
  await chmod(tmp, 0o755);
  await podman(["--version"]);
  const base = await buildBase();
  const seconds = await buildImage(IMAGE, base.image, join(tmp, "build.log"));
  const size = Number(await podman(["image", "inspect", "--format", "{{.Size}}", IMAGE]));
  step(
    `built ${IMAGE} in ${seconds.toFixed(1)} s: ${(size / 1e6).toFixed(1)} MB${base.standIn ? " (on the stand-in base)" : ""}`,
  );
  admin = adminClient();
}, 1_500_000);

afterAll(async () => {
  if (containerName) await podman(["rm", "--force", "--time", "0", containerName]).catch(() => undefined);
  if (webhookConfigurationName) await deleteWebhookConfiguration(admin, webhookConfigurationName);
  await closeTestClients();
  if (tmp) await rm(tmp, { recursive: true, force: true });
}, STEP_TIMEOUT_MS);

// ---------------------------------------------------------------------------------------------

interface ImageConfig {
  Config: {
    User?: string;
    Entrypoint?: string[];
    Cmd?: string[] | null;
    WorkingDir?: string;
    Env?: string[];
    Labels?: Record<string, string>;
  };
}

/** Every path of the image's file system (relative, `/` separated), with its kind. */
async function listTree(root: string): Promise<Map<string, "file" | "dir" | "link">> {
  const found = new Map<string, "file" | "dir" | "link">();
  const walk = async (dir: string) => {
    for (const entry of await readdir(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name);
      const rel = relative(root, path);
      if (entry.isSymbolicLink()) found.set(rel, "link");
      else if (entry.isDirectory()) {
        found.set(rel, "dir");
        await walk(path);
      } else found.set(rel, "file");
    }
  };
  await walk(root);
  return found;
}

const sha256 = (data: Buffer | string) => createHash("sha256").update(data).digest("hex");

/** PEM certificates of a bundle, each normalised to its DER's hash. */
function certificateHashes(pem: string): Set<string> {
  const blocks = pem.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g) ?? [];
  return new Set(blocks.map((b) => sha256(new X509Certificate(b).raw)));
}

describe("the image holds only what runs", () => {
  let config: ImageConfig["Config"];
  let root: string;
  let tree: Map<string, "file" | "dir" | "link">;

  beforeAll(async () => {
    config = (JSON.parse(await podman(["image", "inspect", IMAGE])) as ImageConfig[])[0]!.Config;
    root = (await podman(["image", "mount", IMAGE])).trim();
    tree = await listTree(root);
  }, STEP_TIMEOUT_MS);

  afterAll(async () => {
    await podman(["image", "unmount", IMAGE]).catch(() => undefined);
  });

  it("runs `node dist/process/main.js` in /app as user 65532, with the OCI labels of this release", async () => {
    const pkg = JSON.parse(await readFile(join(repoRoot, "package.json"), "utf8")) as {
      version: string;
      license: string;
    };
    expect({
      user: config.User,
      entrypoint: config.Entrypoint,
      cmd: config.Cmd ?? [],
      workdir: config.WorkingDir,
    }).toEqual({
      user: "65532:65532",
      entrypoint: ["node", "dist/process/main.js"],
      cmd: [],
      workdir: "/app",
    });
    expect(config.Labels).toMatchObject({
      "org.opencontainers.image.version": pkg.version,
      "org.opencontainers.image.licenses": pkg.license,
      "org.opencontainers.image.source": expect.stringMatching(/^https:\/\//),
    });
    step(
      `config: user ${config.User}, entrypoint ${JSON.stringify(config.Entrypoint)} in ${config.WorkingDir}; labels ${Object.entries(
        config.Labels ?? {},
      )
        .filter(([k]) => k.startsWith("org.opencontainers.image."))
        .map(([k, v]) => `${k.slice("org.opencontainers.image.".length)}=${v}`)
        .join(" ")}`,
    );
  });

  it("holds node, dist/, the production dependencies and CA certificates: no shell, npm, corepack or package manager", async () => {
    const top = [...tree.keys()].filter((p) => !p.includes("/")).sort();
    expect(top.filter((p) => !["app", "etc", "lib", "lib64", "tmp", "usr"].includes(p))).toEqual([]);
    for (const path of [
      "usr/local/bin/node",
      "app/package.json",
      "app/dist/process/main.js",
      "app/node_modules",
      "etc/ssl/certs/ca-certificates.crt",
      "etc/passwd",
    ])
      expect({ path, kind: tree.get(path) }).toEqual({
        path,
        kind: path === "app/node_modules" ? "dir" : "file",
      });
    const forbidden = new Set([
      "sh",
      "bash",
      "dash",
      "ash",
      "busybox",
      "npm",
      "npx",
      "corepack",
      "yarn",
      "pnpm",
      "apt",
      "apt-get",
      "dpkg",
      "su",
      "crds",
    ]);
    const found = [...tree.keys()].filter((p) => forbidden.has(p.split("/").at(-1)!));
    expect(found).toEqual([]);

    // node_modules is `npm ci --omit=dev`: the lockfile's packages not marked dev, nothing else.
    const lock = JSON.parse(await readFile(join(repoRoot, "package-lock.json"), "utf8")) as {
      packages: Record<string, { dev?: boolean; optional?: boolean }>;
    };
    const installed = [...tree.entries()]
      // A workspace of the repository (controller/: the controller's own dependencies) is a link.
      .filter(
        ([p, kind]) =>
          (kind === "dir" || kind === "link") && /^app\/node_modules\/(@[^/]+\/[^/]+|[^@/][^/]*)$/.test(p),
      )
      .map(([p]) => p.slice("app/".length))
      .filter((p) => !p.endsWith("/.bin") && p !== "node_modules/.bin");
    const production = Object.entries(lock.packages).filter(
      ([p, meta]) => /^node_modules\/(@[^/]+\/[^/]+|[^@/][^/]*)$/.test(p) && !meta.dev,
    );
    expect(installed.filter((p) => !production.some(([q]) => q === p))).toEqual([]);
    expect(
      production.filter(([p, meta]) => !meta.optional && !installed.includes(p)).map(([p]) => p),
    ).toEqual([]);
    // Each workspace link resolves inside the image (its package.json is there).
    const links = production.filter(([, meta]) => (meta as { link?: boolean }).link);
    for (const [, meta] of links)
      expect(tree.get(`app/${(meta as { resolved?: string }).resolved}/package.json`)).toBe("file");

    const passwd = await readFile(join(root, "etc", "passwd"), "utf8");
    expect(passwd).toMatch(/^nonroot:x:65532:65532:/m);
    const files = [...tree.values()].filter((k) => k === "file").length;
    step(
      `file system: ${top.join(", ")} (${files} files); node, dist/, ${installed.length} production packages, CA certificates; no ${[...forbidden].join(", ")}`,
    );
  });

  it("cannot start a shell", async () => {
    const err = await podman(["run", "--rm", "--entrypoint", "/bin/sh", IMAGE, "-c", "true"]).then(
      () => undefined,
      (e: Error) => e.message,
    );
    expect(err).toMatch(/no such file or directory/);
    step("`podman run --entrypoint /bin/sh` fails: no such file or directory");
  });

  it("keeps npm's build secrets out of every layer and of the image's history", async () => {
    const secrets = await npmBuildSecrets();
    const history = await podman(["history", "--no-trunc", "--format", "{{.CreatedBy}}", IMAGE]);
    const inspect = await podman(["image", "inspect", IMAGE]);
    const checked: string[] = [];
    if (secrets.npmrc) {
      const npmrc = await readFile(secrets.npmrc);
      const hash = sha256(npmrc);
      const text = npmrc.toString().trim();
      for (const [path, kind] of tree) {
        if (kind !== "file" || (await lstat(join(root, path))).size !== npmrc.length) continue;
        expect({ path, npmrc: sha256(await readFile(join(root, path))) === hash }).toEqual({
          path,
          npmrc: false,
        });
      }
      expect(history.includes(text) || inspect.includes(text)).toBe(false);
      checked.push("the npmrc (no file of the image is it, history and config do not hold it)");
    }
    // The image's CA bundle is Node's own store: no certificate that only the build's bundle
    // holds (a proxy's) is in it.
    const imageBundle = certificateHashes(
      await readFile(join(root, "etc/ssl/certs/ca-certificates.crt"), "utf8"),
    );
    expect(imageBundle.size).toBeGreaterThan(100);
    if (secrets.ca) {
      const nodeStore = certificateHashes(rootCertificates.join("\n"));
      const buildOnly = [...certificateHashes(await readFile(secrets.ca, "utf8"))].filter(
        (h) => !nodeStore.has(h),
      );
      expect(buildOnly.filter((h) => imageBundle.has(h))).toEqual([]);
      checked.push(
        `the CA bundle (none of its ${buildOnly.length} certificates that Node does not ship is in the image)`,
      );
    }
    expect(history).not.toMatch(/NODE_EXTRA_CA_CERTS|NPM_CONFIG_CAFILE=\//);
    expect(config.Env?.filter((e) => /NPM|CA_CERTS|npmrc/i.test(e))).toEqual([]);
    step(`build secrets: ${checked.join("; ") || "none were given"}; no CA or npm setting in the env`);
  });
});

// ---------------------------------------------------------------------------------------------
// Running it as deploy/ does

/** `kubectl apply --server-side` of `docs` as the admin. */
async function apply(docs: Obj[]): Promise<string> {
  const kubeconfig = process.env.REFERABLE_TEST_KUBECONFIG!;
  return new Promise((resolve, reject) => {
    const child = execFile(
      KUBECTL,
      [`--kubeconfig=${kubeconfig}`, "apply", "--server-side", "-f", "-"],
      (err, stdout, stderr) =>
        err ? reject(new Error(`kubectl apply: ${stderr || err.message}`)) : resolve(stdout),
    );
    child.stdin?.end(docs.map((d) => dump(d)).join("---\n"));
  });
}

/**
 * podman's flags for what the pod spec asks of the container's security: every field of the
 * pod's and the container's securityContext is either mapped or refused here, so a new one in
 * deploy/ fails the test until it is emulated.
 */
function securityFlags(d: Deployment, c: Container): string[] {
  const pod = d.spec.template.spec.securityContext;
  const ctr = c.securityContext ?? {};
  const flags: string[] = [];
  const known = new Set([
    "runAsNonRoot",
    "runAsUser",
    "runAsGroup",
    "seccompProfile",
    "allowPrivilegeEscalation",
    "readOnlyRootFilesystem",
    "privileged",
    "capabilities",
  ]);
  for (const key of [...Object.keys(pod), ...Object.keys(ctr)])
    if (!known.has(key)) throw new Error(`securityContext.${key}: the test does not emulate it`);
  const merged = { ...pod, ...ctr } as {
    runAsNonRoot?: boolean;
    runAsUser?: number;
    runAsGroup?: number;
    seccompProfile?: { type: string };
    allowPrivilegeEscalation?: boolean;
    readOnlyRootFilesystem?: boolean;
    privileged?: boolean;
    capabilities?: { drop?: string[]; add?: string[] };
  };
  if (merged.runAsUser === undefined || merged.runAsGroup === undefined)
    throw new Error("the pod names no numeric runAsUser/runAsGroup");
  if (merged.runAsNonRoot && merged.runAsUser === 0) throw new Error("runAsNonRoot with runAsUser 0");
  flags.push(`--user=${merged.runAsUser}:${merged.runAsGroup}`);
  // podman's default seccomp profile is the runtime's default, as RuntimeDefault asks.
  if (merged.seccompProfile && merged.seccompProfile.type !== "RuntimeDefault")
    throw new Error(`seccompProfile ${merged.seccompProfile.type}: the test does not emulate it`);
  if (merged.allowPrivilegeEscalation === false) flags.push("--security-opt=no-new-privileges");
  // The kubelet mounts no tmpfs on /tmp or /run of a read-only root; podman does unless told not to.
  if (merged.readOnlyRootFilesystem) flags.push("--read-only", "--read-only-tmpfs=false");
  if (merged.privileged) flags.push("--privileged");
  for (const cap of merged.capabilities?.drop ?? []) flags.push(`--cap-drop=${cap}`);
  for (const cap of merged.capabilities?.add ?? []) flags.push(`--cap-add=${cap}`);
  return flags;
}

/** The ServiceAccount volume the kubelet projects: token, the API server's CA, namespace. */
async function serviceAccountVolume(d: Deployment): Promise<string> {
  const dir = join(tmp, "serviceaccount");
  await mkdir(dir, { mode: 0o755 });
  const token = await requestToken(admin, d.metadata.namespace, d.spec.template.spec.serviceAccountName);
  const cluster = testKubeConfig().getCurrentCluster()!;
  const ca = cluster.caData ? Buffer.from(cluster.caData, "base64") : await readFile(cluster.caFile!);
  await writeFile(join(dir, "token"), token, { mode: 0o644 });
  await writeFile(join(dir, "ca.crt"), ca, { mode: 0o644 });
  await writeFile(join(dir, "namespace"), d.metadata.namespace, { mode: 0o644 });
  return dir;
}

/**
 * The webhook's serving certificate, made here as cert-manager would (deploy/webhook's
 * Certificate): a CA, and a certificate it signs for the address the API server calls, in a
 * folder laid out as the Secret volume the Deployment mounts. Returns the volumes by Secret name
 * and the caBundle to register. (When the controller makes its own certificate instead, this
 * returns no volume, and the caBundle is read from the configuration the controller keeps.)
 */
async function webhookCertificate(): Promise<{ secretVolumes: Record<string, string>; caBundle: string }> {
  const ca = await makeTestCa(join(tmp, "webhook-ca"));
  const dir = join(tmp, "webhook-serving-cert");
  await ca.issue(dir);
  await rm(join(dir, "tls.csr"));
  await rm(join(dir, "tls.ext"));
  await chmod(dir, 0o755);
  for (const file of ["tls.crt", "tls.key"]) await chmod(join(dir, file), 0o644);
  return {
    secretVolumes: { "referable-webhook-serving-cert": dir },
    caBundle: (await readFile(ca.certFile)).toString("base64"),
  };
}

async function httpStatus(url: string): Promise<{ status: number; body: string }> {
  const res = await fetch(url, { signal: AbortSignal.timeout(5000) });
  return { status: res.status, body: await res.text() };
}

async function leaseHolder(namespace: string, name: string): Promise<string | undefined> {
  const lease = await admin
    .request<Obj>("GET", `/apis/coordination.k8s.io/v1/namespaces/${namespace}/leases/${name}`)
    .catch(() => undefined);
  return (lease?.spec as { holderIdentity?: string } | undefined)?.holderIdentity;
}

/** The value of `--flag=value` in the container's args. */
function flagValue(args: readonly string[], flag: string): string | undefined {
  return args.find((a) => a.startsWith(`--${flag}=`))?.slice(flag.length + 3);
}

describe(`the image, run as ${OVERLAY} runs it`, () => {
  beforeAll(async () => {
    objects = await kustomize<Obj>(OVERLAY);
    deployment = objects.find((o) => o.kind === "Deployment") as Deployment;
    container = controllerContainer(deployment);
    podName = `${deployment.metadata.name}-${uniqueName("image").slice("image-".length)}`;

    // Everything of the install but the Deployment (the container below is its pod) and
    // cert-manager's objects (no cert-manager here: webhookCertificate() stands in for it); the
    // webhook's configuration is registered by the webhook step, pointed at the container.
    const skipped = new Set(["Deployment", "Certificate", "Issuer", "ValidatingWebhookConfiguration"]);
    const applied = await apply(objects.filter((o) => !skipped.has(o.kind!)));
    const rules = await aggregateClusterRole(admin, "referable-source-reader");
    step(
      `applied ${OVERLAY} server-side (${applied.trim().split("\n").length} objects; not the Deployment, cert-manager's Certificates and Issuers, or the webhook configuration); filled the aggregated referable-source-reader (${rules.length} rules)`,
    );

    const env = podEnv(deployment, container, podName);
    const sa = await serviceAccountVolume(deployment);
    const cert = await webhookCertificate();
    webhookCaBundle = cert.caBundle;

    // Each containerPort is served by the flag whose address ends in its port: bind it to
    // 127.0.0.1 on a free port instead (host network, loopback only).
    const args = [...(container.args ?? [])];
    for (const port of container.ports ?? []) {
      const i = args.findIndex((a) => /^--[a-z-]+-address=/.test(a) && a.endsWith(`:${port.containerPort}`));
      if (i < 0)
        throw new Error(`no bind-address flag serves containerPort ${port.name} (${port.containerPort})`);
      const local = await freePort();
      args[i] = `${args[i]!.slice(0, args[i]!.indexOf("="))}=127.0.0.1:${local}`;
      urls[port.name] = `127.0.0.1:${local}`;
    }
    const volumes = deployment.spec.template.spec.volumes ?? [];
    const mounts = (container.volumeMounts ?? []).map((m) => {
      const secret = volumes.find((v) => v.name === m.name)?.secret?.secretName;
      const dir = secret && cert.secretVolumes[secret];
      if (!dir) throw new Error(`volume ${m.name}: the test does not emulate it`);
      return `--volume=${dir}:${m.mountPath}:${m.readOnly ? "ro" : "rw"}`;
    });
    const server = new URL(testKubeConfig().getCurrentCluster()!.server);
    const limits = container.resources?.limits ?? {};
    containerName = uniqueName("referable-image-test");
    const flags = [
      "run",
      "--detach",
      `--name=${containerName}`,
      "--network=host",
      ...securityFlags(deployment, container),
      ...(limits.memory ? [`--memory=${limits.memory.replace(/Mi$/, "m").replace(/Gi$/, "g")}`] : []),
      ...(limits.cpu ? [`--cpus=${limits.cpu}`] : []),
      `--volume=${sa}:${SERVICE_ACCOUNT_DIR}:ro`,
      ...mounts,
      `--env=KUBERNETES_SERVICE_HOST=${server.hostname}`,
      `--env=KUBERNETES_SERVICE_PORT=${server.port}`,
      ...Object.entries(env).map(([k, v]) => `--env=${k}=${v}`),
      IMAGE,
      ...args,
    ];
    await podman(flags);
    step(
      `started pod ${podName}: podman ${flags
        .filter((f) => !f.startsWith("--env=") && !f.startsWith("--volume="))
        .join(
          " ",
        )}, env ${Object.keys(env).join(", ")}, KUBERNETES_SERVICE_HOST/PORT, ${SERVICE_ACCOUNT_DIR} (token, ca.crt, namespace) and ${mounts.length} Secret volume(s), read-only`,
    );
  }, STEP_TIMEOUT_MS);

  it(
    "answers the Deployment's liveness and readiness probes",
    async () => {
      await withLog(async () => {
        for (const probe of [container.livenessProbe, container.readinessProbe]) {
          const get = probe!.httpGet;
          const url = `http://${urls[String(get.port)]}${get.path}`;
          const started = Date.now();
          const answer = await waitFor(
            `${get.path} to answer 200`,
            async () => {
              const r = await httpStatus(url);
              return r.status === 200 ? r : undefined;
            },
            WAIT,
          );
          step(
            `probe ${get.path} on port ${get.port}: ${answer.status} ${answer.body.trim()} (after ${Date.now() - started} ms)`,
          );
        }
        // Ready means the cache is synced, leader or not (standbys are ready too): the Lease follows.
        const lease = flagValue(container.args ?? [], "leader-election-id")!;
        await waitFor(
          `the Lease ${lease} to name ${podName}`,
          async () => (await leaseHolder(deployment.metadata.namespace, lease)) === podName,
          WAIT,
        );
        step(`took the Lease ${lease} as ${podName}`);
      });
    },
    STEP_TIMEOUT_MS,
  );

  it(
    "serves /metrics over HTTPS to a token the metrics-reader role lets in, 401 without one",
    async () => {
      await withLog(async () => {
        expect(container.args).toContain("--metrics-secure");
        const url = `https://${urls.metrics}/metrics`;
        expect((await httpsGet(url)).status).toBe(401);
        const ns = await createNamespace(admin, "image-scraper");
        const token = await serviceAccountToken(admin, ns, "prometheus");
        await bindRole(admin, uniqueName("image-metrics-reader"), "referable-metrics-reader", [
          serviceAccount("prometheus", ns),
        ]);
        const page = await waitFor(
          "an authorized scrape",
          async () => {
            const r = await httpsGet(url, token);
            return r.status === 200 ? r.body : undefined;
          },
          WAIT,
        );
        const series = page.split("\n").filter((l) => l.startsWith("referable_"));
        expect(series.length).toBeGreaterThan(0);
        step(
          `/metrics over HTTPS: 401 without a token; 200 with a referable-metrics-reader token, ${series.length} referable_ series`,
        );
      });
    },
    STEP_TIMEOUT_MS,
  );

  it(
    "makes a Referable Ready with its source's value, and follows a change",
    async () => {
      await withLog(async () => {
        const ns = await createNamespace(admin, "image-source");
        await createConfigMap(admin, ns, "db", { v: "first" });
        const name = uniqueName("image-rf");
        await admin.request("POST", RF, {
          body: {
            apiVersion: "referable.dev/v1alpha1",
            kind: "Referable",
            metadata: { name },
            spec: {
              source: { apiVersion: "v1", kind: "ConfigMap", namespace: ns, name: "db", fieldPath: "data.v" },
            },
          },
        });
        const valueOf = async () => {
          const rf = await admin.request<
            Obj & { status?: { value?: unknown; conditions?: Array<{ type: string; status: string }> } }
          >("GET", `${RF}/${name}`);
          const ready = rf.status?.conditions?.find((c) => c.type === "Ready")?.status;
          return ready === "True" ? rf.status?.value : undefined;
        };
        await waitFor(
          `Referable ${name} Ready with "first"`,
          async () => (await valueOf()) === "first",
          WAIT,
        );
        step(`Referable ${name}: Ready, status.value "first" from ConfigMap ${ns}/db`);
        const changed = Date.now();
        await mergePatch(admin, `/api/v1/namespaces/${ns}/configmaps/db`, { data: { v: "second" } });
        await waitFor(
          `Referable ${name} to follow to "second"`,
          async () => (await valueOf()) === "second",
          WAIT,
        );
        step(`... followed the change to "second" in ${Date.now() - changed} ms`);
      });
    },
    STEP_TIMEOUT_MS,
  );

  it(
    "refuses, through the webhook it serves, a Referable whose author may not read the source",
    async () => {
      await withLog(async () => {
        const shipped = objects.find((o) => o.kind === "ValidatingWebhookConfiguration") as Obj & {
          webhooks: Array<Record<string, unknown> & { clientConfig: { service?: { path?: string } } }>;
        };
        const path = shipped.webhooks[0]!.clientConfig.service?.path ?? "/validate-referable";
        webhookConfigurationName = shipped.metadata!.name!;
        // As shipped, with only the endpoint replaced: the container's port, by URL (no Service
        // routes to it here), and the CA that signed its certificate (cert-manager's injection).
        const { annotations: _injected, ...metadata } = shipped.metadata!;
        await admin.request("POST", "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations", {
          body: {
            ...shipped,
            metadata,
            webhooks: shipped.webhooks.map((w) => ({
              ...w,
              clientConfig: { url: `https://${urls.webhook}${path}`, caBundle: webhookCaBundle },
            })),
          },
        });

        const ns = await createNamespace(admin, "image-author");
        await createConfigMap(admin, ns, "db", { v: "secret-ish" });
        const token = await serviceAccountToken(admin, ns, "author");
        const role = uniqueName("image-referable-author");
        await createRole(admin, role, [
          { apiGroups: ["referable.dev"], resources: ["referables"], verbs: ["create", "get"] },
        ]);
        await bindRole(admin, role, role, [serviceAccount("author", ns)]);
        const author = tokenClient(token);
        await waitFor(
          "the author's create permission",
          async () =>
            (await selfAccess(author, { verb: "create", group: "referable.dev", resource: "referables" }))
              .allowed,
          WAIT,
        );
        const create = (dryRun: boolean) =>
          author.request("POST", RF, {
            ...(dryRun && { query: { dryRun: "All" } }),
            body: {
              apiVersion: "referable.dev/v1alpha1",
              kind: "Referable",
              metadata: { name: uniqueName("image-authored") },
              spec: {
                source: {
                  apiVersion: "v1",
                  kind: "ConfigMap",
                  namespace: ns,
                  name: "db",
                  fieldPath: "data.v",
                },
              },
            },
          });
        const refusal = async (dryRun: boolean) =>
          create(dryRun).then(
            () => undefined,
            (err: unknown) => {
              if (isApiError(err)) return err.message;
              throw err;
            },
          );
        // The API server picks a new configuration up asynchronously: wait until a dry run is refused.
        await waitFor("the webhook configuration to be in force", async () => refusal(true), WAIT);
        const message = await refusal(false);
        if (message === undefined)
          throw new Error("the author's Referable was allowed: the webhook should refuse it");
        expect(message).toContain(
          `admission webhook "${String(shipped.webhooks[0]!.name)}" denied the request`,
        );
        expect(message).toContain(
          `user "system:serviceaccount:${ns}:author" may not get configmaps "db" in namespace "${ns}"`,
        );
        step(
          `webhook at https://${urls.webhook}${path}: refused the author: ...${message.slice(message.indexOf("denied the request"), message.indexOf("denied the request") + 200)}...`,
        );

        // Allowed once RBAC lets the author read it: the refusal was the webhook's check.
        const reader = uniqueName("image-db-reader");
        await createRole(admin, reader, [{ apiGroups: [""], resources: ["configmaps"], verbs: ["get"] }], ns);
        await bindRole(admin, reader, reader, [serviceAccount("author", ns)], ns, "Role");
        await waitFor(
          "the author's read of the ConfigMap",
          async () =>
            (await selfAccess(author, { verb: "get", resource: "configmaps", namespace: ns, name: "db" }))
              .allowed,
          WAIT,
        );
        await waitFor(
          "the webhook to allow the author",
          async () => (await refusal(false)) === undefined,
          WAIT,
        );
        step("... and allowed the same author once RBAC lets them get the ConfigMap");
      });
    },
    STEP_TIMEOUT_MS,
  );

  it(
    "stops on SIGTERM within the Deployment's grace period and releases the Lease",
    async () => {
      const grace = deployment.spec.template.spec.terminationGracePeriodSeconds;
      const started = Date.now();
      await podman(["stop", "--time", String(grace), containerName!], { timeoutMs: (grace + 30) * 1000 });
      const elapsed = Date.now() - started;
      const state = JSON.parse(await podman(["inspect", "--format", "{{json .State}}", containerName!])) as {
        ExitCode: number;
      };
      expect({ exitCode: state.ExitCode, withinGrace: elapsed < grace * 1000 }).toEqual({
        exitCode: 0,
        withinGrace: true,
      });
      const lease = flagValue(container.args ?? [], "leader-election-id")!;
      expect(await leaseHolder(deployment.metadata.namespace, lease)).toBe("");
      step(`podman stop --time ${grace} (SIGTERM): exited 0 in ${elapsed} ms; Lease ${lease} released`);
    },
    STEP_TIMEOUT_MS,
  );
});
