import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, test } from 'vitest';
import { backends } from '../../backends/registry.js';
import { loadConfig } from '../../src/config/config.js';
import { estimateCost, loadModels, modelsFiles, resolveModel, shippedModelsFile } from '../../src/config/models.js';

const project = () => {
  const dir = mkdtempSync(join(tmpdir(), 'polyspawn-config-'));
  return { dir, env: { XDG_CONFIG_HOME: join(dir, 'xdg') } as NodeJS.ProcessEnv };
};

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
    [{ backends: { gpt: {} } }, /backends.gpt: no such backend/],
  ])('a bad file %j says what to change', (file, message) => {
    const { dir, env } = project();
    writeFileSync(join(dir, 'polyspawn.config.json'), JSON.stringify(file));
    expect(() => loadConfig(backends, env, dir)).toThrow(message);
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
    const table = loadModels([shippedModelsFile]);
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
    const table = loadModels(modelsFiles(dir, join(dir, 'xdg', 'polyspawn'), env));
    expect(table.codex!.default).toBe('gpt-9');
    expect(table.codex!.aliases.fast).toBeTruthy(); // shipped aliases are kept
    expect(resolveModel(table, 'codex', 'nine')).toEqual({ model: 'gpt-9', known: true });
    expect(resolveModel(table, 'codex', undefined)).toEqual({ model: 'gpt-9', known: true });
    expect(resolveModel(table, 'codex', 'gpt-5.4')).toEqual({ model: 'gpt-5.4', known: true });
  });

  test('a model the table does not know is passed on as named, marked unknown; a name that is no name is refused', () => {
    const table = loadModels([shippedModelsFile]);
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
