/**
 * The Helm chart (deploy/helm/referable), rendered by a real `helm` (built from the Go module
 * proxy) and installed with it on the real control plane:
 *
 * - with its defaults it renders what deploy/ renders (same objects, names, RBAC rules, pod
 *   spec), the Namespace aside (Helm creates it: --create-namespace);
 * - each value does what values.yaml says, and the webhook and Prometheus Operator options
 *   render what deploy/'s overlays render (the dashboard's ConfigMap included); helm lint passes
 *   with every value set; typos and contradictions (a PDB that blocks drains, two writers, a heap
 *   cap at the memory limit) are refused with the fix; the ServiceMonitor and PrometheusRule are
 *   skipped without the Prometheus Operator's CRDs; every alert's runbook exists;
 * - kube-prometheus-stack's rule selection (by the `release` label) loads the chart's alerts into
 *   a real Prometheus;
 * - on a private control plane, `helm upgrade` with a changed CRD changes the CRD (new columns,
 *   new validation enforced), and `helm uninstall` keeps it;
 * - every `helm install` command of the docs renders as written;
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
import { X509Certificate } from "node:crypto";
import { cp, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { connect as tlsConnect } from "node:tls";
import { KubeConfig } from "@kubernetes/client-node";
import { dirname, join } from "node:path";
import { load, loadAll } from "js-yaml";
import { parseConfig } from "../../src/process/config.ts";
import { compileLabelSelector, type LabelSelector } from "../../src/informers/label-selector.ts";
import { KubeClient, type KubeObject } from "../../src/kube/client.ts";
import { repoRoot, type PrivateControlPlane } from "../harness/control-plane.ts";
import { getReferable, SHARD_LABEL } from "../harness/controller.ts";
import { kustomize } from "../harness/kubectl.ts";
import { itIf } from "../harness/availability.ts";
import { startPrivatePlane } from "../harness/faults.ts";
import { netnsUnavailable, startNetnsHost, type NetnsHost } from "../harness/netns-host.ts";
import { CHART, ensureHelm, runHelm } from "../harness/helm.ts";
import {
  prometheusUnavailable,
  secureMetricsEndpoint,
  startPrometheus,
  type Prometheus,
} from "../harness/prometheus.ts";
import {
  adminClient,
  closeTestClients,
  createNamespace,
  impersonatingKubeConfig,
  installTestCrd,
  requestToken,
  uniqueName,
  writeTokenKubeconfig,
  waitFor,
  createConfigMap,
  createSecret,
} from "../harness/kube.ts";
import {
  freePort,
  isErrorLine,
  killAllProcesses,
  startControllerProcess,
  type ControllerProcess,
} from "../harness/process.ts";
import { bindRole, createRole, user } from "../harness/rbac.ts";
import { REFUSAL_SUFFIX } from "../../src/webhook/index.ts";

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

/** Every value of the chart set at once. */
const EVERY_VALUE = {
  global: {
    imageRegistry: "unused.example",
    imagePullSecrets: [{ name: "umbrella" }],
    priorityClassName: "platform-critical",
  },
  imagePullSecrets: [{ name: "regcred" }],
  strategy: { type: "RollingUpdate", rollingUpdate: { maxUnavailable: 1, maxSurge: 0 } },
  extraVolumes: [{ name: "metrics-cert", secret: { secretName: "metrics-tls" } }],
  extraVolumeMounts: [{ name: "metrics-cert", mountPath: "/certs/metrics", readOnly: true }],
  extraObjects: [{ apiVersion: "v1", kind: "ConfigMap", metadata: { name: "{{ .Release.Name }}-extra" } }],
  nameOverride: "refs",
  commonLabels: { "cost-center": "c42" },
  crds: { enabled: true, keep: false },
  image: { repository: "registry.example/referable", tag: "1.2.3", digest: `sha256:${"b".repeat(64)}` },
  replicaCount: 3,
  resources: { limits: { memory: "1Gi", cpu: "2" }, requests: { memory: "256Mi", cpu: "100m" } },
  heapCapMiB: 512,
  logFormat: "json",
  extraEnv: [{ name: "TZ", value: "UTC" }],
  extraArgs: ["--concurrency=8"],
  metrics: { secure: true, readerServiceAccounts: [{ name: "prometheus", namespace: "monitoring" }] },
  serviceMonitor: { enabled: true, labels: { release: "kps" } },
  prometheusRule: {
    enabled: true,
    labels: { release: "kps" },
    runbookBaseURL: "https://wiki.example/referable",
  },
  grafanaDashboard: { enabled: true, annotations: { grafana_folder: "Platform" } },
  podDisruptionBudget: { enabled: true, minAvailable: 2, maxUnavailable: 1 },
  serviceAccount: { create: true, name: "referable", annotations: { a: "b" } },
  podLabels: { team: "platform" },
  podAnnotations: { "example.com/x": "y" },
  // null removes a default key (Helm's rule): the platform picks the UID, as OpenShift's restricted SCC does.
  podSecurityContext: { runAsUser: null, runAsGroup: null },
  securityContext: { allowPrivilegeEscalation: false, capabilities: { drop: ["ALL"] } },
  priorityClassName: "system-cluster-critical",
  topologySpreadConstraints: [
    { maxSkew: 1, topologyKey: "topology.kubernetes.io/zone", whenUnsatisfiable: "ScheduleAnyway" },
  ],
  networkPolicy: { enabled: true, metricsFrom: [{ podSelector: {} }], extraIngress: [] },
  webhook: { enabled: true, certManager: { enabled: true } },
};

/** The Prometheus Operator's kinds, as a cluster with its CRDs reports them to Helm. */
const MONITORING_APIS = [
  "monitoring.coreos.com/v1/ServiceMonitor",
  "monitoring.coreos.com/v1/PrometheusRule",
];

/**
 * `helm template` of the chart as release `release` in `namespace`. Each of `set` is a --set;
 * an argument starting with "--" (e.g. --api-versions=...) is passed as it is.
 */
async function template(release: string, namespace: string, ...set: string[]): Promise<Obj[]> {
  const args = ["template", release, CHART, "--namespace", namespace];
  for (const s of set) args.push(...(s.startsWith("--") ? [s] : ["--set", s]));
  return (loadAll(await runHelm(helm, args)) as Obj[]).filter(Boolean);
}

/**
 * Flags the chart templates for options the controller gets on another branch (issue 26's
 * process half): the controller of this tree is asked about each, and args of the ones it does
 * not know yet are left out of the "the controller accepts its args" check until it does.
 */
const PENDING_FLAGS = ["--metrics-secure", "--log-format=json"].filter((flag) => {
  try {
    parseConfig([flag], {});
    return false;
  } catch {
    return true;
  }
});
const flagName = (arg: string) => arg.split("=")[0]!;
function acceptedArgs(args: readonly string[]): string[] {
  const pending = new Set(PENDING_FLAGS.map(flagName));
  return args.filter((a) => !pending.has(flagName(a)));
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

/** `helm install` of the chart as `release` into `ns` (created if need be), on `kubeconfig`'s cluster. */
const installArgs = (release: string, ns: string, kubeconfig: string) => [
  "install",
  release,
  CHART,
  "--namespace",
  ns,
  "--create-namespace",
  `--kubeconfig=${kubeconfig}`,
];

/** The NODE_OPTIONS variable of a container's env, holding `value`. */
const nodeOptions = (value: string) => ({ name: "NODE_OPTIONS", value });

/** The controller container of the release "rel"'s Deployment among rendered `objects`. */
const controllerOf = (objects: Obj[]) =>
  controllerContainer(find<Deployment>(objects, "Deployment", "rel-controller"));

describe("helm template", () => {
  it(
    "with webhook.enabled=false renders what deploy/ renders, the Namespace aside",
    async () => {
      const chart = await template("referable", "referable-system", "webhook.enabled=false");
      const kustomized = (await kustomize<Obj>("deploy")).filter((o) => o.kind !== "Namespace");
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
    "with its defaults adds to deploy/ the webhook with a certificate the controller manages: no cert-manager",
    async () => {
      const chart = await template("referable", "referable-system");
      const kustomized = (await kustomize<Obj>("deploy")).filter((o) => o.kind !== "Namespace");
      const added = chart.filter((o) => !kustomized.some((k) => key(k) === key(o)));
      expect(added.map(key).sort()).toEqual([
        "ClusterRole /referable-webhook",
        "ClusterRoleBinding /referable-webhook",
        "Role referable-system/referable-webhook-cert",
        "RoleBinding referable-system/referable-webhook-cert",
        "Service referable-system/referable-webhook",
        "ValidatingWebhookConfiguration /referable-validating-webhook",
      ]);
      expect(chart.filter((o) => o.apiVersion?.startsWith("cert-manager.io/"))).toEqual([]);
      const vwc = find(chart, "ValidatingWebhookConfiguration", "referable-validating-webhook");
      expect(vwc.metadata?.annotations?.["cert-manager.io/inject-ca-from"]).toBeUndefined();
      const d = find<Deployment>(chart, "Deployment", "referable-controller");
      const args = controllerContainer(d).args ?? [];
      expect(args).toEqual(
        expect.arrayContaining([
          "--webhook-bind-address=:9443",
          "--webhook-cert-secret=referable-webhook-cert",
          "--webhook-service=referable-webhook",
          "--webhook-configuration=referable-validating-webhook",
        ]),
      );
      expect(parseConfig(args, {})).toMatchObject({ webhookCertSecret: "referable-webhook-cert" });
      // No Secret to mount: the controller reads its own from the API server.
      expect(d.spec.template.spec.volumes).toBeUndefined();
      // RBAC by name: get and update of its one Secret and its one webhook configuration;
      // create of Secrets only in its own namespace.
      expect(find(chart, "Role", "referable-webhook-cert").rules).toEqual([
        {
          apiGroups: [""],
          resources: ["secrets"],
          resourceNames: ["referable-webhook-cert"],
          verbs: ["get", "update"],
        },
        { apiGroups: [""], resources: ["secrets"], verbs: ["create"] },
      ]);
      expect(find(chart, "ClusterRole", "referable-webhook").rules).toContainEqual({
        apiGroups: ["admissionregistration.k8s.io"],
        resources: ["validatingwebhookconfigurations"],
        resourceNames: ["referable-validating-webhook"],
        verbs: ["get", "update"],
      });
    },
    STEP_MS,
  );

  it(
    "with webhook.certManager.enabled renders what deploy/overlays/webhook renders",
    async () => {
      const chart = await template("referable", "referable-system", "webhook.certManager.enabled=true");
      const overlay = (await kustomize<Obj>("deploy/overlays/webhook")).filter((o) => o.kind !== "Namespace");
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
    "with sharding.shards=16 and three replicas renders what deploy/overlays/sharded renders",
    async () => {
      const chart = await template(
        "referable",
        "referable-system",
        "sharding.shards=16",
        "replicaCount=3",
        "webhook.enabled=false",
      );
      const overlay = (await kustomize<Obj>("deploy/overlays/sharded")).filter((o) => o.kind !== "Namespace");
      expect(chart.map(key).sort()).toEqual(overlay.map(key).sort());
      for (const o of overlay)
        expect({ object: key(o), essence: essence(find(chart, o.kind!, o.metadata!.name!)) }).toEqual({
          object: key(o),
          essence: essence(o),
        });
      const args = controllerContainer(find<Deployment>(chart, "Deployment", "referable-controller")).args;
      expect(args).toContain("--shards=16");
      // One replica at a time: the others take its buckets over, so every bucket stays served.
      expect(
        find<Obj & { spec: unknown }>(chart, "PodDisruptionBudget", "referable-controller").spec,
      ).toMatchObject({
        maxUnavailable: 1,
      });
    },
    STEP_MS,
  );

  it(
    "with serviceMonitor, prometheusRule and grafanaDashboard enabled renders deploy/overlays/prometheus-operator's",
    async () => {
      const chart = await template(
        "referable",
        "referable-system",
        "serviceMonitor.enabled=true",
        "prometheusRule.enabled=true",
        "grafanaDashboard.enabled=true",
        "webhook.enabled=false",
        ...MONITORING_APIS.map((api) => `--api-versions=${api}`),
      );
      const overlay = await kustomize<Obj>("deploy/overlays/prometheus-operator");
      expect(chart.map(key).sort()).toEqual(
        overlay
          .map(key)
          .filter((k) => !k.startsWith("Namespace"))
          .sort(),
      );
      for (const kind of ["ServiceMonitor", "PrometheusRule"]) {
        expect(essence(find(chart, kind, "referable-controller"))).toEqual(
          essence(find(overlay, kind, "referable-controller")),
        );
      }
      for (const [kind, name] of [
        ["ServiceAccount", "referable-metrics-scraper"],
        ["Secret", "referable-metrics-scraper-token"],
        ["ClusterRoleBinding", "referable-metrics-scraper"],
      ] as const) {
        const mine = find(chart, kind, name);
        const theirs = find(overlay, kind, name);
        expect(essence(mine)).toEqual(essence(theirs));
        expect(mine.metadata?.annotations).toEqual(theirs.metadata?.annotations);
      }
      // The same dashboard, labelled for Grafana's sidecar in both.
      const mine = find(chart, "ConfigMap", "referable-controller-dashboard");
      const theirs = find(overlay, "ConfigMap", "referable-controller-dashboard");
      expect(mine.data).toEqual(theirs.data);
      expect(mine.metadata?.labels?.grafana_dashboard).toBe("1");
      expect(theirs.metadata?.labels?.grafana_dashboard).toBe("1");
    },
    STEP_MS,
  );

  it(
    "skips the ServiceMonitor and PrometheusRule where the Prometheus Operator's CRDs are not installed",
    async () => {
      const objects = await template(
        "rel",
        "ops",
        "serviceMonitor.enabled=true",
        "prometheusRule.enabled=true",
      );
      expect(objects.filter((o) => o.apiVersion === "monitoring.coreos.com/v1")).toEqual([]);
      // The rest of the release is there: the install succeeds, and an upgrade adds them later.
      find<Deployment>(objects, "Deployment", "rel-controller");
    },
    STEP_MS,
  );

  it(
    "every alert has a runbook_url whose section exists in docs/runbooks.md, in the chart and in deploy/",
    async () => {
      const headings = new Set(
        (await readFile(join(repoRoot, "docs", "runbooks.md"), "utf8"))
          .split("\n")
          .filter((l) => l.startsWith("## "))
          .map((l) => l.slice(3).trim().toLowerCase()),
      );
      const chart = await template(
        "rel",
        "ops",
        "prometheusRule.enabled=true",
        ...MONITORING_APIS.map((api) => `--api-versions=${api}`),
      );
      const overlay = await kustomize<Obj>("deploy/overlays/prometheus-operator");
      for (const rule of [
        find(chart, "PrometheusRule", "rel-controller"),
        find(overlay, "PrometheusRule", "referable-controller"),
      ]) {
        const alerts = (
          rule.spec as {
            groups: Array<{ rules: Array<{ alert: string; annotations: Record<string, string> }> }>;
          }
        ).groups.flatMap((g) => g.rules);
        expect(alerts.length).toBeGreaterThan(0);
        for (const a of alerts) {
          expect({ alert: a.alert, runbook: a.annotations.runbook_url }).toEqual({
            alert: a.alert,
            runbook: `https://referable.dev/docs/runbooks.md#${a.alert.toLowerCase()}`,
          });
          expect({ alert: a.alert, documented: headings.has(a.alert.toLowerCase()) }).toEqual({
            alert: a.alert,
            documented: true,
          });
        }
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
      check: (o) => expect(controllerOf(o).image).toBe("registry.example/referable:1.2.3"),
    },
    {
      reason: "resources replace the container's resources",
      set: ["resources.limits.memory=1Gi", "resources.requests.cpu=100m"],
      check: (o) =>
        expect(controllerOf(o).resources).toEqual({
          requests: { cpu: "100m", memory: "128Mi" },
          limits: { cpu: "1", memory: "1Gi" },
        }),
    },
    {
      reason: "heapCapMiB sets V8's heap cap",
      set: ["heapCapMiB=384", "semiSpaceMiB=0"],
      check: (o) => expect(controllerOf(o).env).toContainEqual(nodeOptions("--max-old-space-size=384")),
    },
    {
      reason: "semiSpaceMiB adds V8's young-generation size to the heap cap",
      set: ["heapCapMiB=256", "semiSpaceMiB=2"],
      check: (o) =>
        expect(controllerOf(o).env).toContainEqual(
          nodeOptions("--max-old-space-size=256 --max-semi-space-size=2"),
        ),
    },
    {
      reason: "heapCapMiB=0 and semiSpaceMiB=0 leave V8's defaults",
      set: ["heapCapMiB=0", "semiSpaceMiB=0"],
      check: (o) => expect(controllerOf(o).env?.map((e) => e.name)).not.toContain("NODE_OPTIONS"),
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
        expect(controllerOf(o).args).toContain("--allow-secrets");
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
        expect(controllerOf(o).args).toContain("--allow-secret-export");
        expect(find(o, "ClusterRole", "rel-export-secrets").rules).toEqual([
          {
            apiGroups: [""],
            resources: ["secrets"],
            verbs: ["get", "list", "watch", "create", "patch", "delete"],
          },
        ]);
        const binding = o.find((x) => x.kind === "RoleBinding" && x.metadata?.name === "rel-export-secrets");
        expect(binding?.metadata?.namespace).toBe("team-b");
      },
    },
    {
      reason:
        "defaultServiceAccount is the lockdown flag; impersonationNamespaces moves impersonate from the ClusterRole to RoleBindings there",
      set: [
        "defaultServiceAccount=team-b/nobody",
        "impersonationNamespaces[0]=team-b",
        "impersonationNamespaces[1]=team-c",
      ],
      check: (o) => {
        expect(controllerOf(o).args).toContain("--default-service-account=team-b/nobody");
        const impersonate = { apiGroups: [""], resources: ["serviceaccounts"], verbs: ["impersonate"] };
        expect(find(o, "ClusterRole", "rel-controller").rules).not.toContainEqual(impersonate);
        expect(find(o, "ClusterRole", "rel-impersonate").rules).toEqual([impersonate]);
        const bindings = o.filter((x) => x.kind === "RoleBinding" && x.metadata?.name === "rel-impersonate");
        expect(bindings.map((b) => b.metadata?.namespace).sort()).toEqual(["team-b", "team-c"]);
      },
    },
    {
      reason: "without impersonationNamespaces the controller may impersonate ServiceAccounts everywhere",
      set: [],
      check: (o) => {
        expect(find(o, "ClusterRole", "rel-controller").rules).toContainEqual({
          apiGroups: [""],
          resources: ["serviceaccounts"],
          verbs: ["impersonate"],
        });
        expect(o.some((x) => x.metadata?.name === "rel-impersonate")).toBe(false);
        expect(controllerOf(o).args?.some((a) => a.startsWith("--default-service-account"))).toBe(false);
      },
    },
    {
      reason: "without allowSecrets there is neither",
      set: [],
      check: (o) => {
        expect(controllerOf(o).args).not.toContain("--allow-secrets");
        expect(o.some((x) => x.metadata?.name === "rel-source-reader-secrets")).toBe(false);
      },
    },
    {
      reason: "leaderElection.enabled=false turns it off and drops the Lease's Role",
      set: ["leaderElection.enabled=false", "replicaCount=1", "podDisruptionBudget.enabled=false"],
      check: (o) => {
        expect(controllerOf(o).args).toContain("--leader-elect=false");
        expect(o.some((x) => x.kind === "Role" && x.metadata?.name === "rel-leader-election")).toBe(false);
      },
    },
    {
      reason: "denyKinds, concurrency and maxValueBytes become the flags",
      set: ["denyKinds[0]=Token.auth.example.com", "concurrency=4", "maxValueBytes=1024"],
      check: (o) =>
        expect(controllerOf(o).args).toEqual(
          expect.arrayContaining([
            "--deny-kinds=Token.auth.example.com",
            "--concurrency=4",
            "--max-value-bytes=1024",
          ]),
        ),
    },
    {
      reason: "maxLabelKeysPerKind, maxLabelBytesPerObject and driftReadBudget become the flags",
      set: ["maxLabelKeysPerKind=512", "maxLabelBytesPerObject=8192", "driftReadBudget=0"],
      check: (o) =>
        expect(controllerOf(o).args).toEqual(
          expect.arrayContaining([
            "--max-label-keys-per-kind=512",
            "--max-label-bytes-per-object=8192",
            "--drift-read-budget=0",
          ]),
        ),
    },
    {
      reason: "priorityClassName and topologySpreadConstraints go on the pod",
      set: [
        "priorityClassName=system-cluster-critical",
        "topologySpreadConstraints[0].maxSkew=1",
        "topologySpreadConstraints[0].topologyKey=topology.kubernetes.io/zone",
        "topologySpreadConstraints[0].whenUnsatisfiable=ScheduleAnyway",
      ],
      check: (o) => {
        const pod = find<Deployment>(o, "Deployment", "rel-controller").spec.template.spec;
        expect(pod.priorityClassName).toBe("system-cluster-critical");
        expect(pod.topologySpreadConstraints).toEqual([
          { maxSkew: 1, topologyKey: "topology.kubernetes.io/zone", whenUnsatisfiable: "ScheduleAnyway" },
        ]);
      },
    },
    {
      reason: "podLabels and podAnnotations go on the pods only; commonLabels on every object",
      set: [
        "podLabels.team=platform",
        "podAnnotations.example\\.com/scrape=no",
        "commonLabels.cost-center=c42",
      ],
      check: (o) => {
        const d = find<Deployment>(o, "Deployment", "rel-controller");
        const meta = (
          d.spec.template as unknown as {
            metadata: { labels: Record<string, string>; annotations: Record<string, string> };
          }
        ).metadata;
        expect(meta.labels).toMatchObject({ team: "platform", "cost-center": "c42" });
        expect(meta.annotations["example.com/scrape"]).toBe("no");
        expect(d.metadata?.labels?.team).toBeUndefined();
        for (const x of o)
          expect({ object: key(x), label: x.metadata?.labels?.["cost-center"] }).toEqual({
            object: key(x),
            label: "c42",
          });
        // The selector never takes them (it must not change across upgrades).
        expect(d.spec.selector).toEqual({
          matchLabels: {
            "app.kubernetes.io/name": "referable-controller",
            "app.kubernetes.io/component": "controller",
          },
        });
      },
    },
    {
      reason: "serviceAccount.annotations annotate the chart's ServiceAccount",
      set: ["serviceAccount.annotations.eks\\.amazonaws\\.com/role-arn=arn:aws:iam::1:role/r"],
      check: (o) =>
        expect(find(o, "ServiceAccount", "rel-controller").metadata?.annotations).toEqual({
          "eks.amazonaws.com/role-arn": "arn:aws:iam::1:role/r",
        }),
    },
    {
      reason:
        "serviceAccount.create=false with a name: no ServiceAccount, and the pods and every binding use that name",
      set: ["serviceAccount.create=false", "serviceAccount.name=platform-sa", "leaderElection.enabled=true"],
      check: (o) => {
        expect(o.filter((x) => x.kind === "ServiceAccount")).toEqual([]);
        expect(
          find<Deployment>(o, "Deployment", "rel-controller").spec.template.spec.serviceAccountName,
        ).toBe("platform-sa");
        const subjects = o.flatMap(
          (x) => (x.subjects as Array<{ kind: string; name: string }> | undefined) ?? [],
        );
        expect(subjects.length).toBeGreaterThan(0);
        expect(new Set(subjects.map((x) => `${x.kind}/${x.name}`))).toEqual(
          new Set(["ServiceAccount/platform-sa"]),
        );
      },
    },
    {
      reason:
        "podSecurityContext.runAsUser=null and runAsGroup=null leave the UID to the platform (OpenShift restricted)",
      set: ["podSecurityContext.runAsUser=null", "podSecurityContext.runAsGroup=null"],
      check: (o) =>
        expect(
          find<Deployment>(o, "Deployment", "rel-controller").spec.template.spec.securityContext,
        ).toEqual({
          runAsNonRoot: true,
          seccompProfile: { type: "RuntimeDefault" },
        }),
    },
    {
      reason: "securityContext replaces the container's settings key by key",
      set: ["securityContext.readOnlyRootFilesystem=false"],
      check: (o) =>
        expect(controllerOf(o).securityContext).toEqual({
          allowPrivilegeEscalation: false,
          readOnlyRootFilesystem: false,
          runAsNonRoot: true,
          privileged: false,
          capabilities: { drop: ["ALL"] },
        }),
    },
    {
      reason: "extraEnv and extraArgs are appended to the container's",
      set: [
        "extraEnv[0].name=HTTPS_PROXY",
        "extraEnv[0].value=http://proxy:3128",
        "extraArgs[0]=--concurrency=8",
      ],
      check: (o) => {
        const c = controllerOf(o);
        expect(c.env?.at(-1)).toEqual({ name: "HTTPS_PROXY", value: "http://proxy:3128" });
        expect(c.args?.at(-1)).toBe("--concurrency=8");
      },
    },
    {
      reason: "image.digest pins the image by digest, whatever the tag",
      set: [
        "image.repository=registry.example/referable",
        "image.tag=1.2.3",
        `image.digest=sha256:${"a".repeat(64)}`,
      ],
      check: (o) => expect(controllerOf(o).image).toBe(`registry.example/referable@sha256:${"a".repeat(64)}`),
    },
    {
      reason: "nameOverride makes the prefix <release>-<nameOverride>",
      set: ["nameOverride=refs"],
      check: (o) => {
        find<Deployment>(o, "Deployment", "rel-refs-controller");
        find(o, "ClusterRole", "rel-refs-source-reader");
      },
    },
    {
      reason: "fullnameOverride replaces the prefix whatever the release is called",
      set: ["fullnameOverride=referable"],
      check: (o) => {
        find<Deployment>(o, "Deployment", "referable-controller");
        expect(o.filter((x) => x.metadata?.name?.startsWith("rel-"))).toEqual([]);
      },
    },
    {
      reason:
        "global keys of other charts are accepted (Helm passes global to every chart) and change nothing",
      set: ["global.imageRegistry=registry.example"],
      check: (o) => expect(controllerOf(o).image).toBe("referable-controller:0.1.0"),
    },
    {
      reason: "global.imagePullSecrets come before imagePullSecrets, each name once",
      set: [
        "global.imagePullSecrets[0].name=umbrella",
        "global.imagePullSecrets[1].name=shared",
        "imagePullSecrets[0].name=shared",
        "imagePullSecrets[1].name=mine",
      ],
      check: (o) =>
        expect(
          find<Deployment>(o, "Deployment", "rel-controller").spec.template.spec.imagePullSecrets,
        ).toEqual([{ name: "umbrella" }, { name: "shared" }, { name: "mine" }]),
    },
    {
      reason: "global.imagePullSecrets alone are the pods' pull secrets",
      set: ["global.imagePullSecrets[0].name=umbrella"],
      check: (o) =>
        expect(
          find<Deployment>(o, "Deployment", "rel-controller").spec.template.spec.imagePullSecrets,
        ).toEqual([{ name: "umbrella" }]),
    },
    {
      reason: "no pull secrets anywhere renders none",
      set: [],
      check: (o) =>
        expect(
          find<Deployment>(o, "Deployment", "rel-controller").spec.template.spec.imagePullSecrets,
        ).toBeUndefined(),
    },
    {
      reason: "global.priorityClassName is the pods' when priorityClassName is empty",
      set: ["global.priorityClassName=platform-critical"],
      check: (o) =>
        expect(find<Deployment>(o, "Deployment", "rel-controller").spec.template.spec.priorityClassName).toBe(
          "platform-critical",
        ),
    },
    {
      reason: "priorityClassName wins over global.priorityClassName",
      set: ["global.priorityClassName=platform-critical", "priorityClassName=mine"],
      check: (o) =>
        expect(find<Deployment>(o, "Deployment", "rel-controller").spec.template.spec.priorityClassName).toBe(
          "mine",
        ),
    },
    {
      reason:
        "podLabels naming the app leave one app.kubernetes.io/name, the app's, so the selector still matches",
      set: ["podLabels.app\\.kubernetes\\.io/name=other", "podLabels.team=platform"],
      check: (o) => {
        const d = find<Deployment>(o, "Deployment", "rel-controller");
        const labels = (d.spec.template as unknown as { metadata: { labels: Record<string, string> } })
          .metadata.labels;
        expect(labels["app.kubernetes.io/name"]).toBe("referable-controller");
        expect(labels.team).toBe("platform");
        expect(labels["app.kubernetes.io/instance"]).toBe("rel");
      },
    },
    {
      reason: "commonLabels naming the app leave one app.kubernetes.io/name on every object",
      set: ["commonLabels.app\\.kubernetes\\.io/name=other"],
      check: (o) => {
        for (const x of o)
          expect({ object: key(x), name: x.metadata?.labels?.["app.kubernetes.io/name"] }).toEqual({
            object: key(x),
            name: "referable-controller",
          });
      },
    },
    {
      reason: "podDisruptionBudget.maxUnavailable budgets by maxUnavailable instead of minAvailable",
      set: ["podDisruptionBudget.maxUnavailable=1"],
      check: (o) => {
        const spec = find(o, "PodDisruptionBudget", "rel-controller").spec as Record<string, unknown>;
        expect(spec.maxUnavailable).toBe(1);
        expect(spec.minAvailable).toBeUndefined();
      },
    },
    {
      reason: "podDisruptionBudget.maxUnavailable takes a percentage",
      set: ["podDisruptionBudget.maxUnavailable=50%"],
      check: (o) =>
        expect(
          (find(o, "PodDisruptionBudget", "rel-controller").spec as Record<string, unknown>).maxUnavailable,
        ).toBe("50%"),
    },
    {
      reason: "strategy replaces the Deployment's rolling update",
      set: ["strategy.type=Recreate"],
      check: (o) =>
        expect(find<Deployment>(o, "Deployment", "rel-controller").spec.strategy).toEqual({
          type: "Recreate",
        }),
    },
    {
      reason: "without strategy the rollout never goes below the replica count",
      set: [],
      check: (o) =>
        expect(find<Deployment>(o, "Deployment", "rel-controller").spec.strategy).toEqual({
          type: "RollingUpdate",
          rollingUpdate: { maxUnavailable: 0, maxSurge: 1 },
        }),
    },
    {
      reason:
        "extraVolumes and extraVolumeMounts mount a metrics certificate, with the webhook's cert-manager volume",
      set: [
        "extraVolumes[0].name=metrics-cert",
        "extraVolumes[0].secret.secretName=metrics-tls",
        "extraVolumeMounts[0].name=metrics-cert",
        "extraVolumeMounts[0].mountPath=/certs/metrics",
        "extraVolumeMounts[0].readOnly=true",
        "extraArgs[0]=--metrics-cert-dir=/certs/metrics",
        "webhook.certManager.enabled=true",
      ],
      check: (o) => {
        const d = find<Deployment>(o, "Deployment", "rel-controller");
        expect(d.spec.template.spec.volumes).toEqual([
          { name: "webhook-serving-cert", secret: { secretName: "rel-webhook-serving-cert" } },
          { name: "metrics-cert", secret: { secretName: "metrics-tls" } },
        ]);
        const c = controllerContainer(d);
        expect(c.volumeMounts).toEqual([
          {
            name: "webhook-serving-cert",
            mountPath: "/tmp/k8s-webhook-server/serving-certs",
            readOnly: true,
          },
          { name: "metrics-cert", mountPath: "/certs/metrics", readOnly: true },
        ]);
        expect(c.args).toContain("--metrics-cert-dir=/certs/metrics");
      },
    },
    {
      reason: "extraVolumes alone, with the webhook's own certificate, are the pods' only volumes",
      set: ["extraVolumes[0].name=scratch", "extraVolumes[0].emptyDir.medium=Memory"],
      check: (o) => {
        const d = find<Deployment>(o, "Deployment", "rel-controller");
        expect(d.spec.template.spec.volumes).toEqual([{ name: "scratch", emptyDir: { medium: "Memory" } }]);
        expect(controllerContainer(d).volumeMounts).toBeUndefined();
      },
    },
    {
      reason: "extraObjects install more objects, as templates, given as objects or strings",
      // --set would read "{{" as the start of a list: JSON instead.
      set: [
        `--set-json=extraObjects=${JSON.stringify([
          {
            apiVersion: "v1",
            kind: "ConfigMap",
            metadata: { name: "{{ .Release.Name }}-extra", namespace: "{{ .Release.Namespace }}" },
            data: { k: "v" },
          },
          "apiVersion: v1\nkind: Secret\nmetadata:\n  name: {{ .Release.Name }}-extra-secret",
        ])}`,
      ],
      check: (o) => {
        expect(find(o, "ConfigMap", "rel-extra")).toEqual({
          apiVersion: "v1",
          kind: "ConfigMap",
          metadata: { name: "rel-extra", namespace: "ops" },
          data: { k: "v" },
        });
        find(o, "Secret", "rel-extra-secret");
      },
    },
    {
      reason: "networkPolicy admits the metrics port from metricsFrom, and the webhook port",
      set: [
        "networkPolicy.enabled=true",
        "networkPolicy.metricsFrom[0].namespaceSelector.matchLabels.name=monitoring",
        "webhook.enabled=true",
      ],
      check: (o) => {
        const np = find(o, "NetworkPolicy", "rel-controller");
        expect(np.spec).toEqual({
          podSelector: {
            matchLabels: {
              "app.kubernetes.io/name": "referable-controller",
              "app.kubernetes.io/component": "controller",
            },
          },
          policyTypes: ["Ingress"],
          ingress: [
            {
              ports: [{ port: "metrics", protocol: "TCP" }],
              from: [{ namespaceSelector: { matchLabels: { name: "monitoring" } } }],
            },
            { ports: [{ port: "webhook", protocol: "TCP" }] },
          ],
        });
      },
    },
    {
      reason: "logFormat becomes --log-format",
      set: ["logFormat=text"],
      check: (o) => expect(controllerOf(o).args).toContain("--log-format=text"),
    },
    {
      reason:
        "metrics.secure: the flag, the TokenReview/SubjectAccessReview role, the reader role and its bindings",
      set: [
        "metrics.secure=true",
        "metrics.readerServiceAccounts[0].name=prometheus",
        "metrics.readerServiceAccounts[0].namespace=monitoring",
      ],
      check: (o) => {
        expect(controllerOf(o).args).toContain("--metrics-secure");
        expect(find(o, "ClusterRole", "rel-metrics-auth").rules).toEqual([
          { apiGroups: ["authentication.k8s.io"], resources: ["tokenreviews"], verbs: ["create"] },
          { apiGroups: ["authorization.k8s.io"], resources: ["subjectaccessreviews"], verbs: ["create"] },
        ]);
        expect(find(o, "ClusterRoleBinding", "rel-metrics-auth").subjects).toEqual([
          { kind: "ServiceAccount", name: "rel-controller", namespace: "ops" },
        ]);
        expect(find(o, "ClusterRole", "rel-metrics-reader").rules).toEqual([
          { nonResourceURLs: ["/metrics"], verbs: ["get"] },
        ]);
        expect(find(o, "ClusterRoleBinding", "rel-metrics-reader").subjects).toEqual([
          { kind: "ServiceAccount", name: "prometheus", namespace: "monitoring" },
        ]);
      },
    },
    {
      reason:
        "metrics.secure makes the ServiceMonitor scrape over HTTPS with a token from a Secret (authorization, not bearerTokenFile)",
      set: ["metrics.secure=true", "serviceMonitor.enabled=true", `--api-versions=${MONITORING_APIS[0]}`],
      check: (o) =>
        expect(
          (find(o, "ServiceMonitor", "rel-controller").spec as { endpoints: unknown[] }).endpoints,
        ).toEqual([secureMetricsEndpoint("metrics", "rel-metrics-scraper-token")]),
    },
    {
      reason:
        "the ServiceMonitor's token is a ServiceAccount's of the release, bound to the metrics reader role",
      set: ["metrics.secure=true", "serviceMonitor.enabled=true", `--api-versions=${MONITORING_APIS[0]}`],
      check: (o) => {
        const secret = find(o, "Secret", "rel-metrics-scraper-token") as Obj & { type: string };
        expect(secret.type).toBe("kubernetes.io/service-account-token");
        expect(secret.metadata?.namespace).toBe("ops");
        expect(secret.metadata?.annotations?.["kubernetes.io/service-account.name"]).toBe(
          "rel-metrics-scraper",
        );
        expect(find(o, "ServiceAccount", "rel-metrics-scraper").metadata?.namespace).toBe("ops");
        expect(find(o, "ClusterRoleBinding", "rel-metrics-scraper")).toMatchObject({
          roleRef: { kind: "ClusterRole", name: "rel-metrics-reader" },
          subjects: [{ kind: "ServiceAccount", name: "rel-metrics-scraper", namespace: "ops" }],
        });
      },
    },
    {
      reason: "serviceMonitor.authorization names a Secret of your own, and the chart makes no token",
      set: [
        "metrics.secure=true",
        "serviceMonitor.enabled=true",
        "serviceMonitor.authorization.secretName=prom-token",
        "serviceMonitor.authorization.key=jwt",
        `--api-versions=${MONITORING_APIS[0]}`,
      ],
      check: (o) => {
        const [endpoint] = (find(o, "ServiceMonitor", "rel-controller").spec as { endpoints: Obj[] })
          .endpoints;
        expect(endpoint!.authorization).toEqual({
          type: "Bearer",
          credentials: { name: "prom-token", key: "jwt" },
        });
        expect(o.filter((x) => x.metadata?.name?.startsWith("rel-metrics-scraper"))).toEqual([]);
      },
    },
    {
      reason:
        "prometheusRule.labels and serviceMonitor.labels label them for kube-prometheus-stack's selectors",
      set: [
        "prometheusRule.enabled=true",
        "prometheusRule.labels.release=kps",
        "serviceMonitor.enabled=true",
        "serviceMonitor.labels.release=kps",
        ...MONITORING_APIS.map((api) => `--api-versions=${api}`),
      ],
      check: (o) => {
        expect(find(o, "PrometheusRule", "rel-controller").metadata?.labels?.release).toBe("kps");
        expect(find(o, "ServiceMonitor", "rel-controller").metadata?.labels?.release).toBe("kps");
      },
    },
    {
      reason: "grafanaDashboard's sidecar label and namespace are configurable",
      set: [
        "grafanaDashboard.enabled=true",
        "grafanaDashboard.sidecarLabel=grafana_dashboard_referable",
        "grafanaDashboard.sidecarLabelValue=yes",
        "grafanaDashboard.namespace=monitoring",
      ],
      check: (o) => {
        const cm = find(o, "ConfigMap", "rel-controller-dashboard");
        expect(cm.metadata?.namespace).toBe("monitoring");
        expect(cm.metadata?.labels?.grafana_dashboard_referable).toBe("yes");
        const dashboard = JSON.parse((cm.data as Record<string, string>)["referable-controller.json"]!) as {
          uid: string;
        };
        expect(dashboard.uid).toBe("referable-controller");
      },
    },
    {
      reason: "the CRD is a template, kept on uninstall by default",
      set: [],
      check: (o) =>
        expect(find(o, "CustomResourceDefinition", "referables.referable.dev").metadata?.annotations).toEqual(
          {
            "helm.sh/resource-policy": "keep",
          },
        ),
    },
    {
      reason: "crds.keep=false lets helm uninstall delete the CRD (no keep policy)",
      set: ["crds.keep=false"],
      check: (o) =>
        expect(
          find(o, "CustomResourceDefinition", "referables.referable.dev").metadata?.annotations,
        ).toBeUndefined(),
    },
    {
      reason: "crds.enabled=false renders no CRD (managed elsewhere)",
      set: ["crds.enabled=false"],
      check: (o) => expect(o.filter((x) => x.kind === "CustomResourceDefinition")).toEqual([]),
    },
  ];
  it.each(values)(
    "$reason",
    async ({ set, check }) => {
      const objects = await template("rel", "ops", ...set);
      check(objects);
      // Whatever the values, the controller accepts the args it is given.
      const d = objects.find((o): o is Deployment => o.kind === "Deployment")!;
      expect(parseConfig(acceptedArgs(controllerContainer(d).args ?? []), {})).not.toBe("help");
    },
    STEP_MS,
  );

  it(
    "helm lint --strict passes with the defaults and with every value set at once, and helm template renders",
    async () => {
      const file = join(await mkdtemp(join(tmpdir(), "referable-helm-values-")), "values.yaml");
      await writeFile(file, JSON.stringify(EVERY_VALUE));
      try {
        expect(await runHelm(helm, ["lint", CHART, "--strict"])).toContain("0 chart(s) failed");
        const lint = await runHelm(helm, ["lint", CHART, "--strict", "--values", file]);
        expect(lint).toContain("0 chart(s) failed");
        const objects = await template(
          "rel",
          "ops",
          `--values=${file}`,
          ...MONITORING_APIS.map((api) => `--api-versions=${api}`),
        );
        const d = find<Deployment>(objects, "Deployment", "rel-refs-controller");
        expect(d.spec.replicas).toBe(3);
        expect(parseConfig(acceptedArgs(controllerContainer(d).args ?? []), {})).not.toBe("help");
        for (const kind of [
          "ServiceMonitor",
          "PrometheusRule",
          "NetworkPolicy",
          "PodDisruptionBudget",
          "CustomResourceDefinition",
        ])
          expect(objects.some((o) => o.kind === kind)).toBe(true);
      } finally {
        await rm(dirname(file), { recursive: true, force: true });
      }
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
    {
      reason: "a typo inside serviceAccount",
      set: "serviceAccount.annotation.a=b",
      says: "additional properties 'annotation' not allowed",
    },
    { reason: "a digest that is not one", set: "image.digest=latest", says: "/image/digest" },
    { reason: "a log format the controller does not have", set: "logFormat=pretty", says: "/logFormat" },
    {
      reason: "a pull secret given as a string",
      set: "imagePullSecrets[0]=regcred",
      says: "/imagePullSecrets/0",
    },
    {
      reason: "a global pull secret given as a string",
      set: "global.imagePullSecrets[0]=regcred",
      says: "/global/imagePullSecrets/0",
    },
    {
      reason: "a typo inside webhook.certManager",
      set: "webhook.certManager.enable=true",
      says: "'enable' not allowed",
    },
    { reason: "a strategy that is not one", set: "strategy.type=Rolling", says: "/strategy/type" },
  ];
  it.each(refused)(
    "$reason",
    async ({ set, says }) => {
      await expect(template("rel", "ops", set)).rejects.toThrow(says);
    },
    STEP_MS,
  );
});

describe("helm template refuses contradictory values, saying the fix", () => {
  const contradictions: Array<{ reason: string; set: string[]; says: string }> = [
    {
      reason: "a PodDisruptionBudget with minAvailable 1 over one replica blocks every node drain",
      set: ["replicaCount=1"],
      says: "podDisruptionBudget.minAvailable=1 with replicaCount=1 lets no pod be evicted, so every node drain blocks: set replicaCount=2 or more, or a lower minAvailable, or podDisruptionBudget.enabled=false",
    },
    {
      reason: "minAvailable 100% blocks every node drain whatever the replicas",
      set: ["podDisruptionBudget.minAvailable=100%"],
      says: "podDisruptionBudget.minAvailable=100% lets no pod be evicted",
    },
    {
      reason: "leader election off with two replicas makes two writers",
      set: ["leaderElection.enabled=false"],
      says: "leaderElection.enabled=false with replicaCount=2 makes 2 controllers write the same statuses and exports: set leaderElection.enabled=true, or replicaCount=1",
    },
    {
      reason: "fewer buckets than replicas leaves a replica with nothing to serve",
      set: ["sharding.shards=2", "replicaCount=3"],
      says: "sharding.shards=2 with replicaCount=3 leaves a replica with no bucket to serve: set sharding.shards=3 or more",
    },
    {
      reason: "sharding without leader election has no Lease settings for its buckets",
      set: ["sharding.shards=4", "leaderElection.enabled=false"],
      says: "sharding.shards=4 needs leaderElection.enabled=true",
    },
    {
      reason: "a heap cap at the memory limit",
      set: ["heapCapMiB=512"],
      says: "heapCapMiB=512 is at or above resources.limits.memory=512Mi (512 MiB)",
    },
    {
      reason: "a heap cap above a limit given in Gi",
      set: ["heapCapMiB=2048", "resources.limits.memory=1Gi"],
      says: "set heapCapMiB to about half the limit (BENCHMARKS.md, Sizing), or raise resources.limits.memory",
    },
    {
      reason: "a heap cap above a limit given in bytes",
      set: ["heapCapMiB=300", "resources.limits.memory=268435456"],
      says: "heapCapMiB=300 is at or above resources.limits.memory=268435456 (256 MiB)",
    },
    {
      reason: "a PodDisruptionBudget with maxUnavailable 0 blocks every node drain",
      set: ["podDisruptionBudget.maxUnavailable=0"],
      says: "podDisruptionBudget.maxUnavailable=0 lets no pod be evicted, so every node drain blocks",
    },
    {
      reason: "an existing ServiceAccount without its name",
      set: ["serviceAccount.create=false"],
      says: "serviceAccount.create=false needs serviceAccount.name",
    },
  ];
  it.each(contradictions)(
    "$reason",
    async ({ set, says }) => {
      await expect(template("rel", "ops", ...set)).rejects.toThrow(says);
    },
    STEP_MS,
  );

  it(
    "accepts each contradiction's fix",
    async () => {
      for (const set of [
        ["replicaCount=1", "podDisruptionBudget.enabled=false", "leaderElection.enabled=false"],
        ["replicaCount=3", "podDisruptionBudget.minAvailable=2"],
        ["replicaCount=3", "sharding.shards=3"],
        ["heapCapMiB=512", "resources.limits.memory=1Gi"],
      ])
        await expect(template("rel", "ops", ...set)).resolves.toEqual(expect.any(Array));
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

/**
 * A kubeconfig file in `dir` for the cluster of `kubeconfig` that authenticates with a token of
 * the release's installed ServiceAccount `namespace/<release>-controller`.
 */
async function serviceAccountKubeconfig(
  admin: KubeClient,
  kubeconfig: string,
  namespace: string,
  release: string,
  dir: string,
): Promise<string> {
  const token = await requestToken(admin, namespace, `${release}-controller`);
  return writeTokenKubeconfig(join(dir, "kubeconfig"), token, kubeconfig);
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
        ...installArgs(release, ns, kubeconfig),
        "--set",
        `extraSourceKinds[0].apiGroups[0]=${widgetGroup}`,
        "--set",
        "extraSourceKinds[0].resources[0]=widgets",
        // The shared control plane's CRD is installed already, by the harness, and is every
        // test's: managed outside this release (the CRD's own upgrade is tested below).
        "--set",
        "crds.enabled=false",
        // A webhook here would judge every test's Referables on the shared control plane; the
        // chart's default webhook is installed on a control plane of its own below.
        "--set",
        "webhook.enabled=false",
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
      const saKubeconfig = await serviceAccountKubeconfig(admin, kubeconfig, ns, release, tmp);

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
        await createConfigMap(admin, src, "db", { host: "db.example" });
        await admin.request("POST", `/apis/${widgetGroup}/v1/namespaces/${src}/widgets`, {
          body: {
            apiVersion: `${widgetGroup}/v1`,
            kind: "Widget",
            metadata: { name: "w" },
            spec: { size: 7 },
          },
        });
        await createSecret(admin, src, "s", { k: "v" });
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

      // helm uninstall removes what it installed (the CRD, not the release's, stays).
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

// ---------------------------------------------------------------------------------------------
// The CRD across upgrades, on a control plane of its own: the shared one's CRD is every other
// test's, and this one installs, changes and uninstalls it.

describe("helm upgrade upgrades the CRD", () => {
  let plane: PrivateControlPlane;
  let admin: KubeClient;
  let tmp: string;
  const CRD = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/referables.referable.dev";

  beforeAll(async () => {
    ({ plane, admin } = await startPrivatePlane("helm-crd", { installCrds: false }));
    tmp = await mkdtemp(join(tmpdir(), "referable-helm-crd-"));
  }, STEP_MS);

  afterAll(async () => {
    await admin?.close();
    await plane?.stop();
    if (tmp) await rm(tmp, { recursive: true, force: true });
  });

  type Crd = Obj & {
    spec: {
      versions: Array<{
        name: string;
        additionalPrinterColumns?: Array<{ name: string }>;
        schema: { openAPIV3Schema: { properties: { spec: Record<string, unknown> } } };
      }>;
    };
  };

  /** A Referable whose source kind is `kind`, as a user would create it. */
  const referable = (name: string, kind: string) => ({
    apiVersion: "referable.dev/v1alpha1",
    kind: "Referable",
    metadata: { name },
    spec: { source: { apiVersion: "v1", kind, namespace: "default", name: "x", fieldPath: "data.x" } },
  });

  it(
    "installs the CRD (and skips monitoring without the Prometheus Operator), applies a changed CRD on upgrade (new columns and validation), and keeps it on uninstall",
    async () => {
      const helmArgs = (...args: string[]) => [
        ...args,
        "--namespace",
        "referable-system",
        `--kubeconfig=${plane.kubeconfigPath}`,
      ];
      // A copy of the chart (symlinks resolved), whose CRD the next release changes.
      const chart = join(tmp, "referable");
      await cp(CHART, chart, { recursive: true, dereference: true });
      // With the monitoring options on, as on a cluster without the Prometheus Operator: the
      // install succeeds (they are skipped, and the notes say so) instead of failing.
      const notes = await runHelm(
        helm,
        helmArgs(
          "install",
          "rfcrd",
          chart,
          "--create-namespace",
          "--set",
          "serviceMonitor.enabled=true",
          "--set",
          "prometheusRule.enabled=true",
          // No controller runs here to serve the webhook (the test after "without cert-manager"
          // below runs one), and the CRD is what this test is about.
          "--set",
          "webhook.enabled=false",
        ),
      );
      expect(notes).toContain("no monitoring.coreos.com/v1 ServiceMonitor");
      expect(notes).toContain("no monitoring.coreos.com/v1 PrometheusRule");
      const installed = await admin.request<Crd>("GET", CRD);
      expect(installed.metadata?.labels?.["app.kubernetes.io/managed-by"]).toBe("Helm");
      expect(installed.metadata?.annotations?.["helm.sh/resource-policy"]).toBe("keep");
      const columns = (crd: Crd) => crd.spec.versions[0]!.additionalPrinterColumns?.map((c) => c.name);
      expect(columns(installed)).not.toContain("Upgraded");
      await waitFor(
        "the installed CRD to serve Referables",
        async () =>
          admin.request("GET", RF).then(
            () => true,
            () => false,
          ),
        WAIT,
      );
      await admin.request("POST", RF, { body: referable("before-upgrade", "Upgraded") });

      // The next release's CRD: one more printer column and one more validation rule.
      const file = join(chart, "files", "referable.dev_referables.yaml");
      const next = load(await readFile(file, "utf8")) as Crd;
      for (const v of next.spec.versions) {
        v.additionalPrinterColumns = [
          ...(v.additionalPrinterColumns ?? []),
          { name: "Upgraded", type: "string", jsonPath: ".metadata.labels.upgraded" } as { name: string },
        ];
        const spec = v.schema.openAPIV3Schema.properties.spec;
        spec["x-kubernetes-validations"] = [
          ...((spec["x-kubernetes-validations"] as unknown[] | undefined) ?? []),
          {
            rule: "!has(self.source) || self.source.kind != 'Upgraded'",
            message: "refused by the upgraded CRD",
          },
        ];
      }
      await writeFile(file, JSON.stringify(next));
      await runHelm(helm, helmArgs("upgrade", "rfcrd", chart, "--reuse-values"));

      const upgraded = await admin.request<Crd>("GET", CRD);
      expect(columns(upgraded)).toContain("Upgraded");
      // The API server enforces the new validation: what was accepted before is refused now.
      await waitFor(
        "the upgraded CRD's validation to be served",
        async () =>
          admin.request("POST", RF, { body: referable(uniqueName("after-upgrade"), "Upgraded") }).then(
            async (created) => {
              await admin.request("DELETE", `${RF}/${(created as Obj).metadata!.name}`);
              return false;
            },
            (err: Error) => {
              if (!err.message.includes("refused by the upgraded CRD")) throw err;
              return true;
            },
          ),
        WAIT,
      );

      // crds.keep: uninstall leaves the CRD, and with it the Referables.
      await runHelm(helm, helmArgs("uninstall", "rfcrd"));
      await admin.request("GET", CRD);
      await admin.request("GET", `${RF}/before-upgrade`);
    },
    STEP_MS,
  );

  it(
    "installs with every value set (the webhook aside): the API server accepts every object",
    async () => {
      const file = join(tmp, "every-value.yaml");
      await writeFile(
        file,
        JSON.stringify({ ...EVERY_VALUE, crds: { enabled: false }, webhook: { enabled: false } }),
      );
      const ns = "referable-every";
      const args = ["--namespace", ns, `--kubeconfig=${plane.kubeconfigPath}`];
      await runHelm(helm, ["install", "rfall", CHART, "--create-namespace", "--values", file, ...args]);
      const status = load(await runHelm(helm, ["status", "rfall", "-o", "yaml", ...args])) as {
        info?: { status?: string };
      };
      expect(status.info?.status).toBe("deployed");
      // Read back as the API server stored them.
      const d = await admin.request<Deployment>(
        "GET",
        `/apis/apps/v1/namespaces/${ns}/deployments/rfall-refs-controller`,
      );
      expect(d.spec.template.spec.securityContext).toEqual({
        runAsNonRoot: true,
        seccompProfile: { type: "RuntimeDefault" },
      });
      expect(d.spec.template.spec.priorityClassName).toBe("system-cluster-critical");
      expect(d.spec.template.spec.serviceAccountName).toBe("referable");
      const np = await admin.request<Obj>(
        "GET",
        `/apis/networking.k8s.io/v1/namespaces/${ns}/networkpolicies/rfall-refs-controller`,
      );
      expect(np.metadata?.labels?.["cost-center"]).toBe("c42");
      const reader = await admin.request<Obj>(
        "GET",
        "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/rfall-refs-metrics-reader",
      );
      expect(reader.subjects).toEqual([
        { kind: "ServiceAccount", name: "prometheus", namespace: "monitoring" },
      ]);
      await runHelm(helm, ["uninstall", "rfall", ...args]);
      await expect(
        admin.request("GET", `/apis/apps/v1/namespaces/${ns}/deployments/rfall-refs-controller`),
      ).rejects.toThrow(/404/);
    },
    STEP_MS,
  );
});

// ---------------------------------------------------------------------------------------------
// kube-prometheus-stack's rule selection, with a real Prometheus

/**
 * What the Prometheus Operator does with PrometheusRules for a Prometheus whose ruleSelector is
 * `selector` (kube-prometheus-stack's default: `release: <its release>`): the rules of every
 * PrometheusRule whose labels match become Prometheus's rule files; the others are not loaded.
 */
function selectRules(objects: Obj[], selector: LabelSelector): unknown[] {
  const matches = compileLabelSelector(selector);
  return objects
    .filter((o) => o.kind === "PrometheusRule" && matches.matches(o.metadata?.labels))
    .flatMap((o) => (o.spec as { groups: unknown[] }).groups);
}

describe("kube-prometheus-stack-style rule selection", () => {
  let prometheus: Prometheus | undefined;
  afterAll(async () => prometheus?.stop());

  itIf(prometheusUnavailable())(
    "loads the chart's alerts when prometheusRule.labels carry the release label, and none without it",
    async () => {
      const selector: LabelSelector = { matchLabels: { release: "kps" } };
      const apis = MONITORING_APIS.map((api) => `--api-versions=${api}`);
      const unlabelled = await template("rel", "ops", "prometheusRule.enabled=true", ...apis);
      expect(selectRules(unlabelled, selector)).toEqual([]);

      const labelled = await template(
        "rel",
        "ops",
        "prometheusRule.enabled=true",
        "prometheusRule.labels.release=kps",
        ...apis,
      );
      const groups = selectRules(labelled, selector);
      const alerts = (groups as Array<{ rules: Array<{ alert: string }> }>).flatMap((g) =>
        g.rules.map((r) => r.alert),
      );
      expect(alerts.length).toBeGreaterThan(0);
      // Prometheus refuses to start on a rule file it cannot load, so ready means loaded.
      prometheus = await startPrometheus([], { ruleGroups: groups });
      const started = Date.now();
      const rules = await waitFor(
        "every selected rule to be evaluated",
        async () => {
          const r = await prometheus!.rules();
          return r.length === alerts.length && r.every((x) => Date.parse(x.lastEvaluation) > started)
            ? r
            : undefined;
        },
        WAIT,
      );
      expect(rules.map((r) => [r.name, r.type, r.health, r.lastError ?? ""]).sort()).toEqual(
        alerts.map((a) => [a, "alerting", "ok", ""]).sort(),
      );
    },
    STEP_MS,
  );
});

// ---------------------------------------------------------------------------------------------
// The docs' commands

/** Every `helm install` command in the sh blocks of `doc`, continuation lines joined, split into words. */
async function helmInstallsIn(doc: string): Promise<string[][]> {
  const text = await readFile(join(repoRoot, doc), "utf8");
  const blocks = [...text.matchAll(/^```sh\n([\s\S]*?)^```$/gm)].map((m) => m[1]!.replace(/\\\n\s*/g, ""));
  return blocks
    .flatMap((b) => b.split("\n"))
    .map((line) => line.replace(/#.*$/, "").trim())
    .filter((line) => line.startsWith("helm install "))
    .map((line) => line.split(/\s+/));
}

describe("the docs' helm commands", () => {
  const docs = ["README.md", "deploy/README.md", "deploy/helm/referable/README.md"];
  it(
    "every `helm install` of the docs renders as written (helm template with the same flags)",
    async () => {
      let seen = 0;
      for (const doc of docs) {
        for (const words of await helmInstallsIn(doc)) {
          seen++;
          // helm install NAME CHART ...: the same as helm template, which needs no cluster.
          const args = ["template", ...words.slice(2)];
          const objects = (loadAll(await runHelm(helm, args)) as Obj[]).filter(Boolean);
          const d = objects.find((o): o is Deployment => o.kind === "Deployment");
          expect({ doc, command: words.join(" "), deployment: d?.metadata?.name }).toEqual({
            doc,
            command: words.join(" "),
            deployment: `${words[2]}-controller`,
          });
          const repository = words.find((w) => w.startsWith("image.repository="));
          if (repository) expect(controllerContainer(d!).image).toContain(repository.split("=")[1]);
        }
      }
      expect(seen).toBeGreaterThanOrEqual(4);
    },
    STEP_MS,
  );
});

// ---------------------------------------------------------------------------------------------
// The chart's default webhook, installed on a control plane of its own (a webhook that refuses
// Referables must not judge other test files' on the shared one): the controller makes its own
// certificate, and the API server calls it through the chart's Service. Endpoints may not hold
// loopback addresses, so the Service's endpoint is a test host of this test's own (a network
// namespace, see netns-host.ts) that forwards to the controller's webhook on 127.0.0.1.

describe("the chart's default webhook without cert-manager", () => {
  let plane: PrivateControlPlane | undefined;
  let admin: KubeClient;
  let controller: ControllerProcess | undefined;
  let host: NetnsHost | undefined;
  let tmp: string;

  afterAll(async () => {
    await controller?.stop().catch(() => undefined);
    await host?.stop().catch(() => undefined);
    await admin?.close();
    await plane?.stop();
    if (tmp) await rm(tmp, { recursive: true, force: true });
  });

  itIf(netnsUnavailable())(
    "serves with a certificate the controller made and put in the caBundle, and the API server's admission calls it",
    async () => {
      // Webhook calls resolved through Endpoints (as the aggregator's), since no kube-proxy routes
      // the Service's ClusterIP here.
      ({ plane, admin } = await startPrivatePlane("helm-webhook", {
        installCrds: false,
        extraFlags: { apiServer: ["--enable-aggregator-routing=true"] },
      }));
      tmp = await mkdtemp(join(tmpdir(), "referable-helm-webhook-"));
      const release = "rf";
      const ns = "referable-system";
      const kubeconfig = plane.kubeconfigPath;
      // The chart's defaults: nothing set.
      await runHelm(helm, installArgs(release, ns, kubeconfig));
      // No cert-manager anywhere: neither its API nor any object of it.
      await expect(admin.request("GET", "/apis/cert-manager.io")).rejects.toThrow(/404/);
      const vwcPath = `/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/${release}-validating-webhook`;
      type Vwc = Obj & { webhooks: Array<{ clientConfig: { caBundle?: string } }> };
      expect((await admin.request<Vwc>("GET", vwcPath)).webhooks[0]!.clientConfig.caBundle).toBeUndefined();
      await waitFor(
        "the Referable CRD established",
        async () => {
          const crd = await admin.request<{
            status?: { conditions?: Array<{ type: string; status: string }> };
          }>("GET", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/referables.referable.dev");
          return crd.status?.conditions?.some((c) => c.type === "Established" && c.status === "True");
        },
        WAIT,
      );

      // The "pod": the installed Deployment's args and env, the installed ServiceAccount's token.
      const deployment = await admin.request<Deployment>(
        "GET",
        `/apis/apps/v1/namespaces/${ns}/deployments/${release}-controller`,
      );
      const container = controllerContainer(deployment);
      const saKubeconfig = await serviceAccountKubeconfig(admin, kubeconfig, ns, release, tmp);
      const port = await freePort();
      const env: Record<string, string> = {};
      for (const e of container.env ?? []) {
        const field = e.valueFrom?.fieldRef?.fieldPath;
        if (e.value !== undefined) env[e.name] = e.value;
        else if (field === "metadata.name") env[e.name] = `${release}-controller-a`;
        else if (field === "metadata.namespace") env[e.name] = ns;
      }
      const args = (container.args ?? [])
        .filter((a) => !/^--(metrics|health-probe|webhook)-bind-address=/.test(a))
        .concat(`--webhook-bind-address=127.0.0.1:${port}`, `--kubeconfig=${saKubeconfig}`);
      controller = await startControllerProcess(args, { kubeconfig: false, env });
      host = await startNetnsHost(port, port);

      // What the endpoints controllers would write for the Service's one ready pod.
      const service = `${release}-webhook`;
      await admin.request("POST", `/api/v1/namespaces/${ns}/endpoints`, {
        body: {
          apiVersion: "v1",
          kind: "Endpoints",
          metadata: { name: service },
          subsets: [
            { addresses: [{ ip: host.address }], ports: [{ name: "webhook", port, protocol: "TCP" }] },
          ],
        },
      });
      await admin.request("POST", `/apis/discovery.k8s.io/v1/namespaces/${ns}/endpointslices`, {
        body: {
          apiVersion: "discovery.k8s.io/v1",
          kind: "EndpointSlice",
          metadata: { name: `${service}-a`, labels: { "kubernetes.io/service-name": service } },
          addressType: "IPv4",
          endpoints: [{ addresses: [host.address], conditions: { ready: true } }],
          ports: [{ name: "webhook", port, protocol: "TCP" }],
        },
      });

      const logs = () =>
        `${controller!.stdout().split("\n").slice(-20).join("\n")}\ntest host ${host!.name}: ${host!.tail()}`;
      try {
        // The controller made the CA and the certificate, and set the caBundle to the CA.
        type Secret = Obj & { type: string; data: Record<string, string> };
        const secret = await waitFor(
          "the webhook certificate Secret",
          async () => {
            try {
              return await admin.request<Secret>("GET", `/api/v1/namespaces/${ns}/secrets/${service}-cert`);
            } catch {
              return undefined;
            }
          },
          WAIT,
        );
        expect(secret.type).toBe("kubernetes.io/tls");
        expect(Object.keys(secret.data).sort()).toEqual(["ca.crt", "ca.key", "tls.crt", "tls.key"]);
        const caBundle = await waitFor(
          "the caBundle set",
          async () => (await admin.request<Vwc>("GET", vwcPath)).webhooks[0]!.clientConfig.caBundle,
          WAIT,
        );
        expect(caBundle).toBe(secret.data["ca.crt"]);
        const ca = new X509Certificate(Buffer.from(caBundle, "base64"));
        const cert = new X509Certificate(Buffer.from(secret.data["tls.crt"]!, "base64"));
        expect(ca.ca).toBe(true);
        expect(cert.checkIssued(ca) && cert.verify(ca.publicKey)).toBe(true);
        expect(cert.checkHost(`${service}.${ns}.svc`)).toBe(`${service}.${ns}.svc`);
        // The certificate the webhook serves is that one.
        await waitFor(
          "the webhook serving the Secret's certificate",
          async () => (await presentedCertificate(port, `${service}.${ns}.svc`)) === cert.fingerprint256,
          WAIT,
        );

        // Admission through the API server: an author who may not read the source is refused
        // with the webhook's reason (a call that failed TLS would fail with "failed calling
        // webhook" instead), and one who may is admitted.
        const src = await createNamespace(admin, "helm-webhook-src");
        await createConfigMap(admin, src, "db", { host: "db.example" });
        const author = uniqueName("author");
        await createRole(admin, "referable-author", [
          { apiGroups: ["referable.dev"], resources: ["referables"], verbs: ["create", "get"] },
        ]);
        await bindRole(admin, "referable-author", "referable-author", [user(author)]);
        const referable = (name: string) => ({
          apiVersion: "referable.dev/v1alpha1",
          kind: "Referable",
          metadata: { name },
          spec: {
            source: {
              apiVersion: "v1",
              kind: "ConfigMap",
              namespace: src,
              name: "db",
              fieldPath: "data.host",
            },
          },
        });
        const asAuthor = impersonating(kubeconfig, author);
        try {
          await waitFor(
            "the webhook refusing an author who may not read the source",
            async () => {
              try {
                await asAuthor.request("POST", RF, { body: referable(uniqueName("refused")) });
                throw new Error("a Referable of an author who may not read its source was admitted");
              } catch (err) {
                const message = (err as Error).message;
                if (message.includes(REFUSAL_SUFFIX)) return true;
                if (message.includes("admitted")) throw err;
                // The API server's webhook client may not have seen the caBundle yet.
                return undefined;
              }
            },
            WAIT,
          );
        } finally {
          await asAuthor.close();
        }
        await admin.request("POST", RF, { body: referable(uniqueName("admitted")) });
      } catch (err) {
        throw new Error(`${(err as Error).message}\n${logs()}`);
      }
      expect(controller.logs().filter(isErrorLine)).toEqual([]);
      expect(await controller.stop()).toEqual({ code: 0, signal: null });
      controller = undefined;
    },
    STEP_MS * 2,
  );
});

/** The SHA-256 fingerprint of the certificate served on 127.0.0.1:`port` for `servername`. */
function presentedCertificate(port: number, servername: string): Promise<string | undefined> {
  return new Promise((resolve) => {
    const socket = tlsConnect({ host: "127.0.0.1", port, servername, rejectUnauthorized: false }, () => {
      const fingerprint = socket.getPeerX509Certificate()?.fingerprint256;
      socket.end();
      resolve(fingerprint);
    });
    socket.on("error", () => resolve(undefined));
  });
}

/** A client of the control plane at `kubeconfigPath` acting as `username` (impersonation by its admin). */
function impersonating(kubeconfigPath: string, username: string): KubeClient {
  const kc = new KubeConfig();
  kc.loadFromFile(kubeconfigPath);
  // The server's words quoted, as the harness's own clients do: the refusal is told by the webhook's.
  return new KubeClient({ kubeConfig: impersonatingKubeConfig(kc, username), serverMessages: true });
}
