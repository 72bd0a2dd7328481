// spawn_<agent>: one tool per named agent (src/jobs/agents/definitions.ts), kept in step with the
// definitions on disk: a definition added, changed or removed registers, replaces or removes
// its tool, and the SDK tells the client with notifications/tools/list_changed.
//
// The tool's input is the backend's spawn input minus what the definition fixes: the system
// prompt, permissions and MCP servers always; the model and the output schema when it sets
// them (a caller may pick a model, or pass an output_schema, only where the definition leaves
// it open — a preset is reproducible); `resume` gives way to `new_session` on session agents.
import type { McpServer, RegisteredTool } from '@modelcontextprotocol/sdk/server/mcp.js';
import { z } from 'zod';
import type { Backend } from '../../../backends/types.js';
import type { AgentDefinition } from '../../jobs/agents/definitions.js';
import type { App } from '../../app.js';
import { spawnJob } from '../../jobs/spawn.js';
import { brief } from '../tool-list.js';
import {
  askParentField,
  budgetField,
  budgetRequest,
  type BudgetArg,
  cwdField,
  extraFields,
  modelField,
  outputSchemaField,
  promptField,
  resumeField,
  spawnedResult,
  spawnAnnotations,
  timeoutField,
  waitField,
} from './spawn.js';
import { jobResultSchema } from '../../jobs/result.js';
import { shorten } from '../../lib/text.js';

function agentInputSchema(definition: AgentDefinition, backend: Backend, app: App) {
  return z
    .object({
      prompt: promptField(),
      ...(definition.model ? {} : { model: modelField(app.models[backend.name]!) }),
      // The compact list leaves out what the server's instructions explain for every spawn tool,
      // and new_session, which the tool's description explains.
      ...(backend.kind === 'cli'
        ? { cwd: brief(cwdField().describe('Folder to work in (default: the project)'), '') }
        : {}),
      ...(definition.session
        ? {
            new_session: brief(
              z.boolean().optional().describe('Start a new conversation instead of continuing the previous one'),
              '',
            ),
          }
        : backend.supportsResume
          ? {
              resume: brief(
                resumeField().describe('Continue an earlier run of this agent: its agent_id or session_id'),
                '',
              ),
            }
          : {}),
      timeout_s: brief(
        timeoutField().describe(`Stop after this many seconds (default ${definition.timeoutS ?? app.config.timeoutS})`),
        // Said in the list only where the definition's own default differs from everyone's.
        definition.timeoutS ? `Default ${definition.timeoutS}` : '',
      ),
      wait_s: brief(waitField().describe('Wait up to this long and return the result if done'), ''),
      ...(definition.outputSchema ? {} : { output_schema: outputSchemaField() }),
      budget: budgetField(),
      ...(definition.askParent === false ? {} : askParentField(app, backend)),
      ...extraFields(backend),
    })
    .strict();
}

/** How much of a named agent's description its tool shows (a definition may hold 2,000 characters). */
const LISTED_DESCRIPTION_CHARS = 400;

function toolDescription(definition: AgentDefinition): string {
  const facts = [`a named agent on ${definition.backend}${definition.model ? ` (${definition.model})` : ''}`];
  if (definition.session)
    facts.push(
      'it continues its previous conversation on every call (calls run one at a time; new_session: true starts over)',
    );
  if (definition.outputSchema) {
    const shape = JSON.stringify(definition.outputSchema);
    facts.push(
      `its answer is JSON matching ${shape.length <= 400 ? `the schema ${shape}` : 'its output schema (list_agents shows it)'}, returned as \`structured\``,
    );
  }
  if (definition.allowedCallers) facts.push(`only for the MCP clients ${definition.allowedCallers.join(', ')}`);
  // That it returns an agent_id at once, the server's instructions say for every spawn tool. A
  // long description is cut: a hundred agents' tools sit in the orchestrator's context.
  return `${shorten(definition.description, LISTED_DESCRIPTION_CHARS, ' … (list_agents has the rest)')}\n\n(${facts.join('; ')}.)`;
}

type AgentArgs = {
  prompt: string;
  model?: string;
  cwd?: string;
  new_session?: boolean;
  resume?: string;
  timeout_s?: number;
  wait_s?: number;
  output_schema?: Record<string, unknown>;
  ask_parent?: boolean;
  budget?: BudgetArg;
  [extra: string]: unknown;
};

function registerOne(server: McpServer, app: App, definition: AgentDefinition, backend: Backend): RegisteredTool {
  return server.registerTool(
    `spawn_${definition.name}`,
    {
      title: `${definition.name} (${backend.name} agent)`,
      description: toolDescription(definition),
      inputSchema: agentInputSchema(definition, backend, app),
      outputSchema: jobResultSchema,
      annotations: spawnAnnotations(backend),
    },
    async (args, extra) => {
      const { prompt, model, cwd, new_session, resume, timeout_s, wait_s, output_schema, ask_parent, budget, ...rest } =
        args as AgentArgs;
      const job = spawnJob(app, {
        backend,
        label: `spawn_${definition.name}`,
        caller: server.server.getClientVersion()?.name,
        prompt,
        model,
        cwd,
        resume,
        timeoutS: timeout_s,
        outputSchema: output_schema,
        askParent: ask_parent,
        ...budgetRequest(budget),
        extra: rest,
        agent: { definition, newSession: new_session },
      });
      return spawnedResult(app, job, wait_s, extra);
    },
  );
}

/** Registers spawn_<agent> for every definition in effect, and keeps them in step with the files. */
/** The function it returns stops following the definitions (the server closed). */
export function registerAgentSpawnTools(server: McpServer, app: App): () => void {
  const registered = new Map<string, { fingerprint: string; tool: RegisteredTool }>();
  const sync = () => {
    const wanted = new Map<string, { definition: AgentDefinition; backend: Backend; fingerprint: string }>();
    for (const definition of app.agents.agents.values()) {
      // A backend disabled in the config is not in app.backends: the definition is reported, not served.
      const backend = app.backends.find((b) => b.name === definition.backend);
      if (backend) wanted.set(definition.name, { definition, backend, fingerprint: JSON.stringify(definition) });
    }
    for (const [name, entry] of registered) {
      if (wanted.get(name)?.fingerprint !== entry.fingerprint) {
        entry.tool.remove();
        registered.delete(name);
      }
    }
    for (const [name, { definition, backend, fingerprint }] of wanted) {
      if (registered.has(name)) continue;
      try {
        registered.set(name, { fingerprint, tool: registerOne(server, app, definition, backend) });
      } catch (error) {
        // Another tool of that name (the checks forbid it; a future built-in might not).
        process.stderr.write(`polyspawn: agent ${name} (${definition.file}) not served: ${(error as Error).message}\n`);
      }
    }
  };
  sync();
  return app.agents.onChange(sync);
}
