// `polyspawn doctor`: with and without each CLI and key; the table, the exit code, and never a
// key's value.
import { mkdirSync, writeFileSync } from 'node:fs';
import { delimiter, dirname, join } from 'node:path';
import { describe, expect, test } from 'vitest';
import { collectDoctor, doctorCommand, formatDoctor } from '../../src/commands/doctor.js';
import { usableLine } from '../helpers/backends.js';
import { memoryIo } from '../helpers/command-io.js';
import { fakeBinDir } from '../helpers/mcp.js';
import { tempDir } from '../helpers/temp.js';
import { bwrapWorks } from '../helpers/tools.js';

const XAI_KEY = 'xai-abcdefghijklmnopqrstuvwxyz0123456789';
const MISTRAL_KEY = 'mistral-0123456789abcdefghij';

function project() {
  const root = tempDir('doctor');
  const dir = join(root, 'project');
  const empty = join(root, 'empty-bin');
  mkdirSync(dir);
  mkdirSync(empty);
  // Only the fake CLIs (and node, which they run on), or nothing at all: a CLI installed on
  // this machine must not change the outcome.
  const base = { XDG_CONFIG_HOME: join(root, 'xdg') };
  return {
    dir,
    withClis: {
      ...base,
      PATH: [fakeBinDir, dirname(process.execPath), '/usr/bin', '/bin'].join(delimiter),
    } as NodeJS.ProcessEnv,
    withoutClis: { ...base, PATH: empty } as NodeJS.ProcessEnv,
  };
}

async function doctor(argv: string[], env: NodeJS.ProcessEnv, cwd: string) {
  const { io, printed } = memoryIo(env, cwd);
  const code = await doctorCommand(argv, io);
  return { code, ...printed() };
}

const row = (table: string, name: string) => table.split('\n').find((l) => l.startsWith(`${name} `)) ?? '';

describe('doctor', () => {
  test('the CLIs found, with their versions; no keys: exit 0 and a table that says how to fix the rest', async () => {
    const p = project();
    const { code, stdout } = await doctor([], p.withClis, p.dir);
    expect(code).toBe(0);
    expect(stdout).toMatch(/^backend +kind +status +model +details$/m);
    // Signed in, as each CLI's status command says; copilot has none: installed, sign-in not checked.
    const signIn = {
      claude: ['ok', '; signed in \\(claude\\.ai\\)'],
      codex: ['ok', '; signed in \\(ChatGPT\\)'],
      copilot: ['installed', '; sign-in not checked: copilot cannot tell without sending a request'],
    };
    for (const [cli, [status, said]] of Object.entries(signIn)) {
      expect(row(stdout, cli)).toMatch(
        new RegExp(`^${cli} +cli +${status} +\\S+ +${fakeBinDir}/${cli}, 0\\.0\\.0-fake \\(${cli}\\)${said}$`),
      );
    }
    expect(row(stdout, 'grok')).toMatch(
      /^grok +api +NOT USABLE +\S+ +no API key: set XAI_API_KEY \(or GROK_API_KEY, X_API_KEY\) in api_keys\.json or the environment$/,
    );
    expect(row(stdout, 'mistral')).toContain('no API key: set MISTRAL_API_KEY in api_keys.json');
    expect(stdout).toContain(`project     ${p.dir}`);
    expect(stdout).toContain(`IAC.md      ${join(p.dir, 'IAC.md')} (not written yet`);
    expect(stdout).toContain(`run store   ${join(p.dir, '.polyspawn')} (0 runs)`);
    expect(stdout).toContain('config      none: defaults');
    expect(stdout).toContain(`API keys    ${join(p.dir, 'api_keys.json')} (none), then`);
    expect(stdout).toContain(usableLine(4));
  });

  test("models: the backends' shipped table, then the models.json overrides in the order they apply", async () => {
    const p = project();
    expect((await doctor([], p.withoutClis, p.dir)).stdout).toMatch(/^models {6}shipped table$/m);
    const user = join(p.withoutClis.XDG_CONFIG_HOME!, 'polyspawn', 'models.json');
    const projectFile = join(p.dir, '.polyspawn', 'models.json');
    mkdirSync(dirname(user), { recursive: true });
    mkdirSync(dirname(projectFile));
    writeFileSync(user, JSON.stringify({ $comment: 'mine', codex: { default: 'gpt-user' } }));
    writeFileSync(projectFile, JSON.stringify({ codex: { default: 'gpt-project' } }));
    const { stdout } = await doctor([], p.withoutClis, p.dir);
    expect(stdout).toContain(`models      shipped table, then ${user}, then ${projectFile}\n`);
    expect(row(stdout, 'codex')).toMatch(/^codex +cli +NOT USABLE +gpt-project /);
  });

  test('nothing usable: exit 1, and it says what to do', async () => {
    const p = project();
    const { code, stdout } = await doctor([], p.withoutClis, p.dir);
    expect(code).toBe(1);
    expect(row(stdout, 'codex')).toMatch(
      /NOT USABLE .*`codex` is not on PATH: install it with `npm install -g @openai\/codex`, or set POLYSPAWN_CODEX_BIN to its path/,
    );
    expect(stdout).toContain('No backend is usable: install one of the CLIs or set an API key');
  });

  test('keys: the name and where, never the value; base URLs, default or configured', async () => {
    const p = project();
    writeFileSync(join(p.dir, 'api_keys.json'), JSON.stringify({ XAI_API_KEY: XAI_KEY, GEMINI_API_KEY: '' }));
    const env = {
      ...p.withoutClis,
      MISTRAL_API_KEY: MISTRAL_KEY,
      POLYSPAWN_MISTRAL_BASE_URL: 'http://127.0.0.1:9/v1/',
    };
    for (const argv of [[], ['--json']]) {
      const { code, stdout, stderr } = await doctor(argv, env, p.dir);
      expect(code).toBe(0);
      expect(stdout + stderr).not.toContain(XAI_KEY);
      expect(stdout + stderr).not.toContain(MISTRAL_KEY);
      if (argv.length === 0) {
        expect(row(stdout, 'grok')).toMatch(
          new RegExp(
            `ok .*key XAI_API_KEY in ${join(p.dir, 'api_keys.json')}; base URL https://api\\.x\\.ai/v1 \\(default\\)$`,
          ),
        );
        expect(row(stdout, 'mistral')).toMatch(
          /ok .*key from env MISTRAL_API_KEY; base URL http:\/\/127\.0\.0\.1:9\/v1$/,
        );
        // An empty value is no key.
        expect(row(stdout, 'gemini')).toContain('NOT USABLE');
        expect(stdout).toContain(`${join(p.dir, 'api_keys.json')} (found)`);
        expect(stdout).toContain(usableLine(2));
      } else {
        const report = JSON.parse(stdout);
        expect(report.backends.find((b: { name: string }) => b.name === 'grok')).toMatchObject({
          usable: true,
          keySource: `XAI_API_KEY in ${join(p.dir, 'api_keys.json')}`,
        });
      }
    }
  });

  test('sign-in: signed out is NOT SIGNED IN (not usable, and what to do); a key in the environment; an answer that tells nothing is not checked', async () => {
    const p = project();
    const out = await collectDoctor({ ...p.withClis, FAKE_CLI_SIGNED_IN: 'no' }, p.dir);
    const text = formatDoctor(out);
    expect(row(text, 'claude')).toMatch(
      /^claude +cli +NOT SIGNED IN +.*; not signed in: run `claude auth login` \(or `claude`, then \/login\), or set ANTHROPIC_API_KEY$/,
    );
    expect(row(text, 'codex')).toMatch(/^codex +cli +NOT SIGNED IN +.*; not signed in: run `codex login`/);
    expect(out.backends.find((b) => b.name === 'claude')).toMatchObject({
      usable: false,
      signIn: { state: 'not signed in' },
    });
    expect(out.usable).toBe(2); // copilot and gemini_cli: installed, not known to be signed out
    expect(text).toContain(usableLine(2));

    // codex's status command does not look at the key codex exec reads from its environment.
    const keyed = await collectDoctor(
      { ...p.withClis, FAKE_CLI_SIGNED_IN: 'no', CODEX_API_KEY: 'sk-abcdefghijklmnopqrstuvwx' },
      p.dir,
    );
    const keyedText = formatDoctor(keyed);
    expect(row(keyedText, 'codex')).toMatch(
      /^codex +cli +ok +.*; signed in \(key from CODEX_API_KEY, checked at its first request\)$/,
    );
    expect(keyedText).not.toContain('sk-abcdefghijklmnopqrstuvwx');

    const garbled = formatDoctor(await collectDoctor({ ...p.withClis, FAKE_CLI_SIGNED_IN: 'garbled' }, p.dir));
    expect(row(garbled, 'claude')).toMatch(
      /^claude +cli +installed +.*; sign-in not checked: `claude auth status --json` said nothing it reads$/,
    );
    const hung = await collectDoctor({ ...p.withClis, FAKE_CLI_SIGNED_IN: 'hang' }, p.dir, { versionTimeoutMs: 1000 });
    const codex = hung.backends.find((b) => b.name === 'codex')!;
    expect(codex).toMatchObject({ usable: true, signIn: { state: 'not checked' } });
    expect(codex.detail).toContain('sign-in not checked: `codex login status` gave no answer within 1 s');
  });

  test('a CLI that fails --version is broken; one that never answers is killed and still counted', async () => {
    const p = project();
    const broken = await collectDoctor({ ...p.withClis, FAKE_CLI_VERSION: 'fail' }, p.dir);
    const claude = broken.backends.find((b) => b.name === 'claude')!;
    expect(claude.usable).toBe(false);
    expect(claude.detail).toMatch(
      /is there but broken \(--version exited with code 3: fake-cli: claude is broken\): reinstall it \(install it with `npm install -g @anthropic-ai\/claude-code`\), or set POLYSPAWN_CLAUDE_BIN/,
    );
    expect(broken.usable).toBe(0);

    const hung = await collectDoctor({ ...p.withClis, FAKE_CLI_VERSION: 'hang' }, p.dir, { versionTimeoutMs: 300 });
    const codex = hung.backends.find((b) => b.name === 'codex')!;
    expect(codex).toMatchObject({ usable: true, version: { ok: false, timedOut: true } });
    expect(codex.detail).toContain('no answer to --version within 0.3 s');
  });

  test('disabled backends and a bin override that is not there', async () => {
    const p = project();
    const report = await collectDoctor(
      { ...p.withClis, POLYSPAWN_CODEX_ENABLED: '0', POLYSPAWN_CLAUDE_BIN: '/nowhere/claude' },
      p.dir,
    );
    const text = formatDoctor(report);
    expect(row(text, 'codex')).toMatch(
      /^codex +cli +disabled +.*disabled \(POLYSPAWN_CODEX_ENABLED or backends\.codex\.enabled in the config\)$/,
    );
    expect(row(text, 'claude')).toMatch(
      /NOT USABLE .*\/nowhere\/claude \(from POLYSPAWN_CLAUDE_BIN or the config\) is not an executable file: fix the path/,
    );
    expect(report.usable).toBe(2); // copilot and gemini_cli
  });

  test("what the project's config sets, and what it may not set and is ignored", async () => {
    const p = project();
    writeFileSync(
      join(p.dir, 'polyspawn.config.json'),
      JSON.stringify({ timeout_s: 60, backends: { grok: { base_url: 'https://attacker.example.com' } } }),
    );
    const report = await collectDoctor(p.withoutClis, p.dir);
    expect(report.projectConfig).toMatchObject({ changed: ['timeout_s 60'], ignored: ['backends.grok.base_url'] });
    expect(report.backends.find((b) => b.name === 'grok')!.baseUrl).toBe('https://api.x.ai/v1');
    const text = formatDoctor(report);
    expect(text).toContain(
      `project cfg ${join(p.dir, 'polyspawn.config.json')} sets timeout_s 60; ` +
        'it may not set backends.grok.base_url (ignored: set them in your own config',
    );
  });

  test('an IAC.md polyspawn did not write: doctor names the file it writes instead, and why', async () => {
    const p = project();
    writeFileSync(join(p.dir, 'IAC.md'), '# Infrastructure as Code notes\n');
    const report = await collectDoctor(p.withoutClis, p.dir);
    expect(report.iacFile).toBe(join(p.dir, 'IAC.polyspawn.md'));
    expect(formatDoctor(report)).toContain(
      `IAC.md      ${join(p.dir, 'IAC.polyspawn.md')} (not written yet: it appears with the first agent)\n` +
        `            ${join(p.dir, 'IAC.md')} was not written by polyspawn`,
    );
  });

  test('team presets: the usable ones named, a broken one refused by file and reason', async () => {
    const p = project();
    const teams = join(p.dir, '.polyspawn', 'teams');
    mkdirSync(teams, { recursive: true });
    writeFileSync(join(teams, 'review.md'), '---\ntopology: map_reduce\nmembers: [codex]\n---\nCheck it.\n');
    writeFileSync(join(teams, 'odd.md'), '---\ntopology: pipeline\nmembers: [codex]\nrounds: 99\n---\n');
    const text = formatDoctor(await collectDoctor(p.withoutClis, p.dir));
    expect(text).toContain('team presets: review\n');
    expect(text).toMatch(new RegExp(`team preset refused: ${join(teams, 'odd.md')}: rounds: `));
  });

  test.skipIf(!bwrapWorks)(
    'sandboxes: bwrap probed, each engine asked whether it answers; the ones the config uses said so',
    async () => {
      const p = project();
      const engines = join(fakeBinDir, '..', 'engine');
      mkdirSync(join(p.dir, '..', 'xdg', 'polyspawn'), { recursive: true });
      writeFileSync(
        join(p.dir, '..', 'xdg', 'polyspawn', 'config.json'),
        JSON.stringify({
          backends: { codex: { sandbox: 'bwrap' }, claude: { sandbox: { mode: 'docker', image: 'x' } } },
        }),
      );
      const env = {
        ...p.withClis,
        PATH: `${engines}${delimiter}${p.withClis.PATH}`,
        FAKE_ENGINE_DIR: tempDir('doctor-engine'),
      };
      const down = await collectDoctor(env, p.dir);
      expect(down.sandboxes).toEqual([
        { mode: 'bwrap', ok: true, detail: expect.stringMatching(/bwrap works$/), backends: ['codex'] },
        {
          mode: 'docker',
          ok: false,
          detail: expect.stringMatching(
            /docker is there, but no engine answers \(docker version exited with code 1: Cannot connect/,
          ),
          backends: ['claude'],
        },
        { mode: 'podman', ok: false, detail: expect.stringContaining('no engine answers'), backends: [] },
      ]);
      const text = formatDoctor(down);
      expect(text).toMatch(/^sandbox +bwrap ok \(configured for codex\): /m);
      expect(text).toMatch(/^sandbox +docker NOT USABLE \(configured for claude\): /m);
      expect(text).toMatch(/^sandbox +podman not available: /m);
      const up = await collectDoctor({ ...env, FAKE_ENGINE_UP: '1' }, p.dir);
      expect(up.sandboxes.map((s) => s.ok)).toEqual([true, true, true]);
      // No bwrap at all: the install command.
      const without = await collectDoctor({ ...p.withClis, PATH: fakeBinDir }, p.dir);
      expect(without.sandboxes[0]).toMatchObject({
        ok: false,
        detail: expect.stringContaining('apt-get install bubblewrap'),
      });
    },
  );

  test('a broken config: exit 1 and the reason, on stderr', async () => {
    const p = project();
    writeFileSync(join(p.dir, 'polyspawn.config.json'), '{"concurrency": "many"}');
    const { code, stdout, stderr } = await doctor([], p.withClis, p.dir);
    expect(code).toBe(1);
    expect(stdout).toBe('');
    expect(stderr).toMatch(/polyspawn doctor: configuration error: .*polyspawn\.config\.json: concurrency/);
  });

  test('the isolation default and the worktrees left in the project, an interrupted one marked', async () => {
    const p = project();
    expect((await collectDoctor(p.withClis, p.dir)).worktrees).toEqual([]);
    const state = join(p.dir, '.polyspawn');
    mkdirSync(join(state, 'worktrees', 'abc234'), { recursive: true });
    mkdirSync(join(state, 'runs', 'abc234'), { recursive: true });
    const record = { v: 1, id: 'abc234', state: 'interrupted', backend: 'codex', model: 'm', prompt: 'p', cwd: p.dir };
    writeFileSync(join(state, 'runs', 'abc234', 'record.json'), JSON.stringify({ ...record, owner: { pid: 1 } }));
    const report = await collectDoctor({ ...p.withClis, POLYSPAWN_ISOLATION: 'worktree' }, p.dir);
    expect(report.isolation).toBe('worktree');
    expect(report.worktrees).toEqual([
      { id: 'abc234', path: join(state, 'worktrees', 'abc234'), branch: 'polyspawn/abc234', state: 'interrupted' },
    ]);
    expect(formatDoctor(report)).toMatch(
      /isolation {3}worktree; 1 worktree kept \(integrate or discard each\):\n {12}abc234 {2}interrupted {2}polyspawn\/abc234 .*integrate commits it first/,
    );
  });

  test('damaged lines in the run store\'s index are listed with their numbers; a damaged record says so, not "unknown"', async () => {
    const p = project();
    const state = join(p.dir, '.polyspawn');
    mkdirSync(state, { recursive: true });
    const line = (fields: Record<string, unknown>) =>
      JSON.stringify({
        id: 'abc234',
        st: 'succeeded',
        b: 'codex',
        m: 'm',
        t: 't',
        c: '2026-01-01T00:00:00Z',
        ...fields,
      });
    writeFileSync(
      join(state, 'index.jsonl'),
      [line({}), line({ st: 'exploded' }), '{"id":"abc2', line({ id: 'abc235' }), line({ id: 'ab0de1' }), ''].join(
        '\n',
      ),
    );
    mkdirSync(join(state, 'worktrees', 'xyz234'), { recursive: true });
    mkdirSync(join(state, 'runs', 'xyz234'), { recursive: true });
    writeFileSync(join(state, 'runs', 'xyz234', 'record.json'), '{"v":1,"id":"xyz');
    const report = await collectDoctor(p.withClis, p.dir);
    expect(report.storeDamage).toEqual(['index.jsonl: 3 damaged lines skipped (lines 2, 3, 5)']);
    const text = formatDoctor(report);
    expect(text).toMatch(/run store {3}.*\n {12}index.jsonl: 3 damaged lines skipped \(lines 2, 3, 5\)/);
    expect(text).toMatch(/ {12}xyz234 {2}damaged record {2}polyspawn\/xyz234/);
  });
});
