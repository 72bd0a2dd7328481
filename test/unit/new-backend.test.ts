// Adding a backend is one file and one line in backends/registry.ts: two throwaway backends
// (an HTTP API and a CLI) given beside the registry's show up everywhere a backend does, with
// nothing else changed: tools/list and the instructions, doctor, init's client configuration,
// redaction, agent definitions and the output schema's limit. And one with no default model is a
// configuration error that says where to add it, never a crash.
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import { parse as parseToml } from 'smol-toml';
import { afterEach, describe, expect, test } from 'vitest';
import { backends as registry } from '../../backends/registry.js';
import type { ApiBackend, CliBackend } from '../../backends/types.js';
import { createApp, type App } from '../../src/app.js';
import { collectDoctor, formatDoctor } from '../../src/commands/doctor.js';
import { runInit } from '../../src/commands/init.js';
import { ConfigError } from '../../src/lib/errors.js';
import { configuredSecrets } from '../../src/config/keys.js';
import { checkDefinition } from '../../src/jobs/agents/definitions.js';
import { schemaProblem } from '../../src/jobs/structured-output.js';
import { createServer } from '../../src/mcp/server.js';

const ACME_KEY = 'acme-key-0123456789abcdef';

const acme: ApiBackend = {
  name: 'acme',
  kind: 'api',
  title: 'Acme (Acme API)',
  description: 'Acme by API, from the prompt alone: second opinions.',
  keyNames: ['ACME_API_KEY', 'ACME_KEY'],
  keyLabel: 'Acme API key',
  secretPatterns: [String.raw`\bacmek_[A-Za-z0-9]{20,}`],
  models: { default: 'acme-1', aliases: { fast: 'acme-1-mini' }, prices: {} },
  defaultBaseUrl: 'https://api.acme.test/v1',
  supportsSystemPrompt: true,
  supportsResume: false,
  // Echoes the key it was given: what reaches a result must be redacted.
  async call(input, ctx) {
    return {
      ok: true,
      text: `${input.model} at ${ctx.baseUrl ?? acme.defaultBaseUrl} with ${ctx.key}`,
      costSource: 'unknown',
    };
  },
};

const anvil: CliBackend = {
  name: 'anvil',
  kind: 'cli',
  title: 'Anvil agent',
  description: 'Anvil, a coding agent working in a folder.',
  executable: 'anvil',
  binEnv: 'POLYSPAWN_ANVIL_BIN',
  installHint: 'install it with `npm install -g anvil`',
  supportsSystemPrompt: false,
  supportsResume: false,
  supportsToolLists: true,
  permissionModes: ['all'],
  secretPatterns: [],
  models: { default: 'anvil-1', aliases: {}, prices: {} },
  loginEnv: ['ANVIL_TOKEN', 'ANVIL_HOME'],
  removeEnv: ['ANVIL_NESTED'],
  modelEndpointEnv: ['ANVIL_BASE_URL'],
  maxOutputSchemaBytes: 100,
  command: (input, settings) => ({
    file: settings.bin ?? 'anvil',
    args: [],
    env: { ANVIL_NESTED: undefined },
    stdin: input.prompt,
  }),
  parse: (run) => ({ ok: run.exitCode === 0, text: run.stdout, costSource: 'unknown' }),
};

const all = [...registry, acme, anvil];

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/**
 * A project with api_keys.json holding acme's key (under its second name), no models.json
 * override (the backends' own tables are the whole story), and a bin folder with an `anvil`
 * whose --version says whether it saw ANVIL_NESTED, and which otherwise answers with its prompt.
 */
function project() {
  const root = mkdtempSync(join(tmpdir(), 'polyspawn-new-backend-'));
  cleanups.push(() => rmSync(root, { recursive: true, force: true }));
  const dir = join(root, 'project');
  const bin = join(root, 'bin');
  mkdirSync(dir);
  mkdirSync(bin);
  writeFileSync(
    join(bin, 'anvil'),
    '#!/bin/sh\nif [ "$1" = --version ]; then echo "anvil 1.2.3${ANVIL_NESTED:+ (nested)}"; else cat; fi\n',
  );
  chmodSync(join(bin, 'anvil'), 0o755);
  writeFileSync(join(dir, 'api_keys.json'), JSON.stringify({ ACME_KEY: ACME_KEY }));
  const env: NodeJS.ProcessEnv = {
    // Named, not left to the working folder: the spawn tools' key check reads the project's
    // api_keys.json from the environment's project, not from createApp's cwd.
    POLYSPAWN_PROJECT_DIR: dir,
    PATH: [bin, '/usr/bin', '/bin'].join(delimiter),
    HOME: root,
    XDG_CONFIG_HOME: join(root, 'xdg'),
    ANVIL_NESTED: '1',
  };
  return { root, dir, env };
}

async function connect(app: App) {
  const server = createServer(app);
  const [a, b] = InMemoryTransport.createLinkedPair();
  await server.connect(a);
  const client = new Client({ name: 'c', version: '1' });
  await client.connect(b);
  cleanups.push(async () => {
    await client.close();
    await server.close();
    app.agents.close();
    await app.jobs.shutdown();
    await app.iac.close();
  });
  return client;
}

describe('a backend added beside the registry', () => {
  test('tools/list and the instructions: its spawn tool and its models, which define_agent takes by name', async () => {
    const p = project();
    const client = await connect(createApp(p.env, p.dir, () => true, all));
    const { tools } = await client.listTools();
    const names = tools.map((t) => t.name);
    expect(names).toEqual(expect.arrayContaining(['spawn_acme', 'spawn_anvil', 'spawn_claude']));
    const spawnAcme = tools.find((t) => t.name === 'spawn_acme')!;
    expect(spawnAcme.description).toContain('Acme by API');
    const define = tools.find((t) => t.name === 'define_agent')!;
    const props = define.inputSchema.properties as Record<string, { description?: string }>;
    // The compact list leaves the names to the instructions' backend list (below); the full list names them.
    expect(props.backend!.description).toBeUndefined();
    const instructions = client.getInstructions() ?? '';
    expect(instructions).toContain('- spawn_acme: usable. model: acme-1 by default; aliases: fast');
    expect(instructions).toMatch(/- spawn_anvil: usable\. model: anvil-1 by default/);
    expect(instructions).toMatch(/CLI agents \([^)]*spawn_anvil\)/);
  });

  test('the full tool list names it among the backends and, for allow/deny, among the CLIs with tool lists', async () => {
    const p = project();
    const client = await connect(createApp({ ...p.env, POLYSPAWN_TOOL_SCHEMAS: 'full' }, p.dir, () => true, all));
    const define = (await client.listTools()).tools.find((t) => t.name === 'define_agent')!;
    const props = define.inputSchema.properties as Record<string, { description?: string }>;
    expect(props.backend!.description).toBe(`${[...registry.map((b) => b.name), 'acme'].join(', ')} or anvil`);
    const withToolLists = all.filter((b) => b.kind === 'cli' && b.supportsToolLists).map((b) => b.name);
    expect(withToolLists).toEqual(expect.arrayContaining(['claude', 'copilot', 'anvil']));
    expect(props.allow!.description).toBe(`Tools it may use (${withToolLists.join(', ')})`);
    expect(props.deny!.description).toBe(`Tools it may not use (${withToolLists.join(', ')})`);
  });

  test('spawns run them: the API with its key, default model and base URL; its key, found under a name only it declares, redacted from results', async () => {
    const p = project();
    // ACME_KEY says neither API_KEY nor TOKEN: only acme's keyNames make it a secret.
    const envKey = 'acme-env-key-abcdefghij';
    const client = await connect(
      createApp(
        { ...p.env, ACME_KEY: envKey, POLYSPAWN_ANVIL_BIN: join(p.root, 'bin', 'anvil') },
        p.dir,
        () => true,
        all,
      ),
    );
    const api = JSON.stringify(
      await client.callTool({ name: 'spawn_acme', arguments: { prompt: 'hello', wait_s: 10 } }),
    );
    expect(api).toContain('"state":"succeeded"');
    expect(api).toContain('acme-1 at https://api.acme.test/v1 with [REDACTED]');
    expect(api).not.toContain(ACME_KEY);
    const cli = JSON.stringify(
      await client.callTool({ name: 'spawn_anvil', arguments: { prompt: `say ${envKey}`, wait_s: 10 } }),
    );
    expect(cli).toContain('"state":"succeeded"');
    expect(cli).toContain('say [REDACTED]');
    expect(cli).not.toContain(envKey);
  });

  test('doctor: its key found under its second name, its default base URL; the CLI checked without its removed variables', async () => {
    const p = project();
    const report = await collectDoctor(p.env, p.dir, { backends: all });
    const acmeRow = report.backends.find((b) => b.name === 'acme')!;
    expect(acmeRow).toMatchObject({
      kind: 'api',
      usable: true,
      model: 'acme-1',
      keySource: `ACME_KEY in ${join(p.dir, 'api_keys.json')}`,
      baseUrl: 'https://api.acme.test/v1',
    });
    const anvilRow = report.backends.find((b) => b.name === 'anvil')!;
    expect(anvilRow).toMatchObject({
      kind: 'cli',
      usable: true,
      model: 'anvil-1',
      version: { ok: true, version: 'anvil 1.2.3' },
    });
    const text = formatDoctor(report);
    expect(text).toMatch(
      new RegExp(
        `^acme +api +ok +acme-1 +key ACME_KEY in ${join(p.dir, 'api_keys.json')}; base URL https://api\\.acme\\.test/v1 \\(default\\)$`,
        'm',
      ),
    );
    // It declares no signInCheck: installed, and doctor says it did not check the sign-in.
    expect(text).toMatch(
      /^anvil +cli +installed +anvil-1 +\S+\/anvil, anvil 1\.2\.3; sign-in not checked: anvil cannot tell without sending a request$/m,
    );
    expect(text).not.toContain(ACME_KEY);
  });

  test('init: a VS Code password prompt for its key, and its key and login variables in Codex env_vars', () => {
    const p = project();
    const codexHome = join(p.root, 'codex');
    const reports = runInit({
      dir: p.dir,
      clients: ['vscode', 'codex'],
      server: { command: 'node', args: ['/x/cli.js'] },
      codexHome,
      backends: all,
    });
    expect(reports.map((r) => r.action)).toEqual(['created', 'created']);
    const vscode = JSON.parse(readFileSync(join(p.dir, '.vscode', 'mcp.json'), 'utf8'));
    expect(vscode.servers.agents.env.ACME_API_KEY).toBe('${input:acme-api-key}');
    expect(vscode.inputs).toContainEqual({
      type: 'promptString',
      id: 'acme-api-key',
      description: 'Acme API key for spawn_acme (leave empty to skip acme)',
      password: true,
    });
    // One password prompt per API backend: the registry's, then the added one.
    const ids = vscode.inputs.map((i: { id: string }) => i.id);
    expect(ids).toHaveLength(all.filter((b) => b.kind === 'api').length);
    expect(ids).toEqual(expect.arrayContaining(['xai-api-key', 'gemini-api-key', 'mistral-api-key']));
    expect(ids.at(-1)).toBe('acme-api-key');
    const codex = parseToml(readFileSync(join(codexHome, 'config.toml'), 'utf8')) as {
      mcp_servers: { agents: { env_vars: string[] } };
    };
    expect(codex.mcp_servers.agents.env_vars).toEqual(
      expect.arrayContaining(['ACME_API_KEY', 'ACME_KEY', 'ANVIL_TOKEN', 'ANVIL_HOME', 'XAI_API_KEY', 'CODEX_HOME']),
    );
  });

  test("redaction: the app redacts its keys' shape", () => {
    const p = project();
    const shaped = 'acmek_ABCDEFGHIJKLMNOPQRSTUV';
    const withAcme = createApp(p.env, p.dir, () => true, all);
    const without = createApp(p.env, p.dir, () => true, registry);
    cleanups.push(async () => {
      for (const app of [withAcme, without]) {
        app.agents.close();
        await app.iac.close();
      }
    });
    expect(withAcme.secrets.text(`key ${shaped} here`)).toBe('key [REDACTED] here');
    expect(without.secrets.text(`key ${shaped} here`)).toBe(`key ${shaped} here`);
  });

  test('redaction: its key is a configured secret, from api_keys.json or the environment', () => {
    const p = project();
    const dirs = { projectDir: p.dir, userConfigDir: join(p.root, 'xdg', 'polyspawn') };
    expect(configuredSecrets(all, dirs, {})).toContain(ACME_KEY);
    const fromEnv = 'acme-env-key-abcdefghij';
    expect(configuredSecrets([acme], { projectDir: p.root, userConfigDir: p.root }, { ACME_KEY: fromEnv })).toContain(
      fromEnv,
    );
    expect(
      configuredSecrets(registry, { projectDir: p.root, userConfigDir: p.root }, { ACME_KEY: fromEnv }),
    ).not.toContain(fromEnv);
  });

  test('agent definitions: a missing backend is told it among the backends; its own limits apply to output schemas', () => {
    const p = project();
    const app = createApp(p.env, p.dir, () => true, all);
    cleanups.push(async () => {
      app.agents.close();
      await app.iac.close();
    });
    const where = { scope: 'project' as const, file: join(p.dir, 'agent.md') };
    const missing = checkDefinition('helper', { description: 'Helps.' }, 'You help.', where, app.agents.ctx);
    expect(missing).toEqual({
      problems: [`backend: is required: one of the backends (${all.map((b) => b.name).join(', ')})`],
    });
    const schema = { type: 'object', description: 'x'.repeat(200) };
    expect(schemaProblem(schema, anvil)).toBe(
      'the output schema is 234 bytes as JSON text, more than the 100 anvil takes on its command line: simplify it',
    );
    expect(schemaProblem(schema, acme)).toBeUndefined();
    const tooLong = checkDefinition(
      'helper',
      { description: 'Helps.', backend: 'anvil', output_schema: schema },
      'You help.',
      where,
      app.agents.ctx,
    );
    expect(tooLong).toMatchObject({
      problems: expect.arrayContaining([
        'output_schema: the output schema is 234 bytes as JSON text, more than the 100 anvil takes on its command line: simplify it',
      ]),
    });
  });

  test('no default model: a configuration error naming the backend file or an override to set it in, from the server and doctor alike; disabled or overridden, no error', async () => {
    const p = project();
    const withoutDefault = [...registry, { ...acme, models: { ...acme.models, default: '' } }, anvil];
    const expected =
      /^no default model for acme: set models\.default in backends\/acme\.ts \(shipped with the backend\), or add "acme": \{ "default": "<model>" \} to a models\.json override/;
    expect(() => createApp(p.env, p.dir, () => true, withoutDefault)).toThrow(ConfigError);
    expect(() => createApp(p.env, p.dir, () => true, withoutDefault)).toThrow(expected);
    await expect(collectDoctor(p.env, p.dir, { backends: withoutDefault })).rejects.toThrow(expected);
    const disabled = createApp({ ...p.env, POLYSPAWN_ACME_ENABLED: '0' }, p.dir, () => true, withoutDefault);
    const override = join(p.root, 'models.json');
    writeFileSync(override, JSON.stringify({ $comment: 'acme renamed its model', acme: { default: 'acme-2' } }));
    const overridden = createApp({ ...p.env, POLYSPAWN_MODELS: override }, p.dir, () => true, withoutDefault);
    cleanups.push(async () => {
      for (const app of [disabled, overridden]) {
        app.agents.close();
        await app.iac.close();
      }
    });
    expect(disabled.backends.map((b) => b.name)).not.toContain('acme');
    expect(overridden.models.acme).toEqual({ default: 'acme-2', aliases: { fast: 'acme-1-mini' }, prices: {} });
  });
});
