// result: the full outcome of one agent or team, or its progress while it runs.
import { z } from 'zod';
import { tool } from './tool.js';
import type { App } from '../../app.js';
import { brief } from '../tool-list.js';
import { findJob, findTeam } from '../views.js';
import { fullResult } from '../../jobs/result.js';
import { TEAM_ID } from '../../jobs/teams/record.js';
import { jobOrTeamResultSchema, teamResult } from '../../jobs/teams/result.js';

export const resultTool = (app: App) =>
  tool({
    name: 'result',
    title: 'Agent result',
    description:
      "One agent's answer, error, session_id, tokens and cost; while it runs, its state and newest output. Does not wait.",
    input: z
      .object({
        agent_id: z.string().min(1).max(64),
        include_raw: brief(z.boolean().optional().describe("Also the CLI's own final record"), ''),
      })
      .strict(),
    output: jobOrTeamResultSchema,
    annotations: { readOnlyHint: true, openWorldHint: false },
    handler: async ({ agent_id, include_raw }) =>
      TEAM_ID.test(agent_id)
        ? teamResult(app, findTeam(app, agent_id), (id) => app.jobs.get(id))
        : fullResult(app, findJob(app, agent_id), { includeRaw: include_raw ?? false }),
  });
