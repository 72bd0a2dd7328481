// A response its client stopped reading: what waits for it piles up in the server (the MCP SDK
// queues what it sends without waiting for the client). Cut off once the client has taken
// nothing of what waited for a whole period; an MCP client resumes with Last-Event-ID, a
// browser's EventSource reconnects.
import type { ServerResponse } from 'node:http';

/** Watches `res` until it closes: data waiting and none of it taken for `periodMs` ends it. */
export function cutWhenStalled(res: ServerResponse, periodMs: number, onCut: () => void): void {
  let taken = -1;
  const watch = setInterval(() => {
    const now = res.socket?.bytesWritten ?? 0;
    if (res.writableNeedDrain && now === taken) {
      onCut();
      res.destroy();
    }
    taken = now;
  }, periodMs).unref();
  res.once('close', () => clearInterval(watch));
}
