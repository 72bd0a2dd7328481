// The built `polyspawn` command as a user runs it: help, doctor's exit code, init's paths,
// `run` piped and in a pseudo-terminal, Ctrl-C, and `status` reading what `run` stored.
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync } from 'node:fs';
import { once } from 'node:events';
import { delimiter, dirname, join } from 'node:path';
import { describe, expect, test } from 'vitest';
import { startFakeModelApi } from '../fakes/model-api.js';
import { backendList, literal, usableLine } from '../helpers/backends.js';
import { fakeBinDir, serverEntry } from '../helpers/mcp.js';
import { waitFor, waitGone } from '../helpers/processes.js';
import { tempDir } from '../helpers/temp.js';

function project(extraEnv: Record<string, string> = {}) {
  const dir = tempDir('cli');
  const records = join(dir, '.records');
  mkdirSync(records);
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) if (v !== undefined && !k.startsWith('POLYSPAWN_')) env[k] = v;
  delete env.CLAUDECODE;
  Object.assign(env, {
    PATH: [fakeBinDir, dirname(process.execPath), '/usr/bin', '/bin'].join(delimiter),
    XDG_CONFIG_HOME: join(dir, '.xdg'),
    POLYSPAWN_KILL_GRACE_S: '1',
    FAKE_CLI_RECORD: records,
    ...extraEnv,
  });
  const cli = (args: string[], options: { input?: string; env?: Record<string, string> } = {}) =>
    spawnSync(process.execPath, [serverEntry, ...args], {
      cwd: dir,
      env: { ...env, ...options.env },
      input: options.input ?? '',
      encoding: 'utf8',
      timeout: 30_000,
    });
  return { dir, env, records, cli };
}

/** Control characters other than newline and tab: a piped output must have none. */
const CONTROL = /[\u0000-\u0008\u000b-\u001f\u007f]/;

describe('polyspawn --help and wrong usage', () => {
  test('the help lists every command; each command has its own', () => {
    const p = project();
    const help = p.cli(['--help']);
    expect(help.status).toBe(0);
    for (const command of ['[serve]', 'init', 'doctor', 'run', 'status'])
      expect(help.stdout).toContain(`polyspawn ${command}`);
    for (const command of ['init', 'doctor', 'run', 'status']) {
      const own = p.cli([command, '--help']);
      expect(own.status, command).toBe(0);
      expect(own.stdout).toContain(`Usage: polyspawn ${command}`);
      expect(p.cli(['help', command]).stdout).toBe(own.stdout);
    }
  });

  test('mistakes exit 2 with a sentence that says what to do, and the usage', () => {
    const p = project();
    const unknown = p.cli(['frobnicate']);
    expect(unknown.status).toBe(2);
    expect(unknown.stderr).toContain('unknown command "frobnicate"');
    const cases: [string[], RegExp][] = [
      [['run'], new RegExp(literal(`name a backend (${backendList}), e.g. \`polyspawn run claude`))],
      [['run', 'codex'], /give codex a prompt: as arguments, or "-" to read it from stdin/],
      [['run', 'nope', 'hi'], new RegExp(literal(`no backend "nope": use one of ${backendList}`))],
      [['run', 'codex', '--model', 'gpt 0', 'hi'], /unknown model "gpt 0" for codex, and not a plain model name/],
      [['run', 'codex', '--timeout', 'soon', 'hi'], /--timeout takes whole seconds, not "soon"/],
      [['run', 'codex', '--max-turns', '0', 'hi'], /--max-turns takes a whole number from 1 to 1000, not "0"/],
      [['run', 'codex', '--max-budget-usd', 'lots', 'hi'], /--max-budget-usd takes an amount above 0, at most 10000/],
      [['run', 'codex', '--cwd', 'missing-dir', 'hi'], /cwd ".*missing-dir" is not an existing folder/],
      [['run', 'codex', '--isolation', 'box', 'hi'], /--isolation takes none or worktree, not "box"/],
      [['run', 'codex', '--base', 'main', 'hi'], /base applies only with isolation "worktree"/],
      [['status', '--limit=-3'], /--limit must be a whole number/],
      [['doctor', '--verbose'], /Unknown option '--verbose'/],
    ];
    for (const [args, message] of cases) {
      const r = p.cli(args);
      expect(r.status, args.join(' ')).toBe(2);
      expect(r.stderr, args.join(' ')).toMatch(message);
      expect(r.stderr).toContain(`Usage: polyspawn ${args[0]}`);
    }
  });

  test('a backend that cannot run here: exit 1 and how to fix it', () => {
    const p = project();
    const r = p.cli(['run', 'grok', 'hi']);
    expect(r.status).toBe(1);
    expect(r.stderr).toMatch(/grok cannot run here: no API key found: set one of XAI_API_KEY/);
  });
});

describe('polyspawn serve started by hand', () => {
  const NOTICE = 'this is an MCP server';

  test('from a terminal: stderr says what it is, how to connect a client and that Ctrl-C ends it; stdout stays empty', () => {
    const p = project();
    const script = spawnSync('script', ['--version'], { encoding: 'utf8' });
    expect(script.error, 'this test needs script(1) from util-linux (apt-get install bsdutils)').toBeUndefined();
    const quote = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;
    // stdin is the pseudo-terminal; stdout and stderr go to files, as a client would read them apart.
    // script's own stdin is empty, so the server reads the end of its input and ends.
    const command = `${[process.execPath, serverEntry].map(quote).join(' ')} 2>stderr.txt >stdout.txt`;
    const r = spawnSync('script', ['-qfec', command, '/dev/null'], {
      cwd: p.dir,
      env: p.env,
      encoding: 'utf8',
      timeout: 30_000,
    });
    expect(r.status, r.stdout).toBe(0);
    const stderr = readFileSync(join(p.dir, 'stderr.txt'), 'utf8');
    expect(stderr).toContain(`polyspawn: ${NOTICE}`);
    expect(stderr).toContain('run `polyspawn init` in your project');
    expect(stderr).toContain(`node ${serverEntry} init <project folder>`);
    expect(stderr).toContain('Ctrl-C ends this server');
    // Said before the start-up line, which follows as always.
    expect(stderr.indexOf(NOTICE)).toBeLessThan(stderr.indexOf('serving on stdio'));
    expect(readFileSync(join(p.dir, 'stdout.txt'), 'utf8')).toBe('');
  });

  test('started by a client (stdin a pipe): no notice, only the start-up line', () => {
    const p = project();
    const r = p.cli([]);
    expect(r.status).toBe(0);
    expect(r.stderr).toContain('serving on stdio');
    expect(r.stderr).not.toContain(NOTICE);
    expect(r.stdout).toBe('');
  });
});

describe('polyspawn doctor and init, built', () => {
  test('doctor exits 1 when nothing is usable, 0 when something is', () => {
    const p = project();
    const none = p.cli(['doctor'], { env: { PATH: join(p.dir, '.records') } });
    expect(none.status).toBe(1);
    expect(none.stdout).toContain('No backend is usable');
    const some = p.cli(['doctor']);
    expect(some.status).toBe(0);
    expect(some.stdout).toContain(usableLine(4));
  });

  test("init writes this node and this installation's dist/src/cli.js, by absolute path", () => {
    const p = project();
    const r = p.cli(['init', '--claude', '--codex'], { env: { CODEX_HOME: join(p.dir, '.codex') } });
    expect(r.status).toBe(0);
    const agents = JSON.parse(readFileSync(join(p.dir, '.mcp.json'), 'utf8')).mcpServers.agents;
    expect(agents).toEqual({ type: 'stdio', command: process.execPath, args: [serverEntry] });
    expect(readFileSync(join(p.dir, '.codex', 'config.toml'), 'utf8')).toContain(
      `args = [ ${JSON.stringify(serverEntry)} ]`,
    );
  });
});

describe('polyspawn run', () => {
  test('piped: the answer alone on stdout, a summary on stderr, no control characters; status and IAC.md show it', () => {
    const p = project();
    const r = p.cli(['run', 'codex', 'explain', 'this', '[[cli:sleep:200]]']);
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toBe('FAKE codex: explain this [[cli:sleep:200]]\n');
    expect(r.stderr).toMatch(
      /^polyspawn: agent ([a-z2-9]{6}) \(codex, gpt-5\.5\) succeeded after [\d.]+ s · 12 in \/ 7 out tokens · \$0\.000085 \(estimated\) · log \S+stdout\.log\n$/,
    );
    expect(r.stdout + r.stderr).not.toMatch(CONTROL);
    const id = /agent ([a-z2-9]{6})/.exec(r.stderr)![1]!;

    const status = p.cli(['status']);
    expect(status.status).toBe(0);
    expect(status.stdout).toContain('Active agents (0)');
    expect(status.stdout).toMatch(
      new RegExp(`^  ${id} +succeeded +codex +gpt-5\\.5 .* 12/7 +\\$0\\.000085~ +explain this`, 'm'),
    );
    expect(status.stdout).not.toMatch(CONTROL);
    const json = JSON.parse(p.cli(['status', '--json']).stdout);
    expect(json.history[0]).toMatchObject({ id, state: 'succeeded', backend: 'codex', inputTokens: 12 });
    // The same store and IAC.md as the server's.
    expect(readFileSync(join(p.dir, 'IAC.md'), 'utf8')).toContain(`### \`${id}\` · codex`);
    expect(existsSync(join(p.dir, '.polyspawn', 'runs', id, 'record.json'))).toBe(true);
  });

  test('the prompt from stdin with "-", --json, and a failure (exit 1, the error on stderr)', () => {
    const p = project();
    const fromStdin = p.cli(['run', 'claude', '-', '--json'], { input: '--starts with a dash\nsecond line' });
    expect(fromStdin.status).toBe(0);
    expect(JSON.parse(fromStdin.stdout)).toMatchObject({
      state: 'succeeded',
      backend: 'claude',
      text: 'FAKE claude: --starts with a dash\nsecond line',
    });
    const failed = p.cli(['run', 'copilot', 'break [[cli:fail]]']);
    expect(failed.status).toBe(1);
    expect(failed.stdout).toBe('');
    expect(failed.stderr).toMatch(/polyspawn: copilot .*401/);
    expect(failed.stderr).toMatch(/agent \w+ \(copilot, \S+\) failed after/);
  });

  test('--max-turns: a run past it is stopped, exit 1, and the result names the budget', () => {
    const p = project();
    const r = p.cli([
      'run',
      'codex',
      '--json',
      '--max-turns',
      '1',
      '--max-budget-usd',
      '5',
      'many [[cli:turns:30:200]]',
    ]);
    expect(r.status).toBe(1);
    expect(JSON.parse(r.stdout)).toMatchObject({
      state: 'failed',
      error: expect.stringMatching(/^stopped by polyspawn: it began turn 2, past max_turns \(1\)/),
      budget: { max_turns: 1, max_budget_usd: 5, exceeded: 'turns' },
    });
  });

  test("--resume in a later process: the turn is billed its own tokens, not the whole session's", () => {
    const p = project();
    const first = p.cli(['run', 'codex', '--json', 'first turn']);
    expect(first.status, first.stderr).toBe(0);
    const earlier = JSON.parse(first.stdout);
    expect(earlier.usage).toMatchObject({ input_tokens: 12, output_tokens: 7 });
    // Another process: the first agent is known only from the run store. Codex reports the
    // thread's running totals: 30 in / 20 out after both turns.
    const second = p.cli(['run', 'codex', '--json', '--resume', earlier.agent_id, 'second turn [[cli:usage:30:20]]']);
    expect(second.status, second.stderr).toBe(0);
    const resumed = JSON.parse(second.stdout);
    expect(resumed.session_id).toBe(earlier.session_id);
    expect(resumed.usage).toMatchObject({ input_tokens: 18, output_tokens: 13 });
  });

  test('an API backend, against the fake model API: same output, the key never printed', async () => {
    const api = await startFakeModelApi();
    try {
      const key = 'mistral-test-key-0123456789abcdef';
      const p = project({ MISTRAL_API_KEY: key, POLYSPAWN_MISTRAL_BASE_URL: api.url });
      const child = spawn(process.execPath, [serverEntry, 'run', 'mistral', 'hello api'], {
        cwd: p.dir,
        env: p.env,
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let stdout = '';
      let stderr = '';
      child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
      child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
      const [code] = await once(child, 'exit');
      expect(code, stderr).toBe(0);
      expect(stdout).toContain('FAKE REPLY (turn 1): hello api');
      expect(stderr).toMatch(/agent \w+ \(mistral, \S+\) succeeded after .* 12 in \/ 7 out tokens/);
      expect(stdout + stderr).not.toContain(key);

      // A model polyspawn's table does not know goes to the API as named, its cost unknown.
      const unknown = spawn(
        process.execPath,
        [serverEntry, 'run', 'mistral', '--json', '--model', 'mistral-next-2612', 'hello new model'],
        { cwd: p.dir, env: p.env, stdio: ['ignore', 'pipe', 'pipe'] },
      );
      let json = '';
      unknown.stdout.on('data', (c: Buffer) => (json += c.toString()));
      expect((await once(unknown, 'exit'))[0]).toBe(0);
      expect(JSON.parse(json)).toMatchObject({
        state: 'succeeded',
        model: 'mistral-next-2612',
        cost_source: 'unknown',
        cost_note: expect.stringMatching(/^model "mistral-next-2612" is not in polyspawn's models table/),
      });
      expect(api.requests.at(-1)!.model).toBe('mistral-next-2612');
    } finally {
      await api.close();
    }
  });

  test('in a terminal: the live line (state and elapsed) is drawn, then cleared before the answer', () => {
    const p = project();
    const script = spawnSync('script', ['--version'], { encoding: 'utf8' });
    // util-linux's script(1) gives the command a pseudo-terminal; it is part of every Debian.
    expect(script.error, 'this test needs script(1) from util-linux (apt-get install bsdutils)').toBeUndefined();
    const quote = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;
    const command = [process.execPath, serverEntry, 'run', 'claude', 'tty test [[cli:sleep:300]]'].map(quote).join(' ');
    const r = spawnSync('script', ['-qfec', `stty cols 120; ${command}`, '/dev/null'], {
      cwd: p.dir,
      env: p.env,
      encoding: 'utf8',
      timeout: 30_000,
    });
    expect(r.status, r.stdout).toBe(0);
    // A drawn line: carriage return, erase line, a spinner frame, the id, backend/model, state, elapsed.
    expect(r.stdout).toMatch(/\r\u001b\[2K[⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏] [a-z2-9]{6} claude\/sonnet (queued|running) [\d.]+ s/);
    // Cleared before the answer, which is printed whole.
    expect(r.stdout).toMatch(/\r\u001b\[2KFAKE claude: tty test \[\[cli:sleep:300\]\]\r?\n/);
  });

  test('Ctrl-C cancels the agent: exit 130, no process left, and the store says cancelled', async () => {
    const p = project();
    const gcFile = join(p.dir, 'grandchild.pid');
    const child = spawn(
      process.execPath,
      [serverEntry, 'run', 'codex', `hang [[cli:hang]] [[cli:grandchild:${gcFile}]]`],
      { cwd: p.dir, env: p.env, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    const exited = once(child, 'exit');
    await waitFor(
      'the fake CLI and its grandchild to start',
      () => existsSync(gcFile) && readdirSync(p.records).some((f) => f.endsWith('.json')),
      20_000,
    );
    const cliPid = Number(
      readdirSync(p.records)
        .find((f) => f.endsWith('.json'))!
        .slice(0, -5),
    );
    const grandchild = Number(readFileSync(gcFile, 'utf8'));
    child.kill('SIGINT');
    const [code] = await exited;
    expect(code, stderr).toBe(130);
    await waitGone(cliPid);
    await waitGone(grandchild);
    expect(stderr).toMatch(/SIGINT: cancelling agent ([a-z2-9]{6})/);
    expect(stderr).toMatch(/agent [a-z2-9]{6} \(codex, gpt-5\.5\) cancelled after/);
    expect(stdout).toBe('');
    const id = /cancelling agent ([a-z2-9]{6})/.exec(stderr)![1];
    const status = JSON.parse(p.cli(['status', '--json']).stdout);
    expect(status.active).toEqual([]);
    expect(status.history[0]).toMatchObject({ id, state: 'cancelled' });
  });

  test('a second Ctrl-C kills at once, even an agent that ignores SIGTERM', async () => {
    const p = project({ POLYSPAWN_KILL_GRACE_S: '60' });
    const child = spawn(process.execPath, [serverEntry, 'run', 'claude', 'stubborn [[cli:ignore-term]]'], {
      cwd: p.dir,
      env: p.env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    const exited = once(child, 'exit');
    await waitFor('the fake CLI to start', () => readdirSync(p.records).some((f) => f.endsWith('.json')), 20_000);
    const cliPid = Number(
      readdirSync(p.records)
        .find((f) => f.endsWith('.json'))!
        .slice(0, -5),
    );
    child.kill('SIGINT');
    await waitFor('the cancel to begin', () => stderr.includes('cancelling agent'));
    child.kill('SIGINT');
    const [code] = await exited;
    expect(code).toBe(130);
    expect(stderr).toMatch(/SIGINT again: killed agent/);
    await waitGone(cliPid);
  });
});
