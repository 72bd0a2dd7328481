// The API backends' settings and declarations: base URLs from config and env, the policy
// knobs, the models table entries, and the tool inputs the backends declare.
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, test } from 'vitest';
import { z } from 'zod';
import { backends } from '../../backends/registry.js';
import { mistralText } from '../../backends/mistral.js';
import { loadConfig } from '../../src/config/config.js';
import { ConfigError } from '../../src/lib/errors.js';
import { policyKnobs } from '../../src/jobs/execute-api.js';
import { estimateCost, resolveModel, shippedModels } from '../../src/config/models.js';
import { tempProject } from '../helpers/temp.js';

const API = ['grok', 'gemini', 'mistral'] as const;

const project = (file?: unknown) => tempProject('apiconfig', file);

describe('base_url', () => {
  test('none by default (each backend uses its vendor URL)', () => {
    const { dir, env } = project();
    const c = loadConfig(backends, env, dir);
    for (const name of API) expect(c.backends[name]!.baseUrl).toBeUndefined();
  });

  test("from the user's config file, overridden by POLYSPAWN_<NAME>_BASE_URL; a trailing slash is dropped", () => {
    const { dir, env } = project();
    mkdirSync(join(dir, 'xdg', 'polyspawn'), { recursive: true });
    writeFileSync(
      join(dir, 'xdg', 'polyspawn', 'config.json'),
      JSON.stringify({
        backends: {
          grok: { base_url: 'https://gw.example.com/xai/v1/' },
          gemini: { base_url: 'https://file.example.com' },
        },
      }),
    );
    const c = loadConfig(backends, { ...env, POLYSPAWN_GEMINI_BASE_URL: 'http://127.0.0.1:8080' }, dir);
    expect(c.backends.grok!.baseUrl).toBe('https://gw.example.com/xai/v1');
    expect(c.backends.gemini!.baseUrl).toBe('http://127.0.0.1:8080');
    expect(c.backends.mistral!.baseUrl).toBeUndefined();
  });

  test.each([
    [{ POLYSPAWN_MISTRAL_BASE_URL: 'not a url' }, /POLYSPAWN_MISTRAL_BASE_URL: "not a url" is not an http\(s\) URL/],
    [{ POLYSPAWN_GROK_BASE_URL: 'ftp://x.example.com' }, /is not an http\(s\) URL/],
    [
      { POLYSPAWN_CLAUDE_BASE_URL: 'http://x.example.com' },
      /claude: base_url \(POLYSPAWN_CLAUDE_BASE_URL\) applies only to API backends/,
    ],
  ])('rejects %o', (extra, message) => {
    const { dir, env } = project();
    expect(() => loadConfig(backends, { ...env, ...extra }, dir)).toThrow(ConfigError);
    expect(() => loadConfig(backends, { ...env, ...extra }, dir)).toThrow(message);
  });
});

describe('policy knobs', () => {
  test('defaults, values, and bad values that fall back with a note', () => {
    expect(policyKnobs({})).toEqual({ knobs: {}, problems: [] });
    expect(policyKnobs({ POLYSPAWN_API_RETRY_AFTER_CAP_S: '1.5', POLYSPAWN_API_BACKOFF_MS: '50' })).toEqual({
      knobs: { retryAfterCapMs: 1500, backoffMs: 50 },
      problems: [],
    });
    const bad = policyKnobs({ POLYSPAWN_API_RETRY_AFTER_CAP_S: '60' });
    expect(bad.knobs).toEqual({});
    expect(bad.problems[0]).toMatch(/POLYSPAWN_API_RETRY_AFTER_CAP_S=60 is not a number from 0 to 30/);
  });
});

describe('models table', () => {
  const table = shippedModels(backends);

  test.each(API)('%s: a default with a price, every alias priced', (name) => {
    const entry = table[name]!;
    expect(entry.prices[entry.default]).toBeDefined();
    for (const target of Object.values(entry.aliases))
      expect(entry.prices[target], `${name} alias -> ${target}`).toBeDefined();
    expect(resolveModel(table, name, undefined)).toEqual({ model: entry.default, known: true });
  });

  test('cost: cached input at its own price', () => {
    const usage = { inputTokens: 1_000_000, outputTokens: 1_000_000, cachedInputTokens: 500_000 };
    // gemini-3.5-flash: 1.5 in, 0.15 cached, 9 out
    expect(estimateCost(table, 'gemini', 'gemini-3.5-flash', usage)).toBeCloseTo(0.5 * 1.5 + 0.5 * 0.15 + 9, 9);
  });
});

describe('backend declarations', () => {
  test.each(API)('%s: an API backend with system prompt, no resume, and the extra inputs', (name) => {
    const b = backends.find((x) => x.name === name)!;
    expect(b).toMatchObject({ kind: 'api', supportsSystemPrompt: true, supportsResume: false });
    const extra = z.object(b.extraInput!).strict();
    expect(extra.parse({ max_output_tokens: 100, temperature: 0.5 })).toEqual({
      max_output_tokens: 100,
      temperature: 0.5,
    });
    expect(() => extra.parse({ temperature: 3 })).toThrow();
    expect(() => extra.parse({ max_output_tokens: 0 })).toThrow();
    expect(() => extra.parse({ max_output_tokens: 1.5 })).toThrow();
  });

  test('Mistral content: a string, text chunks among others, or null', () => {
    expect(mistralText('hi')).toBe('hi');
    expect(
      mistralText([
        { type: 'thinking', thinking: [{ type: 'text', text: 'hmm' }] },
        { type: 'text', text: 'a' },
        { type: 'text', text: 'b' },
      ]),
    ).toBe('ab');
    expect(mistralText(null)).toBe('');
  });
});
