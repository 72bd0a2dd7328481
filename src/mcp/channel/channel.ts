// The per-run channel: while CLI agents run, an MCP server on 127.0.0.1 that only they can reach,
// each with its own token, valid while its run lasts. It listens from the first run that opens it
// to the last that closes it: with no CLI agent running, nothing listens.
import type { App } from '../../app.js';
import type { ChannelLease, ParentChannel } from '../../jobs/conversation.js';
import { listenHttpMcp, type HttpMcpListener } from '../http/listener.js';
import { tokenTable } from '../http/tokens.js';
import { channelServer } from './tools.js';

export function createParentChannel(app: App): ParentChannel {
  const tokens = tokenTable<string>();
  let listening: Promise<HttpMcpListener<string>> | undefined;
  let leases = 0;

  const listen = () =>
    listenHttpMcp<string>({
      authenticate: (token) => tokens.lookup(token),
      serverFor: (jobId) => channelServer(app, jobId),
      log: (line) => app.log(line),
    });

  return {
    async open(jobId: string): Promise<ChannelLease> {
      leases++;
      let listener: HttpMcpListener<string>;
      try {
        listener = await (listening ??= listen());
      } catch (error) {
        leases--;
        listening = undefined;
        throw error;
      }
      const token = tokens.issue(jobId);
      return {
        url: listener.url,
        token,
        close: async () => {
          tokens.revoke(jobId);
          await listener.endSessionsOf(jobId);
          if (--leases > 0) return;
          listening = undefined;
          await listener.close();
        },
      };
    },
  };
}
