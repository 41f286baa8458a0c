/**
 * The real consumers read a Referable on the first try, from the manifests docs/consuming.md
 * shows (examples/consumers/): kro through `${ref.status.text}` in a
 * ResourceGraphDefinition, and provider-kubernetes through an Object's
 * `patchesFrom: status.text` of a number value, each following a change of the source. Both are
 * built from the Go module proxy at the versions scripts/consumer-binaries.sh pins (the one place
 * they are written; README.md and docs/consuming.md name them, test/unit/consumer-versions.test.ts
 * checks) and run as their own processes;
 * provider-kubernetes in a network namespace of its own, as the only identity that reads
 * Referables with exactly the consumer roles of deploy/base/rbac-consumer.yaml.
 */
import { execFile } from "node:child_process";
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { randomBytes } from "node:crypto";
import { loadAll } from "js-yaml";
import type { KubeClient, KubeObject } from "../../src/kube/client.ts";
import { repoRoot } from "../harness/control-plane.ts";
import { KUBECTL } from "../harness/kubectl.ts";
import { consumerBinaries, startIsolated, startOnHost, type ConsumerProcess } from "../harness/consumers.ts";
import { SHARD_LABEL, startTestController, type TestController } from "../harness/controller.ts";
import {
  adminClient,
  closeTestClients,
  kubeConfigWithToken,
  serviceAccountToken,
  testKubeConfig,
  waitFor,
} from "../harness/kube.ts";

const execFileAsync = promisify(execFile);
const EXAMPLES = join(repoRoot, "examples", "consumers");
/** A first build of both consumers takes minutes; a cached one, a second. */
const SETUP_MS = 20 * 60_000;
const STEP_MS = 120_000;
const WAIT = { timeoutMs: 60_000, intervalMs: 100 };

type Obj = KubeObject &
  Record<string, unknown> & { metadata: { name: string; finalizers?: string[] } & Record<string, unknown> };

let admin: KubeClient;
let tc: TestController;
let binDir: string;
let dir: string;
/** Replaces "consumers-example" (and the kro kind's "ConsumersExample") in the manifests. */
let id: string;
let kindId: string;
const processes: ConsumerProcess[] = [];

beforeAll(async () => {
  admin = adminClient();
  binDir = await consumerBinaries();
  dir = await mkdtemp(join(tmpdir(), "referable-consumers-"));
  const hex = randomBytes(4).toString("hex");
  id = `consumers-${hex}`;
  kindId = `Consumers${hex.toUpperCase().replace(/[0-9]/g, (d) => "ABCDEFGHIJ"[Number(d)]!)}`;
  tc = await startTestController();
  await apply(await manifest("referables.yaml"));
}, SETUP_MS);

afterAll(async () => {
  for (const p of processes) await p.stop();
  await tc?.stop();
  await closeTestClients();
  if (dir) await rm(dir, { recursive: true, force: true });
});

/** The documents of an example manifest, renamed for this run; Referables get the test shard. */
async function manifest(file: string): Promise<Obj[]> {
  const text = (await readFile(join(EXAMPLES, file), "utf8"))
    .replaceAll("consumers-example", id)
    .replaceAll("ConsumersExample", kindId);
  const docs = (loadAll(text) as Array<Obj | null>).filter((d): d is Obj => d !== null);
  for (const d of docs)
    if (d.kind === "Referable") d.metadata = { ...d.metadata, labels: { [SHARD_LABEL]: tc.shard } };
  return docs;
}

async function kubectl(args: string[], input?: string): Promise<string> {
  const env = { ...process.env, KUBECONFIG: process.env.REFERABLE_TEST_KUBECONFIG };
  const child = execFileAsync(KUBECTL, args, { env, maxBuffer: 16 << 20 });
  if (input !== undefined) {
    child.child.stdin!.end(input);
  }
  return (await child).stdout;
}

async function apply(objects: Obj[]): Promise<void> {
  await kubectl(
    ["apply", "--server-side", "--field-manager=consumers-test", "-f", "-"],
    JSON.stringify({ apiVersion: "v1", kind: "List", items: objects }),
  );
}

async function installCrds(folder: string, edit: (crd: Obj) => Obj = (c) => c): Promise<void> {
  const crds: Obj[] = [];
  for (const file of (await readdir(folder)).filter((f) => f.endsWith(".yaml")).sort())
    for (const doc of loadAll(await readFile(join(folder, file), "utf8")) as Array<Obj | null>)
      if (doc) crds.push(edit(doc));
  await apply(crds);
  for (const crd of crds)
    await kubectl(["wait", "--for=condition=Established", "--timeout=60s", `crd/${crd.metadata.name}`]);
}

async function configMapData(namespace: string, name: string): Promise<Record<string, string> | undefined> {
  const cm = await admin
    .request<{ data?: Record<string, string> }>("GET", `/api/v1/namespaces/${namespace}/configmaps/${name}`)
    .catch(() => undefined);
  return cm?.data;
}

async function waitForKey(
  namespace: string,
  name: string,
  key: string,
  want: string,
  consumer: ConsumerProcess,
) {
  try {
    await waitFor(
      `${key}=${want} in ConfigMap ${namespace}/${name}`,
      async () => {
        const data = await configMapData(namespace, name);
        return data?.[key] === want;
      },
      WAIT,
    );
  } catch (err) {
    throw new Error(`${(err as Error).message}\n--- the consumer's log ends with:\n${consumer.tail()}`);
  }
}

describe("kubectl reads status.text", () => {
  it(
    "the commands of examples/consumers/kubectl/wait.sh: wait for Ready, print the text, wait for a value",
    async () => {
      const script = (await readFile(join(EXAMPLES, "kubectl", "wait.sh"), "utf8")).replaceAll(
        "consumers-example",
        id,
      );
      const commands = script
        .split("\n")
        .filter((l) => l.startsWith("kubectl "))
        .map((l) =>
          l
            .slice("kubectl ".length)
            .split(" ")
            .map((arg) => arg.replaceAll("'", "")),
        );
      expect(commands).toHaveLength(3);
      await kubectl(commands[0]!);
      expect(await kubectl(commands[1]!)).toBe("5432");
      await kubectl(commands[2]!);
    },
    STEP_MS,
  );
});

describe("Argo CD, Helm and Deployments read an exported key", () => {
  it(
    "examples/consumers/export/export.yaml keeps the port in a ConfigMap key, as text",
    async () => {
      await apply(await manifest("export/export.yaml"));
      const cm = await waitFor(
        "the exported key",
        async () => (await configMapData(id, `${id}-settings`))?.DATABASE_PORT,
        WAIT,
      );
      expect(cm).toBe("5432");
    },
    STEP_MS,
  );
});

describe("Crossplane compositions (not run: no Crossplane here)", () => {
  it("examples/consumers/crossplane/composition.yaml parses and templates status.text", async () => {
    const [composition] = await manifest("crossplane/composition.yaml");
    expect(composition).toMatchObject({ kind: "Composition", spec: { mode: "Pipeline" } });
    expect(JSON.stringify(composition)).toContain("$rf.status.text");
  });
});

describe("kro reads ${ref.status.text}", () => {
  it(
    "a ResourceGraphDefinition reads the value with no cast, and its ConfigMap follows the source",
    async () => {
      await installCrds(join(binDir, "kro-crds"));
      // kro acts as the cluster's admin: it creates CRDs and whatever its graphs hold.
      const kro = startOnHost(
        join(binDir, "kro"),
        [
          "--metrics-bind-address=0",
          "--health-probe-bind-address=0",
          `--kubeconfig=${process.env.REFERABLE_TEST_KUBECONFIG}`,
        ],
        {},
        join(dir, "kro.log"),
      );
      processes.push(kro);
      const [rgd] = await manifest("kro/resourcegraphdefinition.yaml");
      await apply([rgd!]);
      // The graph is accepted only if `${host.status.text}` type-checks against the CRD.
      await waitFor(
        `ResourceGraphDefinition ${rgd!.metadata.name} Active`,
        async () => {
          const got = await admin.request<{ status?: { state?: string } }>(
            "GET",
            `/apis/kro.run/v1alpha1/resourcegraphdefinitions/${rgd!.metadata.name}`,
          );
          return got.status?.state === "Active";
        },
        WAIT,
      ).catch(async (err: Error) => {
        const got = await admin.request(
          "GET",
          `/apis/kro.run/v1alpha1/resourcegraphdefinitions/${rgd!.metadata.name}`,
        );
        throw new Error(`${err.message}: ${JSON.stringify((got as Obj).status)}\n${kro.tail()}`);
      });
      const [instance] = await manifest("kro/instance.yaml");
      await waitFor(
        "kro's CRD for the instance kind",
        async () => {
          await apply([instance!]);
          return true;
        },
        WAIT,
      );
      const target = `${id}-from-kro`;
      await waitForKey(id, target, "DATABASE_HOST", "db.internal", kro);
      await admin.request("PATCH", `/api/v1/namespaces/${id}/configmaps/${id}-db`, {
        body: { data: { host: "db2.internal" } },
        contentType: "application/merge-patch+json",
      });
      await waitForKey(id, target, "DATABASE_HOST", "db2.internal", kro);
    },
    STEP_MS,
  );
});

describe("provider-kubernetes reads status.text of a number", () => {
  it(
    "an Object patches the port into a string field, with only the consumer roles on Referables, and follows the source",
    async () => {
      // Crossplane would set the conversion webhook's Service; without Crossplane, only the
      // storage version v1alpha2 is used, so no conversion is needed.
      await installCrds(join(binDir, "provider-kubernetes-crds"), (crd) => {
        const spec = crd.spec as { conversion?: unknown };
        if (spec.conversion) spec.conversion = { strategy: "None" };
        return crd;
      });

      // The provider's identity: its own API groups (as Crossplane's RBAC manager grants), the
      // Secrets (the ProviderConfig's credentials), and, for Referables, exactly the consumer roles of deploy/.
      const ns = id;
      const sa = "provider-kubernetes";
      const token = await serviceAccountToken(admin, ns, sa);
      await apply([
        {
          apiVersion: "rbac.authorization.k8s.io/v1",
          kind: "ClusterRole",
          metadata: { name: `${id}-provider` },
          rules: [
            {
              apiGroups: ["kubernetes.crossplane.io", "kubernetes.m.crossplane.io"],
              resources: ["*"],
              verbs: ["*"],
            },
            {
              apiGroups: ["apiextensions.k8s.io"],
              resources: ["customresourcedefinitions"],
              verbs: ["get", "list", "watch"],
            },
            { apiGroups: ["", "events.k8s.io"], resources: ["events"], verbs: ["create", "patch", "update"] },
            { apiGroups: ["coordination.k8s.io"], resources: ["leases"], verbs: ["*"] },
            // Crossplane grants every provider this: its manager caches Secrets cluster-wide.
            { apiGroups: [""], resources: ["secrets"], verbs: ["get", "list", "watch"] },
          ],
        } as unknown as Obj,
        binding(`${id}-provider`, `${id}-provider`, ns, sa),
      ]);
      // The consumer roles as deploy/ ships them, under names of this run (deploy.test.ts applies
      // deploy/ itself to the same cluster), bound by the example's own bindings.
      const roles = (
        loadAll(await readFile(join(repoRoot, "deploy", "base", "rbac-consumer.yaml"), "utf8")) as Obj[]
      )
        .filter((o) => o?.kind === "ClusterRole")
        .map((o) => ({ ...o, metadata: { name: `${id}-${o.metadata.name}` } }));
      expect(roles.map((r) => r.metadata.name)).toEqual([
        `${id}-referable-consumer`,
        `${id}-referable-consumer-finalizers`,
      ]);
      const bindings = (await manifest("provider-kubernetes/rbac.yaml")).map((b) => {
        const copy = structuredClone(b) as Obj & {
          roleRef: { name: string };
          subjects: Array<{ namespace: string }>;
        };
        copy.roleRef.name = `${id}-${copy.roleRef.name}`;
        copy.subjects[0]!.namespace = ns;
        return copy as Obj;
      });
      await apply([...roles, ...bindings]);

      // Where the provider applies its manifests: this cluster, as its admin, through a kubeconfig
      // in a Secret (the ProviderConfig's credentials).
      const adminConfig = testKubeConfig().exportConfig();
      await apply([
        {
          apiVersion: "v1",
          kind: "Secret",
          metadata: { name: "cluster-config", namespace: ns },
          stringData: { kubeconfig: adminConfig },
        } as unknown as Obj,
        {
          apiVersion: "kubernetes.crossplane.io/v1alpha1",
          kind: "ProviderConfig",
          metadata: { name: id },
          spec: {
            credentials: {
              source: "Secret",
              secretRef: { namespace: ns, name: "cluster-config", key: "kubeconfig" },
            },
          },
        } as unknown as Obj,
      ]);

      const kubeconfig = join(dir, "provider.kubeconfig");
      await writeFile(kubeconfig, kubeConfigWithToken(token).exportConfig());
      const certs = join(dir, "provider-certs");
      await mkdir(certs);
      await execFileAsync("openssl", [
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-days",
        "1",
        "-subj",
        "/CN=provider-kubernetes",
        "-keyout",
        join(certs, "tls.key"),
        "-out",
        join(certs, "tls.crt"),
      ]);
      const server = new URL(testKubeConfig().getCurrentCluster()!.server).origin;
      const provider = await startIsolated(
        server,
        join(binDir, "provider-kubernetes"),
        ["--enable-watches", "--debug"],
        { KUBECONFIG: kubeconfig, TLS_SERVER_CERTS_DIR: certs },
        join(dir, "provider-kubernetes.log"),
      );
      processes.push(provider);

      const [object] = await manifest("provider-kubernetes/object.yaml");
      await apply([object!]);
      const target = `${id}-from-provider`;
      await waitForKey(ns, target, "DATABASE_PORT", "5432", provider);
      expect(await configMapData(ns, target)).toMatchObject({ DATABASE_NAME: "app" });
      // Its finalizer on the Referable is what needs the finalizers role.
      const rf = await admin.request<Obj>("GET", `/apis/referable.dev/v1alpha1/referables/${id}-port`);
      expect(
        (rf.metadata.finalizers ?? []).some((f) =>
          f.startsWith("kubernetes.crossplane.io/referred-by-object-"),
        ),
      ).toBe(true);

      await admin.request("PATCH", `/api/v1/namespaces/${ns}/services/${id}-db`, {
        body: { spec: { ports: [{ port: 6543 }] } },
        contentType: "application/merge-patch+json",
      });
      await waitForKey(ns, target, "DATABASE_PORT", "6543", provider);
    },
    STEP_MS,
  );
});

function binding(name: string, role: string, namespace: string, sa: string): Obj {
  return {
    apiVersion: "rbac.authorization.k8s.io/v1",
    kind: "ClusterRoleBinding",
    metadata: { name },
    roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name: role },
    subjects: [{ kind: "ServiceAccount", name: sa, namespace }],
  } as unknown as Obj;
}
