// logs: one agent's output, a page at a time (src/jobs/process/log-page.ts), so a long log
// never comes back in one piece: raw, or read by its backend as a transcript.
import { z } from 'zod';
import { tool } from './tool.js';
import type { App } from '../../app.js';
import { DEFAULT_LOG_BYTES, readLogPage } from '../../jobs/process/log-page.js';
import { transcriptText } from '../../jobs/process/transcript-text.js';
import { runFolder } from '../../lib/run-folder.js';
import { brief } from '../tool-list.js';
import { findJob } from '../views.js';
import { InputError } from '../../lib/errors.js';

const MAX_LOG_BYTES = 1024 * 1024;

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

export const logsTool = (app: App) =>
  tool({
    name: 'logs',
    title: 'Agent logs',
    description:
      "An agent's CLI output, page by page, also while it runs (offset: the last next_offset; tail: the newest bytes; readable: as a transcript). Its answer: result.",
    input: z
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
        readable: brief(
          z
            .boolean()
            .optional()
            .describe("stdout as a transcript, where the agent's backend reads its output (CLI and ACP agents)"),
          '',
        ),
      })
      .strict(),
    output: outputSchema,
    annotations: { readOnlyHint: true, openWorldHint: false },
    handler: async ({ agent_id, stream, offset, limit, tail, readable }) => {
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
      if (!readable) return { agent_id: job.id, state: job.state, stream: which, ...page };
      const backend = app.backends.find((b) => b.name === job.backend);
      if (which !== 'stdout' || backend?.kind !== 'cli' || !backend.transcript)
        throw new InputError(
          `readable reads the stdout of a CLI or ACP agent; ${job.id} is a ${job.backend} agent${which === 'stdout' ? '' : ' and this is its stderr'}: leave readable out for the raw log`,
        );
      // A tail may begin inside a line: the transcript starts at the first whole one.
      const whole = tail !== undefined && page.offset > 0 ? page.text.slice(page.text.indexOf('\n') + 1) : page.text;
      const text = transcriptText(whole, backend.transcript.bind(backend));
      return { agent_id: job.id, state: job.state, stream: which, ...page, text };
    },
  });
