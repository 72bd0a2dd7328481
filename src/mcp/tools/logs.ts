// logs: one agent's raw output, a page at a time, so a long log never comes back in one piece.
// Offsets and sizes are in bytes of the log file; pages end at a line end when there is one
// (else at a character boundary), and secrets are redacted, even ones a page edge cuts.
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { z } from 'zod';
import { Redactor } from '../../lib/redact.js';
import { redactPage } from '../../lib/scrub.js';
import type { App } from '../../app.js';
import { readAt, withFile } from '../../lib/fs.js';
import { runFolder } from '../../lib/run-folder.js';
import { brief } from '../tool-list.js';
import { findJob, toolResult } from '../views.js';
import { InputError } from '../../lib/errors.js';

export const DEFAULT_LOG_BYTES = 64 * 1024;
const MAX_LOG_BYTES = 1024 * 1024;
/** Bytes read on each side of a page to find secrets its edges cut. */
const CONTEXT = 1024;

const outputSchema = z.object({
  agent_id: z.string(),
  state: z.string(),
  stream: z.enum(['stdout', 'stderr']),
  path: z.string().describe('The log file'),
  size: z.number().describe('Bytes in the log now (it grows while the agent runs)'),
  offset: z.number().describe('Byte offset of this page'),
  next_offset: z.number().describe('Pass as offset to read on'),
  eof: z.boolean().describe('True when this page reaches the end of the log as it is now'),
  text: z.string(),
});

/** The length of `buffer` without a multi-byte character its end cuts. */
function wholeChars(buffer: Buffer): number {
  let lead = buffer.length - 1;
  while (lead > 0 && lead > buffer.length - 4 && (buffer[lead]! & 0xc0) === 0x80) lead--;
  const b = buffer[lead] ?? 0;
  const need = b >= 0xf0 ? 4 : b >= 0xe0 ? 3 : b >= 0xc0 ? 2 : 1;
  return lead + need > buffer.length ? lead : buffer.length;
}

type LogPage = z.infer<typeof outputSchema>;

/** secrets: the app's; without it only the generic key shapes are masked. */
export function readLogPage(
  path: string,
  options: { offset?: number; limit?: number; tail?: number },
  secrets: Redactor = new Redactor(),
): Omit<LogPage, 'agent_id' | 'state' | 'stream'> {
  const none = { path, size: 0, offset: 0, next_offset: 0, eof: true, text: '' };
  return withFile(path, none, (fd, size) => {
    const limit = options.tail ?? options.limit ?? DEFAULT_LOG_BYTES;
    let start = options.tail !== undefined ? Math.max(0, size - options.tail) : Math.min(options.offset ?? 0, size);
    let page = readAt(fd, start, Math.min(size, start + limit) - start);
    if (options.tail !== undefined) {
      // A tail starts at a character boundary, not inside one.
      let skip = 0;
      while (skip < 3 && skip < page.length && (page[skip]! & 0xc0) === 0x80) skip++;
      start += skip;
      page = page.subarray(skip);
    }
    if (start + page.length < size && page.length > 0) {
      const newline = page.lastIndexOf(10);
      const cut = newline >= 0 ? newline + 1 : wholeChars(page);
      if (cut > 0) page = page.subarray(0, cut);
    }
    const end = start + page.length;
    const before = readAt(fd, Math.max(0, start - CONTEXT), start - Math.max(0, start - CONTEXT));
    const after = readAt(fd, end, Math.min(CONTEXT, size - end));
    return {
      path,
      size,
      offset: start,
      next_offset: end,
      eof: end >= size,
      text: redactPage(page, before, after, secrets),
    };
  });
}

export function registerLogsTool(server: McpServer, app: App): void {
  server.registerTool(
    'logs',
    {
      title: 'Agent logs',
      description:
        "An agent's raw CLI output, page by page, also while it runs (offset: the last next_offset; tail: the newest bytes). Its answer: result.",
      inputSchema: z
        .object({
          agent_id: z.string().min(1).max(64),
          stream: z.enum(['stdout', 'stderr']).optional(),
          offset: z.number().int().min(0).optional(),
          limit: brief(
            z
              .number()
              .int()
              .min(1)
              .max(MAX_LOG_BYTES)
              .optional()
              .describe(`Bytes per page (default ${DEFAULT_LOG_BYTES})`),
            '',
          ),
          tail: brief(
            z.number().int().min(1).max(MAX_LOG_BYTES).optional().describe('The last this many bytes instead'),
            '',
          ),
        })
        .strict(),
      outputSchema,
      annotations: { readOnlyHint: true, openWorldHint: false },
    },
    async ({ agent_id, stream, offset, limit, tail }) => {
      const job = findJob(app, agent_id);
      if (tail !== undefined && offset !== undefined)
        throw new InputError('pass offset (to page from the start) or tail (for the newest bytes), not both');
      const which = stream ?? 'stdout';
      const page = readLogPage(
        runFolder(app.config.stateDir, job.id)[which],
        {
          ...(offset !== undefined ? { offset } : {}),
          ...(limit !== undefined ? { limit } : {}),
          ...(tail !== undefined ? { tail } : {}),
        },
        app.secrets,
      );
      return toolResult({ agent_id: job.id, state: job.state, stream: which, ...page });
    },
  );
}
