// spawn_grok, spawn_gemini and spawn_mistral end to end: the built MCP server (dist/) over
// stdio, the real SDKs, and the fake model API (test/fakes/model-api.ts) on 127.0.0.1 at a
// random port, each backend's base URL pointed at it through POLYSPAWN_<NAME>_BASE_URL.
// Every case asserts the job's final state, the classified error, how many requests the fake
// saw, and usage and cost. No assertion on speed: a request that must be ended (a cancel, a
// time-out, the server closing) would otherwise take 30 s or more, and the bound that shows it
// was ended is 10-15 s; the lower bounds only show that waits happened (retry-after).
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, test, type ExpectStatic } from 'vitest';
import { backends } from '../../backends/registry.js';
import { FAKE_USAGE, startFakeModelApi, type FakeModelApi, type RecordedRequest } from '../fakes/model-api.js';
import { repoRoot, startServer, type TestServer } from '../helpers/mcp.js';

type Name = 'grok' | 'gemini' | 'mistral';
const NAMES: Name[] = ['grok', 'gemini', 'mistral'];

const KEYS: Record<Name, { env: string; value: string; aliases: string[] }> = {
  grok: { env: 'XAI_API_KEY', value: 'xai-test-key-0123456789', aliases: ['XAI_API_KEY', 'GROK_API_KEY', 'X_API_KEY'] },
  gemini: {
    env: 'GEMINI_API_KEY',
    value: 'gemini-test-key-0123456789',
    aliases: ['GEMINI_API_KEY', 'GOOGLE_API_KEY', 'GOOGLE_AI_KEY'],
  },
  mistral: { env: 'MISTRAL_API_KEY', value: 'mistral-test-key-0123456789', aliases: ['MISTRAL_API_KEY'] },
};
const OPENAI_KEY = 'sk-openai-must-never-reach-xai';
const ALL_ALIASES = NAMES.flatMap((n) => KEYS[n].aliases);

/** The backends' shipped models: the default model and its price, for the expected cost. */
const MODELS = Object.fromEntries(backends.map((b) => [b.name, b.models]));
function expectedCost(name: Name): number {
  const price = MODELS[name]!.prices[MODELS[name]!.default]!;
  return (FAKE_USAGE.input * price.input + FAKE_USAGE.output * price.output) / 1e6;
}

const baseUrl = (name: Name, url: string) => (name === 'grok' ? `${url}/v1` : url);

type JobResult = {
  agent_id: string;
  state: string;
  text?: string;
  error?: string;
  elapsed_s: number;
  usage?: { input_tokens: number; output_tokens: number; cached_input_tokens: number };
  cost_usd?: number;
  cost_source?: string;
  log?: string;
};

let api: FakeModelApi;
let server: TestServer;
let moduleLog: string;
let scratch: string;
const loadedAtStart: string[] = [];

/**
 * A module-resolution hook loaded into the server with NODE_OPTIONS=--import: it appends every
 * resolved module URL to a file. Robust because it sees what Node itself resolves (static and
 * dynamic imports alike), needs no debug code in the server, and has a positive control below.
 */
function writeModuleLogger(dir: string): string {
  const hooks = join(dir, 'hooks.mjs');
  writeFileSync(
    hooks,
    `import { appendFileSync } from 'node:fs';
export async function resolve(specifier, context, next) {
  const result = await next(specifier, context);
  appendFileSync(process.env.POLYSPAWN_TEST_MODULE_LOG, result.url + '\\n');
  return result;
}
`,
  );
  const register = join(dir, 'register.mjs');
  writeFileSync(
    register,
    `import { register } from 'node:module';\nregister(${JSON.stringify(pathToFileURL(hooks).href)});\n`,
  );
  return register;
}

const SDK_PATHS = ['/node_modules/openai/', '/node_modules/@google/genai/', '/node_modules/@mistralai/mistralai/'];
const sdksIn = (urls: string[]) => SDK_PATHS.filter((p) => urls.some((u) => u.includes(p)));
const readModuleLog = () => readFileSync(moduleLog, 'utf8').split('\n').filter(Boolean);

function serverEnv(extra: Record<string, string> = {}): Record<string, string> {
  const env: Record<string, string> = {
    // Never let a developer's real keys or endpoints near these tests.
    ...Object.fromEntries(ALL_ALIASES.map((k) => [k, ''])),
    GOOGLE_GEMINI_BASE_URL: '',
    GOOGLE_GENAI_USE_VERTEXAI: '',
    POLYSPAWN_CONCURRENCY: '40',
    POLYSPAWN_API_RETRY_AFTER_CAP_S: '1.5', // the fake's 429 asks for 2 s: shows the cap
    POLYSPAWN_API_BACKOFF_MS: '50',
  };
  for (const name of NAMES) env[`POLYSPAWN_${name.toUpperCase()}_BASE_URL`] = baseUrl(name, api.url);
  return { ...env, ...extra };
}

beforeAll(async () => {
  api = await startFakeModelApi();
  scratch = mkdtempSync(join(tmpdir(), 'polyspawn-api-test-'));
  moduleLog = join(scratch, 'modules.log');
  writeFileSync(moduleLog, '');
  const register = writeModuleLogger(scratch);
  server = await startServer({
    env: serverEnv({
      ...Object.fromEntries(NAMES.map((n) => [KEYS[n].env, KEYS[n].value])),
      // Things the openai SDK reads from the environment by default: none may reach x.ai.
      OPENAI_API_KEY: OPENAI_KEY,
      OPENAI_BASE_URL: 'http://127.0.0.1:9/openai-base-url-must-not-be-used',
      OPENAI_ORG_ID: 'org-must-not-leak',
      OPENAI_PROJECT_ID: 'proj-must-not-leak',
      OPENAI_CUSTOM_HEADERS: 'X-Openai-Only: custom-header-must-not-leak',
      // ...and what @google/genai reads: ignored, the configured base URL and API win.
      GOOGLE_GEMINI_BASE_URL: 'http://127.0.0.1:9/gemini-base-url-must-not-be-used',
      GOOGLE_GENAI_USE_VERTEXAI: 'true',
      NODE_OPTIONS: `--import=${pathToFileURL(register).href}`,
      POLYSPAWN_TEST_MODULE_LOG: moduleLog,
    }),
  });
  await server.client.listTools();
  loadedAtStart.push(...readModuleLog());
});

afterAll(async () => {
  await server?.close();
  await api?.close();
  if (scratch) rmSync(scratch, { recursive: true, force: true });
});

let counter = 0;
/** A prompt no other case uses, so requests can be told apart while cases run in parallel. */
const marker = (label: string) => `case-${label}-${++counter}-${Date.now()}`;
const requestsFor = (mark: string): RecordedRequest[] => api.requests.filter((r) => r.rawBody.includes(mark));

async function spawn(name: Name, args: Record<string, unknown>): Promise<JobResult> {
  return server.callOk<JobResult>(`spawn_${name}`, { wait_s: 30, ...args });
}

function expectFakeUsage(expect: ExpectStatic, job: JobResult, name: Name) {
  expect(job.usage).toEqual({
    input_tokens: FAKE_USAGE.input,
    output_tokens: FAKE_USAGE.output,
    cached_input_tokens: FAKE_USAGE.cached,
  });
  expect(job.cost_source).toBe('estimated');
  expect(job.cost_usd).toBeCloseTo(expectedCost(name), 12);
}

const runLog = (job: JobResult) => readFileSync(job.log!.replace(/stdout\.log$/, 'stderr.log'), 'utf8');

test('starting the server and listing tools loads none of the three SDKs', async () => {
  // The hook worked: it saw the server's entry (one bundle holding the backends: scripts/bundle.mjs).
  expect(loadedAtStart.some((u) => u.endsWith('/dist/src/cli.js'))).toBe(true);
  expect(sdksIn(loadedAtStart)).toEqual([]);
  const tools = await server.client.listTools();
  for (const name of NAMES) {
    const tool = tools.tools.find((t) => t.name === `spawn_${name}`)!;
    const props = Object.keys(tool.inputSchema.properties ?? {});
    expect(props.sort()).toEqual([
      'budget',
      'max_output_tokens',
      'model',
      'output_schema',
      'prompt',
      'system_prompt',
      'temperature',
      'timeout_s',
      'wait_s',
    ]);
    expect(tool.annotations?.destructiveHint).toBe(false);
  }
  expect(server.client.getInstructions()).toMatch(/spawn_grok: usable/);
});

describe.concurrent.each(NAMES)('%s', (name) => {
  test('success: text, usage, estimated cost, one request; the inputs reach the wire', async ({ expect }) => {
    const mark = marker(`ok-${name}`);
    const job = await spawn(name, {
      prompt: `say hi ${mark}`,
      system_prompt: 'be brief',
      max_output_tokens: 64,
      temperature: 0.25,
    });
    expect(job.state).toBe('succeeded');
    expect(job.text).toContain(`FAKE REPLY (turn 1): say hi ${mark}`);
    expect(job.error).toBeUndefined();
    expectFakeUsage(expect, job, name);
    const reqs = requestsFor(mark);
    expect(reqs).toHaveLength(1);
    const req = reqs[0]!;
    expect(req.system).toBe('be brief');
    expect(req.model).toBe(MODELS[name]!.default);
    const body = req.body as Record<string, any>;
    if (name === 'grok') {
      expect(req.path).toBe('/v1/chat/completions');
      expect(body.max_completion_tokens).toBe(64);
      expect(body.temperature).toBe(0.25);
      expect(req.headers.authorization).toBe(`Bearer ${KEYS.grok.value}`);
      // OPENAI_* from the environment never reach x.ai: not the key, not the org or project.
      expect(req.rawBody + JSON.stringify(req.headers)).not.toContain(OPENAI_KEY);
      expect(req.headers['openai-organization']).toBeUndefined();
      expect(req.headers['openai-project']).toBeUndefined();
      expect(req.headers['x-openai-only']).toBeUndefined();
    } else if (name === 'gemini') {
      expect(req.path).toBe(`/v1beta/models/${MODELS.gemini!.default}:generateContent`);
      expect(body.generationConfig).toMatchObject({ maxOutputTokens: 64, temperature: 0.25 });
      expect(req.headers['x-goog-api-key']).toBe(KEYS.gemini.value);
      expect(req.query.key).toBeUndefined();
    } else {
      expect(req.path).toBe('/v1/chat/completions');
      expect(body.max_tokens).toBe(64);
      expect(body.temperature).toBe(0.25);
      expect(req.headers.authorization).toBe(`Bearer ${KEYS.mistral.value}`);
    }
    // The key reaches no tool result and no log.
    expect(JSON.stringify(job)).not.toContain(KEYS[name].value);
    expect(runLog(job)).not.toContain(KEYS[name].value);
    expect(runLog(job)).toContain(`key from env ${KEYS[name].env}`);
  });

  test('429 once: retried after the retry-after the server asked for, then succeeds', async ({ expect }) => {
    const mark = marker(`429once-${name}`);
    const job = await spawn(name, { prompt: `[[fake:429-once]] ${mark}` });
    expect(job.state).toBe('succeeded');
    expectFakeUsage(expect, job, name);
    expect(requestsFor(mark).map((r) => r.status)).toEqual([429, 200]);
    expect(job.elapsed_s).toBeGreaterThanOrEqual(0.9); // the fake's retry-after: 1
    expect(runLog(job)).toMatch(/waiting 1 s before attempt 2 \(retry-after 1 s\)/);
  });

  test('429 always: rate_limited after 3 attempts, each wait capped', async ({ expect }) => {
    const mark = marker(`429-${name}`);
    const job = await spawn(name, { prompt: `[[fake:429]] ${mark}` });
    expect(job.state).toBe('failed');
    expect(job.error).toMatch(/^rate_limited: .*rate limiting.*gave up after 3 attempts/);
    expect(job.error).toMatch(/try again/i);
    expect(requestsFor(mark)).toHaveLength(3);
    expect(job.usage).toBeUndefined();
    expect(job.cost_source).toBe('unknown');
    // retry-after: 2 on each, capped to POLYSPAWN_API_RETRY_AFTER_CAP_S=1.5, twice.
    expect(runLog(job).match(/waiting 1\.5 s before attempt \d \(retry-after 2 s, capped at 1\.5 s\)/g)).toHaveLength(
      2,
    );
    expect(job.elapsed_s).toBeGreaterThanOrEqual(2.9);
  });

  test('500: server error after 3 attempts', async ({ expect }) => {
    const mark = marker(`500-${name}`);
    const job = await spawn(name, { prompt: `[[fake:500]] ${mark}` });
    expect(job.state).toBe('failed');
    expect(job.error).toMatch(/^server: .*HTTP 500.*on 3 attempts/);
    expect(job.error).toContain('fake error 500');
    expect(requestsFor(mark)).toHaveLength(3);
    expect(job.cost_source).toBe('unknown');
  });

  test('401: auth, not retried, and the message names the key to check', async ({ expect }) => {
    const mark = marker(`401-${name}`);
    const job = await spawn(name, { prompt: `[[fake:401]] ${mark}` });
    expect(job.state).toBe('failed');
    expect(job.error).toMatch(/^auth: .*rejected the API key \(HTTP 401/);
    expect(job.error).toContain(`Check ${KEYS[name].env}`);
    expect(requestsFor(mark)).toHaveLength(1);
  });

  test(
    'slower than timeout_s: timed_out after one attempt, request aborted',
    { timeout: 120_000 },
    async ({ expect }) => {
      const mark = marker(`slow-${name}`);
      // The answer would take a minute; timeout_s is 10 s (1 s is too short to be sure, on a busy
      // machine, that the request has reached the fake before it is ended).
      const job = await spawn(name, { prompt: `[[fake:slow:60000]] ${mark}`, timeout_s: 10, wait_s: 50 });
      expect(job.state).toBe('timed_out');
      expect(job.error).toMatch(/^timeout: no answer from .* within 10 s \(timeout_s\)\. Raise timeout_s/);
      expect(job.elapsed_s).toBeLessThan(30);
      const reqs = requestsFor(mark);
      expect(reqs).toHaveLength(1);
      await expect.poll(() => reqs[0]!.outcome, { timeout: 15_000 }).toBe('slow-aborted');
    },
  );

  test('malformed JSON: bad_response, not retried', async ({ expect }) => {
    const mark = marker(`malformed-${name}`);
    const job = await spawn(name, { prompt: `[[fake:malformed]] ${mark}` });
    expect(job.state).toBe('failed');
    expect(job.error).toMatch(/^bad_response: .*reply could not be read/);
    expect(requestsFor(mark)).toHaveLength(1);
    expect(job.cost_source).toBe('unknown');
  });

  test('empty content: bad_response, with the usage that was still billed', async ({ expect }) => {
    const mark = marker(`empty-${name}`);
    const job = await spawn(name, { prompt: `[[fake:empty]] ${mark}` });
    expect(job.state).toBe('failed');
    expect(job.error).toMatch(/^bad_response: .*returned an empty answer \(finish reason: (stop|STOP)\)/);
    expect(requestsFor(mark)).toHaveLength(1);
    expectFakeUsage(expect, job, name);
  });

  test('content as an array of chunks (Mistral) is read as text', async ({ expect }) => {
    const mark = marker(`chunks-${name}`);
    const job = await spawn(name, { prompt: `[[fake:mistral-chunks]] ${mark}` });
    expect(job.state).toBe('succeeded');
    expect(job.text).toContain(`FAKE REPLY (turn 1): [[fake:mistral-chunks]] ${mark}`);
    expectFakeUsage(expect, job, name);
    expect(requestsFor(mark)).toHaveLength(1);
    if (name === 'mistral') {
      // The fake answers in Mistral's dialect (chunks) when the user agent says mistral.
      expect(String(requestsFor(mark)[0]!.headers['user-agent'])).toMatch(/mistral/i);
    }
  });

  test('cancel during a slow request: cancelled at once, request aborted', { timeout: 120_000 }, async ({ expect }) => {
    const mark = marker(`cancel-${name}`);
    // The answer would take 30 s, and timeout_s is longer still.
    const started = await server.callOk<JobResult>(`spawn_${name}`, {
      prompt: `[[fake:slow:30000]] ${mark}`,
      timeout_s: 120,
    });
    // The SDK's first import, on a busy machine, can take seconds.
    await expect.poll(() => requestsFor(mark).length, { timeout: 30_000, interval: 20 }).toBe(1);
    const t0 = Date.now();
    const cancelled = await server.callOk<JobResult>('cancel', { agent_id: started.agent_id });
    const tookMs = Date.now() - t0;
    expect(cancelled.state).toBe('cancelled');
    expect(tookMs).toBeLessThan(10_000);
    const result = await server.callOk<JobResult>('result', { agent_id: started.agent_id });
    expect(result.state).toBe('cancelled');
    expect(result.error).toBe('cancelled');
    await expect.poll(() => requestsFor(mark)[0]!.outcome, { timeout: 15_000 }).toBe('slow-aborted');
    expect(requestsFor(mark)).toHaveLength(1);
  });
});

test('each SDK is loaded once its backend runs (the module log sees them)', () => {
  // Runs after the cases above: the positive control for the start-up check.
  expect(sdksIn(readModuleLog())).toEqual(SDK_PATHS);
});

describe('keys', () => {
  let keyless: TestServer;
  let projectDir: string;

  beforeAll(async () => {
    projectDir = mkdtempSync(join(tmpdir(), 'polyspawn-keys-'));
    // grok from the project's api_keys.json; gemini's empty value there must not hide the env.
    writeFileSync(
      join(projectDir, 'api_keys.json'),
      JSON.stringify({ XAI_API_KEY: 'xai-from-project-file-0123', GEMINI_API_KEY: '' }),
    );
    mkdirSync(join(projectDir, '.xdg-config', 'polyspawn'), { recursive: true });
    keyless = await startServer({
      projectDir,
      env: serverEnv({ XAI_API_KEY: 'xai-from-env-is-second', GOOGLE_AI_KEY: 'gemini-from-env-alias-0123' }),
    });
  });

  afterAll(async () => {
    await keyless?.close();
    rmSync(projectDir, { recursive: true, force: true });
  });

  test('a missing key is an immediate error naming every name tried, and no request is made', async () => {
    const mark = marker('nokey-mistral');
    const before = api.requests.length;
    const result = await keyless.call('spawn_mistral', { prompt: `hello ${mark}`, wait_s: 5 });
    expect(result.isError).toBe(true);
    const text = JSON.stringify(result.content);
    expect(text).toContain('spawn_mistral cannot run here: no API key found');
    expect(text).toContain('MISTRAL_API_KEY');
    expect(text).toContain(join(projectDir, 'api_keys.json'));
    expect(api.requests.length).toBe(before);
    expect(requestsFor(mark)).toHaveLength(0);
    const list = await keyless.callOk<{ agents?: unknown[] }>('list');
    expect(JSON.stringify(list)).not.toContain(mark); // no job was created
    // The model is told what to set; the files tried are in the spawn's error (above) and in doctor.
    expect(keyless.client.getInstructions()).toMatch(
      /spawn_mistral: NOT usable here \(no API key: set MISTRAL_API_KEY in api_keys\.json or the environment\)/,
    );
    expect(keyless.client.getInstructions()).not.toContain(join(projectDir, 'api_keys.json'));
  });

  test("the project's api_keys.json comes before the environment, and an empty value hides nothing", async () => {
    const grokMark = marker('file-grok');
    const grokJob = await keyless.callOk<JobResult>('spawn_grok', { prompt: `hi ${grokMark}`, wait_s: 30 });
    expect(grokJob.state).toBe('succeeded');
    expect(requestsFor(grokMark)[0]!.headers.authorization).toBe('Bearer xai-from-project-file-0123');
    expect(runLog(grokJob)).toContain(`key from XAI_API_KEY in ${join(projectDir, 'api_keys.json')}`);

    const gemMark = marker('env-gemini');
    const gemJob = await keyless.callOk<JobResult>('spawn_gemini', { prompt: `hi ${gemMark}`, wait_s: 30 });
    expect(gemJob.state).toBe('succeeded');
    expect(requestsFor(gemMark)[0]!.headers['x-goog-api-key']).toBe('gemini-from-env-alias-0123');
  });

  test('an API backend takes no cwd', async () => {
    const result = await keyless.call('spawn_grok', { prompt: 'x', cwd: '.' });
    expect(result.isError).toBe(true);
    expect(JSON.stringify(result.content)).toMatch(/cwd/);
  });
});

describe('server shutdown', () => {
  test('closing the server aborts API requests in flight', { timeout: 120_000 }, async () => {
    const other = await startServer({
      env: serverEnv(Object.fromEntries(NAMES.map((n) => [KEYS[n].env, KEYS[n].value]))),
    });
    const marks = NAMES.map((n) => marker(`shutdown-${n}`));
    try {
      await Promise.all(
        NAMES.map((n, i) => other.callOk(`spawn_${n}`, { prompt: `[[fake:slow:30000]] ${marks[i]}`, timeout_s: 120 })),
      );
      await expect
        .poll(() => marks.every((m) => requestsFor(m).length === 1), { timeout: 30_000, interval: 20 })
        .toBe(true);
    } finally {
      await other.close(); // closes the server's stdin: it cancels every job and exits
    }
    await expect
      .poll(() => marks.map((m) => requestsFor(m)[0]!.outcome), { timeout: 15_000, interval: 20 })
      .toEqual(NAMES.map(() => 'slow-aborted'));
  });
});

describe('unreachable endpoint', () => {
  test('connection refused: server error after 3 attempts, naming the cause and the base URL setting', async () => {
    const net = await import('node:net');
    const probe = net.createServer();
    await new Promise<void>((r) => probe.listen(0, '127.0.0.1', r));
    const port = (probe.address() as { port: number }).port;
    await new Promise<void>((r) => probe.close(() => r()));
    const dead = `http://127.0.0.1:${port}`;
    const other = await startServer({
      env: {
        ...serverEnv(Object.fromEntries(NAMES.map((n) => [KEYS[n].env, KEYS[n].value]))),
        ...Object.fromEntries(NAMES.map((n) => [`POLYSPAWN_${n.toUpperCase()}_BASE_URL`, baseUrl(n, dead)])),
      },
    });
    try {
      const jobs = await Promise.all(
        NAMES.map((n) => other.callOk<JobResult>(`spawn_${n}`, { prompt: 'hello', wait_s: 30 })),
      );
      jobs.forEach((job, i) => {
        const n = NAMES[i]!;
        expect(job.state).toBe('failed');
        expect(job.error).toContain(`server: could not reach`);
        expect(job.error).toContain(`at ${baseUrl(n, dead)} (ECONNREFUSED) in 3 attempts`);
        expect(job.error).toContain(`POLYSPAWN_${n.toUpperCase()}_BASE_URL`);
        expect(runLog(job).match(/attempt \d: server \(ECONNREFUSED\)/g)).toHaveLength(3);
      });
    } finally {
      await other.close();
    }
  });
});
