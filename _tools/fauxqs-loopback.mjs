// fauxqs-loopback.mjs starts the fauxqs SQS emulator on 127.0.0.1 only.
//
// Usage: node fauxqs-loopback.mjs PORT [HOST]
// fauxqs's own host option only names the host in queue URLs; the server
// itself listens on every interface. Wrapping net.Server.prototype.listen
// before fauxqs is imported gives its single listen call the loopback host.
// The process exits when its standard input closes (parent gone).
import net from "node:net";

const port = Number(process.argv[2] || 4566);
const host = process.argv[3] || "127.0.0.1";

const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  if (args.length > 0 && typeof args[0] === "object" && args[0] !== null) {
    args[0] = { ...args[0], host };
  } else if (typeof args[0] === "number" || typeof args[0] === "string") {
    const p = args[0];
    const rest = args.slice(1).filter((a) => typeof a === "function" || typeof a === "object");
    const cb = rest.find((a) => typeof a === "function");
    return listen.call(this, { port: Number(p), host }, cb);
  }
  return listen.apply(this, args);
};

const { startFauxqs } = await import("fauxqs");
const server = await startFauxqs({ port, host, logger: false });
console.log(`fauxqs listening on ${host}:${server.port}`);

const stop = async () => {
  try { await server.stop(); } finally { process.exit(0); }
};
process.on("SIGTERM", stop);
process.on("SIGINT", stop);
if (process.env.EXIT_ON_STDIN_CLOSE === "1") {
  process.stdin.on("end", stop);
  process.stdin.on("close", stop);
  process.stdin.resume();
}
