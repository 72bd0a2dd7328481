// cancel: stop a queued or running agent, and its whole process group; or a team, and every member.
import { z } from 'zod';
import { tool } from './tool.js';
import type { App } from '../../app.js';
import { findJob, findTeam } from '../views.js';
import { summarize } from '../../jobs/result.js';
import { TEAM_ID } from '../../jobs/teams/record.js';
import { jobOrTeamSummarySchema, summarizeTeam } from '../../jobs/teams/result.js';

export const cancelTool = (app: App) =>
  tool({
    name: 'cancel',
    title: 'Cancel agent',
    description: 'Stop a queued or running agent and all its processes.',
    input: z.object({ agent_id: z.string().min(1).max(64) }).strict(),
    output: jobOrTeamSummarySchema,
    annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: true, openWorldHint: false },
    handler: async ({ agent_id }) => {
      if (TEAM_ID.test(agent_id)) {
        findTeam(app, agent_id);
        return summarizeTeam(app, (await app.teams.cancel(agent_id))!);
      }
      findJob(app, agent_id);
      const job = await app.jobs.cancel(agent_id);
      return summarize(app, job!);
    },
  });
