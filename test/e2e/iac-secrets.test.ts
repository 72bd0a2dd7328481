// No secret reaches a file polyspawn writes or a tool result, even when an agent prints the API
// key it was given.
import { readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, test } from 'vitest';
import { startFakeModelApi } from '../fakes/model-api.js';
import { startServer } from '../helpers/mcp.js';
import { parseIac } from '../helpers/iac.js';
import { tempDir } from '../helpers/temp.js';

const KEYS = {
  // Shaped like real keys: recognized by their pattern (and by value: they are configured).
  ANTHROPIC_API_KEY: 'sk-ant-api03-e2eSecretValue0123456789abcdef',
  GITHUB_TOKEN: 'ghp_e2eSecretValue0123456789abcdefABCDEF',
  // No shape at all: only the configured value betrays them.
  MISTRAL_API_KEY: 'Zq8pT3xW9vLm2Nc7Rb4Ys6Hd1Kf0Ga5J',
  GEMINI_API_KEY_IN_FILE: 'plainGeminiKeyWithoutShape0123456',
};

function filesUnder(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const path = join(dir, e.name);
    return e.isDirectory() ? filesUnder(path) : e.isFile() ? [path] : [];
  });
}

const leaks = (text: string) =>
  Object.entries(KEYS)
    .filter(([, v]) => text.includes(v))
    .map(([k]) => k);

describe('secrets', () => {
  test('an agent that prints its API key leaves it in no file and no tool result', async () => {
    const projectDir = tempDir('secrets');
    writeFileSync(join(projectDir, 'api_keys.json'), JSON.stringify({ GEMINI_API_KEY: KEYS.GEMINI_API_KEY_IN_FILE }));
    const s = await startServer({
      projectDir,
      env: {
        ANTHROPIC_API_KEY: KEYS.ANTHROPIC_API_KEY,
        GITHUB_TOKEN: KEYS.GITHUB_TOKEN,
        MISTRAL_API_KEY: KEYS.MISTRAL_API_KEY,
        POLYSPAWN_CONCURRENCY: '8',
      },
    });
    const results: unknown[] = [];
    const call = async (name: string, args: Record<string, unknown>) => {
      const result = await s.call(name, args);
      results.push(result);
      return result.structuredContent as { agent_id: string };
    };
    const prompts = [
      // Its own login reaches a CLI (another backend's key does not: test/e2e/child-env.test.ts).
      ['claude', '[[cli:echo-env:ANTHROPIC_API_KEY]]'],
      ['codex', '[[cli:echo-env:MISTRAL_API_KEY]]'],
      ['copilot', '[[cli:echo-env:GITHUB_TOKEN]]'],
      ['copilot', `the key is ${KEYS.MISTRAL_API_KEY}, also ${KEYS.GEMINI_API_KEY_IN_FILE}`],
      ['claude', `${KEYS.GITHUB_TOKEN} first line with a token [[cli:fail]]`],
      ['codex', `Authorization: Bearer ${KEYS.MISTRAL_API_KEY} [[cli:stderr:${KEYS.GEMINI_API_KEY_IN_FILE}]]`],
      ['claude', `slow ${KEYS.ANTHROPIC_API_KEY} [[cli:hang]]`],
    ] as const;
    const ids: string[] = [];
    for (const [backend, prompt] of prompts)
      ids.push(
        (await call(`spawn_${backend}`, { prompt, ...(prompt.includes('hang') ? { timeout_s: 1 } : {}) })).agent_id,
      );
    await call('wait_for_agents', { agent_ids: ids, timeout_s: 30 });
    for (const id of ids) {
      await call('result', { agent_id: id, include_raw: true });
      await call('logs', { agent_id: id });
      await call('logs', { agent_id: id, stream: 'stderr' });
      await call('logs', { agent_id: id, tail: 7 }); // a tail that starts inside a key
    }
    await call('list', { recent: 50 });
    const echoed = (await s.callOk<{ text: string }>('result', { agent_id: ids[0]! })).text;
    expect(echoed).toBe('[REDACTED]');
    await s.close();

    expect(leaks(JSON.stringify(results))).toEqual([]);
    const stateDir = join(projectDir, '.polyspawn');
    const written = [...filesUnder(stateDir), join(projectDir, 'IAC.md')];
    expect(written.length).toBeGreaterThan(ids.length * 3);
    for (const file of written) expect(leaks(readFileSync(file).toString('latin1')), file).toEqual([]);
    // The keys were there to leak: the logs and IAC.md show where they were.
    expect(readFileSync(join(stateDir, 'runs', ids[0]!, 'stdout.log'), 'utf8')).toContain('[REDACTED]');
    expect(readFileSync(join(stateDir, 'runs', ids[5]!, 'stderr.log'), 'utf8')).toContain('[REDACTED]');
    const iac = readFileSync(join(projectDir, 'IAC.md'), 'utf8');
    expect(parseIac(iac).entries).toHaveLength(ids.length);
    expect(iac.match(/\[REDACTED\]/g)!.length).toBeGreaterThan(ids.length);
    expect(statSync(join(stateDir, 'index.jsonl')).size).toBeGreaterThan(0);
  });

  test('keys written to api_keys.json after the start are redacted from the first job that could print them', async () => {
    const api = await startFakeModelApi();
    const projectDir = tempDir('late-keys');
    const s = await startServer({ projectDir, env: { POLYSPAWN_MISTRAL_BASE_URL: api.url } });
    try {
      // No shape a redactor could recognise: only their being configured gives them away.
      const late = {
        MISTRAL_API_KEY: 'lateMistralKeyNoShape0123456789',
        GEMINI_API_KEY: 'lateGeminiKeyNoShape9876543210',
      };
      writeFileSync(join(projectDir, 'api_keys.json'), JSON.stringify(late));
      const lateLeaks = (text: string) =>
        Object.entries(late)
          .filter(([, v]) => text.includes(v))
          .map(([k]) => k);
      // The fake API answers with the prompt: the agent prints both keys.
      const spawned = await s.call('spawn_mistral', {
        prompt: `echo ${late.MISTRAL_API_KEY} and ${late.GEMINI_API_KEY}`,
        wait_s: 30,
      });
      const job = spawned.structuredContent as { agent_id: string; state: string; text: string };
      expect(job.state).toBe('succeeded');
      const result = await s.call('result', { agent_id: job.agent_id, include_raw: true });
      const logs = await s.call('logs', { agent_id: job.agent_id });
      expect(lateLeaks(JSON.stringify([spawned, result, logs]))).toEqual([]);
      expect(job.text).toContain('FAKE REPLY (turn 1): echo [REDACTED] and [REDACTED]');
      await s.close();
      const run = join(projectDir, '.polyspawn', 'runs', job.agent_id);
      for (const file of ['record.json', 'prompt.txt', 'stdout.log', 'stderr.log'])
        expect(lateLeaks(readFileSync(join(run, file), 'utf8')), file).toEqual([]);
      const iac = readFileSync(join(projectDir, 'IAC.md'), 'utf8');
      expect(lateLeaks(iac)).toEqual([]);
      expect(iac).toContain('[REDACTED]');
      expect(readFileSync(join(run, 'stdout.log'), 'utf8')).toContain('echo [REDACTED] and [REDACTED]');
    } finally {
      await s.close();
      await api.close();
    }
  });
});
