/**
 * The controller's Deployment as deploy/ renders it, read the way the kubelet would: the tests
 * that run it (as local processes, or as the image under podman) share its types and its env.
 */
import type { LabelSelector } from "../../src/informers/label-selector.ts";
import type { KubeObject } from "../../src/kube/client.ts";

export interface Container {
  name: string;
  image: string;
  command?: string[];
  args?: string[];
  env?: Array<{ name: string; value?: string; valueFrom?: { fieldRef?: { fieldPath: string } } }>;
  ports?: Array<{ name: string; containerPort: number }>;
  livenessProbe?: { httpGet: { path: string; port: string | number } };
  readinessProbe?: { httpGet: { path: string; port: string | number } };
  volumeMounts?: Array<{ name: string; mountPath: string; readOnly?: boolean }>;
  resources?: { requests?: Record<string, string>; limits?: Record<string, string> };
  securityContext?: Record<string, unknown>;
}

export interface PodSpec {
  serviceAccountName: string;
  terminationGracePeriodSeconds: number;
  securityContext: Record<string, unknown>;
  containers: Container[];
  volumes?: Array<{ name: string; secret?: { secretName: string } }>;
}

export interface Deployment extends KubeObject {
  metadata: NonNullable<KubeObject["metadata"]> & { name: string; namespace: string };
  spec: {
    replicas: number;
    selector: LabelSelector;
    template: { metadata: { labels: Record<string, string> }; spec: PodSpec };
  };
}

/** The Deployment's container named controller. */
export function controllerContainer(deployment: Deployment): Container {
  const c = deployment.spec.template.spec.containers.find((x) => x.name === "controller");
  if (!c) throw new Error("the Deployment has no container named controller");
  return c;
}

/** The container's env as the kubelet resolves it for a pod named `podName`. */
export function podEnv(
  deployment: Deployment,
  container: Container,
  podName: string,
): Record<string, string> {
  const env: Record<string, string> = {};
  for (const e of container.env ?? []) {
    const field = e.valueFrom?.fieldRef?.fieldPath;
    if (e.value !== undefined) env[e.name] = e.value;
    else if (field === "metadata.name") env[e.name] = podName;
    else if (field === "metadata.namespace") env[e.name] = deployment.metadata.namespace;
    else throw new Error(`env ${e.name}: the test does not emulate ${JSON.stringify(e.valueFrom)}`);
  }
  return env;
}
