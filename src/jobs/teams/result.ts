// How a team looks to whoever asked for it (run_team, result, wait_for_agents, list): one shape
// with its zod schema, the members' own results beside the team's answer when it has finished.
import { z } from 'zod';
import { isFinished, JOB_STATES, type JobRecord } from '../table.js';
import { fullResult, jobResultSchema, jobSummarySchema, redactedTask, type ResultContext } from '../result.js';
import { teamTotals, TEAM_STATES, type TeamRecord } from './record.js';
import { TOPOLOGY_NAMES } from './options.js';
import { overlapsOfIds } from '../worktree/report.js';

export const teamSummarySchema = z
  .object({
    team_id: z.string(),
    topology: z.enum(TOPOLOGY_NAMES),
    state: z.enum(TEAM_STATES),
    task: z.string(),
    preset: z.string().optional(),
    members: z.array(
      z.object({ agent_id: z.string(), member: z.string(), role: z.string(), state: z.enum(JOB_STATES) }),
    ),
    created_at: z.string(),
    ended_at: z.string().optional(),
    elapsed_s: z.number(),
    cost_usd: z.number().optional(),
    usage: z.object({ input_tokens: z.number(), output_tokens: z.number(), cached_input_tokens: z.number() }),
    parent_team_id: z.string().optional(),
    child_team_ids: z.array(z.string()).optional(),
  })
  .meta({ id: 'team_summary' });

export const teamResultSchema = teamSummarySchema
  .extend({
    answer: z.string().optional().describe("The team's answer"),
    error: z.string().optional(),
    note: z.string().optional(),
    budget_reached: z.boolean().optional(),
    events: z.array(z.object({ at: z.string(), kind: z.string(), text: z.string(), agent_id: z.string().optional() })),
    member_results: z
      .array(jobResultSchema)
      .optional()
      .describe("Each member's own result, once the team has finished"),
    overlaps: z
      .array(z.object({ file: z.string(), agent_ids: z.array(z.string()) }))
      .optional()
      .describe('Files that more than one member changed in its worktree (isolation "worktree")'),
  })
  .meta({ id: 'team_result' });

type TeamSummary = z.infer<typeof teamSummarySchema>;
type TeamResult = z.infer<typeof teamResultSchema>;

export function summarizeTeam(ctx: Pick<ResultContext, 'secrets'>, team: TeamRecord, now = Date.now()): TeamSummary {
  const totals = teamTotals(team);
  const end = team.endedAt ? Date.parse(team.endedAt) : now;
  return {
    team_id: team.id,
    topology: team.spec.topology,
    state: team.state,
    task: redactedTask(ctx, team.spec.task),
    preset: team.spec.preset,
    members: team.members.map((m) => ({ agent_id: m.jobId, member: m.member, role: m.role, state: m.state })),
    created_at: team.createdAt,
    ended_at: team.endedAt,
    elapsed_s: Math.round((end - Date.parse(team.createdAt)) / 100) / 10,
    cost_usd: totals.costUsd,
    usage: {
      input_tokens: totals.inputTokens,
      output_tokens: totals.outputTokens,
      cached_input_tokens: totals.cachedInputTokens,
    },
    parent_team_id: team.spec.parent?.teamId,
    child_team_ids: team.children?.length ? team.children : undefined,
  };
}

export function teamResult(
  ctx: ResultContext,
  team: TeamRecord,
  getJob: (id: string) => JobRecord | undefined,
): TeamResult {
  const members = team.state === 'running' ? [] : team.members.flatMap((m) => getJob(m.jobId) ?? []);
  const overlaps = overlapsOfIds(
    getJob,
    team.members.map((m) => m.jobId),
  );
  return ctx.secrets.deep({
    ...summarizeTeam(ctx, team),
    answer: team.answer || undefined,
    error: team.error,
    note: team.note,
    budget_reached: team.budgetReached,
    events: team.events.map((e) => ({ at: e.at, kind: e.kind, text: e.text, agent_id: e.jobId })),
    member_results: members.length
      ? members.filter((j) => isFinished(j.state)).map((j) => fullResult(ctx, j))
      : undefined,
    overlaps: overlaps.length ? overlaps.map((o) => ({ file: o.file, agent_ids: o.agentIds })) : undefined,
  });
}

/** result's output: a job's result, or a team's (a team id was passed). */
export const jobOrTeamResultSchema = z.union([jobResultSchema, teamResultSchema]);
/** cancel's output: a job's summary, or a team's. */
export const jobOrTeamSummarySchema = z.union([jobSummarySchema, teamSummarySchema]);
