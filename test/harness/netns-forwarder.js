// Runs inside a network namespace of its own (started by consumers.ts through `unshare -n`):
// listens on 127.0.0.1:PORT, the API server's own address and port, and forwards each
// connection, bytes as they are (TLS passes through), to a unix socket that the test process
// forwards on to the real API server. Unix sockets live in the filesystem, which the namespace
// shares; TCP ports do not. Then it runs COMMAND... as its child and exits with it.
//
// Usage: node netns-forwarder.js PORT SOCKET COMMAND [ARGS...]
import { spawn } from "node:child_process";
import { connect, createServer } from "node:net";

const [port, socket, command, ...args] = process.argv.slice(2);
const server = createServer((inner) => {
  const outer = connect(socket);
  inner.pipe(outer).pipe(inner);
  inner.on("error", () => outer.destroy());
  outer.on("error", () => inner.destroy());
});
server.listen(Number(port), "127.0.0.1", () => {
  const child = spawn(command, args, { stdio: "inherit" });
  for (const signal of ["SIGTERM", "SIGINT"]) process.on(signal, () => child.kill(signal));
  child.on("exit", (code, signal) => process.exit(code ?? (signal ? 128 : 1)));
});
