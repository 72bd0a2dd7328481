// spawn_<agent>: one tool per named agent (src/jobs/agents/definitions.ts), kept in step with the
// definitions on disk: a definition added, changed or removed registers, replaces or removes
// its tool, and the client hears notifications/tools/list_changed (src/mcp/tool-server.ts).
//
// The tool's input is the backend's spawn input minus what the definition fixes: the system
// prompt, permissions and MCP servers always; the model and the output schema when it sets
// them (a caller may pick a model, or pass an output_schema, only where the definition leaves
// it open — a preset is reproducible); `resume` gives way to `new_session` on session agents.
import { z } from 'zod';
import type { Backend } from '../../../backends/types.js';
import type { AgentDefinition } from '../../jobs/agents/definitions.js';
import type { App } from '../../app.js';
import { brief } from '../tool-list.js';
import type { ToolSource } from '../tool-server.js';
import type { ToolDeclaration } from './tool.js';
import {
  askParentField,
  budgetField,
  cwdField,
  extraFields,
  modelField,
  outputSchemaField,
  promptField,
  resumeField,
  spawnTool,
  timeoutField,
  waitField,
} from './spawn.js';
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

function agentTool(app: App, definition: AgentDefinition, backend: Backend): ToolDeclaration {
  return spawnTool(
    app,
    backend,
    {
      name: `spawn_${definition.name}`,
      title: `${definition.name} (${backend.name} agent)`,
      description: toolDescription(definition),
      input: agentInputSchema(definition, backend, app),
    },
    { label: `spawn_${definition.name}`, agent: definition },
  );
}

/** The named agents' tools of each app: one list for every server of the process. */
const sources = new WeakMap<App, ToolSource>();

/**
 * spawn_<agent> for every definition in effect, kept in step with the files: `tools()` is the
 * current list (a declaration kept while its definition is unchanged), and `onChange` tells a
 * server when it changed (the function it returns stops telling it).
 */
export function agentSpawnTools(app: App): ToolSource {
  let source = sources.get(app);
  if (source) return source;
  let current = new Map<string, { fingerprint: string; tool: ToolDeclaration }>();
  const listeners = new Set<() => void>();
  const sync = () => {
    const next = new Map<string, { fingerprint: string; tool: ToolDeclaration }>();
    for (const definition of app.agents.agents.values()) {
      // A backend disabled in the config is not in app.backends: the definition is reported, not served.
      const backend = app.backends.find((b) => b.name === definition.backend);
      if (!backend) continue;
      const fingerprint = JSON.stringify(definition);
      const kept = current.get(definition.name);
      next.set(definition.name, {
        fingerprint,
        tool: kept?.fingerprint === fingerprint ? kept.tool : agentTool(app, definition, backend),
      });
    }
    const changed =
      next.size !== current.size || [...next].some(([name, entry]) => current.get(name)?.tool !== entry.tool);
    current = next;
    if (changed) for (const listener of listeners) listener();
  };
  sync();
  app.agents.onChange(sync);
  source = {
    tools: () => [...current.values()].map((entry) => entry.tool),
    onChange(listener) {
      listeners.add(listener);
      return () => void listeners.delete(listener);
    },
  };
  sources.set(app, source);
  return source;
}
