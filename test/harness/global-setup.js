// Jest global setup of the integration project: one control plane for the whole run, shared by
// every test file through the environment (Jest starts its workers after this returns).
// Plain JavaScript on purpose: Jest loads global setup's imports with Node's own loader, which
// runs control-plane.ts directly (Node 24 strips types) but knows nothing of Jest's mappers.
import { startControlPlane } from "./control-plane.ts";

export default async function globalSetup() {
  const plane = await startControlPlane();
  process.env.REFERABLE_TEST_KUBECONFIG = plane.kubeconfigPath;
  process.env.REFERABLE_TEST_KUBE_VERSION = plane.version;
  if (plane.binDir) process.env.REFERABLE_TEST_BIN_DIR = plane.binDir;
  globalThis.__referableControlPlane = plane;
  process.stderr.write(
    `\nintegration tests run against kube-apiserver ${plane.version} at ${plane.server}\n`,
  );
}
