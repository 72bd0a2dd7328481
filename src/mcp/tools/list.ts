// list: the job table at a glance.
import { z } from 'zod';
import { tool } from './tool.js';
import type { App } from '../../app.js';
import { isFinished } from '../../jobs/table.js';
import { brief } from '../tool-list.js';

import { jobSummarySchema, summarize } from '../../jobs/result.js';
import { summarizeTeam, teamSummarySchema } from '../../jobs/teams/result.js';

/** Teams listed: the running ones and the newest finished. */
const TEAMS_LISTED = 10;

const DEFAULT_RECENT = 20;

/** One schema for every server of the process: tools/list converts it once (src/mcp/tool-list.ts). */
const listOutputSchema = z.object({
  agents: z.array(jobSummarySchema),
  running: z.number(),
  queued: z.number(),
  teams: z.array(teamSummarySchema).optional(),
});

export const listTool = (app: App) =>
  tool({
    name: 'list',
    title: 'List agents',
    description: 'Agents running or queued, then the newest finished: agent_id, state, elapsed time, cost.',
    input: z
      .object({
        recent: brief(
          z
            .number()
            .int()
            .min(0)
            .max(1000)
            .optional()
            .describe(`How many finished agents to include (default ${DEFAULT_RECENT})`),
          '',
        ),
      })
      .strict(),
    output: listOutputSchema,
    annotations: { readOnlyHint: true, openWorldHint: false },
    handler: async ({ recent }) => {
      const newestFirst = app.jobs.all().reverse();
      const active = newestFirst.filter((j) => !isFinished(j.state));
      const finished = newestFirst.filter((j) => isFinished(j.state)).slice(0, recent ?? DEFAULT_RECENT);
      const now = Date.now();
      const teams = app.teams.recent(TEAMS_LISTED);
      return {
        agents: [...active, ...finished].map((j) => summarize(app, j, now)),
        running: active.filter((j) => j.state === 'running').length,
        queued: active.filter((j) => j.state === 'queued').length,
        teams: teams.length ? teams.map((t) => summarizeTeam(app, t, now)) : undefined,
      };
    },
  });
