/**
 * The Helm chart (deploy/helm/referable), rendered by a real `helm` (built from the Go module
 * proxy) and installed with it on the real control plane:
 *
 * - with its defaults it renders what deploy/ renders (same objects, names, RBAC rules, pod
 *   spec), the Namespace aside (Helm creates it: --create-namespace);
 * - each value does what values.yaml says, and the webhook and Prometheus Operator options
 *   render what deploy/'s overlays render;
 * - `helm install` succeeds on the control plane and two replicas, run as local processes with
 *   the installed Deployment's args and env and the installed ServiceAccount's token (nothing
 *   else), pass their start-up checks, elect one leader in the release's namespace and resolve
 *   Referables of a default kind and of an extra kind the values opted in, while Secrets stay
 *   Forbidden; `helm uninstall` removes what it installed.
 *
 * No kubelet runs here, so the "pods" are processes, as in test/integration/deploy.test.ts; and
 * no controller-manager, so the test fills the aggregated source-reader role as the
 * clusterrole-aggregation controller would.
 */
import { execFile } from "node:child_process";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { load, loadAll } from "js-yaml";
import { parseConfig } from "../../src/config.ts";
import { compileLabelSelector, type LabelSelector } from "../../src/informers/label-selector.ts";
import type { KubeClient, KubeObject } from "../../src/kube/client.ts";
import { repoRoot } from "../harness/control-plane.ts";
import { getReferable, SHARD_LABEL } from "../harness/controller.ts";
import { CHART, ensureHelm, runHelm } from "../harness/helm.ts";
import {
  adminClient,
  closeTestClients,
  createNamespace,
  installTestCrd,
  uniqueName,
  waitFor,
} from "../harness/kube.ts";
import { killAllProcesses, startControllerProcess, type ControllerProcess } from "../harness/process.ts";

const execFileAsync = promisify(execFile);
const BIN_DIR = process.env.REFERABLE_TEST_BIN_DIR;
const KUBECTL = BIN_DIR ? join(BIN_DIR, "kubectl") : "kubectl";
const RF = "/apis/referable.dev/v1alpha1/referables";
const WAIT = { timeoutMs: 60_000, intervalMs: 100 };
const STEP_MS = 180_000;

type Obj = KubeObject & Record<string, unknown>;

interface Container {
  name: string;
  args?: string[];
  env?: Array<{ name: string; value?: string; valueFrom?: { fieldRef?: { fieldPath: string } } }>;
  [key: string]: unknown;
}

interface Deployment extends Obj {
  spec: {
    replicas: number;
    template: { spec: { containers: Container[]; volumes?: unknown[]; [key: string]: unknown } };
    [key: string]: unknown;
  };
}

let helm: string;

beforeAll(async () => {
  helm = await ensureHelm((line) => process.stderr.write(`${line}\n`));
}, 1_200_000);

afterAll(async () => {
  await killAllProcesses();
  await closeTestClients();
});

/** `helm template` of the chart as release `release` in `namespace`, CRDs included. */
async function template(release: string, namespace: string, ...set: string[]): Promise<Obj[]> {
  const args = ["template", release, CHART, "--namespace", namespace, "--include-crds"];
  for (const s of set) args.push("--set", s);
  return (loadAll(await runHelm(helm, args)) as Obj[]).filter(Boolean);
}

/** `kubectl kustomize` of a deploy/ folder. */
async function kustomize(dir: string): Promise<Obj[]> {
  const { stdout } = await execFileAsync(KUBECTL, ["kustomize", join(repoRoot, dir)], {
    maxBuffer: 32 * 1024 * 1024,
  });
  return (loadAll(stdout) as Obj[]).filter(Boolean);
}

const key = (o: Obj) => `${o.kind} ${o.metadata?.namespace ?? ""}/${o.metadata?.name}`;

function find<T extends Obj = Obj>(objects: Obj[], kind: string, name: string): T {
  const found = objects.find((o) => o.kind === kind && o.metadata?.name === name);
  if (!found) throw new Error(`no ${kind} ${name} in [${objects.map(key).join(", ")}]`);
  return found as T;
}

/**
 * An object as it matters to the cluster, labels and annotations aside (Helm adds its own, and
 * kustomize adds part-of to metadata only); selectors, which must match, are compared as part
 * of the spec.
 */
function essence(o: Obj): unknown {
  const copy = structuredClone(o) as Obj & { spec?: { template?: { metadata?: Record<string, unknown> } } };
  copy.metadata = { name: o.metadata?.name, namespace: o.metadata?.namespace };
  if (copy.spec?.template?.metadata) delete copy.spec.template.metadata.labels;
  return copy;
}

function controllerContainer(d: Deployment): Container {
  const c = d.spec.template.spec.containers.find((x) => x.name === "controller");
  if (!c) throw new Error("no container named controller");
  return c;
}

describe("helm template", () => {
  it(
    "with its defaults renders what deploy/ renders, the Namespace aside",
    async () => {
      const chart = await template("referable", "referable-system");
      const kustomized = (await kustomize("deploy")).filter((o) => o.kind !== "Namespace");
      expect(chart.map(key).sort()).toEqual(kustomized.map(key).sort());
      for (const o of kustomized) {
        expect({ object: key(o), essence: essence(find(chart, o.kind!, o.metadata!.name!)) }).toEqual({
          object: key(o),
          essence: essence(o),
        });
      }
      // The pods' labels still carry deploy/'s, so the Services and the PDB select them.
      const d = find<Deployment>(chart, "Deployment", "referable-controller");
      const podLabels = (d.spec.template as unknown as { metadata: { labels: Record<string, string> } })
        .metadata.labels;
      expect(podLabels).toMatchObject({
        "app.kubernetes.io/name": "referable-controller",
        "app.kubernetes.io/component": "controller",
      });
    },
    STEP_MS,
  );

  it(
    "with webhook.enabled renders what deploy/overlays/webhook renders",
    async () => {
      const chart = await template("referable", "referable-system", "webhook.enabled=true");
      const overlay = (await kustomize("deploy/overlays/webhook")).filter((o) => o.kind !== "Namespace");
      expect(chart.map(key).sort()).toEqual(overlay.map(key).sort());
      for (const o of overlay.filter((x) => x.kind !== "Deployment")) {
        expect({ object: key(o), essence: essence(find(chart, o.kind!, o.metadata!.name!)) }).toEqual({
          object: key(o),
          essence: essence(o),
        });
      }
      // The Deployment: the same flag, port and certificate volume (the overlay's patch also
      // restates affinity, which the chart has anyway).
      const mine = controllerContainer(find<Deployment>(chart, "Deployment", "referable-controller"));
      const theirs = controllerContainer(find<Deployment>(overlay, "Deployment", "referable-controller"));
      expect(mine.args).toEqual(theirs.args);
      // Ports as a set: kustomize's strategic merge puts the patched port first.
      const byName = (ports: unknown) =>
        [...(ports as Array<{ name: string }>)].sort((a, b) => a.name.localeCompare(b.name));
      expect(byName(mine.ports)).toEqual(byName(theirs.ports));
      expect(mine.volumeMounts).toEqual(theirs.volumeMounts);
      expect(
        find<Deployment>(chart, "Deployment", "referable-controller").spec.template.spec.volumes,
      ).toEqual(find<Deployment>(overlay, "Deployment", "referable-controller").spec.template.spec.volumes);
    },
    STEP_MS,
  );

  it(
    "with serviceMonitor.enabled and prometheusRule.enabled renders deploy/overlays/prometheus-operator's",
    async () => {
      const chart = await template(
        "referable",
        "referable-system",
        "serviceMonitor.enabled=true",
        "prometheusRule.enabled=true",
      );
      const overlay = await kustomize("deploy/overlays/prometheus-operator");
      for (const kind of ["ServiceMonitor", "PrometheusRule"]) {
        expect(essence(find(chart, kind, "referable-controller"))).toEqual(
          essence(find(overlay, kind, "referable-controller")),
        );
      }
    },
    STEP_MS,
  );

  const values: Array<{ reason: string; set: string[]; check: (objects: Obj[]) => void }> = [
    {
      reason: "replicaCount sets the Deployment's replicas",
      set: ["replicaCount=3"],
      check: (o) => expect(find<Deployment>(o, "Deployment", "rel-controller").spec.replicas).toBe(3),
    },
    {
      reason: "image.repository and image.tag make the image (the tag defaults to appVersion)",
      set: ["image.repository=registry.example/referable", "image.tag=1.2.3"],
      check: (o) =>
        expect(controllerContainer(find<Deployment>(o, "Deployment", "rel-controller")).image).toBe(
          "registry.example/referable:1.2.3",
        ),
    },
    {
      reason: "resources replace the container's resources",
      set: ["resources.limits.memory=1Gi", "resources.requests.cpu=100m"],
      check: (o) =>
        expect(controllerContainer(find<Deployment>(o, "Deployment", "rel-controller")).resources).toEqual({
          requests: { cpu: "100m", memory: "128Mi" },
          limits: { cpu: "1", memory: "1Gi" },
        }),
    },
    {
      reason: "heapCapMiB sets V8's heap cap",
      set: ["heapCapMiB=512", "semiSpaceMiB=0"],
      check: (o) =>
        expect(controllerContainer(find<Deployment>(o, "Deployment", "rel-controller")).env).toContainEqual({
          name: "NODE_OPTIONS",
          value: "--max-old-space-size=512",
        }),
    },
    {
      reason: "semiSpaceMiB adds V8's young-generation size to the heap cap",
      set: ["heapCapMiB=256", "semiSpaceMiB=2"],
      check: (o) =>
        expect(controllerContainer(find<Deployment>(o, "Deployment", "rel-controller")).env).toContainEqual({
          name: "NODE_OPTIONS",
          value: "--max-old-space-size=256 --max-semi-space-size=2",
        }),
    },
    {
      reason: "heapCapMiB=0 and semiSpaceMiB=0 leave V8's defaults",
      set: ["heapCapMiB=0", "semiSpaceMiB=0"],
      check: (o) =>
        expect(
          controllerContainer(find<Deployment>(o, "Deployment", "rel-controller")).env?.map((e) => e.name),
        ).not.toContain("NODE_OPTIONS"),
    },
    {
      reason: "extraSourceKinds become an aggregated ClusterRole granting get, list and watch",
      set: ["extraSourceKinds[0].apiGroups[0]=example.com", "extraSourceKinds[0].resources[0]=widgets"],
      check: (o) => {
        const role = find(o, "ClusterRole", "rel-source-reader-extra");
        expect(role.metadata?.labels?.["referable.dev/aggregate-to-source-reader"]).toBe("true");
        expect(role.rules).toEqual([
          { apiGroups: ["example.com"], resources: ["widgets"], verbs: ["get", "list", "watch"] },
        ]);
      },
    },
    {
      reason: "allowSecrets needs both halves: the flag and the RBAC rule",
      set: ["allowSecrets=true"],
      check: (o) => {
        expect(controllerContainer(find<Deployment>(o, "Deployment", "rel-controller")).args).toContain(
          "--allow-secrets",
        );
        expect(find(o, "ClusterRole", "rel-source-reader-secrets").rules).toEqual([
          { apiGroups: [""], resources: ["secrets"], verbs: ["get", "list", "watch"] },
        ]);
      },
    },
    {
      reason: "exportNamespaces bind the ConfigMap export role there, and nowhere cluster-wide",
      set: ["exportNamespaces[0]=team-b", "exportNamespaces[1]=team-c"],
      check: (o) => {
        const bindings = o.filter(
          (x) => x.kind === "RoleBinding" && x.metadata?.name === "rel-export-configmaps",
        );
        expect(bindings.map((b) => b.metadata?.namespace).sort()).toEqual(["team-b", "team-c"]);
        expect(bindings[0]!.roleRef).toEqual({
          apiGroup: "rbac.authorization.k8s.io",
          kind: "ClusterRole",
          name: "rel-export-configmaps",
        });
        expect(o.some((x) => x.kind === "ClusterRoleBinding" && x.metadata?.name?.includes("export"))).toBe(
          false,
        );
        expect(o.some((x) => x.metadata?.name === "rel-export-secrets")).toBe(false);
      },
    },
    {
      reason: "allowSecretExport needs both halves: the flag and the Secret role, bound in exportNamespaces",
      set: ["allowSecretExport=true", "exportNamespaces[0]=team-b"],
      check: (o) => {
        expect(controllerContainer(find<Deployment>(o, "Deployment", "rel-controller")).args).toContain(
          "--allow-secret-export",
        );
        expect(find(o, "ClusterRole", "rel-export-secrets").rules).toEqual([
          { apiGroups: [""], resources: ["secrets"], verbs: ["get", "create", "patch", "delete"] },
        ]);
        const binding = o.find((x) => x.kind === "RoleBinding" && x.metadata?.name === "rel-export-secrets");
        expect(binding?.metadata?.namespace).toBe("team-b");
      },
    },
    {
      reason: "without allowSecrets there is neither",
      set: [],
      check: (o) => {
        expect(controllerContainer(find<Deployment>(o, "Deployment", "rel-controller")).args).not.toContain(
          "--allow-secrets",
        );
        expect(o.some((x) => x.metadata?.name === "rel-source-reader-secrets")).toBe(false);
      },
    },
    {
      reason: "leaderElection.enabled=false turns it off and drops the Lease's Role",
      set: ["leaderElection.enabled=false", "replicaCount=1"],
      check: (o) => {
        expect(controllerContainer(find<Deployment>(o, "Deployment", "rel-controller")).args).toContain(
          "--leader-elect=false",
        );
        expect(o.some((x) => x.kind === "Role" && x.metadata?.name === "rel-leader-election")).toBe(false);
      },
    },
    {
      reason: "denyKinds, concurrency and maxValueBytes become the flags",
      set: ["denyKinds[0]=Token.auth.example.com", "concurrency=4", "maxValueBytes=1024"],
      check: (o) =>
        expect(controllerContainer(find<Deployment>(o, "Deployment", "rel-controller")).args).toEqual(
          expect.arrayContaining([
            "--deny-kinds=Token.auth.example.com",
            "--concurrency=4",
            "--max-value-bytes=1024",
          ]),
        ),
    },
  ];
  it.each(values)(
    "$reason",
    async ({ set, check }) => {
      const objects = await template("rel", "ops", ...set);
      check(objects);
      // Whatever the values, the controller accepts the args it is given.
      const d = find<Deployment>(objects, "Deployment", "rel-controller");
      expect(parseConfig(controllerContainer(d).args ?? [], {})).not.toBe("help");
    },
    STEP_MS,
  );
});

describe("helm template refuses values the chart does not know, saying which (values.schema.json)", () => {
  const refused: Array<{ reason: string; set: string; says: string }> = [
    {
      reason: "a typo of replicaCount",
      set: "replicas=3",
      says: "additional properties 'replicas' not allowed",
    },
    {
      reason: "an extra source kind without resources",
      set: "extraSourceKinds[0].apiGroups[0]=example.com",
      says: "at '/extraSourceKinds/0': missing property 'resources'",
    },
    {
      reason: "a duration that is not one",
      set: "leaderElection.leaseDuration=15",
      says: "/leaderElection/leaseDuration",
    },
    { reason: "a log level the controller does not have", set: "logLevel=verbose", says: "/logLevel" },
  ];
  it.each(refused)(
    "$reason",
    async ({ set, says }) => {
      await expect(template("rel", "ops", set)).rejects.toThrow(says);
    },
    STEP_MS,
  );
});

// ---------------------------------------------------------------------------------------------
// Installed on the control plane

/** What kube-controller-manager's clusterrole-aggregation controller does for `name` (see deploy.test.ts). */
async function aggregate(client: KubeClient, name: string): Promise<void> {
  type Role = Obj & { rules?: unknown[]; aggregationRule?: { clusterRoleSelectors?: LabelSelector[] } };
  const role = await client.request<Role>("GET", `/apis/rbac.authorization.k8s.io/v1/clusterroles/${name}`);
  const selectors = (role.aggregationRule?.clusterRoleSelectors ?? []).map((s) => compileLabelSelector(s));
  const all = await client.request<{ items: Role[] }>(
    "GET",
    "/apis/rbac.authorization.k8s.io/v1/clusterroles",
  );
  const rules: unknown[] = [];
  for (const r of all.items
    .filter((x) => x.metadata?.name !== name && selectors.some((s) => s.matches(x.metadata?.labels)))
    .sort((a, b) => a.metadata!.name!.localeCompare(b.metadata!.name!))) {
    for (const rule of r.rules ?? [])
      if (!rules.some((x) => JSON.stringify(x) === JSON.stringify(rule))) rules.push(rule);
  }
  await client.request("PATCH", `/apis/rbac.authorization.k8s.io/v1/clusterroles/${name}`, {
    query: { fieldManager: "clusterrole-aggregation-controller", force: true },
    contentType: "application/apply-patch+yaml",
    body: { apiVersion: "rbac.authorization.k8s.io/v1", kind: "ClusterRole", metadata: { name }, rules },
  });
}

describe("helm install on the control plane", () => {
  let admin: KubeClient;
  let ns: string;
  let tmp: string;
  let release: string;
  let installed = false;
  const replicas: ControllerProcess[] = [];
  const shard = uniqueName("helm");
  const widgetGroup = "helm.test.referable.dev";

  beforeAll(async () => {
    admin = adminClient();
    tmp = await mkdtemp(join(tmpdir(), "referable-helm-test-"));
    // Names of cluster-scoped objects start with the release's name: unique, so this install
    // never meets deploy.test.ts's on the shared control plane.
    release = uniqueName("rfhelm");
    ns = uniqueName("referable-helm");
    await installTestCrd(admin, widgetGroup, "Widget");
  }, STEP_MS);

  afterAll(async () => {
    for (const r of replicas) await r.stop().catch(() => undefined);
    if (installed) {
      await runHelm(helm, [
        "uninstall",
        release,
        "--namespace",
        ns,
        `--kubeconfig=${process.env.REFERABLE_TEST_KUBECONFIG}`,
      ]).catch(() => undefined);
    }
    if (tmp) await rm(tmp, { recursive: true, force: true });
  });

  it(
    "installs, and two replicas with its Deployment and its RBAC only elect a leader and resolve Referables",
    async () => {
      const kubeconfig = process.env.REFERABLE_TEST_KUBECONFIG!;
      await runHelm(helm, [
        "install",
        release,
        CHART,
        "--namespace",
        ns,
        "--create-namespace",
        `--kubeconfig=${kubeconfig}`,
        "--set",
        `extraSourceKinds[0].apiGroups[0]=${widgetGroup}`,
        "--set",
        "extraSourceKinds[0].resources[0]=widgets",
      ]);
      installed = true;
      const status = load(
        await runHelm(helm, [
          "status",
          release,
          "--namespace",
          ns,
          `--kubeconfig=${kubeconfig}`,
          "-o",
          "yaml",
        ]),
      ) as { info?: { status?: string } };
      expect(status.info?.status).toBe("deployed");
      await aggregate(admin, `${release}-source-reader`);

      // The Deployment as installed, read back from the API server.
      const deployment = await admin.request<Deployment>(
        "GET",
        `/apis/apps/v1/namespaces/${ns}/deployments/${release}-controller`,
      );
      expect(deployment.spec.replicas).toBe(2);
      const container = controllerContainer(deployment);
      // The installed ServiceAccount's identity, as a pod would have it (no admin rights).
      const token = await (async () => {
        const review = await admin.request<{ status: { token: string } }>(
          "POST",
          `/api/v1/namespaces/${ns}/serviceaccounts/${release}-controller/token`,
          {
            body: {
              apiVersion: "authentication.k8s.io/v1",
              kind: "TokenRequest",
              spec: { expirationSeconds: 3600 },
            },
          },
        );
        return review.status.token;
      })();
      const adminConfig = JSON.parse(await readFile(kubeconfig, "utf8")) as {
        users: Array<{ user: Record<string, unknown> }>;
      };
      for (const u of adminConfig.users) u.user = { token };
      const saKubeconfig = join(tmp, "kubeconfig");
      await writeFile(saKubeconfig, JSON.stringify(adminConfig));

      // Each "pod": the container's args (bind addresses aside: the replicas share a loopback
      // interface; the harness gives each free ports) and env as the kubelet resolves it.
      for (const pod of ["a", "b"]) {
        const podName = `${release}-controller-${pod}`;
        const env: Record<string, string> = {};
        for (const e of container.env ?? []) {
          const field = e.valueFrom?.fieldRef?.fieldPath;
          if (e.value !== undefined) env[e.name] = e.value;
          else if (field === "metadata.name") env[e.name] = podName;
          else if (field === "metadata.namespace") env[e.name] = ns;
        }
        const args = (container.args ?? []).filter((a) => !/^--(metrics|health-probe)-bind-address=/.test(a));
        args.push(`--kubeconfig=${saKubeconfig}`, `--referable-selector=${SHARD_LABEL}=${shard}`);
        replicas.push(await startControllerProcess(args, { kubeconfig: false, env }));
      }
      const logs = () => replicas.map((r) => r.stdout().split("\n").slice(-15).join("\n")).join("\n---\n");
      try {
        // Start-up checks pass with the chart's RBAC, and both become ready.
        await waitFor(
          "both replicas ready",
          async () => (await Promise.all(replicas.map((r) => r.ready()))).every((c) => c === 200),
          WAIT,
        );
        // One leader, on the Lease in the release's namespace.
        const holder = await waitFor(
          "the Lease held",
          async () => {
            const lease = await admin.request<{ spec?: { holderIdentity?: string } }>(
              "GET",
              `/apis/coordination.k8s.io/v1/namespaces/${ns}/leases/referable-controller`,
            );
            return lease.spec?.holderIdentity || undefined;
          },
          WAIT,
        );
        expect([`${release}-controller-a`, `${release}-controller-b`]).toContain(holder);

        // Sources: a default kind, the extra kind the values opted in, and a Secret.
        const src = await createNamespace(admin, "helm-src");
        await admin.request("POST", `/api/v1/namespaces/${src}/configmaps`, {
          body: {
            apiVersion: "v1",
            kind: "ConfigMap",
            metadata: { name: "db" },
            data: { host: "db.example" },
          },
        });
        await admin.request("POST", `/apis/${widgetGroup}/v1/namespaces/${src}/widgets`, {
          body: {
            apiVersion: `${widgetGroup}/v1`,
            kind: "Widget",
            metadata: { name: "w" },
            spec: { size: 7 },
          },
        });
        await admin.request("POST", `/api/v1/namespaces/${src}/secrets`, {
          body: { apiVersion: "v1", kind: "Secret", metadata: { name: "s" }, stringData: { k: "v" } },
        });
        const cases = [
          {
            reason: "Available",
            apiVersion: "v1",
            kind: "ConfigMap",
            name: "db",
            fieldPath: "data.host",
            value: "db.example",
          },
          {
            reason: "Available",
            apiVersion: `${widgetGroup}/v1`,
            kind: "Widget",
            name: "w",
            fieldPath: "spec.size",
            value: 7,
          },
          {
            reason: "Forbidden",
            apiVersion: "v1",
            kind: "Secret",
            name: "s",
            fieldPath: "data.k",
            value: undefined,
          },
        ];
        const names: string[] = [];
        for (const c of cases) {
          const name = uniqueName(`helm-${c.kind.toLowerCase()}`);
          names.push(name);
          await admin.request("POST", RF, {
            body: {
              apiVersion: "referable.dev/v1alpha1",
              kind: "Referable",
              metadata: { name, labels: { [SHARD_LABEL]: shard } },
              spec: {
                source: {
                  apiVersion: c.apiVersion,
                  kind: c.kind,
                  namespace: src,
                  name: c.name,
                  fieldPath: c.fieldPath,
                },
              },
            },
          });
        }
        for (const [i, c] of cases.entries()) {
          const rf = await waitFor(
            `${c.kind} Referable ${c.reason}`,
            async () => {
              const got = await getReferable(admin, names[i]!);
              return got.reason === c.reason ? got : undefined;
            },
            WAIT,
          );
          expect(rf.status.value).toEqual(c.value);
        }
        for (const name of names) await admin.request("DELETE", `${RF}/${name}`);
      } catch (err) {
        throw new Error(`${(err as Error).message}\n${logs()}`);
      }
      for (const r of replicas.splice(0)) expect(await r.stop()).toEqual({ code: 0, signal: null });

      // helm uninstall removes what it installed (the CRD stays, as Helm keeps CRDs).
      await runHelm(helm, ["uninstall", release, "--namespace", ns, `--kubeconfig=${kubeconfig}`]);
      installed = false;
      await expect(
        admin.request("GET", `/apis/rbac.authorization.k8s.io/v1/clusterroles/${release}-controller`),
      ).rejects.toThrow(/404/);
      await admin.request(
        "GET",
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/referables.referable.dev",
      );
    },
    STEP_MS * 2,
  );
});
