// The ACP agents the user declares (`acp_agents` in their own config; a project's config may not:
// what runs is the user's choice alone, as a CLI's `bin` is). Each becomes a backend
// (backends/acp.ts) listed and spawned like the built-in ones: `spawn_<name>`.
import { z } from 'zod';
import {
  acpBackend,
  MCP_TRANSPORTS,
  PERMISSION_ANSWERS,
  USAGE_REPORTS,
  type AcpAgent,
  type AcpBackend,
} from '../../backends/acp.js';
import { ACP_PRESETS } from '../../backends/acp-presets.js';
import { ConfigError } from '../lib/errors.js';
import { ENV_NAME, isModelName, PLAIN_NAME_RULE } from '../lib/text.js';

/** A backend's name becomes a tool's (`spawn_<name>`) and variables' (`POLYSPAWN_<NAME>_BIN`). */
const AGENT_NAME = /^[a-z][a-z0-9_]{0,30}$/;
const MODE_NAME = /^[a-z][a-z0-9_-]{0,30}$/;

const acpAgentSchema = z
  .object({
    /** A measured agent's declaration to start from (backends/acp-presets.ts). */
    preset: z.enum(Object.keys(ACP_PRESETS) as [string, ...string[]]),
    description: z.string().min(1).max(200),
    command: z.string().min(1).max(4096),
    args: z.array(z.string().max(4096)).max(100),
    /** Arguments that choose the model a spawn names, `{model}` standing for it. */
    model_args: z.array(z.string().max(4096)).max(10),
    /** The model a spawn without one runs (with model_args). */
    default_model: z.string().refine(isModelName, `a model name: ${PLAIN_NAME_RULE}`),
    env: z.array(z.string().regex(ENV_NAME, 'must be a variable name')).max(100),
    permissions: z
      .record(z.string().regex(MODE_NAME, 'must be a lower-case mode name'), z.enum(PERMISSION_ANSWERS))
      .refine((modes) => Object.keys(modes).length > 0 && Object.keys(modes).length <= 20, 'name 1 to 20 modes'),
    usage: z.enum(USAGE_REPORTS),
    /** The session mode to run in (set with session/set_mode after the session starts). */
    session_mode: z.string().min(1).max(100),
    mcp: z.enum(MCP_TRANSPORTS),
    reports_cost: z.boolean(),
    fs: z.boolean(),
    start_timeout_s: z.number().int().min(1).max(600),
    install_hint: z.string().min(1).max(300),
  })
  .partial()
  .strict();

export const acpAgentsSchema = z.record(z.string().regex(AGENT_NAME, 'must be a lower-case name'), acpAgentSchema);

type Declaration = z.infer<typeof acpAgentSchema>;

/** The defaults of an agent declared without a preset: everything but its command. */
const PLAIN: Omit<AcpAgent, 'name' | 'command' | 'description' | 'installHint'> = {
  args: [],
  env: [],
  permissions: { ask: 'ask', allow: 'allow', deny: 'deny' },
  usage: 'per_turn',
  mcp: 'http',
  reportsCost: false,
  fs: false,
  startTimeoutS: 60,
};

/** The declared agents as backends; a name a built-in backend has, or a declaration without a command, is refused. */
export function acpBackends(
  declared: Record<string, Declaration> | undefined,
  builtIn: ReadonlySet<string>,
  file: string,
): AcpBackend[] {
  return Object.entries(declared ?? {}).map(([name, d]) => {
    const where = `acp_agents.${name} (${file})`;
    if (builtIn.has(name)) throw new ConfigError(`${where}: "${name}" is a built-in backend's name: choose another`);
    const preset = d.preset ? ACP_PRESETS[d.preset]! : undefined;
    const command = d.command ?? preset?.command;
    if (!command) throw new ConfigError(`${where}: say which program to run (command), or start from a preset`);
    return acpBackend({
      ...PLAIN,
      ...preset,
      name,
      command,
      description: d.description ?? preset?.description ?? `${name} (ACP): edits files.`,
      installHint: d.install_hint ?? preset?.installHint ?? `install ${command}`,
      ...(d.args && { args: d.args }),
      ...(d.model_args && { modelArgs: d.model_args }),
      ...(d.default_model && {
        models: { ...(preset?.models ?? { aliases: {}, prices: {} }), default: d.default_model },
      }),
      ...(d.env && { env: d.env }),
      ...(d.permissions && { permissions: d.permissions }),
      ...(d.usage && { usage: d.usage }),
      ...(d.session_mode && { sessionMode: d.session_mode }),
      ...(d.mcp && { mcp: d.mcp }),
      ...(d.reports_cost !== undefined && { reportsCost: d.reports_cost }),
      ...(d.fs !== undefined && { fs: d.fs }),
      ...(d.start_timeout_s && { startTimeoutS: d.start_timeout_s }),
    });
  });
}
