/**
 * The real consumers the tests read Referables with: kro and provider-kubernetes, built from the
 * Go module proxy by scripts/consumer-binaries.sh (cached; CI builds them before the tests), run
 * as processes. provider-kubernetes binds :8080 and :9443 on every interface, so it runs in a
 * network namespace of its own, reaching the API server through a unix socket (see
 * netns-forwarder.js); nothing it opens is reachable from the host.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { createWriteStream } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { repoRoot } from "./control-plane.ts";
import { forwardTo } from "./netns-host.ts";
import { stopProcessGroup } from "./process-group.ts";

/** Builds (once) or finds kro and provider-kubernetes; returns their folder. */
export async function consumerBinaries(): Promise<string> {
  const script = join(repoRoot, "scripts", "consumer-binaries.sh");
  return new Promise((resolve, reject) => {
    const child = spawn("bash", [script], { stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    let err = "";
    child.stdout.on("data", (d: Buffer) => (out += d.toString()));
    child.stderr.on("data", (d: Buffer) => {
      err += d.toString();
      process.stderr.write(d);
    });
    child.on("error", reject);
    child.on("exit", (code) => {
      const dir = out.trim().split("\n").pop();
      if (code === 0 && dir) resolve(dir);
      else
        reject(new Error(`building kro and provider-kubernetes failed (exit ${code}): ${err.slice(-2000)}`));
    });
  });
}

/** A consumer process and its log. */
export interface ConsumerProcess {
  /** The last `bytes` of what it wrote (stdout and stderr), for failure messages. */
  tail(bytes?: number): string;
  /** Stops it (SIGTERM, then SIGKILL after 10 s) and everything it started. */
  stop(): Promise<void>;
}

interface Started {
  child: ChildProcess;
  output: string[];
  cleanup: () => Promise<void>;
}

function track(child: ChildProcess, logFile: string | undefined): string[] {
  const output: string[] = [];
  const file = logFile ? createWriteStream(logFile) : undefined;
  const keep = (d: Buffer) => {
    output.push(d.toString());
    while (output.length > 400) output.shift();
    file?.write(d);
  };
  child.stdout?.on("data", keep);
  child.stderr?.on("data", keep);
  child.on("close", () => file?.end());
  return output;
}

function handle({ child, output, cleanup }: Started): ConsumerProcess {
  const exited = new Promise<void>((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) resolve();
    else child.once("close", () => resolve());
  });
  return {
    tail: (bytes = 4000) => output.join("").slice(-bytes),
    async stop() {
      // The whole process group: the forwarder and the consumer it runs.
      await stopProcessGroup(child, exited);
      await cleanup();
    },
  };
}

/** Runs `command` on the host (for a consumer whose listeners can all be turned off: kro). */
export function startOnHost(
  command: string,
  args: string[],
  env: Record<string, string>,
  logFile?: string,
): ConsumerProcess {
  const child = spawn(command, args, {
    env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "/root", ...env },
    stdio: ["ignore", "pipe", "pipe"],
    detached: true,
  });
  return handle({ child, output: track(child, logFile), cleanup: async () => undefined });
}

/**
 * Runs `command` in a network namespace of its own (`unshare -n`, loopback up), where
 * 127.0.0.1:PORT of `apiServer` (https://127.0.0.1:PORT) reaches the real API server, so the same
 * kubeconfig works inside. Needs root (CAP_SYS_ADMIN), as CI has.
 */
export async function startIsolated(
  apiServer: string,
  command: string,
  args: string[],
  env: Record<string, string>,
  logFile?: string,
): Promise<ConsumerProcess> {
  const target = new URL(apiServer);
  if (target.hostname !== "127.0.0.1")
    throw new Error(`startIsolated forwards to 127.0.0.1 only, not ${apiServer}`);
  const dir = await mkdtemp(join(tmpdir(), "referable-netns-"));
  const socket = join(dir, "apiserver.sock");
  const server = await forwardTo(socket, Number(target.port));
  const forwarder = fileURLToPath(new URL("./netns-forwarder.js", import.meta.url));
  const inner = [process.execPath, forwarder, target.port, socket, command, ...args]
    .map(shellQuote)
    .join(" ");
  const child = spawn("unshare", ["-n", "sh", "-c", `ip link set lo up && exec ${inner}`], {
    env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "/root", ...env },
    stdio: ["ignore", "pipe", "pipe"],
    detached: true,
  });
  const cleanup = async () => {
    await new Promise<void>((resolve) => server.close(() => resolve()));
    await rm(dir, { recursive: true, force: true });
  };
  return handle({ child, output: track(child, logFile), cleanup });
}

function shellQuote(s: string): string {
  return `'${s.replace(/'/g, `'\\''`)}'`;
}
