// A request body read into memory up to a cap. Past the cap nothing more is kept: the rest of
// what the client sends is let through unread, and the caller answers 413 and closes.
import type { IncomingMessage } from 'node:http';

/** The body, 'too-large' past maxBytes; rejects when the client goes away before sending it all. */
export function readBody(req: IncomingMessage, maxBytes: number): Promise<Buffer | 'too-large'> {
  if (Number(req.headers['content-length']) > maxBytes) return Promise.resolve('too-large');
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const settle = (outcome: () => void) => {
      req.off('data', onData).off('end', onEnd).off('error', onGone).off('close', onGone);
      outcome();
    };
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > maxBytes) settle(() => resolve('too-large'));
      else chunks.push(chunk);
    };
    const onEnd = () => settle(() => resolve(Buffer.concat(chunks)));
    const onGone = () =>
      settle(() => reject(new Error('the client closed the connection before it sent the whole request body')));
    req.on('data', onData).on('end', onEnd).on('error', onGone).on('close', onGone);
  });
}
