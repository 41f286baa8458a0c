/**
 * `npm run cluster`: starts the test control plane for a person and keeps it until Ctrl-C.
 */
import { parseOrExit } from "../../src/process/cli.ts";
import { startControlPlane } from "./control-plane.ts";

parseOrExit({
  usage: "npm run cluster",
  description:
    "Starts the test control plane (etcd + kube-apiserver, with the CRD of crds/) for a person, and keeps it until Ctrl-C.",
  flags: {},
});

const plane = await startControlPlane();
process.stdout.write(
  [
    "",
    `kube-apiserver ${plane.version} is running at ${plane.server}, with the CRD of crds/ installed.`,
    "In another terminal, point kubectl (the one built with the control plane) and the controller at it:",
    `  export KUBECONFIG=${plane.kubeconfigPath}`,
    ...(plane.binDir ? [`  export PATH=${plane.binDir}:$PATH`] : []),
    "  npm start",
    "and in a third (the same two exports), the examples:",
    "  kubectl apply -f examples/crds/ && kubectl wait --for=condition=Established -f examples/crds/ && kubectl apply -f examples/referables/",
    "  kubectl get rf",
    "Press Ctrl-C to stop it (both processes end and the temporary folder is removed).",
    "",
  ].join("\n"),
);
let stopping = false;
for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.on(signal, () => {
    if (stopping) return;
    stopping = true;
    void plane.stop().then(() => process.exit(0));
  });
}
setInterval(() => undefined, 1 << 30);
