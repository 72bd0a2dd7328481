// The channel as the app is given it: loaded with the first CLI agent that runs, so start-up
// does not pay for the HTTP stack.
import type { App } from '../../app.js';
import type { ParentChannel } from '../../jobs/conversation.js';

export function lazyParentChannel(app: App): ParentChannel {
  let channel: Promise<ParentChannel> | undefined;
  return {
    async open(jobId) {
      channel ??= import('./channel.js').then((m) => m.createParentChannel(app));
      return (await channel).open(jobId);
    },
  };
}
