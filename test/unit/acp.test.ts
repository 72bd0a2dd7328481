// The ACP backend's pieces in-process: agents declared in the user's config (never a project's),
// presets, the log parsed back into an outcome, the permission question and the spawn's narrowing.
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, test } from 'vitest';
import type { RequestPermissionRequest } from '@agentclientprotocol/sdk';
import { acpBackend, acpPermission, parseAcpLog, type AcpBackend } from '../../backends/acp.js';
import { ACP_PRESETS } from '../../backends/acp-presets.js';
import { backends } from '../../backends/registry.js';
import { loadConfig } from '../../src/config/config.js';
import { createApp } from '../../src/app.js';
import { collectDoctor } from '../../src/commands/doctor.js';
import { ConfigError } from '../../src/lib/errors.js';
import { CONVERSATION_LIMITS } from '../../src/jobs/conversation.js';
import { permissionQuestion } from '../../src/jobs/acp/permission.js';
import { tempProject } from '../helpers/temp.js';

function projectWith(user: unknown, projectFile?: unknown) {
  const { dir, env } = tempProject('acp-config');
  mkdirSync(join(dir, 'xdg', 'polyspawn'), { recursive: true });
  writeFileSync(join(dir, 'xdg', 'polyspawn', 'config.json'), JSON.stringify(user));
  if (projectFile) writeFileSync(join(dir, 'polyspawn.config.json'), JSON.stringify(projectFile));
  return { dir, env };
}

function withConfigs(user: unknown, projectFile?: unknown) {
  const { dir, env } = projectWith(user, projectFile);
  return () => loadConfig(backends, env, dir);
}

describe('acp_agents in the config', () => {
  test("the user's declaration becomes a backend with settings; a preset fills in the rest", () => {
    const config = withConfigs({
      acp_agents: {
        qwen: { command: 'qwen', args: ['--acp'], env: ['DASHSCOPE_API_KEY'] },
        cop: { preset: 'copilot' },
      },
      backends: { qwen: { permission: 'deny' } },
    })();
    expect(config.acpAgents.map((b) => b.name)).toEqual(['qwen', 'cop']);
    const [qwen, cop] = config.acpAgents as [AcpBackend, AcpBackend];
    expect(qwen.acp).toMatchObject({ command: 'qwen', args: ['--acp'], env: ['DASHSCOPE_API_KEY'], usage: 'per_turn' });
    expect(qwen.permissionModes).toEqual(['ask', 'allow', 'deny']);
    expect(qwen.loginEnv).toEqual(['DASHSCOPE_API_KEY']);
    expect(config.backends.qwen!.permission).toBe('deny');
    expect(config.backends.cop!.permission).toBe('ask');
    expect(cop.acp).toMatchObject({ command: 'copilot', args: ['--acp'], usage: 'cumulative', mcp: 'http' });
    expect(
      cop.command(
        {} as never,
        { permission: 'ask', allowTools: [], denyTools: [], bin: '/opt/copilot' },
        { scratchDir: '' },
      ).file,
    ).toBe('/opt/copilot');
  });

  test("a spawn's model reaches the agent through model_args; without them the agent keeps its own", () => {
    const config = withConfigs({
      acp_agents: {
        cop: { preset: 'copilot' },
        plain: { command: 'plain' },
        picked: { command: 'p', model_args: ['-m', '{model}'], default_model: 'big-1' },
      },
    })();
    const [cop, plain, picked] = config.acpAgents;
    const settings = { permission: 'ask', allowTools: [], denyTools: [] };
    const argsFor = (backend: AcpBackend, model: string) =>
      backend.command({ model } as never, settings, { scratchDir: '' }).args;
    expect(cop!.models.default).toBe('gpt-5.4');
    expect(argsFor(cop!, 'gpt-5.4')).toEqual(['--acp', '--model', 'gpt-5.4']);
    expect(plain!.models.default).toBe('default');
    expect(argsFor(plain!, 'default')).toEqual([]);
    expect(picked!.models.default).toBe('big-1');
    expect(argsFor(picked!, 'big-1')).toEqual(['-m', 'big-1']);
    expect(withConfigs({ acp_agents: { x: { command: 'x', default_model: '--evil' } } })).toThrow(/a model name/);
  });

  test('doctor checks a declared agent as it checks a CLI: not installed, it says how to install it', async () => {
    const { dir, env } = projectWith({
      acp_agents: { ghost: { command: 'no-such-acp-agent', install_hint: 'install it with `npm i -g ghost`' } },
    });
    const report = await collectDoctor(env, dir);
    expect(report.backends.find((b) => b.name === 'ghost')).toMatchObject({
      usable: false,
      detail: expect.stringContaining('npm i -g ghost'),
    });
  });

  test("a project's config declares no agent: its acp_agents are ignored and said", () => {
    const config = withConfigs({}, { acp_agents: { evil: { command: '/tmp/evil.sh' } } })();
    expect(config.acpAgents).toEqual([]);
    expect(config.projectConfig!.ignored).toEqual(['acp_agents']);
  });

  test("a project's config that names an agent this user has not declared: ignored and said, the app starts", () => {
    const { dir, env } = projectWith(
      { acp_agents: { cop: { preset: 'copilot' } } },
      { timeout_s: 60, backends: { qwen: { permission: 'allow' }, cop: { enabled: true } } },
    );
    const config = loadConfig(backends, env, dir);
    expect(config.backends.qwen).toBeUndefined();
    expect(config.timeoutS).toBe(60);
    expect(config.projectConfig!.changed).toEqual(['timeout_s 60', 'backends.cop.enabled true']);
    expect(config.projectConfig!.ignored).toEqual([
      'backends.qwen (no backend of that name here: an ACP agent is declared in acp_agents)',
    ]);
    const logged: string[] = [];
    const app = createApp({ ...env, PATH: process.env.PATH }, dir, (line) => logged.push(line) > 0);
    expect(app.backends.map((b) => b.name)).toContain('cop');
    expect(logged.join('\n')).toContain(
      `it may not set backends.qwen (no backend of that name here: an ACP agent is declared in acp_agents) (ignored: set them in your own config, ${join(dir, 'xdg', 'polyspawn', 'config.json')}`,
    );
    // The user's own file naming no backend is still the user's mistake to fix.
    expect(withConfigs({ backends: { qwen: { permission: 'allow' } } })).toThrow(/backends.qwen: no such backend/);
  });

  test("a project's config makes an agent's permission stricter, never looser: only the user's may", () => {
    const user = {
      acp_agents: { cop: { preset: 'copilot' }, free: { command: 'free' } },
      backends: { free: { permission: 'allow' } },
    };
    const looser = withConfigs(user, { backends: { cop: { permission: 'allow' }, free: { permission: 'deny' } } })();
    expect(looser.backends.cop!.permission).toBe('ask');
    expect(looser.backends.free!.permission).toBe('deny');
    expect(looser.projectConfig!.changed).toEqual(['backends.free.permission "deny"']);
    expect(looser.projectConfig!.ignored).toEqual([
      'backends.cop.permission "allow" (it answers permission requests "allow", looser than "ask"\'s "ask")',
    ]);
    // Over the user's own choice too: allow set by the user, ask by the project is kept, allow again dropped.
    const stricter = withConfigs(user, { backends: { free: { permission: 'ask' }, cop: { permission: 'nosuch' } } })();
    expect(stricter.backends.free!.permission).toBe('ask');
    expect(stricter.backends.cop!.permission).toBe('ask');
    expect(stricter.projectConfig!.ignored).toEqual([
      'backends.cop.permission "nosuch" (no such mode: ask, allow, deny)',
    ]);
    const { dir, env } = projectWith(
      { acp_agents: { cop: { preset: 'copilot' } }, backends: { cop: { permission: 'deny' } } },
      { backends: { cop: { permission: 'ask' } } },
    );
    expect(loadConfig(backends, env, dir).backends.cop!.permission).toBe('deny');
    // The environment is the user's: it still sets any mode.
    expect(loadConfig(backends, { ...env, POLYSPAWN_COP_PERMISSION: 'allow' }, dir).backends.cop!.permission).toBe(
      'allow',
    );
  });

  test('refused: a built-in name, no command, a permission mode it does not declare, a bad name', () => {
    expect(withConfigs({ acp_agents: { claude: { preset: 'claude' } } })).toThrow(/built-in backend's name/);
    expect(withConfigs({ acp_agents: { bare: {} } })).toThrow(/say which program to run/);
    expect(withConfigs({ acp_agents: { x: { command: 'x' } }, backends: { x: { permission: 'yolo' } } })).toThrow(
      /permission "yolo" is not one of ask, allow, deny/,
    );
    expect(withConfigs({ acp_agents: { 'Bad-Name': { command: 'x' } } })).toThrow(ConfigError);
    expect(withConfigs({ acp_agents: { x: { command: 'x', permissions: { ask: 'maybe' } } } })).toThrow(ConfigError);
  });
});

const agent = (usage: 'per_turn' | 'cumulative' | 'meta_token_count' | 'none') =>
  acpBackend({ ...ACP_PRESETS.codex!, name: 'a', usage });

/** A log as the session driver writes it. */
const logOf = (...lines: unknown[]) => lines.map((l) => JSON.stringify(l)).join('\n');
const prompt = (id: number) => ({
  from: 'client',
  message: { jsonrpc: '2.0', id, method: 'session/prompt', params: { sessionId: 's-1', prompt: [] } },
});
const chunk = (text: string) => ({
  from: 'agent',
  message: {
    jsonrpc: '2.0',
    method: 'session/update',
    params: { sessionId: 's-1', update: { sessionUpdate: 'agent_message_chunk', content: { type: 'text', text } } },
  },
});
const answer = (id: number, result: unknown) => ({ from: 'agent', message: { jsonrpc: '2.0', id, result } });

describe('the log parsed back', () => {
  test("the answer is the last prompt's chunks; usage per turn; the session id", () => {
    const log = logOf(
      chunk('replayed history'),
      prompt(2),
      chunk('hello '),
      chunk('world'),
      answer(2, { stopReason: 'end_turn', usage: { inputTokens: 7, outputTokens: 3, cachedReadTokens: 2 } }),
    );
    expect(parseAcpLog(agent('per_turn').acp, log)).toMatchObject({
      ok: true,
      text: 'hello world',
      sessionId: 's-1',
      usage: { inputTokens: 9, outputTokens: 3, cachedInputTokens: 2 },
      costSource: 'unknown',
    });
    // Counted anew by each process, and a run is one process with one prompt: this run's.
    expect(parseAcpLog(agent('cumulative').acp, log).usage).toMatchObject({ inputTokens: 9 });
    expect(parseAcpLog(agent('none').acp, log).usage).toBeUndefined();
  });

  test("tokens in _meta.quota.token_count; a cost in USD is reported as the session's", () => {
    const log = logOf(
      prompt(1),
      {
        from: 'agent',
        message: {
          jsonrpc: '2.0',
          method: 'session/update',
          params: {
            sessionId: 's-1',
            update: { sessionUpdate: 'usage_update', cost: { amount: 0.25, currency: 'USD' } },
          },
        },
      },
      answer(1, { stopReason: 'end_turn', _meta: { quota: { token_count: { input_tokens: 11, output_tokens: 4 } } } }),
    );
    expect(parseAcpLog(agent('meta_token_count').acp, log)).toMatchObject({
      usage: { inputTokens: 11, outputTokens: 4 },
      sessionCostUsd: 0.25,
    });
  });

  test("polyspawn's error, a turn that did not end, a refusal", () => {
    expect(parseAcpLog(agent('none').acp, logOf(prompt(1), { polyspawn: { error: 'it crashed' } }))).toMatchObject({
      ok: false,
      error: 'it crashed',
    });
    expect(parseAcpLog(agent('none').acp, logOf(prompt(1))).error).toBe('the turn did not end');
    expect(parseAcpLog(agent('none').acp, logOf(prompt(1), answer(1, { stopReason: 'refusal' }))).error).toBe(
      'the agent stopped: refusal',
    );
  });
});

describe('permissions', () => {
  const request = (newText: string): RequestPermissionRequest => ({
    sessionId: 's',
    toolCall: {
      toolCallId: 't',
      title: 'Write a.txt',
      kind: 'edit',
      content: [{ type: 'diff', path: '/p/a.txt', oldText: 'old line', newText }],
    },
    options: [
      { optionId: 'y', name: 'Allow once', kind: 'allow_once' },
      { optionId: 'n', name: 'Reject', kind: 'reject_once' },
    ],
  });

  test('the question carries the tool call and its diff, within the question limit', () => {
    const question = permissionQuestion(request('new line'));
    expect(question).toContain('edit: Write a.txt');
    expect(question).toContain('edit /p/a.txt\n--- before\nold line\n+++ after\nnew line');
    expect(question).toContain('Allow once / Reject');
    const long = permissionQuestion(request('x'.repeat(100_000)));
    expect(long.length).toBeLessThanOrEqual(CONVERSATION_LIMITS.questionChars);
    expect(long).toContain('(clipped)');
  });

  test('a spawn narrows its mode answer, never widens it', () => {
    const backend = agent('none');
    expect(acpPermission(backend, 'allow', { extra: {} })).toBe('allow');
    expect(acpPermission(backend, 'allow', { extra: { on_permission: 'ask' } })).toBe('ask');
    expect(acpPermission(backend, 'ask', { extra: { on_permission: 'allow' } })).toBe('ask');
    expect(acpPermission(backend, 'deny', { extra: { on_permission: 'allow' } })).toBe('deny');
  });
});
