// Every tool polyspawn serves, in the order tools/list shows them: the declarations
// (src/mcp/tools/*), built once per app and shared by all its servers, and the named agents'
// spawn_<agent> tools, which follow their files.
import type { App } from '../../app.js';
import type { Nesting } from '../../jobs/agents/nesting.js';
import type { ToolSource } from '../tool-server.js';
import { agentSpawnTools } from './agent-spawn.js';
import { defineAgentTool, listAgentsTool, removeAgentTool } from './agents.js';
import { cancelTool } from './cancel.js';
import { integrateTool } from './integrate.js';
import { listTool } from './list.js';
import { logsTool } from './logs.js';
import { replyTool } from './reply.js';
import { resultTool } from './result.js';
import { runTeamTool } from './run-team.js';
import { spawnTools } from './spawn.js';
import type { ToolDeclaration } from './tool.js';
import { waitTool } from './wait.js';

const declared = new WeakMap<App, { first: ToolDeclaration[]; then: ToolDeclaration[] }>();

function declarations(app: App) {
  let tools = declared.get(app);
  if (!tools) {
    tools = {
      first: spawnTools(app),
      then: [
        runTeamTool(app),
        defineAgentTool(app),
        removeAgentTool(app),
        integrateTool(app),
        ...(app.parentChannel ? [replyTool(app)] : []),
        listAgentsTool(app),
        listTool(app),
        resultTool(app),
        waitTool(app),
        cancelTool(app),
        logsTool(app),
      ],
    };
    declared.set(app, tools);
  }
  return tools;
}

/** The tools a client at this nesting gets: without those that start agents where none may start. */
export function toolSources(app: App, nesting: Nesting): ToolSource[] {
  const { first, then } = declarations(app);
  if (!nesting.canSpawn) return [{ tools: () => then.filter((tool) => !tool.spawning) }];
  return [{ tools: () => first }, agentSpawnTools(app), { tools: () => then }];
}
