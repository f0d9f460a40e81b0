// server-everything's streamable HTTP transport bound to 127.0.0.1 only (its own
// launcher listens on every interface, and tests never open a port off this machine),
// on the port in PORT (0: any free one). Prints `everything-http ready url=…` on stdout
// once it listens. Used by tests/tests/it/plugins_http.rs.
import net from "node:net";

const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (port, ...rest) {
  if (typeof port === "number" || (typeof port === "string" && /^\d+$/.test(port))) {
    this.once("listening", () => {
      console.log(`everything-http ready url=http://127.0.0.1:${this.address().port}/mcp`);
    });
    return listen.call(this, Number(port), "127.0.0.1", ...rest);
  }
  return listen.call(this, port, ...rest);
};
process.argv.splice(2, process.argv.length - 2, "streamableHttp");
await import("@modelcontextprotocol/server-everything/dist/index.js");
