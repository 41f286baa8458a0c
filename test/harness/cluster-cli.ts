/**
 * `npm run cluster`: starts the test control plane for a person and keeps it until Ctrl-C.
 */
import { startControlPlane } from "./control-plane.ts";

const plane = await startControlPlane();
const kubectl = plane.binDir ? `${plane.binDir}/kubectl` : "kubectl";
process.stdout.write(
  [
    "",
    `kube-apiserver ${plane.version} is running at ${plane.server}`,
    "Point kubectl at it:",
    `  export KUBECONFIG=${plane.kubeconfigPath}`,
    `  ${kubectl} get --raw /version`,
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
