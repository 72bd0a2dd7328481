// How a job looks to whoever asked for it: one summary shape and one full shape, shared by every
// MCP tool and `polyspawn run --json`, with the zod schemas the tools declare as output schemas.
import { existsSync } from 'node:fs';
import { z } from 'zod';
import type { Config } from '../config/config.js';
import { sandboxLabel } from '../config/sandbox.js';
import { isKnownModel, type ModelsTable } from '../config/models.js';
import type { Redactor } from '../lib/redact.js';
import { runFolder } from '../lib/run-folder.js';
import { taskLine } from '../lib/text.js';
import { isFinished, JOB_STATES, type JobRecord, type JobTable } from './table.js';
import { openQuestions, type ConversationEntry } from './conversation.js';
import { ranTogether, siblingOverlaps, type JobWorktree } from './worktree/report.js';

// The shapes that several tools' output schemas repeat carry an id: a listed output schema holds
// each once, under $defs, and refers to it (src/mcp/tool-list.ts).
export const questionSchema = z
  .object({
    message_id: z.string(),
    question: z.string(),
    options: z.array(z.string()).optional(),
    to: z
      .literal('user')
      .optional()
      .describe(
        "Meant for the user: put it to them unless their client's dialog already did, and reply with their answer",
      ),
    asked_at: z.string(),
  })
  .meta({ id: 'question' });

export const jobSummarySchema = z
  .object({
    agent_id: z.string(),
    backend: z.string(),
    agent: z.string().optional().describe('The named agent (spawn_<agent>) that ran it'),
    team_id: z.string().optional().describe('The team (run_team) it is a member of'),
    team_role: z.string().optional().describe('Its part in that team: "stage 2", "round 1", "leader", "judge"'),
    model: z.string(),
    state: z.enum(JOB_STATES),
    task: z.string().describe('First line of the prompt, shortened'),
    created_at: z.string(),
    started_at: z.string().optional(),
    ended_at: z.string().optional(),
    elapsed_s: z.number().describe('Seconds running so far, or the whole run time once finished'),
    cost_usd: z.number().optional(),
    cost_source: z.enum(['reported', 'estimated', 'unknown']).optional(),
    waiting_for_parent: z.boolean().optional().describe('It asked you something: answer with reply_subagent'),
    questions: z.array(questionSchema).optional().describe('Its questions still unanswered'),
    progress: z.string().optional().describe('Its newest progress line'),
    sandbox: z.string().optional().describe('The sandbox it ran in (bwrap, docker, podman), when it had one'),
    changed_files: z
      .number()
      .optional()
      .describe('Isolated in a worktree: how many files its branch changes (`result` lists them)'),
  })
  .meta({ id: 'job_summary' });

const worktreeSchema = z.object({
  path: z.string(),
  branch: z.string(),
  base: z.string().describe('The commit it started from'),
  kept: z.boolean().describe('The worktree is still there (until integrate merges, picks or discards it)'),
  files: z.array(z.string()).optional().describe('Every file its branch changes from the base'),
  committed: z.array(z.string()).optional().describe('Files the agent changed in commits of its own'),
  uncommitted: z.array(z.string()).optional().describe('Files it left uncommitted, which polyspawn committed'),
  agent_committed: z.boolean().optional(),
  diff_stat: z.string().optional(),
  notes: z.array(z.string()).optional(),
  overlaps: z
    .array(z.object({ file: z.string(), agent_ids: z.array(z.string()) }))
    .optional()
    .describe('Files that isolated agents whose runs overlapped in time with this one changed too'),
});

export const jobResultSchema = jobSummarySchema
  .extend({
    text: z.string().optional().describe("The agent's final answer"),
    structured: z
      .unknown()
      .optional()
      .describe('The answer as JSON, validated against the output schema (when the job had one)'),
    error: z.string().optional(),
    cost_note: z.string().optional().describe('Why the cost is unknown'),
    session_id: z.string().optional().describe('Pass as `resume` (or pass agent_id) to continue this conversation'),
    usage: z
      .object({ input_tokens: z.number(), output_tokens: z.number(), cached_input_tokens: z.number() })
      .optional(),
    premium_requests: z.number().optional(),
    exit_code: z.number().nullable().optional(),
    log: z.string().optional().describe('Path of the full stdout log'),
    output_tail: z.string().optional().describe('The newest output of a job still running'),
    conversation: z
      .array(
        z.object({
          kind: z.enum(['question', 'answer', 'progress']),
          at: z.string(),
          message_id: z.string().optional(),
          text: z.string(),
          options: z.array(z.string()).optional(),
          to: z.literal('user').optional().describe('A question meant for the user'),
          by: z.enum(['orchestrator', 'dashboard', 'user']).optional().describe('Who gave the answer'),
        }),
      )
      .optional()
      .describe('Its questions, your answers and its progress lines, in order'),
    budget: z
      .object({
        max_turns: z.number().optional(),
        max_budget_usd: z.number().optional(),
        exceeded: z.enum(['turns', 'cost']).optional(),
      })
      .optional()
      .describe('Its budget, and the limit it passed (exceeded)'),
    worktree: worktreeSchema.optional().describe('Where it worked (isolation "worktree") and what it changed'),
    raw: z.unknown().optional(),
  })
  .meta({ id: 'job_result' });

type JobSummary = z.infer<typeof jobSummarySchema>;
type QuestionView = z.infer<typeof questionSchema>;
export type JobResult = z.infer<typeof jobResultSchema>;

const TAIL_CHARS = 2000;

/** What shaping a job needs: the redactor, where run folders are, the live output of running jobs, the models table. */
export type ResultContext = {
  secrets: Redactor;
  config: Pick<Config, 'stateDir'>;
  jobs: Pick<JobTable, 'outputTail' | 'all' | 'get'>;
  models: ModelsTable;
};

/** Said of a model that is not in the table, until its backend reports a cost. */
function costNote(ctx: Pick<ResultContext, 'models'>, job: JobRecord): string | undefined {
  if (job.outcome?.costSource === 'reported' || isKnownModel(ctx.models, job.backend, job.model)) return undefined;
  return (
    `model "${job.model}" is not in polyspawn's models table: it is passed to ${job.backend} as named, and its cost is ` +
    `unknown unless ${job.backend} reports one (add its prices to a models.json override to have it estimated: docs/configuration.md, "Models")`
  );
}

export const redactedTask = (ctx: Pick<ResultContext, 'secrets'>, prompt: string) =>
  taskLine(prompt, (t) => ctx.secrets.text(t));

export function summarize(ctx: Pick<ResultContext, 'secrets'>, job: JobRecord, now = Date.now()): JobSummary {
  const start = job.startedAt ? Date.parse(job.startedAt) : undefined;
  const end = job.endedAt ? Date.parse(job.endedAt) : now;
  const questions = questionsOf(ctx, job);
  return {
    agent_id: job.id,
    backend: job.backend,
    agent: job.agent?.name,
    team_id: job.team?.id,
    team_role: job.team?.role,
    model: job.model,
    state: job.state,
    task: redactedTask(ctx, job.prompt),
    created_at: job.createdAt,
    started_at: job.startedAt,
    ended_at: job.endedAt,
    elapsed_s: start === undefined ? 0 : Math.round((end - start) / 100) / 10,
    cost_usd: job.outcome?.costUsd,
    cost_source: job.outcome?.costSource,
    ...(questions.length ? { waiting_for_parent: true, questions } : {}),
    progress: job.progress ? ctx.secrets.text(job.progress.text) : undefined,
    sandbox: job.sandbox ? sandboxLabel(job.sandbox) : undefined,
    changed_files: job.worktree?.changes?.files.length,
  };
}

/** An isolated job's worktree as a caller sees it, with the files its siblings changed too. */
function worktreeView(ctx: ResultContext, job: JobRecord, worktree: JobWorktree): z.infer<typeof worktreeSchema> {
  const c = worktree.changes;
  // Its siblings: read whole only when their runs overlapped its own (a stored summary has no worktree).
  const others = c?.files.length
    ? ctx.jobs
        .all()
        .filter((o) => o.id !== job.id && ranTogether(job, o))
        .map((o) => (o.worktree ? o : ctx.jobs.get(o.id)))
        .filter((o): o is JobRecord => !!o?.worktree?.changes)
    : [];
  const overlaps = siblingOverlaps(job, others);
  return {
    path: worktree.path,
    branch: worktree.branch,
    base: worktree.base,
    kept: existsSync(worktree.path),
    files: c?.files,
    committed: c?.committed,
    uncommitted: c?.uncommitted,
    agent_committed: c?.agentCommitted,
    diff_stat: c?.diffStat,
    notes: worktree.notes?.length ? worktree.notes : undefined,
    overlaps: overlaps.length ? overlaps.map((o) => ({ file: o.file, agent_ids: o.agentIds })) : undefined,
  };
}

/** A running job's unanswered questions, redacted (an ended job's are in its conversation). */
export function questionsOf(ctx: Pick<ResultContext, 'secrets'>, job: JobRecord): QuestionView[] {
  if (job.state !== 'running') return [];
  return openQuestions(job.conversation).map((q) =>
    ctx.secrets.deep({
      message_id: q.messageId,
      question: q.text,
      options: q.options,
      to: q.to,
      asked_at: q.at,
    }),
  );
}

const conversationView = (ctx: Pick<ResultContext, 'secrets'>, entries: ConversationEntry[]) =>
  entries.map((e) =>
    ctx.secrets.deep({
      kind: e.kind,
      at: e.at,
      message_id: e.kind !== 'progress' ? e.messageId : undefined,
      text: e.text,
      options: e.kind === 'question' ? e.options : undefined,
      to: e.kind === 'question' ? e.to : undefined,
      by: e.kind === 'answer' ? e.by : undefined,
    }),
  );

export function fullResult(ctx: ResultContext, job: JobRecord, options: { includeRaw?: boolean } = {}): JobResult {
  const o = job.outcome;
  const tail = isFinished(job.state) ? undefined : ctx.jobs.outputTail(job.id, TAIL_CHARS);
  const note = costNote(ctx, job);
  return {
    ...summarize(ctx, job),
    text: o?.text,
    structured: o?.structured,
    error: o?.error || undefined,
    cost_note: note,
    session_id: o?.sessionId || undefined,
    usage: o?.usage && {
      input_tokens: o.usage.inputTokens,
      output_tokens: o.usage.outputTokens,
      cached_input_tokens: o.usage.cachedInputTokens,
    },
    premium_requests: o?.premiumRequests,
    exit_code: job.exitCode,
    log: job.state !== 'queued' ? runFolder(ctx.config.stateDir, job.id).stdout : undefined,
    output_tail: tail || undefined,
    conversation: job.conversation?.length ? conversationView(ctx, job.conversation) : undefined,
    budget:
      job.maxTurns !== undefined || job.maxBudgetUsd !== undefined || o?.budgetExceeded
        ? { max_turns: job.maxTurns, max_budget_usd: job.maxBudgetUsd, exceeded: o?.budgetExceeded || undefined }
        : undefined,
    worktree: job.worktree && worktreeView(ctx, job, job.worktree),
    raw: options.includeRaw ? o?.raw : undefined,
  };
}
