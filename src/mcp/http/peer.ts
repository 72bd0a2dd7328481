// Who opens a session of the shared server: one of the user's clients (an MCP client, the stdio
// relay, a script), or a process running inside one of polyspawn's agents, which can read the
// project's token (an agent's own polyspawn, or curl). Told once per session, at its initialize
// request, by the process at the other end of the TCP connection (src/lib/sockets.ts): a
// descendant of this server, or of any process started with the depth marker, is an agent's.
// Such a session gets no spawn tools: an agent starts agents only through its own polyspawn,
// which keeps its depth and its sandbox. What cannot be told on loopback counts as an agent's.
import type { Socket } from 'node:net';
import { DEPTH_ENV, MAX_DEPTH, NESTING_ENV, nestingFrom, type Nesting } from '../../jobs/agents/nesting.js';
import { ancestorVariables, descendsFrom } from '../../lib/proc.js';
import { connectionPeer, isLoopbackHost } from '../../lib/sockets.js';

/**
 * How deep the process that opened this connection runs, when it runs inside an agent (or
 * cannot be told apart from one): then it may start no agents. undefined for a client of the
 * user's, for a remote client (only with --allow-remote), and where there is no /proc to tell by.
 */
export function agentPeer(socket: Socket): Nesting | undefined {
  const { localPort, remotePort } = socket;
  const asAgent = (depth: number, why: string): Nesting => ({
    depth,
    canSpawn: false,
    reason: `this session was opened by ${why}; an agent starts agents only through its own polyspawn, within its depth and sandbox`,
  });
  if (localPort === undefined || remotePort === undefined) return asAgent(MAX_DEPTH, 'a connection without an address');
  const peer = connectionPeer(localPort, remotePort);
  if (peer === 'no-proc') return undefined;
  if (peer === 'unidentified') {
    if (!isLoopbackHost(socket.remoteAddress)) return undefined;
    return asAgent(MAX_DEPTH, `a process that could not be identified as one of yours (port ${remotePort})`);
  }
  const marker = ancestorVariables(NESTING_ENV, peer);
  if (marker[DEPTH_ENV] !== undefined || descendsFrom(peer, process.pid)) {
    const depth = marker[DEPTH_ENV] !== undefined ? nestingFrom({}, marker).depth : MAX_DEPTH;
    return asAgent(depth, `process ${peer}, which runs inside an agent that polyspawn started`);
  }
  return undefined;
}
