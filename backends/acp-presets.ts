// The ACP agents measured with polyspawn (test/contract/acp.test.ts, ../shared facts): a config
// line `"acp_agents": { "<name>": { "preset": "<preset>" } }` turns one on; any field of the
// declaration overrides the preset's. What each knows of its vendor's CLI (its keys' shapes, its
// login variables, where it keeps its state) is the built-in backend's own.
import type { AcpAgent } from './acp.js';
import { claude, rootSandboxEnv } from './claude.js';
import { codex } from './codex.js';
import { copilot } from './copilot.js';

type Preset = Omit<AcpAgent, 'name'>;

/** Allow, refuse, or ask the orchestrator: the permission modes every preset offers, `ask` the default. */
const ASK_FIRST = { ask: 'ask', allow: 'allow', deny: 'deny' } as const;

export const ACP_PRESETS: Readonly<Record<string, Preset>> = {
  gemini: {
    description: 'Gemini CLI (ACP): edits files.',
    command: 'gemini',
    // --skip-trust: an untrusted folder ignores MCP servers and refuses yolo (measured).
    args: ['--acp', '--skip-trust'],
    modelArgs: ['--model', '{model}'],
    env: ['GEMINI_API_KEY', 'GOOGLE_API_KEY'],
    permissions: ASK_FIRST,
    usage: 'meta_token_count',
    mcp: 'http',
    reportsCost: false,
    // It reads and writes through the client when offered, and needs a missing file read as empty.
    fs: true,
    startTimeoutS: 60,
    installHint: 'install it with `npm install -g @google/gemini-cli`',
    modelEndpointEnv: ['GOOGLE_GEMINI_BASE_URL'],
  },
  copilot: {
    description: 'Copilot CLI (ACP): edits files.',
    command: 'copilot',
    args: ['--acp'],
    // Its BYOK mode (a model provider of your own) refuses to start without one.
    modelArgs: ['--model', '{model}'],
    models: copilot.models,
    env: [...copilot.loginEnv],
    permissions: ASK_FIRST,
    // PromptResponse.usage adds up over the session in one process, anew after session/load (measured).
    usage: 'cumulative',
    // It refuses stdio MCP servers from the client; HTTP with a bearer header works.
    mcp: 'http',
    reportsCost: false,
    fs: false,
    startTimeoutS: 60,
    installHint: copilot.installHint,
    secretPatterns: copilot.secretPatterns,
    modelEndpointEnv: copilot.modelEndpointEnv,
    sandboxPaths: copilot.sandboxPaths,
  },
  claude: {
    description: 'Claude Code (ACP): edits files.',
    command: 'claude-agent-acp',
    args: [],
    // CLAUDE_CODE_EXECUTABLE: which claude the adapter runs.
    env: [...claude.loginEnv, 'CLAUDE_CODE_EXECUTABLE'],
    permissions: ASK_FIRST,
    usage: 'per_turn',
    // It starts in `auto`, which runs tools without asking; `default` asks for each.
    sessionMode: 'default',
    mcp: 'http',
    // usage_update.cost, in USD, over the session.
    reportsCost: true,
    fs: false,
    startTimeoutS: 60,
    installHint: 'install it with `npm install -g @agentclientprotocol/claude-agent-acp`',
    secretPatterns: claude.secretPatterns,
    removeEnv: claude.removeEnv,
    // The adapter starts claude allowed to skip permissions later, which as root needs this.
    setEnv: rootSandboxEnv,
    modelEndpointEnv: claude.modelEndpointEnv,
    sandboxPaths: claude.sandboxPaths,
  },
  codex: {
    description: 'Codex (ACP): edits files.',
    command: 'codex-acp',
    args: [],
    // CODEX_PATH: which codex the adapter runs.
    env: [...codex.loginEnv, 'CODEX_PATH'],
    permissions: ASK_FIRST,
    usage: 'per_turn',
    // It starts in `agent`, which asks only for what it deems unsafe; `read-only` asks before each edit.
    sessionMode: 'read-only',
    mcp: 'http',
    reportsCost: false,
    fs: false,
    startTimeoutS: 60,
    installHint: 'install it with `npm install -g @agentclientprotocol/codex-acp`',
    secretPatterns: codex.secretPatterns,
    modelEndpointEnv: codex.modelEndpointEnv,
    sandboxPaths: codex.sandboxPaths,
  },
};
