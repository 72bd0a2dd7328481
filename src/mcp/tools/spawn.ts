// spawn_<backend>: one tool per enabled backend. Queues a job and returns its id at once
// (or, with wait_s, its result when it finishes in time).
import { statSync } from 'node:fs';
import { resolve } from 'node:path';
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { z } from 'zod';
import type { Backend, BackendModels } from '../../../backends/types.js';
import type { App } from '../../app.js';
import { isFinished } from '../../jobs/table.js';
import { resolveModel } from '../../config/models.js';
import { schemaProblem, type JsonSchema } from '../../jobs/structured-output.js';
import { brief } from '../tool-list.js';
import { fullResult, jobResultSchema, toolResult, ToolInputError } from '../views.js';
import { MAX_WAIT_S, waitWithProgress } from './wait.js';

const MAX_PROMPT_CHARS = 2_000_000;
const JOB_ID = /^[a-z2-9]{6}$/;

/** A backend's models, as the full schema and the server's instructions say them. */
export const modelsText = (models: BackendModels) => {
  const aliases = Object.keys(models.aliases);
  return `${models.default} by default${aliases.length ? `; aliases: ${aliases.join(', ')}` : ''}`;
};

// The inputs the backends' tools and the named agents' tools share. The server's instructions
// explain them once (src/server.ts), so the compact tools/list leaves most undescribed (brief).
export const promptField = () =>
  brief(
    z
      .string()
      .max(MAX_PROMPT_CHARS, `prompt is longer than ${MAX_PROMPT_CHARS} characters: put long material in a file and point the agent at it`)
      .refine((s) => s.trim().length > 0, 'prompt is empty: say what the agent should do')
      .describe('Self-contained: the agent sees nothing else'),
    '',
  );

export const outputSchemaField = () =>
  brief(
    z
      .record(z.string(), z.unknown())
      .optional()
      .describe('A JSON Schema the answer must match: the answer is validated (one retry with the errors on a mismatch) and returned as `structured`'),
    '',
  );

// The instructions name each backend's models (src/server.ts).
export const modelField = (models: BackendModels) => brief(z.string().max(200).optional().describe(modelsText(models)), '');
export const cwdField = () => z.string().min(1).max(4096).optional();
export const resumeField = () => z.string().min(1).max(200).optional();
export const timeoutField = () =>
  z
    .number()
    .int()
    .min(1)
    .max(7 * 86400)
    .optional();
export const waitField = () => z.number().min(0).max(MAX_WAIT_S).optional();
/** A backend's own extra inputs: the compact list gives their names and types only (the full list keeps their descriptions). */
export const extraFields = (backend: Backend): z.ZodRawShape =>
  Object.fromEntries(Object.entries(backend.extraInput ?? {}).map(([key, schema]) => [key, brief(schema as z.ZodType, '')]));

/** A caller's output_schema, checked: a compilable JSON Schema the backend can take, or a ToolInputError. */
export function checkOutputSchema(schema: unknown, backend: Backend): JsonSchema | undefined {
  if (schema === undefined) return undefined;
  const problem = schemaProblem(schema, backend);
  if (problem) throw new ToolInputError(`output_schema: ${problem}`);
  return schema as JsonSchema;
}

function inputSchema(backend: Backend, app: App) {
  return z
    .object({
      prompt: promptField(),
      model: modelField(app.models[backend.name]!),
      // API backends answer from the prompt alone: no folder to work in.
      ...(backend.kind === 'cli' ? { cwd: cwdField() } : {}),
      ...(backend.supportsSystemPrompt ? { system_prompt: z.string().max(200_000).optional() } : {}),
      ...(backend.supportsResume ? { resume: brief(resumeField().describe('agent_id or session_id to continue'), '') } : {}),
      timeout_s: brief(timeoutField().describe(`Default ${app.config.timeoutS}`), ''),
      wait_s: waitField(),
      output_schema: outputSchemaField(),
      ...extraFields(backend),
    })
    .strict();
}

type SpawnArgs = {
  prompt: string;
  model?: string;
  cwd?: string;
  system_prompt?: string;
  resume?: string;
  timeout_s?: number;
  wait_s?: number;
  output_schema?: Record<string, unknown>;
  [extra: string]: unknown;
};

export function resolveCwd(app: App, cwd: string | undefined): string {
  const dir = resolve(app.config.projectDir, cwd ?? '.');
  let isDir = false;
  try {
    isDir = statSync(dir).isDirectory();
  } catch {
    // reported below
  }
  if (!isDir) throw new ToolInputError(`cwd "${dir}" is not an existing folder: pass an existing folder, absolute or relative to ${app.config.projectDir}`);
  return dir;
}

export function resolveResume(app: App, backend: Backend, resume: string | undefined): string | undefined {
  if (resume === undefined) return undefined;
  const earlier = app.jobs.get(resume);
  if (earlier) {
    if (earlier.backend !== backend.name) {
      throw new ToolInputError(`agent ${resume} ran on ${earlier.backend}, not ${backend.name}: resume it with spawn_${earlier.backend}`);
    }
    const session = earlier.outcome?.sessionId;
    if (!session) throw new ToolInputError(`agent ${resume} has no session to resume yet (state: ${earlier.state}): wait for it to finish`);
    return session;
  }
  if (JOB_ID.test(resume)) throw new ToolInputError(`no agent with id "${resume}": pass an agent_id from list, or a session_id`);
  if (/\s/.test(resume)) throw new ToolInputError('resume must be an agent_id or a session_id, without spaces');
  return resume;
}

export function registerSpawnTools(server: McpServer, app: App): void {
  for (const backend of app.backends) {
    server.registerTool(
      `spawn_${backend.name}`,
      {
        title: backend.title,
        // That it returns an agent_id at once, the server's instructions say for every spawn tool.
        description: backend.description,
        inputSchema: inputSchema(backend, app),
        outputSchema: jobResultSchema,
        // API backends return text only: they change nothing on this machine.
        annotations: { readOnlyHint: false, destructiveHint: backend.kind === 'cli', idempotentHint: false, openWorldHint: true },
      },
      async (args, extra) => {
        // The schema above was built per backend, so zod cannot type the optional fields.
        const { prompt, model, cwd, system_prompt, resume, timeout_s, wait_s, output_schema, ...rest } = args as SpawnArgs;
        const availability = app.availability(backend);
        if (!availability.usable) throw new ToolInputError(`spawn_${backend.name} cannot run here: ${availability.detail}`);
        const resolved = resolveModel(app.models, backend.name, model);
        if ('error' in resolved) throw new ToolInputError(resolved.error);
        const outputSchema = checkOutputSchema(output_schema, backend);
        const resumeSessionId = resolveResume(app, backend, resume);
        // The session's running totals after its newest turn; after a restart only the stored
        // record of the agent named in `resume` is at hand.
        const previousSessionTotals = resumeSessionId
          ? (app.jobs.latestInSession(backend.name, resumeSessionId) ?? app.jobs.get(resume!))?.outcome?.sessionTotals
          : undefined;
        const job = app.jobs.submit({
          backend: backend.name,
          model: resolved.model,
          prompt,
          cwd: resolveCwd(app, cwd),
          timeoutS: timeout_s ?? app.config.timeoutS,
          ...(system_prompt ? { systemPrompt: system_prompt } : {}),
          ...(resumeSessionId ? { resumeSessionId } : {}),
          ...(previousSessionTotals ? { previousSessionTotals } : {}),
          ...(outputSchema ? { outputSchema } : {}),
          extra: rest,
        });
        if (wait_s && !isFinished(job.state)) await waitWithProgress(app, [job.id], wait_s, 'all', extra);
        return toolResult(fullResult(app, job));
      },
    );
  }
}
