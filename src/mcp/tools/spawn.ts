// spawn_<backend>: one tool per enabled backend. Queues a job (the spawn use case,
// src/jobs/spawn.ts) and returns its id at once (or, with wait_s, its result when it finishes
// in time); as an MCP task, the task reports the job.
import { z } from 'zod';
import { ISOLATION_MODES, timeoutSeconds } from '../../config/config.js';
import { SANDBOX_MODES } from '../../config/sandbox.js';
import type { Backend, BackendModels } from '../../../backends/types.js';
import type { App } from '../../app.js';
import type { AgentDefinition } from '../../jobs/agents/definitions.js';
import { maxBudgetUsdSchema, maxTurnsSchema } from '../../jobs/budget.js';
import { spawnJob } from '../../jobs/spawn.js';
import { spawnRequestFrom, type SpawnArgs } from '../../jobs/spawn-args.js';
import { isFinished, type JobRecord } from '../../jobs/table.js';
import { brief } from '../tool-list.js';
import { fullResult, jobResultSchema } from '../../jobs/result.js';
import { tool, type ToolCall, type ToolDeclaration } from './tool.js';
import { MAX_WAIT_S, waitWithProgress } from './wait.js';

const MAX_PROMPT_CHARS = 2_000_000;

/** A backend's models, as the full schema and the server's instructions say them. */
export const modelsText = (models: BackendModels) => {
  const aliases = Object.keys(models.aliases);
  return `${models.default} by default${aliases.length ? `; aliases: ${aliases.join(', ')}` : ''}`;
};

// The inputs the backends' tools and the named agents' tools share. The server's instructions
// explain them once (src/mcp/server.ts), so the compact tools/list leaves most undescribed (brief).
export const promptField = () =>
  brief(
    z
      .string()
      .max(
        MAX_PROMPT_CHARS,
        `prompt is longer than ${MAX_PROMPT_CHARS} characters: put long material in a file and point the agent at it`,
      )
      .refine((s) => s.trim().length > 0, 'prompt is empty: say what the agent should do')
      .describe('Self-contained: the agent sees nothing else'),
    '',
  );

export const outputSchemaField = () =>
  brief(
    z
      .record(z.string(), z.unknown())
      .optional()
      .describe(
        'A JSON Schema the answer must match: the answer is validated (one retry with the errors on a mismatch) and returned as `structured`',
      ),
    '',
  );

// The instructions name each backend's models (src/mcp/server.ts).
export const modelField = (models: BackendModels) =>
  brief(z.string().max(200).optional().describe(modelsText(models)), '');
/**
 * One object, not two fields: listed as {"type":"object"}, it costs each spawn tool a third of
 * what max_turns and max_budget_usd would apiece (the instructions say what it holds), and it
 * mirrors the result's `budget`.
 */
export const budgetField = () =>
  brief(
    z
      .object({ max_turns: maxTurnsSchema().optional(), max_budget_usd: maxBudgetUsdSchema().optional() })
      .strict()
      .optional()
      .describe('max_turns: the most model requests; max_budget_usd: the most USD it may spend'),
    { type: 'object' },
  );
export const cwdField = () => z.string().min(1).max(4096).optional();
export const resumeField = () => z.string().min(1).max(200).optional();
/**
 * A CLI agent's own git worktree (src/jobs/worktree/) and the ref it starts from: listed as plain
 * strings, the server's instructions say what the values do.
 */
const isolationField = () =>
  brief(
    z
      .enum(ISOLATION_MODES)
      .optional()
      .describe('worktree: it works in a git worktree of its own, on branch polyspawn/<agent_id>; see integrate'),
    { type: 'string' },
  );
const baseField = () =>
  brief(
    z.string().min(1).max(200).optional().describe('With isolation "worktree": the ref it starts from (default HEAD)'),
    '',
  );
export const timeoutField = () => timeoutSeconds().optional();
export const waitField = () => z.number().min(0).max(MAX_WAIT_S).optional();
/** Offered where the agent could ask: a CLI backend that takes MCP servers, on a server with the channel. */
export const askParentField = (app: App, backend: Backend): z.ZodRawShape =>
  app.parentChannel && backend.kind === 'cli' && backend.supportsMcpServers
    ? { ask_parent: brief(z.boolean().optional().describe('false: it cannot ask you questions mid-run'), '') }
    : {};
/**
 * Offered only where the user's config lets callers choose the sandbox (allow_caller_sandbox), and
 * listed by name and type: the server's instructions say what it does.
 */
const sandboxField = (app: App, backend: Backend): z.ZodRawShape =>
  app.config.allowCallerSandbox && backend.kind === 'cli'
    ? {
        sandbox: brief(z.enum(SANDBOX_MODES).optional().describe('Where the agent runs; your config keeps its floor'), {
          type: 'string',
        }),
      }
    : {};
/** A backend's own extra inputs: the compact list gives their names and types only (the full list keeps their descriptions). */
export const extraFields = (backend: Backend): z.ZodRawShape =>
  Object.fromEntries(
    Object.entries(backend.extraInput ?? {}).map(([key, schema]) => [key, brief(schema as z.ZodType, '')]),
  );

function inputSchema(backend: Backend, app: App) {
  return z
    .object({
      prompt: promptField(),
      model: modelField(app.models[backend.name]!),
      // API backends answer from the prompt alone: no folder to work in.
      ...(backend.kind === 'cli' ? { cwd: cwdField(), isolation: isolationField(), base: baseField() } : {}),
      ...(backend.supportsSystemPrompt ? { system_prompt: z.string().max(200_000).optional() } : {}),
      ...(backend.supportsResume
        ? { resume: brief(resumeField().describe('agent_id or session_id to continue'), '') }
        : {}),
      timeout_s: brief(timeoutField().describe(`Default ${app.config.timeoutS}`), ''),
      wait_s: waitField(),
      output_schema: outputSchemaField(),
      budget: budgetField(),
      ...askParentField(app, backend),
      ...sandboxField(app, backend),
      ...extraFields(backend),
    })
    .strict();
}

/** A spawn tool's answer: the job at once, or its result once it finishes within wait_s. */
async function spawnedResult(app: App, job: JobRecord, waitS: number | undefined, call: ToolCall) {
  if (waitS && !isFinished(job.state)) await waitWithProgress(app, [job.id], waitS, 'all', call);
  return fullResult(app, job);
}

/** A spawn tool's hints: API backends return text only, so they change nothing on this machine. */
const spawnAnnotations = (backend: Backend) => ({
  readOnlyHint: false,
  destructiveHint: backend.kind === 'cli',
  idempotentHint: false,
  openWorldHint: true,
});

/**
 * A spawn tool, spawn_<backend> or spawn_<agent>: its job started from its arguments (without
 * wait_s, which is the tool's own), answered at once, after wait_s, or as a task.
 */
export function spawnTool(
  app: App,
  backend: Backend,
  shown: { name: string; title: string; description: string; input: z.ZodObject },
  who: { label: string; agent?: AgentDefinition },
): ToolDeclaration {
  // The schema was built per backend or definition, so zod cannot type its optional fields: they are SpawnArgs.
  const start = (args: Record<string, unknown>, call: ToolCall) => {
    const { wait_s: _wait, ...rest } = args as SpawnArgs & { wait_s?: number };
    return spawnJob(app, spawnRequestFrom(rest, { backend, caller: call.caller, ...who }));
  };
  return tool({
    ...shown,
    output: jobResultSchema,
    annotations: spawnAnnotations(backend),
    spawning: true,
    handler: (args, call) => spawnedResult(app, start(args, call), args.wait_s as number | undefined, call),
    start: (args, call) => ({ kind: 'job', id: start(args, call).id }),
  });
}

/** spawn_<backend> for every enabled backend. */
export function spawnTools(app: App): ToolDeclaration[] {
  return app.backends.map((backend) =>
    spawnTool(
      app,
      backend,
      {
        name: `spawn_${backend.name}`,
        title: backend.title,
        // That it returns an agent_id at once, the server's instructions say for every spawn tool.
        description: backend.description,
        input: inputSchema(backend, app),
      },
      { label: `spawn_${backend.name}` },
    ),
  );
}
