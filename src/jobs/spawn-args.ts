// A spawn tool's arguments (snake_case, as MCP callers send them) as the spawn use case's request:
// the one mapping for spawn_<backend> and spawn_<agent>. What a backend adds (extraInput) passes
// through as `extra`.
import type { Backend } from '../../backends/types.js';
import type { Isolation } from '../config/config.js';
import type { SandboxMode } from '../config/sandbox.js';
import type { AgentDefinition } from './agents/definitions.js';
import type { SpawnRequest } from './spawn.js';

export type SpawnArgs = {
  prompt: string;
  model?: string;
  cwd?: string;
  system_prompt?: string;
  resume?: string;
  /** A session agent's: start over instead of continuing its conversation. */
  new_session?: boolean;
  timeout_s?: number;
  output_schema?: Record<string, unknown>;
  ask_parent?: boolean;
  budget?: { max_turns?: number; max_budget_usd?: number };
  isolation?: Isolation;
  base?: string;
  sandbox?: SandboxMode;
  [extra: string]: unknown;
};

/** The request a spawn tool's call makes; `agent` for spawn_<agent>. */
export function spawnRequestFrom(
  args: SpawnArgs,
  who: { backend: Backend; label: string; caller: string | undefined; agent?: AgentDefinition },
): SpawnRequest {
  const {
    prompt,
    model,
    cwd,
    system_prompt,
    resume,
    new_session,
    timeout_s,
    output_schema,
    ask_parent,
    budget,
    isolation,
    base,
    sandbox,
    ...extra
  } = args;
  return {
    backend: who.backend,
    label: who.label,
    caller: who.caller,
    prompt,
    model,
    cwd,
    systemPrompt: system_prompt,
    resume,
    timeoutS: timeout_s,
    outputSchema: output_schema,
    askParent: ask_parent,
    maxTurns: budget?.max_turns,
    maxBudgetUsd: budget?.max_budget_usd,
    isolation,
    base,
    ...(sandbox ? { sandbox } : {}),
    extra,
    ...(who.agent ? { agent: { definition: who.agent, newSession: new_session } } : {}),
  };
}
