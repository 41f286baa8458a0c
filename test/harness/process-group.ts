/** Stopping a child spawned `detached` (the leader of its own process group) with everything it started. */
import type { ChildProcess } from "node:child_process";

/**
 * SIGTERM to the child's whole process group, SIGKILL after `killAfterMs`; resolves once `exited`
 * does (the caller's promise of the child's exit or close, made before the signal).
 */
export async function stopProcessGroup(
  child: ChildProcess,
  exited: Promise<void>,
  killAfterMs = 10_000,
): Promise<void> {
  const kill = (signal: NodeJS.Signals) => {
    try {
      process.kill(-child.pid!, signal);
    } catch {
      // already gone
    }
  };
  kill("SIGTERM");
  const timer = setTimeout(() => kill("SIGKILL"), killAfterMs);
  await exited;
  clearTimeout(timer);
}
