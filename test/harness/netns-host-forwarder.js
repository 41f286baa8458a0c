// Runs inside a test host's network namespace (started by netns-host.ts through
// `ip netns exec`): listens on ADDRESS:PORT, the namespace's own address, and forwards each
// connection, bytes as they are (TLS passes through), to a unix socket that the test process
// forwards on to a listener on its 127.0.0.1. Unix sockets live in the filesystem, which the
// namespace shares; TCP ports do not. Writes "listening" on stdout once it listens.
//
// Usage: node netns-host-forwarder.js ADDRESS PORT SOCKET
import { connect, createServer } from "node:net";

const [address, port, socket] = process.argv.slice(2);
const server = createServer((inner) => {
  const outer = connect(socket);
  inner.pipe(outer).pipe(inner);
  inner.on("error", () => outer.destroy());
  outer.on("error", () => inner.destroy());
});
server.listen(Number(port), address, () => process.stdout.write("listening\n"));
for (const signal of ["SIGTERM", "SIGINT"]) process.on(signal, () => process.exit(0));
