// Stops the control plane of the global setup (the harness's reaper covers an interrupted run).
export default async function globalTeardown() {
  await globalThis.__referableControlPlane?.stop();
}
