/**
 * The bind address of a listener, as controller-runtime's flags take it: ":8080" (every
 * interface), "127.0.0.1:8080", "[::1]:8080", or "0" for off. The webhook's server and the
 * process's metrics and probe servers all parse theirs here.
 */

/** Parses ":8080", "127.0.0.1:8080" or "[::1]:8080"; undefined for "0" (off). Throws on anything else. */
export function parseBindAddress(address: string): { host: string | undefined; port: number } | undefined {
  if (address === "0") return undefined;
  const m = /^(?:\[([^\]]+)\]|([^:[\]]*)):(\d{1,5})$/.exec(address);
  const port = Number(m?.[3]);
  // Checked here, not left to listen(): a port over 65535 would otherwise fail only at startup.
  if (!m || port > 65535)
    throw new Error(`bind address ${JSON.stringify(address)} is not of the form [host]:port`);
  return { host: m[1] ?? (m[2] || undefined), port };
}
