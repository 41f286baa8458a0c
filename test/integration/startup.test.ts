/**
 * Start-up problems of the controller process, on a real control plane of its own (it begins
 * without the Referable CRD, which the shared one always has): no CRD, no RBAC to watch
 * Referables, and leader election on with no namespace for the Lease. Each must be one log line
 * that says the fix and a failing /readyz that says it too, and fixing the cluster must be
 * enough: the same process then starts and becomes ready, without a restart.
 */
import { execFile } from "node:child_process";
import { dirname, join } from "node:path";
import { promisify } from "node:util";
import type { KubeClient } from "../../src/kube/client.ts";
import { repoRoot, type PrivateControlPlane } from "../harness/control-plane.ts";
import { startPrivatePlane } from "../harness/faults.ts";
import { serviceAccountToken, uniqueName, waitFor, writeTokenKubeconfig } from "../harness/kube.ts";
import {
  isErrorLine,
  killAllProcesses,
  startControllerProcess,
  type ControllerProcess,
  type LogLine,
} from "../harness/process.ts";

const execFileAsync = promisify(execFile);
/** Deadline of every wait: generous, for a loaded 2-core machine. */
const WAIT_MS = 60_000;

let plane: PrivateControlPlane;
let admin: KubeClient;

beforeAll(async () => {
  ({ plane, admin } = await startPrivatePlane("startup", { installCrds: false }));
}, 180_000);

afterAll(async () => {
  await killAllProcesses();
  await admin?.close();
  await plane?.stop();
});

/** GET /readyz of `p`: status and body (the body says why not ready). */
async function readyz(p: ControllerProcess): Promise<{ status: number; body: string }> {
  const res = await fetch(`http://127.0.0.1:${p.probePort}/readyz`, { signal: AbortSignal.timeout(5_000) });
  return { status: res.status, body: await res.text() };
}

/** A controller process on the private control plane, at debug level (to see each re-check). */
function start(kubeconfig: string, ...args: string[]): Promise<ControllerProcess> {
  return startControllerProcess(["--kubeconfig", kubeconfig, "--log-level", "debug", ...args], {
    kubeconfig: false,
  });
}

/** The error lines of `p` so far. */
function errors(p: ControllerProcess): LogLine[] {
  return p.logs().filter(isErrorLine);
}

/**
 * Waits for the one error line matching `pattern` and for /readyz to say the same, then for two
 * re-checks (so "one line" is not just "too early for a second"); returns the line.
 */
async function expectOneProblem(p: ControllerProcess, pattern: RegExp): Promise<LogLine> {
  const line = await p.waitForLog((l) => isErrorLine(l) && pattern.test(l.msg ?? ""), WAIT_MS);
  const probe = await readyz(p);
  expect(probe.status).toBe(503);
  expect(probe.body).toBe(line.msg);
  await waitFor(
    "two re-checks of the start-up problem",
    () => p.logs().filter((l) => l.msg === "start-up check still failing").length >= 2,
    { timeoutMs: WAIT_MS },
  );
  expect(errors(p).map((l) => l.msg)).toEqual([line.msg]);
  return line;
}

async function kubectl(...args: string[]): Promise<string> {
  const { stdout } = await execFileAsync(
    join(plane.binDir!, "kubectl"),
    [`--kubeconfig=${plane.kubeconfigPath}`, ...args],
    { cwd: repoRoot },
  );
  return stdout;
}

/** A kubeconfig for the private control plane that authenticates with `token`. */
function tokenKubeconfig(token: string, tag: string): Promise<string> {
  const path = join(dirname(plane.kubeconfigPath), `kubeconfig-${tag}`);
  return writeTokenKubeconfig(path, token, plane.kubeconfigPath);
}

describe("start-up problems", () => {
  it(
    "no Referable CRD: one line saying to apply crds/, /readyz says it, and installing the CRD is enough",
    async () => {
      const p = await start(plane.kubeconfigPath);
      const line = await expectOneProblem(p, /Referable CRD is not installed/);
      expect(line.msg).toContain("kubectl apply --server-side -f crds/");
      // The fix the line gives, exactly as given.
      await kubectl("apply", "--server-side", "-f", "crds/");
      await waitFor("/readyz 200 once the CRD is served", async () => (await readyz(p)).status === 200, {
        timeoutMs: WAIT_MS,
      });
      await p.waitForLog((l) => l.msg === "start-up checks pass now: starting", WAIT_MS);
      expect(await p.stop()).toEqual({ code: 0, signal: null });
    },
    3 * WAIT_MS,
  );

  it(
    "no RBAC to watch Referables: one line naming the missing verbs and the ClusterRole to bind",
    async () => {
      await kubectl("apply", "--server-side", "-f", "crds/");
      const ns = uniqueName("startup-rbac");
      await admin.request("POST", "/api/v1/namespaces", {
        body: { apiVersion: "v1", kind: "Namespace", metadata: { name: ns } },
      });
      const token = await serviceAccountToken(admin, ns, "controller");
      const p = await start(await tokenKubeconfig(token, ns));
      const line = await expectOneProblem(p, /RBAC does not let the controller/);
      expect(line.msg).toContain(
        "list referables.referable.dev, watch referables.referable.dev, patch referables.referable.dev/status",
      );
      expect(line.msg).toContain("ClusterRole referable-controller");
      expect(await p.stop()).toEqual({ code: 0, signal: null });
    },
    3 * WAIT_MS,
  );

  it(
    "leader election on and no namespace for the Lease: one line with the fixes, and creating it is enough",
    async () => {
      await kubectl("apply", "--server-side", "-f", "crds/");
      const ns = uniqueName("startup-lease");
      const p = await start(
        plane.kubeconfigPath,
        "--leader-elect=true",
        "--leader-election-namespace",
        ns,
        "--leader-election-id",
        "startup-test",
      );
      const line = await expectOneProblem(p, /does not exist/);
      expect(line.msg).toContain(`kubectl create namespace ${ns}`);
      expect(line.msg).toContain("--leader-elect=false");
      await admin.request("POST", "/api/v1/namespaces", {
        body: { apiVersion: "v1", kind: "Namespace", metadata: { name: ns } },
      });
      await waitFor("/readyz 200 once the namespace exists", async () => (await readyz(p)).status === 200, {
        timeoutMs: WAIT_MS,
      });
      // It really leads: the Lease is held by it.
      await waitFor(
        "the Lease held",
        async () => {
          const lease = await admin.request<{ spec?: { holderIdentity?: string } }>(
            "GET",
            `/apis/coordination.k8s.io/v1/namespaces/${ns}/leases/startup-test`,
          );
          return Boolean(lease.spec?.holderIdentity);
        },
        { timeoutMs: WAIT_MS },
      );
      expect(await p.stop()).toEqual({ code: 0, signal: null });
    },
    3 * WAIT_MS,
  );
});
