// tools/list as served (src/mcp/tool-list.ts): input schemas with what a model needs, not the size
// limits the server enforces anyway; brief() listings; titles, output schemas and every hint for
// the clients; the SDK's own list with POLYSPAWN_TOOL_SCHEMAS=full; and polyspawn's own list and
// instructions within their budgets.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { AjvJsonSchemaValidator as V1Validator } from '@modelcontextprotocol/sdk/validation/ajv';
import { AjvJsonSchemaValidator as V2Validator } from '@modelcontextprotocol/client/validators/ajv';
import { InMemoryTransport, McpServer } from '@modelcontextprotocol/server';
import { describe, expect, test } from 'vitest';
import { z } from 'zod';
import { createApp } from '../../src/app.js';
import { createServer } from '../../src/mcp/server.js';
import { lazyParentChannel } from '../../src/mcp/channel/index.js';
import type { App } from '../../src/app.js';
import { brief, modelVisibleBytes } from '../../src/mcp/tool-list.js';
import { serveTools } from '../../src/mcp/tool-server.js';
import { tool, type ToolDeclaration } from '../../src/mcp/tools/tool.js';
import { backendNames } from '../helpers/backends.js';
import { ACP_PRESETS } from '../../backends/acp-presets.js';

const spawnX = tool({
  name: 'spawn_x',
  title: 'X agent',
  description: 'Runs X.',
  input: z
    .object({
      prompt: z.string().max(2_000_000).describe('The task'),
      timeout_s: z.number().int().min(1).max(100).optional(),
      mode: z.enum(['a', 'b']).optional(),
      schema: z.record(z.string(), z.unknown()).optional(),
      either: z.union([z.boolean(), z.number().int().min(0).max(3)]).optional(),
      short: brief(z.string().optional().describe('A long explanation, for the README'), 'Short'),
      none: brief(z.boolean().optional().describe('Said in the instructions'), ''),
      nested: brief(
        z
          .record(z.string(), z.object({ command: z.string() }).strict())
          .optional()
          .describe('Servers'),
        { type: 'object', description: '{name: {command}}' },
      ),
    })
    .strict(),
  output: z.object({ agent_id: z.string(), state: z.enum(['queued', 'running']) }),
  annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: true },
  handler: () => ({ agent_id: 'a', state: 'queued' }),
});

const look = tool({
  name: 'look',
  title: 'Look',
  description: 'Looks.',
  input: z.object({}).strict(),
  output: z.object({}),
  annotations: { readOnlyHint: true, openWorldHint: false },
  handler: () => ({}),
});

/** tools/list through the SDK's client, twice: before and after `change` replaced spawn_x's declaration. */
async function listed(env: NodeJS.ProcessEnv, change?: ToolDeclaration) {
  const server = new McpServer({ name: 't', version: '1' });
  let tools: ToolDeclaration[] = [spawnX, look];
  // serveTools reads only the app's environment when no call starts a task.
  serveTools(server, { env } as unknown as App, [{ tools: () => tools }]);
  const [a, b] = InMemoryTransport.createLinkedPair();
  await server.connect(a);
  const client = new Client({ name: 'c', version: '1' });
  await client.connect(b);
  const first = (await client.listTools()).tools;
  if (change) tools = [change, look];
  const second = (await client.listTools()).tools;
  await client.close();
  return { first, second };
}

describe('the tool list', () => {
  test('input: types, enums, required fields and descriptions; no limits, no $schema, no keywords that say nothing; title, output schema and hints whole', async () => {
    const { first } = await listed({});
    const spawn = first.find((t) => t.name === 'spawn_x')!;
    expect(spawn).toEqual({
      name: 'spawn_x',
      title: 'X agent',
      description: 'Runs X.',
      inputSchema: {
        type: 'object',
        properties: {
          prompt: { type: 'string', description: 'The task' },
          timeout_s: { type: 'integer' },
          mode: { type: 'string', enum: ['a', 'b'] },
          schema: { type: 'object' },
          // anyOf of bare types, once the limits are gone: one type list.
          either: { type: ['boolean', 'integer'] },
          // brief(): a shorter description, none, or a stand-in.
          short: { type: 'string', description: 'Short' },
          none: { type: 'boolean' },
          nested: { type: 'object', description: '{name: {command}}' },
        },
        required: ['prompt'],
      },
      // As the SDK converts it, so the client checks a result as the server does; named by its content.
      outputSchema: {
        $id: expect.stringMatching(/^urn:polyspawn:output:[0-9a-f]{16}$/),
        type: 'object',
        properties: { agent_id: { type: 'string' }, state: { type: 'string', enum: ['queued', 'running'] } },
        required: ['agent_id', 'state'],
        additionalProperties: false,
      },
      annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: true },
    });
    // The spec's defaults filled in; a read-only tool destroys nothing and may be called again.
    const looked = first.find((t) => t.name === 'look')!;
    expect(looked.annotations).toEqual({
      readOnlyHint: true,
      destructiveHint: false,
      idempotentHint: true,
      openWorldHint: false,
    });
  });

  test('a tool whose declaration changed (a named agent edited) is listed anew', async () => {
    const { second } = await listed({}, { ...spawnX, description: 'Runs X, now better.' });
    expect(second.find((t) => t.name === 'spawn_x')!.description).toBe('Runs X, now better.');
  });

  test('POLYSPAWN_TOOL_SCHEMAS=full: every schema whole, output fields and limits included', async () => {
    const { first } = await listed({ POLYSPAWN_TOOL_SCHEMAS: 'full' });
    const spawn = first.find((t) => t.name === 'spawn_x')!;
    expect(spawn.outputSchema?.properties).toHaveProperty('agent_id');
    expect(spawn.inputSchema.properties!.prompt).toMatchObject({ maxLength: 2_000_000 });
    expect(spawn.title).toBe('X agent');
    // What brief() shortens stays whole there (the README's tool reference is generated from it).
    expect(spawn.inputSchema.properties!.short).toMatchObject({ description: 'A long explanation, for the README' });
    expect(spawn.inputSchema.properties!.none).toMatchObject({ description: 'Said in the instructions' });
    expect(JSON.stringify(spawn.inputSchema.properties!.nested)).toContain('"command"');
  });
});

// Issues 7 and 19: what a model's client sends it of each tool (name, description, inputSchema)
// and the server's instructions sit in its context all session long. bench/coldstart.mjs prints
// the same figures with a per-tool table, from the built server. Issue 19 set 450 B a tool on
// average; a backend's spawn tool (~510 B) is above that average, so a new backend is held to a
// bound of its own tool instead of pushing the shared average over (issue 29: adding a backend or
// a topology must not turn this red merely because the list grew).
const MAX_BYTES_PER_TOOL = 450;
const MAX_BYTES_PER_SPAWN_TOOL = 560;
const spawnTools = new Set(backendNames.map((name) => `spawn_${name}`));
const MAX_INSTRUCTIONS_BYTES = 2_500;

const fakeBin = fileURLToPath(new URL('../fakes/bin', import.meta.url));

describe.each([
  // No CLI on PATH and no API key: every backend says why it is not usable (the longest instructions).
  ['nothing usable here', (dir: string) => ({ PATH: join(dir, 'no-bin') })],
  [
    'every backend usable',
    () => ({ PATH: fakeBin, XAI_API_KEY: 'xai-t', GEMINI_API_KEY: 'g-t', MISTRAL_API_KEY: 'm-t' }),
  ],
])("polyspawn's own tool list and instructions (default config, no named agents, %s)", (_, machine) => {
  test(`each tool says what it is for; a model pays at most ${MAX_BYTES_PER_SPAWN_TOOL} B per backend's spawn tool, ${MAX_BYTES_PER_TOOL} B per other tool and ${MAX_INSTRUCTIONS_BYTES} B of instructions`, async () => {
    // No POLYSPAWN_* variables and no user config: the shipped defaults.
    await withToolList(
      (dir) => ({ ...machine(dir), HOME: dir, XDG_CONFIG_HOME: join(dir, 'xdg') }),
      async (client) => {
        const { tools } = await client.listTools();
        expect(tools.length).toBeGreaterThanOrEqual(17);
        for (const tool of tools) expect(tool.description?.trim(), tool.name).toBeTruthy();
        const table = tools.map((t) => `${t.name} ${modelVisibleBytes(t)}`).join(', ');
        const spawns = tools.filter((t) => spawnTools.has(t.name));
        expect(spawns.map((t) => t.name).sort()).toEqual([...spawnTools].sort());
        for (const tool of spawns)
          expect(modelVisibleBytes(tool), `${tool.name} (${table})`).toBeLessThanOrEqual(MAX_BYTES_PER_SPAWN_TOOL);
        const others = tools.filter((t) => !spawnTools.has(t.name));
        const perTool = others.reduce((sum, t) => sum + modelVisibleBytes(t), 0) / others.length;
        expect(perTool, `a model pays ${perTool.toFixed(1)} B per other tool (${table})`).toBeLessThanOrEqual(
          MAX_BYTES_PER_TOOL,
        );
        const instructions = client.getInstructions() ?? '';
        expect(Buffer.byteLength(instructions), instructions).toBeLessThanOrEqual(MAX_INSTRUCTIONS_BYTES);
        // What spans tools stays in them: the workflow, questions, worktrees, teams, the record, each backend.
        for (const said of ['wait_for_agents', 'reply_subagent', 'worktree', 'run_team', 'IAC.md', 'spawn_mistral'])
          expect(instructions).toContain(said);
      },
    );
  });
});

test(`an ACP agent's spawn tool, from each preset or declared bare, costs a model at most ${MAX_BYTES_PER_SPAWN_TOOL} B`, async () => {
  const declared = Object.fromEntries(Object.keys(ACP_PRESETS).map((preset) => [`${preset}_acp`, { preset }]));
  await withToolList(
    (dir) => {
      const config = join(dir, 'config.json');
      writeFileSync(config, JSON.stringify({ acp_agents: { ...declared, bare_acp: { command: 'true' } } }));
      return { PATH: fakeBin, HOME: dir, POLYSPAWN_CONFIG: config };
    },
    async (client) => {
      const { tools } = await client.listTools();
      for (const name of [...Object.keys(declared), 'bare_acp'].map((n) => `spawn_${n}`)) {
        const tool = tools.find((t) => t.name === name);
        expect(tool, name).toBeDefined();
        expect(modelVisibleBytes(tool!), name).toBeLessThanOrEqual(MAX_BYTES_PER_SPAWN_TOOL);
      }
    },
  );
});

// Issue 25: a client compiles a validator for every listed output schema at each start. The
// shapes several tools return (a job's result and summary, a team's, a question) are held once
// per schema under $defs, and each schema is named by its content, so the spawn tools' one schema
// is compiled once. Both SDK clients' validators must read them as the server means them.
describe("polyspawn's output schemas", () => {
  const question = { message_id: 'm1', question: 'Which?', options: ['a', 'b'], asked_at: '2026-01-01T00:00:00Z' };
  const job = {
    agent_id: 'cabcdef',
    backend: 'codex',
    model: 'm',
    state: 'succeeded',
    task: 'do it',
    created_at: '2026-01-01T00:00:00Z',
    elapsed_s: 1.5,
    questions: [question],
    text: 'done',
  };
  const team = {
    team_id: 'tabcdef',
    topology: 'pipeline',
    state: 'succeeded',
    task: 'do it together',
    members: [{ agent_id: 'cabcdef', member: 'm', role: 'stage 1', state: 'succeeded' }],
    created_at: '2026-01-01T00:00:00Z',
    elapsed_s: 3,
    usage: { input_tokens: 1, output_tokens: 2, cached_input_tokens: 0 },
    events: [],
    member_results: [job],
  };

  test('the shared shapes are defined once per schema and referred to; equal schemas share an $id, others do not', async () => {
    await withToolList(
      (dir) => ({ PATH: fakeBin, HOME: dir, XDG_CONFIG_HOME: join(dir, 'xdg') }),
      async (client) => {
        const { tools } = await client.listTools();
        const byName = new Map(tools.map((t) => [t.name, t.outputSchema as Record<string, any>]));
        const wait = byName.get('wait_for_agents')!;
        expect(Object.keys(wait.$defs).sort()).toEqual(['job_result', 'job_summary', 'question', 'team_result']);
        expect(wait.properties.finished.items).toEqual({ $ref: '#/$defs/job_result' });
        expect(wait.properties.teams.items).toEqual({ $ref: '#/$defs/team_result' });
        expect(wait.$defs.team_result.properties.member_results.items).toEqual({ $ref: '#/$defs/job_result' });
        // result: a job's result or a team's, an object either way (MCP wants an object at the root).
        const result = byName.get('result')!;
        expect(result).toMatchObject({
          type: 'object',
          anyOf: [{ $ref: '#/$defs/job_result' }, { $ref: '#/$defs/team_result' }],
        });
        // A spawn tool's root is the job's result, written out; its question still refers.
        const spawn = byName.get('spawn_codex')!;
        expect(spawn.type).toBe('object');
        expect(spawn.properties.agent_id).toEqual({ type: 'string' });
        expect(spawn.properties.questions.items).toEqual({ $ref: '#/$defs/question' });
        // Nothing of the draft 7 spelling is left.
        expect(JSON.stringify(tools)).not.toContain('#/definitions/');
        // One $id per distinct schema.
        const texts = new Map<string, string>();
        for (const [name, schema] of byName) {
          const { $id, ...rest } = schema;
          const text = JSON.stringify(rest);
          expect(texts.get($id) ?? text, `${name}: ${$id}`).toBe(text);
          texts.set($id, text);
        }
        const spawnIds = new Set(tools.filter((t) => t.name.startsWith('spawn_')).map((t) => t.outputSchema!.$id));
        expect(spawnIds.size).toBe(1);
        expect(texts.size).toBeGreaterThan(5);
      },
    );
  });

  test.each([
    ['the v1 SDK client', () => new V1Validator()],
    ['the v2 SDK client', () => new V2Validator()],
  ])("%s's validator accepts the server's results and refuses a broken one", async (_, validator) => {
    await withToolList(
      (dir) => ({ PATH: fakeBin, HOME: dir, XDG_CONFIG_HOME: join(dir, 'xdg') }),
      async (client) => {
        const { tools } = await client.listTools();
        const v = validator();
        const check = (name: string) => v.getValidator(tools.find((t) => t.name === name)!.outputSchema!);
        for (const t of tools) expect(() => v.getValidator(t.outputSchema!), t.name).not.toThrow();
        expect(check('spawn_codex')(job).valid).toBe(true);
        expect(check('spawn_claude')({ ...job, questions: [{ question: 'no id' }] }).valid).toBe(false);
        expect(check('result')(job).valid).toBe(true);
        expect(check('result')(team).valid).toBe(true);
        expect(check('result')({ ...team, member_results: [{ ...job, state: 'nonsense' }] }).valid).toBe(false);
        const { text: _text, ...summary } = job;
        expect(
          check('wait_for_agents')({ finished: [job], pending: [summary], teams: [team], timed_out: false }).valid,
        ).toBe(true);
        expect(check('wait_for_agents')({ finished: [{ agent_id: 'x' }], pending: [], timed_out: true }).valid).toBe(
          false,
        );
        expect(check('cancel')(summary).valid).toBe(true);
      },
    );
  });
});

/**
 * The built app's tool list, served in memory with the channel to the orchestrator as `serve`
 * builds it (reply_subagent, ask_parent), in a folder of its own removed after.
 */
async function withToolList(env: (dir: string) => NodeJS.ProcessEnv, check: (client: Client) => Promise<void>) {
  const dir = mkdtempSync(join(tmpdir(), 'polyspawn-tool-list-'));
  const app = createApp(env(dir), dir, () => true, undefined, { parentChannel: lazyParentChannel });
  const server = createServer(app);
  const [a, b] = InMemoryTransport.createLinkedPair();
  await server.connect(a);
  const client = new Client({ name: 'c', version: '1' });
  try {
    await client.connect(b);
    await check(client);
  } finally {
    await client.close();
    await server.close();
    app.agents.close();
    await app.iac.close();
    rmSync(dir, { recursive: true, force: true });
  }
}
