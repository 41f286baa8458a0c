import { readFileSync } from "node:fs";
import { createServer } from "node:net";

/**
 * The kernel's ephemeral port range (`net.ipv4.ip_local_port_range`): ports it hands to
 * `listen(0)` and to every outgoing connection. A port picked there and closed again can be
 * taken by any connection of any process before the caller binds it (a CI run once lost a
 * controller to `EADDRINUSE` that way, with the other suites' connections beside it).
 */
function ephemeralRange(): [number, number] {
  try {
    const [lo, hi] = readFileSync("/proc/sys/net/ipv4/ip_local_port_range", "utf8")
      .trim()
      .split(/\s+/)
      .map(Number);
    if (Number.isInteger(lo) && Number.isInteger(hi) && lo! > 0 && hi! >= lo!) return [lo!, hi!];
  } catch {
    // Not Linux: the IANA range, the default of most others.
  }
  return [49152, 65535];
}

/** Ports this process handed out: never twice, even once their first user let go. */
const handedOut = new Set<number>();
const LOWEST = 10_000;

/** Whether `port` can be bound on 127.0.0.1 right now (0: the OS picks); resolves with the port bound, or undefined. */
function tryListen(port: number): Promise<number | undefined> {
  return new Promise((resolve) => {
    const server = createServer();
    server.unref();
    server.once("error", () => resolve(undefined));
    server.listen(port, "127.0.0.1", () => {
      const address = server.address();
      server.close(() => resolve(typeof address === "object" && address ? address.port : undefined));
    });
  });
}

/**
 * A TCP port free on 127.0.0.1 right now, for a process the caller starts next. Picked at random
 * below the kernel's ephemeral range, where no outgoing connection ever takes it (only another
 * listener can, between this check and the bind: another test process picking the same one of
 * thousands), and never the same twice in this process.
 */
export async function freePort(): Promise<number> {
  const [ephemeralLow] = ephemeralRange();
  const span = ephemeralLow - LOWEST;
  for (let attempt = 0; span > 100 && attempt < 200; attempt++) {
    const port = LOWEST + Math.floor(Math.random() * span);
    if (handedOut.has(port)) continue;
    if ((await tryListen(port)) === port) {
      handedOut.add(port);
      return port;
    }
  }
  // No room below the ephemeral range (a system that starts it low): the OS's pick, as before.
  const port = await tryListen(0);
  if (port === undefined) throw new Error("no free port on 127.0.0.1");
  handedOut.add(port);
  return port;
}
