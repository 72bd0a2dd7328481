// MCP on this process's stdin and stdout, for `serve` and its relay to the daemon.
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { serializeMessage } from '@modelcontextprotocol/sdk/shared/stdio.js';
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';

/**
 * The SDK's stdio transport, but every message that finds stdout full waits for the same 'drain'.
 * The SDK's own send adds one 'drain' listener per such message: answers that outrun the client
 * (a burst of results, progress notifications) pile up listeners on stdout, and Node warns of a
 * leak on stderr (MaxListenersExceededWarning) past ten.
 *
 * The messages of one turn of the event loop go out in one write: a burst's answers and
 * notifications (200 spawns answered in one turn) cost one system call and one wake-up of the
 * client, not one each.
 */
export class StdioTransport extends StdioServerTransport {
  private drained: Promise<void> | undefined;
  private corked = false;

  constructor() {
    super();
    // A process that exits within the turn of its last messages still sends them (stdout to a pipe or file is synchronous).
    process.once('exit', this.uncork);
  }

  override send(message: JSONRPCMessage): Promise<void> {
    if (!this.corked) {
      this.corked = true;
      process.stdout.cork();
      setImmediate(this.uncork);
    }
    if (process.stdout.write(serializeMessage(message))) return Promise.resolve();
    this.drained ??= new Promise((resolve) =>
      process.stdout.once('drain', () => {
        this.drained = undefined;
        resolve();
      }),
    );
    return this.drained;
  }

  private uncork = () => {
    this.corked = false;
    process.stdout.uncork();
  };
}
