// wait_for_agents: event-driven, bounded below client time-outs, with progress notifications.
import { z } from 'zod';
import type { App } from '../../app.js';
import { DEFAULT_WAIT_S, isFinished } from '../../jobs/table.js';
import { TEAM_ID } from '../../jobs/teams/record.js';
import { teamResult, teamResultSchema } from '../../jobs/teams/result.js';
import { waitForWork, type WorkWait } from '../../jobs/wait.js';
import { brief } from '../tool-list.js';
import { findJob, findTeam } from '../views.js';
import { tool, type ToolCall } from './tool.js';
import {
  fullResult,
  jobResultSchema,
  jobSummarySchema,
  questionSchema,
  questionsOf,
  summarize,
} from '../../jobs/result.js';
import { InputError } from '../../lib/errors.js';

export const MAX_WAIT_S = 3600;

const PROGRESS_EVERY_MS = 5000;

/** Waits for jobs and teams while sending notifications/progress when the request asked for them. */
export async function waitWithProgress(
  app: App,
  ids: string[],
  waitS: number,
  mode: 'all' | 'any',
  call: ToolCall,
  teamIds: string[] = [],
): Promise<WorkWait> {
  const progress = call.progress;
  const started = Date.now();
  const ticker =
    progress === undefined
      ? undefined
      : setInterval(() => {
          const done =
            ids.filter((id) => isFinished(app.jobs.get(id)!.state)).length +
            teamIds.filter((id) => app.teams.get(id)!.state !== 'running').length;
          progress({
            // Elapsed seconds: progress must increase with every notification.
            progress: Math.round((Date.now() - started) / 1000),
            total: waitS,
            message: `${done} of ${ids.length + teamIds.length} ${teamIds.length ? 'agents and teams' : 'agents'} finished`,
          });
        }, PROGRESS_EVERY_MS);
  try {
    // Each client of a shared server (its session) is woken once by each question.
    return await waitForWork(app.jobs, app.teams, ids, teamIds, {
      timeoutMs: waitS * 1000,
      mode,
      signal: call.signal,
      ...(call.waiter ? { waiter: call.waiter } : {}),
    });
  } finally {
    clearInterval(ticker);
  }
}

/** One schema for every server of the process: tools/list converts it once (src/mcp/tool-list.ts). */
const waitOutputSchema = z.object({
  finished: z.array(jobResultSchema),
  pending: z.array(jobSummarySchema),
  teams: z.array(teamResultSchema).optional().describe('The teams asked for: answer and members once finished'),
  questions: z
    .array(questionSchema.extend({ agent_id: z.string() }))
    .optional()
    .describe('Questions agents are waiting on: answer each with reply_subagent'),
  timed_out: z.boolean().describe('True when agents are still pending: call again to keep waiting'),
});

export const waitTool = (app: App) =>
  tool({
    name: 'wait_for_agents',
    title: 'Wait for agents',
    description: `Waits for agents to finish (or ask something) and returns their results; for any still pending after timeout_s (default ${DEFAULT_WAIT_S}), call again.`,
    input: z
      .object({
        agent_ids: z.array(z.string().min(1).max(64)).max(1000).optional().describe('Default: all unfinished'),
        timeout_s: z.number().min(0).max(MAX_WAIT_S).optional(),
        return_when: brief(z.enum(['all', 'any']).optional().describe('"any": as soon as one finishes'), ''),
      })
      .strict(),
    output: waitOutputSchema,
    annotations: { readOnlyHint: true, openWorldHint: false },
    handler: async ({ agent_ids, timeout_s, return_when }, call) => {
      const asked = agent_ids
        ? [...new Set(agent_ids)]
        : app.jobs
            .all()
            .filter((j) => !isFinished(j.state))
            .map((j) => j.id);
      if (agent_ids && asked.length === 0)
        throw new InputError('agent_ids is empty: pass ids from spawn_* or run_team, or omit it');
      const teamIds = asked.filter((id) => TEAM_ID.test(id));
      const ids = asked.filter((id) => !TEAM_ID.test(id));
      for (const id of ids) findJob(app, id);
      for (const id of teamIds) findTeam(app, id);
      const { finished, pending, teams } = await waitWithProgress(
        app,
        ids,
        timeout_s ?? DEFAULT_WAIT_S,
        return_when ?? 'all',
        call,
        teamIds,
      );
      // The teams' running members may be the ones asking.
      const asking = [...pending, ...app.teams.activeMembers(teamIds).map((id) => app.jobs.get(id)!)];
      const questions = asking.flatMap((j) => questionsOf(app, j).map((q) => ({ agent_id: j.id, ...q })));
      const teamsPending = teams.filter((t) => t.state === 'running').length;
      const done = finished.length + teams.length - teamsPending;
      return {
        finished: finished.map((j) => fullResult(app, j)),
        pending: pending.map((j) => summarize(app, j)),
        teams: teams.length ? teams.map((t) => teamResult(app, t, (id) => app.jobs.get(id))) : undefined,
        questions: questions.length ? questions : undefined,
        timed_out: questions.length === 0 && pending.length + teamsPending > 0 && (return_when !== 'any' || done === 0),
      };
    },
  });
