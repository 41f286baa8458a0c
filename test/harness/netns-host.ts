/**
 * A test host of the test's own: a network namespace (`ip netns add`) joined to this one by a
 * veth pair, with a /30 of the benchmarking range 198.18.0.0/15 (RFC 2544, never routed
 * anywhere): 198.18.x.y+1 on the host end, 198.18.x.y+2 in the namespace. Inside, a forwarder
 * (netns-host-forwarder.js) listens on the namespace's address and passes each connection
 * through a unix socket to the test process, which passes it on to a listener on 127.0.0.1.
 *
 * So a peer that must be given a non-loopback address (the API server calling a webhook through
 * Endpoints, which refuse loopback) connects only to an address this test made, never to one of
 * the machine's own interfaces. Needs root and iproute2, as CI has.
 */
import { execFile, spawn, type ChildProcess } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { connect, createServer, type Server } from "node:net";
import { tmpdir } from "node:os";
import { delimiter, join } from "node:path";
import { fileURLToPath } from "node:url";
import { stopProcessGroup } from "./process-group.ts";

/** A test host in a network namespace, forwarding one port to a listener on 127.0.0.1. */
export interface NetnsHost {
  /** The namespace's address (198.18.x.y): the only one a peer is given. */
  readonly address: string;
  /** The namespace's name, for `ip netns list`. */
  readonly name: string;
  /** What the forwarder wrote, for failure messages. */
  tail(): string;
  /** Kills the forwarder, deletes the namespace (and with it the veth pair), removes the socket. */
  stop(): Promise<void>;
}

/** Why no test host can be made here (undefined when one can): for `itIf`. */
export function netnsUnavailable(): string | undefined {
  const onPath = (process.env.PATH ?? "").split(delimiter).some((dir) => dir && existsSync(join(dir, "ip")));
  if (!onPath) return "no `ip` (iproute2) on PATH to make the test host's network namespace";
  if (process.getuid?.() !== 0) return "making the test host's network namespace (`ip netns add`) needs root";
  return undefined;
}

const PREFIX = "referable-host";
const START_MS = 30_000;

/**
 * Makes a test host whose `address`:`port` reaches 127.0.0.1:`targetPort`. Throws, with what
 * failed, when it cannot; whatever it made until then is removed.
 */
export async function startNetnsHost(port: number, targetPort: number): Promise<NetnsHost> {
  await sweepStale();
  const id = Math.floor(Math.random() * 0xffffff)
    .toString(16)
    .padStart(6, "0");
  const name = `${PREFIX}-${process.pid}-${id}`;
  const hostEnd = `rfh${id}`;
  const innerEnd = `rfn${id}`;
  const [hostAddress, address] = await freeSubnet();
  const dir = await mkdtemp(join(tmpdir(), "referable-netns-host-"));
  const socket = join(dir, "forward.sock");
  let server: Server | undefined;
  let child: ChildProcess | undefined;
  const output: string[] = [];
  const stop = async () => {
    if (child) await killGroup(child);
    if (server) await new Promise<void>((resolve) => server!.close(() => resolve()));
    await ip("netns", "del", name).catch(() => undefined);
    // Deleting the namespace deletes the veth pair; this only catches a pair made before it failed.
    await ip("link", "del", hostEnd).catch(() => undefined);
    await rm(dir, { recursive: true, force: true });
  };
  try {
    await ip("netns", "add", name);
    await ip("link", "add", hostEnd, "type", "veth", "peer", "name", innerEnd);
    await ip("link", "set", innerEnd, "netns", name);
    await ip("addr", "add", `${hostAddress}/30`, "dev", hostEnd);
    await ip("link", "set", hostEnd, "up");
    await ip("-n", name, "addr", "add", `${address}/30`, "dev", innerEnd);
    await ip("-n", name, "link", "set", innerEnd, "up");
    await ip("-n", name, "link", "set", "lo", "up");
    server = await forwardTo(socket, targetPort);
    const script = fileURLToPath(new URL("./netns-host-forwarder.js", import.meta.url));
    child = spawn("ip", ["netns", "exec", name, process.execPath, script, address, String(port), socket], {
      stdio: ["ignore", "pipe", "pipe"],
      detached: true,
    });
    await listening(child, output);
  } catch (err) {
    await stop();
    throw new Error(
      `cannot make the test host ${name} (${address}; needs root and iproute2's \`ip netns\`): ` +
        `${(err as Error).message}${output.length ? `\n${output.join("")}` : ""}`,
    );
  }
  return { address, name, tail: () => output.join("").slice(-4000), stop };
}

/** Runs `ip ARGS...`; rejects with its stderr. */
function ip(...args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile("ip", args, (err, stdout, stderr) => {
      if (err) reject(new Error(`ip ${args.join(" ")}: ${stderr.trim() || err.message}`));
      else resolve(stdout);
    });
  });
}

/** A /30 of 198.18.0.0/15 no interface here has an address in: [host end, namespace end]. */
async function freeSubnet(): Promise<[string, string]> {
  const used = new Set(
    [...(await ip("-4", "-o", "addr", "show")).matchAll(/inet (198\.1[89]\.\d+)\.(\d+)\//g)].map(
      (m) => `${m[1]}.${Number(m[2]) & ~3}`,
    ),
  );
  for (let attempt = 0; attempt < 100; attempt++) {
    const third = Math.floor(Math.random() * 512);
    const base = `198.${18 + (third >> 8)}.${third & 255}`;
    const fourth = Math.floor(Math.random() * 64) * 4;
    if (!used.has(`${base}.${fourth}`)) return [`${base}.${fourth + 1}`, `${base}.${fourth + 2}`];
  }
  throw new Error("no free /30 in 198.18.0.0/15");
}

/** Listens on the unix socket `path`, passing each connection on to 127.0.0.1:`port`. */
export async function forwardTo(path: string, port: number): Promise<Server> {
  const server = createServer((inner) => {
    const outer = connect(port, "127.0.0.1");
    inner.pipe(outer).pipe(inner);
    inner.on("error", () => outer.destroy());
    outer.on("error", () => inner.destroy());
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(path, () => resolve());
  });
  return server;
}

/** Resolves once the forwarder says it listens; rejects when it exits first or takes too long. */
function listening(child: ChildProcess, output: string[]): Promise<void> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`the forwarder did not listen in ${START_MS} ms`)),
      START_MS,
    );
    const keep = (d: Buffer) => {
      output.push(d.toString());
      if (output.join("").includes("listening\n")) {
        clearTimeout(timer);
        resolve();
      }
    };
    child.stdout!.on("data", keep);
    child.stderr!.on("data", keep);
    child.once("error", (err) => {
      clearTimeout(timer);
      reject(err);
    });
    child.once("exit", (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`the forwarder exited (${signal ?? code}) before it listened`));
    });
  });
}

/** SIGTERM to the child's process group, SIGKILL after 10 s; resolves once it exited. */
async function killGroup(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null || !child.pid) return;
  await stopProcessGroup(child, new Promise<void>((resolve) => child.once("exit", () => resolve())));
}

/** Removes the test hosts of test processes that died without cleaning up (their pid is in the name). */
async function sweepStale(): Promise<void> {
  const names = (await ip("netns", "list").catch(() => ""))
    .split("\n")
    .map((line) => line.split(" ")[0]!)
    .filter((n) => n.startsWith(`${PREFIX}-`));
  for (const name of names) {
    const pid = Number(name.slice(PREFIX.length + 1).split("-")[0]);
    if (!Number.isInteger(pid) || pid === process.pid || alive(pid)) continue;
    for (const p of (await ip("netns", "pids", name).catch(() => "")).split(/\s+/).filter(Boolean))
      alive(Number(p), "SIGKILL");
    await ip("netns", "del", name).catch(() => undefined);
  }
}

/** Whether `pid` is alive (signal 0), or sends it `signal`. */
function alive(pid: number, signal: NodeJS.Signals | 0 = 0): boolean {
  try {
    process.kill(pid, signal);
    return true;
  } catch {
    return false;
  }
}
