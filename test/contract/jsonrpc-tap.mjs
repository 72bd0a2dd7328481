// A tap on a stdio MCP server's JSON-RPC, for the contract tests that drive an MCP client we
// cannot instrument (the interactive Claude Code). Preloaded into the server's own Node process,
//
//   JSONRPC_TAP_LOG=LOG node --import ./jsonrpc-tap.mjs server.js ...
//
// it appends every line the server reads on stdin and writes on stdout to LOG, one JSON object
// a line: {"at": ms since the epoch, "from": "client"|"server"|"tap", "message": <the parsed
// message, or the raw line when it is not JSON>}. In the process, not a process in between:
// Claude Code waits at most 3 s for a stdio server's answer to its first request (server/discover)
// before it settles on the older protocol, and a second Node start on the way costs a loaded
// machine much of that.
import { appendFileSync } from 'node:fs';

const log = process.env.JSONRPC_TAP_LOG;
if (log) {
  const record = (from, line) => {
    let message = line;
    try {
      message = JSON.parse(line);
    } catch {
      // kept raw: a server that writes anything but JSON-RPC to stdout is what a test wants to see
    }
    appendFileSync(log, `${JSON.stringify({ at: Date.now(), from, message })}\n`);
  };
  /** Cuts a byte stream into lines (stdio MCP frames one message a line). */
  const lines = (from) => {
    let rest = '';
    return (chunk) => {
      rest += typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString('utf8');
      for (let end = rest.indexOf('\n'); end >= 0; end = rest.indexOf('\n')) {
        const line = rest.slice(0, end).replace(/\r$/, '');
        rest = rest.slice(end + 1);
        if (line.trim()) record(from, line);
      }
    };
  };
  // Seen as the stream hands data to the server's listener: a listener of our own would start
  // the stream flowing before the server listens, and what came first would be lost to it.
  const fromClient = lines('client');
  const stdin = process.stdin;
  const emit = stdin.emit;
  stdin.emit = function (event, ...args) {
    if (event === 'data') fromClient(args[0]);
    return emit.call(this, event, ...args);
  };
  const fromServer = lines('server');
  const stdout = process.stdout;
  const write = stdout.write;
  stdout.write = function (chunk, ...rest) {
    fromServer(chunk);
    return write.call(this, chunk, ...rest);
  };
  process.on('exit', (code) => record('tap', `server exited (code ${code})`));
}
