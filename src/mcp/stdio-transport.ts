// MCP on this process's stdin and stdout, for `serve` and its relay to the daemon.
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { serializeMessage } from '@modelcontextprotocol/sdk/shared/stdio.js';
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';

/**
 * The SDK's stdio transport, but every message that finds stdout full waits for the same 'drain'.
 * The SDK's own send adds one 'drain' listener per such message: answers that outrun the client
 * (a burst of results, progress notifications) pile up listeners on stdout, and Node warns of a
 * leak on stderr (MaxListenersExceededWarning) past ten.
 */
export class StdioTransport extends StdioServerTransport {
  private drained: Promise<void> | undefined;

  override send(message: JSONRPCMessage): Promise<void> {
    if (process.stdout.write(serializeMessage(message))) return Promise.resolve();
    this.drained ??= new Promise((resolve) =>
      process.stdout.once('drain', () => {
        this.drained = undefined;
        resolve();
      }),
    );
    return this.drained;
  }
}
