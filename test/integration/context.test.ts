// The app runs on the environment and folder createApp is given, not on the process's: the
// CLI child starts from the app's env (and a backend's command sees it), the API key is looked
// up in it at run time as well as for availability, and api_keys.json is found in the project
// folder the given cwd names.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, test } from 'vitest';
import { copilot } from '../../backends/copilot.js';
import { createApp, type App } from '../../src/app.js';
import { startFakeModelApi, type FakeModelApi } from '../fakes/model-api.js';
import { fakeBinDir } from '../helpers/mcp.js';

const PROCESS_ONLY = 'POLYSPAWN_TEST_PROCESS_ONLY';
const APP_ONLY = 'POLYSPAWN_TEST_APP_ONLY';

let api: FakeModelApi;
const open: Array<{ app: App; dir: string }> = [];

beforeAll(async () => {
  api = await startFakeModelApi();
  process.env[PROCESS_ONLY] = 'from-the-process';
});

afterEach(async () => {
  for (const { app, dir } of open.splice(0)) {
    app.agents.close();
    await app.iac.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

afterAll(async () => {
  delete process.env[PROCESS_ONLY];
  await api?.close();
});

/** An app in a fresh project folder, with only the variables given (and the fake CLIs on PATH). */
function appWith(env: Record<string, string>, files: Record<string, string> = {}): App {
  const dir = mkdtempSync(join(tmpdir(), 'polyspawn-context-'));
  for (const [name, text] of Object.entries(files)) writeFileSync(join(dir, name), text);
  const app = createApp(
    { PATH: `${fakeBinDir}${delimiter}${process.env.PATH}`, HOME: dir, XDG_CONFIG_HOME: join(dir, 'xdg'), ...env },
    dir,
    () => true,
  );
  open.push({ app, dir });
  return app;
}

async function run(app: App, backend: string, prompt: string) {
  const job = app.jobs.submit({
    backend,
    model: app.models[backend]!.default,
    prompt,
    cwd: app.config.projectDir,
    timeoutS: 30,
    extra: {},
  });
  const { finished } = await app.jobs.waitFor([job.id], { timeoutMs: 30_000, mode: 'all' });
  return finished[0]!;
}

describe('the app context, not the process', () => {
  test("a CLI job's child starts from the app's environment", async () => {
    const app = appWith({ [APP_ONLY]: 'from-the-app' });
    const seen = await run(app, 'claude', `[[cli:echo-env:${APP_ONLY}]]`);
    expect(seen).toMatchObject({ state: 'succeeded', outcome: { text: 'from-the-app' } });
    const hidden = await run(app, 'claude', `[[cli:echo-env:${PROCESS_ONLY}]]`);
    expect(hidden).toMatchObject({ state: 'succeeded', outcome: { text: '' } });
  });

  test("an API job finds its key in the app's environment at run time", async () => {
    const key = 'app-env-mistral-key-0123456789';
    const app = appWith({ MISTRAL_API_KEY: key, POLYSPAWN_MISTRAL_BASE_URL: api.url });
    expect(app.availability(app.backends.find((b) => b.name === 'mistral')!)).toMatchObject({
      usable: true,
      detail: 'HTTP API, key from env MISTRAL_API_KEY, base URL ' + api.url,
    });
    const mark = `context-key-${Date.now()}`;
    const job = await run(app, 'mistral', mark);
    expect(job.state).toBe('succeeded');
    const request = api.requests.find((r) => r.rawBody.includes(mark));
    expect(request?.headers.authorization).toBe(`Bearer ${key}`);
    // ...and the key, known to the app's redactor, never appears in what it returns.
    expect(app.secrets.text(`the key ${key}`)).toBe('the key [REDACTED]');
  });

  test('api_keys.json is found in the project folder of the cwd given, not the process working folder', () => {
    const app = appWith({}, { 'api_keys.json': JSON.stringify({ MISTRAL_API_KEY: 'file-key-0123456789' }) });
    expect(app.availability(app.backends.find((b) => b.name === 'mistral')!)).toEqual({
      usable: true,
      detail: `HTTP API, key from MISTRAL_API_KEY in ${join(app.config.projectDir, 'api_keys.json')}`,
    });
  });

  test("each app has its own redactor: one app never learns another's keys", () => {
    const first = appWith({ MISTRAL_API_KEY: 'first-app-key-0123456789' });
    const second = appWith({});
    expect(first.secrets.text('first-app-key-0123456789')).toBe('[REDACTED]');
    expect(second.secrets.text('first-app-key-0123456789')).toBe('first-app-key-0123456789');
  });
});

describe("a backend's command and the child's environment", () => {
  const settings = { permission: 'allow-all', allowTools: [], denyTools: [] };
  const input = { prompt: 'p', model: 'm1', cwd: '/w', systemPrompt: 'Be brief.', extra: {} };

  test('copilot adds its instructions folder to the folders the child would inherit', () => {
    const inherited = copilot.command(input, settings, {
      scratchDir: '/scratch',
      env: { COPILOT_CUSTOM_INSTRUCTIONS_DIRS: '/mine' },
    });
    expect(inherited.env.COPILOT_CUSTOM_INSTRUCTIONS_DIRS).toBe('/mine,/scratch/copilot-instructions');
    const none = copilot.command(input, settings, { scratchDir: '/scratch', env: {} });
    expect(none.env.COPILOT_CUSTOM_INSTRUCTIONS_DIRS).toBe('/scratch/copilot-instructions');
  });
});
