// API key lookup (src/config/keys.ts) and what availability says about API backends.
import { mkdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, test } from 'vitest';
import { gemini } from '../../backends/gemini.js';
import { grok } from '../../backends/grok.js';
import { mistral } from '../../backends/mistral.js';
import { createApp } from '../../src/app.js';
import { checkBackend } from '../../src/config/availability.js';
import { findApiKey } from '../../src/config/keys.js';
import { tempDir } from '../helpers/temp.js';

function dirs(files: { project?: unknown; user?: unknown } = {}) {
  const root = tempDir('keys');
  const d = { projectDir: join(root, 'project'), userConfigDir: join(root, 'xdg', 'polyspawn') };
  mkdirSync(d.projectDir, { recursive: true });
  mkdirSync(d.userConfigDir, { recursive: true });
  const write = (dir: string, v: unknown) =>
    writeFileSync(join(dir, 'api_keys.json'), typeof v === 'string' ? v : JSON.stringify(v));
  if (files.project !== undefined) write(d.projectDir, files.project);
  if (files.user !== undefined) write(d.userConfigDir, files.user);
  return d;
}

describe('findApiKey', () => {
  test('the aliases, in order', () => {
    expect(grok.keyNames).toEqual(['XAI_API_KEY', 'GROK_API_KEY', 'X_API_KEY']);
    expect(gemini.keyNames).toEqual(['GEMINI_API_KEY', 'GOOGLE_API_KEY', 'GOOGLE_AI_KEY']);
    expect(mistral.keyNames).toEqual(['MISTRAL_API_KEY']);
  });

  test('project file, then user file, then environment', () => {
    const both = dirs({ project: { XAI_API_KEY: 'p' }, user: { XAI_API_KEY: 'u' } });
    expect(findApiKey(grok, both, { XAI_API_KEY: 'e' })).toMatchObject({
      found: true,
      key: 'p',
      source: `XAI_API_KEY in ${join(both.projectDir, 'api_keys.json')}`,
    });
    const user = dirs({ user: { GROK_API_KEY: 'u' } });
    expect(findApiKey(grok, user, { XAI_API_KEY: 'e' })).toMatchObject({ key: 'u', name: 'GROK_API_KEY' });
    expect(findApiKey(grok, dirs(), { X_API_KEY: 'e' })).toMatchObject({ key: 'e', source: 'env X_API_KEY' });
  });

  test('an empty or blank value never hides a key set further down', () => {
    const d = dirs({ project: { GEMINI_API_KEY: '' }, user: { GEMINI_API_KEY: '   ' } });
    expect(findApiKey(gemini, d, { GEMINI_API_KEY: '', GOOGLE_API_KEY: ' g ' })).toMatchObject({
      found: true,
      key: 'g',
      source: 'env GOOGLE_API_KEY',
    });
  });

  test('within one place the first alias wins', () => {
    expect(findApiKey(gemini, dirs(), { GOOGLE_AI_KEY: 'c', GEMINI_API_KEY: 'a' })).toMatchObject({ key: 'a' });
  });

  test('missing: one sentence naming every place and name tried', () => {
    const d = dirs();
    const r = findApiKey(grok, d, {});
    expect(r.found).toBe(false);
    if (r.found) return;
    expect(r.detail).toBe(
      `no API key found: set one of XAI_API_KEY, GROK_API_KEY, X_API_KEY in the environment or in api_keys.json ` +
        `(tried ${join(d.projectDir, 'api_keys.json')} and ${join(d.userConfigDir, 'api_keys.json')} for XAI_API_KEY, GROK_API_KEY, X_API_KEY, ` +
        `then env XAI_API_KEY, GROK_API_KEY, X_API_KEY)`,
    );
  });

  test('a broken file is reported, without echoing its content (it holds keys)', () => {
    const d = dirs({ project: '{"MISTRAL_API_KEY": "sk-secret-value",', user: { MISTRAL_API_KEY: 42 } });
    const r = findApiKey(mistral, d, {});
    expect(r.found).toBe(false);
    if (r.found) return;
    expect(r.detail).toContain(`${join(d.projectDir, 'api_keys.json')} is not valid JSON`);
    expect(r.detail).toContain('MISTRAL_API_KEY in');
    expect(r.detail).toContain('is not a string');
    expect(r.detail).not.toContain('sk-secret-value');
    // ...and a broken file does not stop the environment from being used.
    expect(findApiKey(mistral, d, { MISTRAL_API_KEY: 'm' })).toMatchObject({ key: 'm' });
  });
});

describe('availability of API backends', () => {
  const settings = { permission: 'none', allowTools: [], denyTools: [] };

  test('usable only with a key; the detail names where the key came from, never its value', () => {
    const d = dirs();
    for (const backend of [grok, gemini, mistral]) {
      const missing = checkBackend(backend, settings, {}, d);
      expect(missing.usable).toBe(false);
      expect(missing.detail).toContain(backend.keyNames[0]!);
    }
    const ok = checkBackend(
      grok,
      { ...settings, baseUrl: 'http://127.0.0.1:1/v1' },
      { GROK_API_KEY: 'secret-grok-key' },
      d,
    );
    expect(ok).toEqual({ usable: true, detail: 'HTTP API, key from env GROK_API_KEY, base URL http://127.0.0.1:1/v1' });
  });

  test('the app finds the key files where its config says, from the environment it was given', () => {
    const d = dirs({ project: { MISTRAL_API_KEY: 'from-file' } });
    const env = { POLYSPAWN_PROJECT_DIR: d.projectDir, XDG_CONFIG_HOME: join(d.userConfigDir, '..') };
    const app = createApp(env, tmpdir(), () => true);
    expect(app.availability(mistral)).toEqual({
      usable: true,
      detail: `HTTP API, key from MISTRAL_API_KEY in ${join(d.projectDir, 'api_keys.json')}`,
    });
  });
});
