// `polyspawn init`: merging into every kind of file a user may already have.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import * as jsonc from 'jsonc-parser';
import { parse as parseToml } from 'smol-toml';
import { describe, expect, test } from 'vitest';
import {
  CODEX_TOOL_TIMEOUT_S,
  initCommand,
  runInit,
  type FileReport,
  type ServerCommand,
  type ServerTarget,
} from '../../src/commands/init.js';
import { DEFAULT_WAIT_S } from '../../src/jobs/table.js';
import { apiBackendCount, apiBackendKeys, literal } from '../helpers/backends.js';
import { memoryIo } from '../helpers/command-io.js';
import { tempDir } from '../helpers/temp.js';

const server: ServerCommand = { command: '/opt/node/bin/node', args: ['/opt/polyspawn/dist/src/cli.js'] };

function setup() {
  const root = tempDir('init');
  const dir = join(root, 'project');
  const codexHome = join(root, 'codex-home');
  mkdirSync(dir);
  const file = {
    mcp: join(dir, '.mcp.json'),
    settings: join(dir, '.claude', 'settings.local.json'),
    vscode: join(dir, '.vscode', 'mcp.json'),
    codex: join(codexHome, 'config.toml'),
  };
  const write = (path: string, text: string) => {
    mkdirSync(join(path, '..'), { recursive: true });
    writeFileSync(path, text);
  };
  const read = (path: string) => readFileSync(path, 'utf8');
  const json = (path: string) => jsonc.parse(read(path)) as Record<string, any>;
  const init = (s: ServerTarget = server) =>
    runInit({ dir, clients: ['claude', 'vscode', 'codex'], server: s, codexHome });
  return { root, dir, codexHome, file, write, read, json, init };
}

const actions = (reports: FileReport[]) =>
  Object.fromEntries(reports.map((r) => [r.file.split('/').slice(-2).join('/'), r.action]));

/** Runs the command with in-memory streams; returns its exit code and what it printed. */
async function command(argv: string[], cwd: string, env: NodeJS.ProcessEnv) {
  const { io, printed } = memoryIo(env, cwd);
  const cli = join(cwd, 'installed-cli.js');
  writeFileSync(cli, '');
  const code = await initCommand(argv, io, { cli });
  return { code, ...printed() };
}

describe('init in an empty project', () => {
  test('writes all four files, each with our entry and nothing else', () => {
    const t = setup();
    const reports = t.init();
    expect(actions(reports)).toEqual({
      'project/.mcp.json': 'created',
      '.claude/settings.local.json': 'created',
      '.vscode/mcp.json': 'created',
      'codex-home/config.toml': 'created',
    });
    expect(JSON.parse(t.read(t.file.mcp))).toEqual({
      mcpServers: { agents: { type: 'stdio', command: server.command, args: server.args } },
    });
    expect(JSON.parse(t.read(t.file.settings))).toEqual({ enabledMcpjsonServers: ['agents'] });

    const vscode = JSON.parse(t.read(t.file.vscode));
    expect(vscode.servers.agents).toMatchObject({ type: 'stdio', command: server.command, args: server.args });
    // The project folder, and one key per API backend (these three among them), each a password prompt.
    expect(vscode.servers.agents.env).toMatchObject({
      POLYSPAWN_PROJECT_DIR: '${workspaceFolder}',
      XAI_API_KEY: '${input:xai-api-key}',
      GEMINI_API_KEY: '${input:gemini-api-key}',
      MISTRAL_API_KEY: '${input:mistral-api-key}',
    });
    expect(Object.keys(vscode.servers.agents.env)).toHaveLength(1 + apiBackendCount);
    const ids = vscode.inputs.map((i: { id: string }) => i.id);
    expect(ids).toEqual(expect.arrayContaining(['xai-api-key', 'gemini-api-key', 'mistral-api-key']));
    expect(ids).toHaveLength(apiBackendCount);
    for (const input of vscode.inputs) expect(input).toMatchObject({ type: 'promptString', password: true });
    // Every ${input:...} the server uses is declared, and no key value is in the file.
    for (const ref of JSON.stringify(vscode.servers).matchAll(/\$\{input:([a-z-]+)\}/g))
      expect(vscode.inputs.map((i: { id: string }) => i.id)).toContain(ref[1]);

    // any: the parsed TOML is walked by the assertions, which check its shape themselves.
    const codex = parseToml(t.read(t.file.codex)) as any;
    expect(codex.mcp_servers.agents).toMatchObject({
      command: server.command,
      args: server.args,
      tool_timeout_sec: CODEX_TOOL_TIMEOUT_S,
    });
    expect(codex.mcp_servers.agents.tool_timeout_sec).toBeGreaterThanOrEqual(DEFAULT_WAIT_S * 3);
    expect(codex.mcp_servers.agents.startup_timeout_sec).toBeGreaterThan(10);
    expect(codex.mcp_servers.agents.env_vars).toEqual(
      expect.arrayContaining(['XAI_API_KEY', 'GEMINI_API_KEY', 'MISTRAL_API_KEY']),
    );
    // Codex clears its MCP servers' environment: without these a codex agent's polyspawn is at depth 0.
    expect(codex.mcp_servers.agents.env_vars).toEqual(
      expect.arrayContaining(['POLYSPAWN_DEPTH', 'POLYSPAWN_ALLOW_DEPTH']),
    );
  });

  test('a second run changes nothing and says so', () => {
    const t = setup();
    t.init();
    const before = Object.values(t.file).map(t.read);
    const reports = t.init();
    expect(actions(reports)).toEqual({
      'project/.mcp.json': 'unchanged',
      '.claude/settings.local.json': 'unchanged',
      '.vscode/mcp.json': 'unchanged',
      'codex-home/config.toml': 'kept',
    });
    expect(Object.values(t.file).map(t.read)).toEqual(before);
    expect(reports.find((r) => r.client === 'codex')!.details.join(' ')).toMatch(/already there .*left as it is$/);
  });
});

describe('init merges into existing files', () => {
  test('keeps other servers, settings, comments and formatting; adds ours once', () => {
    const t = setup();
    const mcp = `{\n    "mcpServers": {\n        "github": { "command": "gh-mcp", "args": ["--stdio"] }\n    },\n    "other": true\n}\n`;
    const settings = `{\n  "permissions": { "allow": ["Bash(npm test)"] },\n  "enabledMcpjsonServers": ["github"],\n  "disabledMcpjsonServers": ["agents", "legacy"]\n}\n`;
    const vscode = `// my servers\n{\n  "inputs": [\n    { "type": "promptString", "id": "gh-token", "password": true }, // the token\n  ],\n  "servers": {\n    "github": { "type": "stdio", "command": "gh-mcp" },\n  },\n}\n`;
    const codex = `# my codex config\nmodel = "gpt-5.5"\n\n[mcp_servers.github]\ncommand = "gh-mcp" # inline comment\n\n[profiles.fast]\nmodel = "gpt-5.4-mini"\n`;
    t.write(t.file.mcp, mcp);
    t.write(t.file.settings, settings);
    t.write(t.file.vscode, vscode);
    t.write(t.file.codex, codex);

    const reports = t.init();
    expect(reports.every((r) => r.action === 'updated')).toBe(true);
    const details = reports.flatMap((r) => r.details).join('\n');
    expect(details).toContain('added mcpServers.agents');
    expect(details).toContain('added "agents" to enabledMcpjsonServers');
    expect(details).toContain('removed "agents" from disabledMcpjsonServers');
    expect(details).toContain('added servers.agents');
    expect(details).toContain('added inputs xai-api-key, gemini-api-key, mistral-api-key');
    expect(details).toContain('added [mcp_servers.agents]');

    const m = t.json(t.file.mcp);
    expect(m.mcpServers.github).toEqual({ command: 'gh-mcp', args: ['--stdio'] });
    expect(m.other).toBe(true);
    expect(t.read(t.file.mcp)).toMatch(/^ {8}"agents": \{/m); // the file's own 4-space indent
    const s = t.json(t.file.settings);
    expect(s).toEqual({
      permissions: { allow: ['Bash(npm test)'] },
      enabledMcpjsonServers: ['github', 'agents'],
      disabledMcpjsonServers: ['legacy'],
    });
    const v = t.read(t.file.vscode);
    expect(v).toContain('// my servers');
    expect(v).toContain('// the token');
    const vj = t.json(t.file.vscode);
    expect(Object.keys(vj.servers)).toEqual(['github', 'agents']);
    // The user's own input keeps its place; one key prompt per API backend follows it.
    const ids = vj.inputs.map((i: { id: string }) => i.id);
    expect(ids[0]).toBe('gh-token');
    expect(ids.slice(1)).toEqual(expect.arrayContaining(['xai-api-key', 'gemini-api-key', 'mistral-api-key']));
    expect(ids).toHaveLength(1 + apiBackendCount);
    // Codex: appended only, every byte of the original kept.
    const c = t.read(t.file.codex);
    expect(c.startsWith(codex)).toBe(true);
    // any: as above, the assertions check the shape.
    const parsed = parseToml(c) as any;
    expect(Object.keys(parsed.mcp_servers)).toEqual(['github', 'agents']);
    expect(parsed.profiles.fast.model).toBe('gpt-5.4-mini');

    // Again: nothing more, nothing twice.
    const after = Object.values(t.file).map(t.read);
    expect(t.init().map((r) => r.action)).toEqual(['unchanged', 'unchanged', 'unchanged', 'kept']);
    expect(Object.values(t.file).map(t.read)).toEqual(after);
    expect(t.read(t.file.codex).match(/\[mcp_servers\.agents\]/g)).toHaveLength(1);
  });

  test('an older polyspawn entry is brought up to date, keeping what the user added to it', () => {
    const t = setup();
    t.write(
      t.file.mcp,
      JSON.stringify(
        { mcpServers: { agents: { command: 'node', args: ['dist/src/cli.js'], env: { POLYSPAWN_CONCURRENCY: '2' } } } },
        null,
        2,
      ),
    );
    t.write(
      t.file.vscode,
      JSON.stringify(
        {
          servers: {
            agents: {
              type: 'stdio',
              command: 'npx',
              args: ['-y', 'polyspawn'],
              env: { XAI_API_KEY: '${input:my-xai}', POLYSPAWN_TIMEOUT_S: '600' },
            },
          },
        },
        null,
        2,
      ),
    );
    const reports = t.init();
    const byFile = Object.fromEntries(reports.map((r) => [r.file, r]));
    expect(byFile[t.file.mcp]!.action).toBe('updated');
    expect(byFile[t.file.mcp]!.details.join('\n')).toContain('(was: node dist/src/cli.js)');
    expect(t.json(t.file.mcp).mcpServers.agents).toEqual({
      type: 'stdio',
      command: server.command,
      args: server.args,
      env: { POLYSPAWN_CONCURRENCY: '2' },
    });
    const agents = t.json(t.file.vscode).servers.agents;
    expect(agents).toMatchObject({ command: server.command, args: server.args });
    // The user's own key reference and setting stay; the missing ones are added.
    expect(agents.env).toMatchObject({
      XAI_API_KEY: '${input:my-xai}',
      POLYSPAWN_TIMEOUT_S: '600',
      GEMINI_API_KEY: '${input:gemini-api-key}',
      POLYSPAWN_PROJECT_DIR: '${workspaceFolder}',
    });
  });

  test('--npx and back: the entry follows, never duplicated', () => {
    const t = setup();
    t.init({ command: 'npx', args: ['-y', 'polyspawn'] });
    expect(t.json(t.file.mcp).mcpServers.agents).toMatchObject({ command: 'npx', args: ['-y', 'polyspawn'] });
    expect(actions(t.init())['project/.mcp.json']).toBe('updated');
    expect(t.json(t.file.mcp).mcpServers.agents).toMatchObject(server);
    expect(Object.keys(t.json(t.file.mcp).mcpServers)).toEqual(['agents']);
  });
});

describe('init refuses what it cannot merge, leaving it byte-for-byte untouched', () => {
  const cases: [string, keyof ReturnType<typeof setup>['file'], string, RegExp][] = [
    ['broken .mcp.json', 'mcp', '{ "mcpServers": { "x": { "command": "y" } ', /\.mcp\.json is not valid JSON/],
    ['.mcp.json with comments (Claude Code reads strict JSON)', 'mcp', '// hi\n{}', /\.mcp\.json is not valid JSON/],
    ['.mcp.json that is not an object', 'mcp', '[1, 2]', /does not hold a JSON object/],
    ['mcpServers that is not an object', 'mcp', '{"mcpServers": []}', /"mcpServers" is not an object/],
    [
      "someone else's agents server",
      'mcp',
      '{"mcpServers": {"agents": {"command": "other-agents-server"}}}',
      /already runs something else \(other-agents-server\)/,
    ],
    [
      'broken settings.local.json',
      'settings',
      '{"enabledMcpjsonServers": ["a",]}',
      /settings\.local\.json is not valid JSON/,
    ],
    [
      'enabledMcpjsonServers that is not a list',
      'settings',
      '{"enabledMcpjsonServers": "agents"}',
      /not a list of names/,
    ],
    [
      'broken .vscode/mcp.json',
      'vscode',
      '{ "servers": { "a": { "command": } } }',
      /mcp\.json is not valid JSON with comments \(ValueExpected at line 1/,
    ],
    ['inputs that is not a list', 'vscode', '{ "inputs": {} }', /"inputs" is not a list/],
    [
      'broken config.toml',
      'codex',
      'model = "x"\n[mcp_servers\ncommand = 1\n',
      /config\.toml is not valid TOML .*line 2/,
    ],
    [
      'mcp_servers as an inline table',
      'codex',
      'mcp_servers = { github = { command = "gh" } }\n',
      /cannot be added .*add it by hand/s,
    ],
  ];
  for (const [name, which, text, message] of cases) {
    test(name, () => {
      const t = setup();
      t.write(t.file[which], text);
      const reports = t.init();
      const report = reports.find((r) => r.file === t.file[which])!;
      expect(report.action).toBe('refused');
      expect(report.details.join('\n')).toMatch(message);
      expect(t.read(t.file[which])).toBe(text);
      // The other files are still written.
      expect(reports.filter((r) => r.action === 'refused')).toHaveLength(1);
    });
  }
});

describe('the init command', () => {
  test('writes only the clients asked for, prints what it did, exit 0', async () => {
    const t = setup();
    const { code, stdout } = await command(['--claude', t.dir], t.root, { CODEX_HOME: t.codexHome });
    expect(code).toBe(0);
    expect(stdout).toContain(`polyspawn init in ${t.dir}`);
    expect(stdout).toMatch(
      /Claude Code +\.mcp\.json: created\n +added mcpServers\.agents: \S*node\S* \S*installed-cli\.js/,
    );
    expect(stdout).toMatch(/\.claude\/settings\.local\.json: created/);
    expect(stdout).not.toContain('VS Code');
    expect(() => t.read(t.file.codex)).toThrow();
    // The real command: this node, by absolute path.
    expect(t.json(t.file.mcp).mcpServers.agents.command).toBe(process.execPath);
  });

  test('--npx writes `npx -y polyspawn`', async () => {
    const t = setup();
    expect((await command(['--vscode', '--npx'], t.dir, {})).code).toBe(0);
    expect(t.json(t.file.vscode).servers.agents).toMatchObject({ command: 'npx', args: ['-y', 'polyspawn'] });
  });

  test('VS Code asks only for the API keys this environment holds, or --keys names; never for the others', async () => {
    const t = setup();
    const inputsOf = () => (t.json(t.file.vscode).inputs ?? []).map((i: { id: string }) => i.id);
    const envOf = () => Object.keys(t.json(t.file.vscode).servers.agents.env);

    // Only the CLIs: no prompt at all, and the report says how to be asked.
    const none = await command(['--vscode'], t.dir, {});
    expect(none.code).toBe(0);
    expect(inputsOf()).toEqual([]);
    expect(envOf()).toEqual(['POLYSPAWN_PROJECT_DIR']);
    expect(none.stdout).toMatch(
      new RegExp(
        `VS Code asks for no API key \\(none is in this environment, .*--keys ${literal(apiBackendKeys)} to be asked`,
      ),
    );

    // A key in the environment: its prompt alone; the value never written.
    const key = 'mistral-0123456789abcdefghij';
    const found = await command(['--vscode'], t.dir, { MISTRAL_API_KEY: key, GEMINI_API_KEY: '  ' });
    expect(inputsOf()).toEqual(['mistral-api-key']);
    expect(envOf()).toEqual(['POLYSPAWN_PROJECT_DIR', 'MISTRAL_API_KEY']);
    expect(found.stdout).toContain('VS Code asks for the API keys of mistral (their keys are in this environment');
    expect(t.read(t.file.vscode)).not.toContain(key);

    // --keys names them; what an earlier run added stays.
    const named = await command(['--vscode', '--keys', 'grok,gemini'], t.dir, {});
    expect(named.stdout).toContain('VS Code asks for the API keys of grok, gemini (--keys)');
    expect(inputsOf()).toEqual(['mistral-api-key', 'xai-api-key', 'gemini-api-key']);

    const other = setup();
    await command(['--vscode', '--keys', 'none'], other.dir, { MISTRAL_API_KEY: key });
    expect(other.json(other.file.vscode).inputs).toBeUndefined();
  });

  test('--keys: only API backends, only with VS Code', async () => {
    const t = setup();
    await expect(command(['--vscode', '--keys', 'grok,claude'], t.dir, {})).rejects.toThrow(
      `--keys takes API backends, comma-separated (${apiBackendKeys}), or none; not "claude"`,
    );
    await expect(command(['--vscode', '--keys', ''], t.dir, {})).rejects.toThrow(/--keys takes API backends/);
    await expect(command(['--claude', '--keys', 'grok'], t.dir, {})).rejects.toThrow(/use it with --vscode/);
    expect(existsSync(t.file.vscode)).toBe(false);
  });

  describe('the run store kept out of git', () => {
    /** A project that is a git repository (a `.git` folder is what init looks for: it runs no git). */
    const repo = () => {
      const t = setup();
      mkdirSync(join(t.dir, '.git'));
      return { ...t, ignore: join(t.dir, '.gitignore') };
    };
    const gitLine = (stdout: string) => stdout.split('\n').find((l) => l.startsWith('Git '));

    test('in a repository: /.polyspawn/ appended once, the rest of the file kept byte for byte; IAC.md said to be read', async () => {
      const t = repo();
      const first = await command(['--claude'], t.dir, {});
      expect(first.code).toBe(0);
      expect(t.read(t.ignore)).toBe('/.polyspawn/\n');
      expect(gitLine(first.stdout)).toBe(
        'Git         .gitignore: created with /.polyspawn/ (the run store: logs, records, tokens)',
      );
      expect(first.stdout).toMatch(/^IAC\.md +.*meant to be read, and yours to commit or not$/m);
      const again = await command(['--claude'], t.dir, {});
      expect(gitLine(again.stdout)).toBe('Git         .gitignore already ignores /.polyspawn/');
      expect(t.read(t.ignore)).toBe('/.polyspawn/\n');

      // A file without a final newline, in CRLF: one line added after it, in its own line ending.
      writeFileSync(t.ignore, 'node_modules/\r\ndist');
      await command(['--claude'], t.dir, {});
      expect(t.read(t.ignore)).toBe('node_modules/\r\ndist\r\n/.polyspawn/\r\n');
      for (const written of ['.polyspawn', '  /.polyspawn/  ', '.polyspawn/*']) {
        writeFileSync(t.ignore, `dist/\n${written}\n`);
        expect(gitLine((await command(['--claude'], t.dir, {})).stdout)).toContain('already ignores');
        expect(t.read(t.ignore)).toBe(`dist/\n${written}\n`);
      }
    });

    test('--no-gitignore, no repository, a store configured elsewhere', async () => {
      const t = repo();
      const skipped = await command(['--claude', '--no-gitignore'], t.dir, {});
      expect(gitLine(skipped.stdout)).toBe('Git         .gitignore left as it is (--no-gitignore)');
      expect(existsSync(t.ignore)).toBe(false);

      await command(['--claude'], t.dir, { POLYSPAWN_STATE_DIR: 'var/agents' });
      expect(t.read(t.ignore)).toBe('/var/agents/\n');

      // The project's own config (it came with the repository) cannot have init ignore a folder of its choice.
      const cloned = repo();
      writeFileSync(join(cloned.dir, 'polyspawn.config.json'), JSON.stringify({ state_dir: 'src' }));
      const moved = await command(['--claude'], cloned.dir, {});
      expect(gitLine(moved.stdout)).toBe(
        `Git         no .gitignore written: the project's polyspawn.config.json puts the run store in ${join(cloned.dir, 'src')}; add that folder to .gitignore yourself if it is right`,
      );
      expect(existsSync(cloned.ignore)).toBe(false);

      const plain = setup();
      const outside = await command(['--claude'], plain.dir, {});
      expect(gitLine(outside.stdout)).toMatch(/is not in a git repository: no \.gitignore written$/);
      expect(existsSync(join(plain.dir, '.gitignore'))).toBe(false);
    });

    test('a .gitignore that is a link, a folder or a FIFO is left as it is, and said', async () => {
      const t = repo();
      const target = join(t.root, 'elsewhere');
      writeFileSync(target, 'theirs\n');
      symlinkSync(target, t.ignore);
      const linked = await command(['--claude'], t.dir, {});
      expect(linked.code).toBe(0);
      expect(gitLine(linked.stdout)).toBe(
        'Git         .gitignore is a symbolic link: left as it is; add the line /.polyspawn/ to it yourself',
      );
      expect(readFileSync(target, 'utf8')).toBe('theirs\n');

      rmSync(t.ignore);
      mkdirSync(t.ignore);
      expect(gitLine((await command(['--claude'], t.dir, {})).stdout)).toMatch(
        /\.gitignore is not a regular file: left as it is/,
      );

      rmSync(t.ignore, { recursive: true });
      execFileSync('mkfifo', [t.ignore]);
      // Never blocks on it.
      expect(gitLine((await command(['--claude'], t.dir, {})).stdout)).toMatch(
        /\.gitignore is not a regular file: left as it is/,
      );
    });
  });

  test('exit 1 when a file was left untouched, and the report says which and why', async () => {
    const t = setup();
    t.write(t.file.codex, 'not toml at all = = =');
    const { code, stdout } = await command([t.dir], t.root, { CODEX_HOME: t.codexHome });
    expect(code).toBe(1);
    expect(stdout).toMatch(/Codex +\S*config\.toml: refused\n +\S*config\.toml is not valid TOML/);
    expect(stdout).toContain('1 file(s) left untouched');
    expect(t.read(t.file.mcp)).toContain('agents'); // the others were written
  });

  test('wrong usage is a UsageError that says what to do', async () => {
    const t = setup();
    await expect(command([join(t.dir, 'missing')], t.root, {})).rejects.toThrow(/is not a folder: create it first/);
    const { io } = memoryIo({}, t.dir);
    await expect(initCommand([], io, { cli: join(t.root, 'nowhere.js') })).rejects.toThrow(
      /nowhere\.js is missing: build polyspawn first/,
    );
    await expect(command(['--cursor'], t.root, {})).rejects.toThrow(/Unknown option '--cursor'/);
    expect((await command(['--help'], t.root, {})).stdout).toContain('Usage: polyspawn init');
  });
});

describe('init --http: the clients reach the project daemon', () => {
  const endpoint = { url: 'http://127.0.0.1:7455/mcp' };

  test('Claude Code, VS Code and Codex get an HTTP entry whose token comes from the environment or a prompt', () => {
    const t = setup();
    t.init(endpoint);
    expect(JSON.parse(t.read(t.file.mcp)).mcpServers.agents).toEqual({
      type: 'http',
      url: endpoint.url,
      headers: { Authorization: 'Bearer ${POLYSPAWN_TOKEN}' },
    });
    const vscode = JSON.parse(t.read(t.file.vscode));
    expect(vscode.servers.agents).toEqual({
      type: 'http',
      url: endpoint.url,
      headers: { Authorization: 'Bearer ${input:polyspawn-token}' },
    });
    expect(vscode.inputs).toEqual([expect.objectContaining({ id: 'polyspawn-token', password: true })]);
    const codex = parseToml(t.read(t.file.codex)) as { mcp_servers: { agents: Record<string, unknown> } };
    expect(codex.mcp_servers.agents).toMatchObject({ url: endpoint.url, bearer_token_env_var: 'POLYSPAWN_TOKEN' });
    expect(codex.mcp_servers.agents.command).toBeUndefined();
    // No token in any file.
    for (const file of [t.file.mcp, t.file.vscode, t.file.codex]) expect(t.read(file)).not.toMatch(/psp_/);
  });

  test('a stdio entry becomes an HTTP one (its command, args and env go), and back', () => {
    const t = setup();
    t.init();
    t.init(endpoint);
    const claude = JSON.parse(t.read(t.file.mcp)).mcpServers.agents;
    expect(claude).toEqual({
      type: 'http',
      url: endpoint.url,
      headers: { Authorization: 'Bearer ${POLYSPAWN_TOKEN}' },
    });
    const vscode = JSON.parse(t.read(t.file.vscode)).servers.agents;
    expect(vscode.command).toBeUndefined();
    expect(vscode.env).toBeUndefined();
    t.init();
    expect(JSON.parse(t.read(t.file.mcp)).mcpServers.agents).toEqual({
      type: 'stdio',
      command: server.command,
      args: server.args,
    });
  });

  test('--http without --port and without a running daemon says what to do', async () => {
    const t = setup();
    await expect(command(['--http'], t.dir, { HOME: t.root, XDG_CONFIG_HOME: join(t.root, 'xdg') })).rejects.toThrow(
      'pass --port N and start the daemon with `polyspawn daemon start --port N`',
    );
    const withPort = await command(['--http', '--port', '7455', '--claude'], t.dir, {
      HOME: t.root,
      XDG_CONFIG_HOME: join(t.root, 'xdg'),
    });
    expect(withPort.code).toBe(0);
    expect(withPort.stdout).toContain("reach the project's daemon at http://127.0.0.1:7455/mcp");
  });
});
