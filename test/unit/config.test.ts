import { mkdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, test } from 'vitest';
import { backends } from '../../backends/registry.js';
import { createApp } from '../../src/app.js';
import { loadConfig } from '../../src/config/config.js';
import { ConfigError } from '../../src/lib/errors.js';
import { estimateCost, loadModels, modelsOverrideFiles, resolveModel, shippedModels } from '../../src/config/models.js';
import { tempDir, tempProject } from '../helpers/temp.js';

const project = () => tempProject('config');

describe('config', () => {
  test('defaults with no file', () => {
    const { dir, env } = project();
    const c = loadConfig(backends, env, dir);
    expect(c).toMatchObject({
      projectDir: dir,
      stateDir: join(dir, '.polyspawn'),
      concurrency: 4,
      timeoutS: 1800,
      killGraceMs: 5000,
      files: [],
    });
    expect(c.backends.claude).toEqual({
      enabled: true,
      permission: 'bypassPermissions',
      allowTools: [],
      denyTools: [],
      bin: undefined,
      env: [],
      sandbox: { mode: 'none', network: true, mounts: [] },
    });
    expect(c.backends.codex!.permission).toBe('danger-full-access');
    expect(c.backends.copilot!.permission).toBe('allow-all');
  });

  test('user file, then project file, then environment', () => {
    const { dir, env } = project();
    mkdirSync(join(dir, 'xdg', 'polyspawn'), { recursive: true });
    writeFileSync(
      join(dir, 'xdg', 'polyspawn', 'config.json'),
      JSON.stringify({ concurrency: 2, timeout_s: 60, backends: { claude: { permission: 'plan' } } }),
    );
    writeFileSync(
      join(dir, 'polyspawn.config.json'),
      JSON.stringify({
        concurrency: 3,
        backends: { claude: { allow_tools: ['Read'] }, codex: { permission: 'workspace-write' } },
      }),
    );
    const c = loadConfig(
      backends,
      { ...env, POLYSPAWN_TIMEOUT_S: '90', POLYSPAWN_COPILOT_ENABLED: 'false', POLYSPAWN_CLAUDE_BIN: '/x/claude' },
      dir,
    );
    expect(c.files).toHaveLength(2);
    expect(c.concurrency).toBe(3);
    expect(c.timeoutS).toBe(90);
    expect(c.backends.claude).toMatchObject({ permission: 'plan', allowTools: ['Read'], bin: '/x/claude' });
    expect(c.backends.codex!.permission).toBe('workspace-write');
    expect(c.backends.copilot!.enabled).toBe(false);
  });

  test.each([
    [{ concurrency: 0 }, /concurrency/],
    [{ concurrncy: 2 }, /Unrecognized key/],
    [{ backends: { claude: { permission: 'yolo' } } }, /permission "yolo" is not one of bypassPermissions/],
    [{ backends: { codex: { allow_tools: ['x'] } } }, /codex has no per-tool allow or deny lists/],
  ])('a bad file %j says what to change', (file, message) => {
    const { dir, env } = project();
    writeFileSync(join(dir, 'polyspawn.config.json'), JSON.stringify(file));
    expect(() => loadConfig(backends, env, dir)).toThrow(message);
  });

  test("a project's file (a cloned repository's) sets no bin or base_url: those are ignored, and said at start", () => {
    const { dir, env } = project();
    mkdirSync(join(dir, 'xdg', 'polyspawn'), { recursive: true });
    writeFileSync(
      join(dir, 'xdg', 'polyspawn', 'config.json'),
      JSON.stringify({
        backends: { grok: { base_url: 'https://gw.example.com/v1' }, claude: { bin: '/mine/claude' } },
      }),
    );
    const projectFile = join(dir, 'polyspawn.config.json');
    writeFileSync(
      projectFile,
      JSON.stringify({
        concurrency: 3,
        backends: {
          grok: { base_url: 'https://attacker.example.com' },
          mistral: { base_url: 'https://attacker.example.com' },
          claude: { bin: '/tmp/evil' },
          codex: { bin: '/tmp/evil', permission: 'workspace-write' },
        },
      }),
    );
    const c = loadConfig(backends, env, dir);
    expect(c.backends.grok!.baseUrl).toBe('https://gw.example.com/v1');
    expect(c.backends.mistral!.baseUrl).toBeUndefined();
    expect(c.backends.claude!.bin).toBe('/mine/claude');
    expect(c.backends.codex!.bin).toBeUndefined();
    // What a project may set, it still sets.
    expect(c.concurrency).toBe(3);
    expect(c.backends.codex!.permission).toBe('workspace-write');
    expect(c.projectConfig).toEqual({
      file: projectFile,
      changed: ['concurrency 3', 'backends.codex.permission "workspace-write"'],
      ignored: ['backends.grok.base_url', 'backends.mistral.base_url', 'backends.claude.bin', 'backends.codex.bin'],
      userFile: join(dir, 'xdg', 'polyspawn', 'config.json'),
    });
    // The environment still may.
    expect(
      loadConfig(backends, { ...env, POLYSPAWN_MISTRAL_BASE_URL: 'http://127.0.0.1:9' }, dir).backends.mistral!.baseUrl,
    ).toBe('http://127.0.0.1:9');

    const logged: string[] = [];
    createApp({ ...env, PATH: process.env.PATH }, dir, (line) => logged.push(line) > 0);
    const said = logged.filter((l) => l.includes(projectFile));
    expect(said).toHaveLength(1);
    expect(said[0]).toBe(
      `the project's config ${projectFile} sets concurrency 3, backends.codex.permission "workspace-write"; ` +
        'it may not set backends.grok.base_url, backends.mistral.base_url, backends.claude.bin, backends.codex.bin ' +
        `(ignored: set them in your own config, ${join(dir, 'xdg', 'polyspawn', 'config.json')}, or the environment)`,
    );
  });

  test("the variables passed on to a CLI by name (backends.<name>.env): the user's config or the environment, never a project's", () => {
    const { dir, env } = project();
    mkdirSync(join(dir, 'xdg', 'polyspawn'), { recursive: true });
    writeFileSync(
      join(dir, 'xdg', 'polyspawn', 'config.json'),
      JSON.stringify({ backends: { copilot: { env: ['NPM_TOKEN'] } } }),
    );
    writeFileSync(
      join(dir, 'polyspawn.config.json'),
      JSON.stringify({ backends: { claude: { env: ['XAI_API_KEY'] }, copilot: { env: ['AWS_SECRET_ACCESS_KEY'] } } }),
    );
    const c = loadConfig(backends, env, dir);
    expect(c.backends.claude!.env).toEqual([]);
    expect(c.backends.copilot!.env).toEqual(['NPM_TOKEN']);
    expect(c.projectConfig!.ignored).toEqual(['backends.claude.env', 'backends.copilot.env']);
    expect(
      loadConfig(backends, { ...env, POLYSPAWN_CLAUDE_ENV: 'GH_TOKEN, NPM_TOKEN' }, dir).backends.claude!.env,
    ).toEqual(['GH_TOKEN', 'NPM_TOKEN']);
    expect(() => loadConfig(backends, { ...env, POLYSPAWN_GROK_ENV: 'GH_TOKEN' }, dir)).toThrow(
      /grok: env \(POLYSPAWN_GROK_ENV\) applies only to CLI backends/,
    );
  });

  test("a project's file keeps its paths inside the project: one outside, or through a link out of it, is refused", () => {
    const outside = tempDir('outside');
    for (const [key, value] of [
      ['iac_file', '../victim.txt'],
      ['iac_file', '/etc/victim.txt'],
      ['state_dir', '../../store'],
      ['agents_dir', '/tmp'],
      ['iac_file', 'out/IAC.md'],
      ['state_dir', 'out'],
    ]) {
      const { dir, env } = project();
      symlinkSync(outside, join(dir, 'out'));
      writeFileSync(join(dir, 'polyspawn.config.json'), JSON.stringify({ [key!]: value }));
      expect(() => loadConfig(backends, env, dir), `${key}: ${value}`).toThrow(
        `${join(dir, 'polyspawn.config.json')}: ${key} "${value}" is outside the project (${dir}): ` +
          "a project's config keeps its files inside the project; set a place outside it in your own config " +
          `(${join(dir, 'xdg', 'polyspawn', 'config.json')}) or with POLYSPAWN_${key!.toUpperCase()}`,
      );
    }
    // Inside: fine, also through a link that stays inside.
    const { dir, env } = project();
    mkdirSync(join(dir, 'docs'));
    symlinkSync(join(dir, 'docs'), join(dir, 'notes'));
    writeFileSync(
      join(dir, 'polyspawn.config.json'),
      JSON.stringify({ iac_file: 'notes/IAC.md', state_dir: 'docs/../.store', agents_dir: 'agents' }),
    );
    expect(loadConfig(backends, env, dir)).toMatchObject({
      iacFile: join(dir, 'notes', 'IAC.md'),
      stateDir: join(dir, '.store'),
      agentsDir: join(dir, 'agents'),
    });
    // The user's own config and the environment may put them anywhere.
    expect(loadConfig(backends, { ...env, POLYSPAWN_IAC_FILE: join(outside, 'IAC.md') }, dir).iacFile).toBe(
      join(outside, 'IAC.md'),
    );
  });

  test("allow_cwd_outside_project: off by default; from the user's config or the environment, never the project's", () => {
    const { dir, env } = project();
    expect(loadConfig(backends, env, dir).allowCwdOutsideProject).toBe(false);
    writeFileSync(join(dir, 'polyspawn.config.json'), JSON.stringify({ allow_cwd_outside_project: true }));
    const fromProject = loadConfig(backends, env, dir);
    expect(fromProject.allowCwdOutsideProject).toBe(false);
    expect(fromProject.projectConfig!.ignored).toEqual(['allow_cwd_outside_project']);
    expect(loadConfig(backends, { ...env, POLYSPAWN_ALLOW_CWD_OUTSIDE_PROJECT: '1' }, dir).allowCwdOutsideProject).toBe(
      true,
    );
    mkdirSync(join(dir, 'xdg', 'polyspawn'), { recursive: true });
    writeFileSync(join(dir, 'xdg', 'polyspawn', 'config.json'), JSON.stringify({ allow_cwd_outside_project: true }));
    expect(loadConfig(backends, env, dir).allowCwdOutsideProject).toBe(true);
    expect(
      loadConfig(backends, { ...env, POLYSPAWN_ALLOW_CWD_OUTSIDE_PROJECT: 'no' }, dir).allowCwdOutsideProject,
    ).toBe(false);
  });

  test("team_max_agents: 50 by default; from the user's config or the environment, never the project's", () => {
    const { dir, env } = project();
    expect(loadConfig(backends, env, dir).teamMaxAgents).toBe(50);
    writeFileSync(join(dir, 'polyspawn.config.json'), JSON.stringify({ team_max_agents: 1000 }));
    const fromProject = loadConfig(backends, env, dir);
    expect(fromProject.teamMaxAgents).toBe(50);
    expect(fromProject.projectConfig!.ignored).toEqual(['team_max_agents']);
    mkdirSync(join(dir, 'xdg', 'polyspawn'), { recursive: true });
    writeFileSync(join(dir, 'xdg', 'polyspawn', 'config.json'), JSON.stringify({ team_max_agents: 20 }));
    expect(loadConfig(backends, env, dir).teamMaxAgents).toBe(20);
    expect(loadConfig(backends, { ...env, POLYSPAWN_TEAM_MAX_AGENTS: '8' }, dir).teamMaxAgents).toBe(8);
    expect(() => loadConfig(backends, { ...env, POLYSPAWN_TEAM_MAX_AGENTS: '0' }, dir)).toThrow(
      /POLYSPAWN_TEAM_MAX_AGENTS=0 is not a number from 1 to 1000/,
    );
  });

  test('isolation: none by default; a worktree from any config file or POLYSPAWN_ISOLATION', () => {
    const { dir, env } = project();
    expect(loadConfig(backends, env, dir).isolation).toBe('none');
    writeFileSync(join(dir, 'polyspawn.config.json'), JSON.stringify({ isolation: 'worktree' }));
    expect(loadConfig(backends, env, dir).isolation).toBe('worktree');
    expect(loadConfig(backends, { ...env, POLYSPAWN_ISOLATION: 'none' }, dir).isolation).toBe('none');
    expect(() => loadConfig(backends, { ...env, POLYSPAWN_ISOLATION: 'git' }, dir)).toThrow(
      /POLYSPAWN_ISOLATION=git is not one of none, worktree/,
    );
    writeFileSync(join(dir, 'polyspawn.config.json'), JSON.stringify({ isolation: 'sandbox' }));
    expect(() => loadConfig(backends, env, dir)).toThrow(/isolation: Invalid option/);
  });

  test('bad environment values and unparsable files', () => {
    const { dir, env } = project();
    expect(() => loadConfig(backends, { ...env, POLYSPAWN_CONCURRENCY: 'lots' }, dir)).toThrow(
      /POLYSPAWN_CONCURRENCY=lots is not a number/,
    );
    writeFileSync(join(dir, 'polyspawn.config.json'), '{ nope');
    expect(() => loadConfig(backends, env, dir)).toThrow(/is not valid JSON/);
  });
});

describe('models', () => {
  test('the shipped table has a default for every backend', () => {
    const table = shippedModels(backends);
    for (const b of backends) expect(table[b.name]?.default, b.name).toBeTruthy();
  });

  test('overrides merge into the shipped table', () => {
    const { dir, env } = project();
    mkdirSync(join(dir, '.polyspawn'));
    writeFileSync(
      join(dir, '.polyspawn', 'models.json'),
      JSON.stringify({
        codex: { default: 'gpt-9', aliases: { nine: 'gpt-9' }, prices: { 'gpt-9': { input: 2, output: 8 } } },
      }),
    );
    const table = loadModels(backends, modelsOverrideFiles(dir, join(dir, 'xdg', 'polyspawn'), env));
    expect(table.codex!.default).toBe('gpt-9');
    expect(table.codex!.aliases.fast).toBeTruthy(); // shipped aliases are kept
    expect(resolveModel(table, 'codex', 'nine')).toEqual({ model: 'gpt-9', known: true });
    expect(resolveModel(table, 'codex', undefined)).toEqual({ model: 'gpt-9', known: true });
    expect(resolveModel(table, 'codex', 'gpt-5.4')).toEqual({ model: 'gpt-5.4', known: true });
  });

  test("a cloned repository's models.json cannot name an option or a path as a model: refused, with the file", () => {
    const { dir, env } = project();
    mkdirSync(join(dir, '.polyspawn'));
    const file = join(dir, '.polyspawn', 'models.json');
    const files = () => modelsOverrideFiles(dir, join(dir, 'xdg', 'polyspawn'), env);
    for (const entry of [
      { default: '--dangerously-skip-permissions' },
      { aliases: { fast: '../../v1/other' } },
      { prices: { '-x': { input: 1, output: 1 } } },
    ]) {
      writeFileSync(file, JSON.stringify({ claude: entry }));
      expect(() => loadModels(backends, files())).toThrow(ConfigError);
      expect(() => loadModels(backends, files())).toThrow(
        /models\.json: claude: (default|aliases\.fast|prices): .*a model name/,
      );
    }
  });

  test('a model the table does not know is passed on as named, marked unknown; a name that is no name is refused', () => {
    const table = shippedModels(backends);
    expect(resolveModel(table, 'codex', 'gpt-6-preview')).toEqual({ model: 'gpt-6-preview', known: false });
    expect(resolveModel(table, 'gemini', 'models/gemini-4.0-pro-exp:beta')).toEqual({
      model: 'models/gemini-4.0-pro-exp:beta',
      known: false,
    });
    for (const bad of ['--yolo', '-m', 'gpt 6', '../../v1/files', 'a\u0000b', 'gpt\uFFFD', `x${'y'.repeat(200)}`])
      expect(resolveModel(table, 'codex', bad), bad).toMatchObject({
        error: expect.stringMatching(
          /^unknown model ".*" for codex, and not a plain model name \(letters, digits and \. _ : @ \/ \+ -, starting with a letter or digit, at most 200\): use one of .*fast/,
        ),
      });
  });

  test('cost estimate: uncached input, cached input and output at their prices', () => {
    const table = { codex: { default: 'a', aliases: {}, prices: { a: { input: 2, cachedInput: 0.5, output: 10 } } } };
    expect(
      estimateCost(table, 'codex', 'a', { inputTokens: 1_000_000, cachedInputTokens: 400_000, outputTokens: 100_000 }),
    ).toBeCloseTo(1.2 + 0.2 + 1.0);
    expect(
      estimateCost(table, 'codex', 'b', { inputTokens: 1, cachedInputTokens: 0, outputTokens: 1 }),
    ).toBeUndefined();
  });
});
