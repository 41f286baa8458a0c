/**
 * Diagnostics of kube-apiserver for the scale scenario, on when BENCH_APISERVER_DIAG names a
 * directory: its /metrics at the edges of a phase and a CPU profile (/debug/pprof/profile) of a
 * window inside it, fetched with curl and the control plane's admin certificate. Off, nothing.
 */
import { execFile } from "node:child_process";
import { mkdir, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { promisify } from "node:util";

const run = promisify(execFile);
const DIR = process.env.BENCH_APISERVER_DIAG;

interface Access {
  server: string;
  args: string[];
}
let access: Promise<Access> | undefined;

async function accessOf(kubeconfigPath: string): Promise<Access> {
  const kc = JSON.parse(await readFile(kubeconfigPath, "utf8")) as {
    clusters: { cluster: { server: string } }[];
    users: { user: Record<string, string> }[];
  };
  await mkdir(DIR!, { recursive: true });
  const cert = join(DIR!, "admin.crt");
  const key = join(DIR!, "admin.key");
  await writeFile(cert, Buffer.from(kc.users[0]!.user["client-certificate-data"]!, "base64"));
  await writeFile(key, Buffer.from(kc.users[0]!.user["client-key-data"]!, "base64"), { mode: 0o600 });
  return { server: kc.clusters[0]!.cluster.server, args: ["-sk", "--cert", cert, "--key", key] };
}

/** Saves kube-apiserver's /metrics as `<label>.metrics`. */
export async function apiServerMetrics(kubeconfigPath: string, label: string): Promise<void> {
  if (!DIR) return;
  const a = await (access ??= accessOf(kubeconfigPath));
  await run("curl", [...a.args, "-o", join(DIR, `${label}.metrics`), `${a.server}/metrics`]);
}

/** Starts a CPU profile of `seconds` after `delayMs`; saved as `<label>.pb.gz`. Not awaited by callers. */
export function apiServerProfile(
  kubeconfigPath: string,
  label: string,
  delayMs: number,
  seconds: number,
): void {
  if (!DIR) return;
  setTimeout(() => {
    void (async () => {
      const a = await (access ??= accessOf(kubeconfigPath));
      await run("curl", [
        ...a.args,
        "-o",
        join(DIR, `${label}.pb.gz`),
        `${a.server}/debug/pprof/profile?seconds=${seconds}`,
      ]);
    })().catch((err: unknown) => console.error(`apiserver-diag: ${String(err)}`));
  }, delayMs).unref();
}
