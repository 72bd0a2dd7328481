// Spawns as MCP tasks with the real Claude Code 2.1.332 as the orchestrator (issue 25), against
// the fake model API: polyspawn is its MCP server `agents`, the real claude CLI its agents.
// - Interactive (in a terminal, test/contract/interactive-claude.ts): a spawn becomes a
//   background task and the model's next turn carries a <task-notification> with the agent's
//   answer; an agent's question to the user opens Claude Code's dialog and the answer typed
//   there reaches the agent in the same run; a team is a task too; stopping the task from
//   Claude Code's task panel ends the agent.
// - `claude -p` never declares the tasks extension: its spawn blocks (wait_s) and answers as
//   before.
// Every JSON-RPC message between Claude Code and polyspawn is logged by a tap in the server's
// process (test/contract/jsonrpc-tap.mjs); the tests assert on that sequence and on what the
// fake model API was sent.
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { afterAll, afterEach, beforeAll, describe, expect, test } from 'vitest';
import type { FakeModelApi } from '../fakes/model-api.js';
import { serverEntry } from '../helpers/mcp.js';
import { waitFor } from '../helpers/processes.js';
import { cliEnv, runCli, startCliSetup, type CliHomes, type CliSetup, type InstalledClis } from './clis.js';
import {
  exchangesOf,
  readTap,
  startInteractiveClaude,
  writeMcpConfig,
  type Exchange,
  type InteractiveClaude,
  type JsonRpc,
} from './interactive-claude.js';

const TASKS = 'io.modelcontextprotocol/tasks';
const CLIENT_CAPABILITIES = 'io.modelcontextprotocol/clientCapabilities';

/**
 * An interactive session (and an agent waiting for the user's answer) is idle between model
 * requests; the fake model API closes an idle connection after 1 s, and a request sent on it
 * just then fails with ECONNRESET ("API Error: Connection dropped"), which claude retries only
 * when retries are on (makeCliHomes turns them off so that an error status ends a run at once;
 * no test here asks the fake for one).
 */
const RETRY_A_DROPPED_CONNECTION = { CLAUDE_CODE_MAX_RETRIES: '2' };

let setup: CliSetup | undefined;
let clis: InstalledClis;
let api: FakeModelApi;
let homes: CliHomes;
let project: string;
/** polyspawn as the orchestrator's MCP server `agents`, with the pinned CLIs as its agents. */
let agents: { script: string; env: Record<string, string> };
/** The orchestrator's own environment: its config folder apart from its agents'. */
let orchestratorEnv: Record<string, string>;

beforeAll(async () => {
  setup = await startCliSetup();
  ({ clis, api, homes, project } = setup);
  agents = {
    script: serverEntry,
    env: {
      POLYSPAWN_CLAUDE_BIN: clis.claude,
      POLYSPAWN_CODEX_BIN: clis.codex,
      POLYSPAWN_COPILOT_BIN: clis.copilot,
      POLYSPAWN_KILL_GRACE_S: '1',
      XDG_CONFIG_HOME: join(project, '.xdg-config'),
      ...homes.env,
      ...RETRY_A_DROPPED_CONNECTION,
    },
  };
  orchestratorEnv = { ...homes.env, CLAUDE_CONFIG_DIR: join(homes.dir, 'orchestrator'), ...RETRY_A_DROPPED_CONNECTION };
}, 900_000);

afterAll(async () => {
  await setup?.close();
});

/** The prompt that makes the orchestrator's model call polyspawn's tool `tool` with `args`. */
const call = (tool: string, args: Record<string, unknown>) => `[[fake:mcp:agents:${tool}:${JSON.stringify(args)}]]`;

const declaresTasks = (request: JsonRpc) => {
  const meta = request.params?._meta as Record<string, { extensions?: Record<string, unknown> }> | undefined;
  return meta?.[CLIENT_CAPABILITIES]?.extensions?.[TASKS] !== undefined;
};

/** Every string inside a JSON value. */
const stringsIn = (value: unknown): string[] =>
  typeof value === 'string'
    ? [value]
    : typeof value === 'object' && value !== null
      ? Object.values(value).flatMap(stringsIn)
      : [];

/** The <task-notification> elements the model was sent, each once, oldest first. */
function taskNotifications(): string[] {
  const found = new Set<string>();
  for (const r of api.requests)
    for (const text of stringsIn(r.body))
      for (const m of text.matchAll(/<task-notification>[\s\S]*?<\/task-notification>/g)) found.add(m[0]);
  return [...found];
}

/** Waits for the notification that holds `mark`, and returns it. */
async function notificationWith(mark: string, ms = 240_000): Promise<string> {
  await waitFor(`a <task-notification> with ${mark}`, () => taskNotifications().some((n) => n.includes(mark)), ms);
  return taskNotifications().find((n) => n.includes(mark))!;
}

/** The tool result Claude Code gave the model in place of a task's answer (undefined: none yet). */
const placeholderFor = (taskId: string) =>
  api.requests.map((r) => r.toolResult).find((text) => text?.includes(`started server-side task ${taskId}`));

// ---------------------------------------------------------------------------------------------
// The gate: tasks need MCP 2026-07-28, which a server on @modelcontextprotocol/sdk 1.x cannot
// speak. Asked of the built server itself, so these tests start running the day it does.

/** What the built server answers to a 2026-07-28 server/discover on stdio. */
async function discoverAnswer(): Promise<JsonRpc | undefined> {
  const dir = mkdtempSync(join(process.env.TMPDIR ?? '/tmp', 'polyspawn-gate-'));
  mkdirSync(join(dir, '.xdg-config'));
  const child = spawn(process.execPath, [serverEntry], {
    cwd: dir,
    env: { ...process.env, XDG_CONFIG_HOME: join(dir, '.xdg-config') },
    stdio: ['pipe', 'pipe', 'ignore'],
  });
  const meta = {
    'io.modelcontextprotocol/protocolVersion': '2026-07-28',
    'io.modelcontextprotocol/clientInfo': { name: 'polyspawn-gate', version: '0.0.0' },
    [CLIENT_CAPABILITIES]: {},
  };
  child.stdin.write(
    `${JSON.stringify({ jsonrpc: '2.0', id: 'gate', method: 'server/discover', params: { _meta: meta } })}\n`,
  );
  try {
    return await new Promise<JsonRpc | undefined>((resolve) => {
      const timer = setTimeout(() => resolve(undefined), 30_000);
      createInterface({ input: child.stdout }).on('line', (line) => {
        const message = JSON.parse(line) as JsonRpc;
        if (message.id === 'gate') {
          clearTimeout(timer);
          resolve(message);
        }
      });
      child.on('close', () => resolve(undefined));
    });
  } finally {
    child.kill('SIGKILL');
  }
}

const discovered = existsSync(serverEntry) ? await discoverAnswer() : undefined;
const speaksTasksEra = (discovered?.result?.supportedVersions as string[] | undefined)?.includes('2026-07-28') ?? false;
if (!speaksTasksEra) {
  console.warn(
    `tasks.test.ts: the interactive tests are SKIPPED: the built server (${serverEntry}) does not speak MCP ` +
      `2026-07-28, which tasks need (server/discover answered ${JSON.stringify(discovered ?? 'nothing')}). ` +
      'They run once polyspawn is on @modelcontextprotocol/server 2.x (issue 25).',
  );
}

// ---------------------------------------------------------------------------------------------

describe.skipIf(!speaksTasksEra)('the interactive Claude Code: spawns as tasks', () => {
  let claude: InteractiveClaude | undefined;

  /** A fresh session in the project, polyspawn's tools allowed. */
  async function session(): Promise<InteractiveClaude> {
    claude = await startInteractiveClaude({
      claude: clis.claude,
      cwd: project,
      dir: homes.dir,
      env: orchestratorEnv,
      mcpServers: { agents },
      args: ['--allowedTools', 'mcp__agents'],
      requireModernEra: true,
    });
    return claude;
  }

  // Closing checks that claude's exit ended polyspawn and every agent it had started.
  afterEach(async () => {
    await claude?.close();
    claude = undefined;
  });

  /** The tools/call of `tool` with `mark` in its arguments, once answered. */
  const callOf = (c: InteractiveClaude, tool: string, mark: string) =>
    c.waitForExchange(
      'agents',
      'tools/call',
      (e) => e.request.params?.name === tool && JSON.stringify(e.request.params).includes(mark),
    );

  /** The answered tasks/get requests for `taskId`, oldest first. */
  const polls = (c: InteractiveClaude, taskId: string) =>
    c.exchanges('agents', 'tasks/get').filter((e) => e.request.params?.taskId === taskId && e.response);

  /** Whether a tasks/get said the task ended. */
  const ended = (c: InteractiveClaude, taskId: string) =>
    polls(c, taskId).some((p) => ['completed', 'failed', 'cancelled'].includes(p.response!.result!.status as string));

  /**
   * The JSON-RPC messages of one task, in order: each request with its answer, a run of the same
   * poll with the same answer as one pair with its count. For the record of what was said.
   */
  function sequenceOf(c: InteractiveClaude, taskId: string): string {
    const messages = c.tap('agents').map(({ from, message }) => ({ from, m: message as JsonRpc }));
    const answers = new Map(
      messages.filter(({ from, m }) => from === 'server' && !m.method).map(({ m }) => [String(m.id), m]),
    );
    const shown = (value: unknown) => {
      const text = JSON.stringify(value);
      return text.length > 700 ? `${text.slice(0, 700)}…` : text;
    };
    const pairs: { text: string; count: number }[] = [];
    for (const { from, m } of messages) {
      if (from !== 'client' || !m.method) continue;
      const answer = answers.get(String(m.id));
      const { _meta, ...params } = m.params ?? {};
      void _meta;
      const made = (answer?.result as { taskId?: string } | undefined)?.taskId === taskId;
      if ((params as { taskId?: string }).taskId !== taskId && !made) continue;
      const text = `→ ${m.method} ${shown(params)}\n  ← ${shown(answer?.result ?? answer?.error ?? '(no answer)')}`;
      const last = pairs.at(-1);
      if (last?.text === text) last.count++;
      else pairs.push({ text, count: 1 });
    }
    return pairs.map((p) => (p.count > 1 ? `${p.text}   (×${p.count})` : p.text)).join('\n');
  }

  /** The call's answer is a task handle; returns its task id. */
  function taskHandle(e: Exchange): string {
    expect(declaresTasks(e.request), JSON.stringify(e.request)).toBe(true);
    const result = e.response!.result!;
    expect(result, JSON.stringify(e.response)).toMatchObject({ resultType: 'task', status: 'working' });
    expect(result.taskId).toEqual(expect.any(String));
    return result.taskId as string;
  }

  /** The agent id the finished task's result names, and that it has its entry in IAC.md. */
  async function agentOf(c: InteractiveClaude, taskId: string): Promise<string> {
    const done = polls(c, taskId).find((p) => p.response!.result!.status === 'completed');
    expect(done, `no tasks/get of ${taskId} answered completed`).toBeDefined();
    const result = done!.response!.result!.result as { structuredContent?: { agent_id?: string; team_id?: string } };
    const id = result.structuredContent?.agent_id ?? result.structuredContent?.team_id;
    expect(id, JSON.stringify(result)).toEqual(expect.any(String));
    await waitFor(`IAC.md to hold ${id}`, () => {
      const iac = join(project, 'IAC.md');
      return existsSync(iac) && readFileSync(iac, 'utf8').includes(id!);
    });
    return id!;
  }

  test('spawn_claude becomes a background task; the notification carries the agent’s answer', async () => {
    const c = await session();
    const mark = `task-spawn-${Date.now()}`;
    await c.submit(`Delegate. ${call('spawn_claude', { prompt: `${mark} name a colour` })}`);
    const taskId = taskHandle(await callOf(c, 'spawn_claude', mark));
    // What the model got at once: Claude Code's placeholder, naming polyspawn's task.
    await waitFor('the placeholder result', () => placeholderFor(taskId) !== undefined);
    expect(placeholderFor(taskId)).toContain('moved to the background');

    const note = await notificationWith(`FAKE REPLY (turn 1): ${mark} name a colour`);
    expect(note).toContain('<status>completed</status>');
    // tasks/get said what the job was doing while it ran.
    const working = polls(c, taskId).filter((p) => p.response!.result!.status === 'working');
    expect(working.length).toBeGreaterThan(0);
    expect(working.every((p) => typeof p.response!.result!.statusMessage === 'string')).toBe(true);
    console.log(`spawn as a task: agent ${await agentOf(c, taskId)}, task ${taskId}\n${note}`);
  });

  test('a question to the user opens the dialog; the answer typed there reaches the agent in the same run', async () => {
    const c = await session();
    const mark = `task-ask-${Date.now()}`;
    const ask = { question: `${mark} Which colour do you want?`, to: 'user' };
    const prompt = `${mark} ask. [[fake:mcp:parent:ask_parent:${JSON.stringify(ask)}]]`;
    await c.submit(`Delegate. ${call('spawn_claude', { prompt })}`);
    const taskId = taskHandle(await callOf(c, 'spawn_claude', mark));

    // The dialog, with the agent's question in it (the prompt line above holds it as well); a
    // task that ends first never asked the user (its notification says what the agent got).
    const dialog = new RegExp(`requests your input[\\s\\S]*${ask.question.replace('?', '\\?')}`);
    await waitFor('the dialog, or the task to end', () => dialog.test(c.screen()) || ended(c, taskId), 240_000);
    const last = () => JSON.stringify(polls(c, taskId).at(-1)?.response?.result);
    expect(ended(c, taskId), `the task ended without asking the user: ${last()}`).toBe(false);
    const asking = polls(c, taskId).find((p) => p.response!.result!.status === 'input_required');
    expect(JSON.stringify(asking?.response?.result?.inputRequests)).toContain(ask.question);
    await c.answerDialog('blue, like the sea');
    const update = await c.waitForExchange('agents', 'tasks/update', (e) => e.request.params?.taskId === taskId);
    expect(update.response!.error, JSON.stringify(update.response)).toBeUndefined();
    expect(JSON.stringify(update.request.params?.inputResponses)).toContain('"action":"accept"');

    // The agent's model got ask_parent's answer and finished with it (the fake answers TOOL_RESULT: …).
    const note = await notificationWith('blue, like the sea');
    expect(note).toContain('<status>completed</status>');
    expect(note).toContain('TOOL_RESULT:');
    console.log(`question to the user: agent ${await agentOf(c, taskId)}\n${sequenceOf(c, taskId)}\n${note}`);
  });

  /** Asks the user `ask` through a spawn as a task; returns the task id once the dialog shows the question. */
  async function askTheUser(c: InteractiveClaude, mark: string, ask: Record<string, unknown> & { question: string }) {
    const prompt = `${mark} ask. [[fake:mcp:parent:ask_parent:${JSON.stringify({ ...ask, to: 'user' })}]]`;
    await c.submit(`Delegate. ${call('spawn_claude', { prompt })}`);
    const taskId = taskHandle(await callOf(c, 'spawn_claude', mark));
    const dialog = new RegExp(`requests your input[\\s\\S]*${ask.question.replace('?', '\\?')}`);
    await waitFor('the dialog, or the task to end', () => dialog.test(c.screen()) || ended(c, taskId), 240_000);
    expect(ended(c, taskId), 'the task ended without asking the user').toBe(false);
    return taskId;
  }

  /** The dialog's part of the screen. */
  const dialogOf = (c: InteractiveClaude) => c.screen().slice(c.screen().indexOf('requests your input'));

  test('Esc in the dialog answers later: the task waits, Claude Code polls on; leaving then stops it without tasks/cancel, and polyspawn ends the agent', async () => {
    const c = await session();
    const mark = `task-later-${Date.now()}`;
    const taskId = await askTheUser(c, mark, { question: `${mark} Later?` });
    c.press('Escape');
    await c.waitForScreen('needs your input', 10_000);
    expect(c.screen()).not.toContain('requests your input');
    // Polling goes on while the question waits: the task still input_required, nothing answered or cancelled.
    const polled = polls(c, taskId).length;
    await waitFor('two more polls', () => polls(c, taskId).length >= polled + 2, 30_000);
    expect(polls(c, taskId).at(-1)!.response!.result!.status).toBe('input_required');
    expect(c.exchanges('agents', 'tasks/update')).toEqual([]);
    expect(c.exchanges('agents', 'tasks/cancel')).toEqual([]);
    // Leaving: Claude Code lists the task ("The following will stop when you exit"); on "Exit
    // and stop tasks" it sends no tasks/cancel but closes polyspawn's stdin, and polyspawn ends
    // the agent with its client (close() fails if anything claude started is left).
    await c.close();
    claude = undefined;
    expect(c.exchanges('agents', 'tasks/cancel')).toEqual([]);
  });

  test('a question with options: the dialog offers them; the choice reaches the agent', async () => {
    const c = await session();
    const mark = `task-choice-${Date.now()}`;
    const taskId = await askTheUser(c, mark, {
      question: `${mark} Delete the branch?`,
      options: ['keep it', 'delete it'],
    });
    // The field is collapsed ("▸ not set"); → expands it to its choices.
    c.press('Right');
    await waitFor('the choices', () => dialogOf(c).includes('keep it') && dialogOf(c).includes('delete it'), 10_000);
    console.log(`the dialog's choices:\n${dialogOf(c)}`);
    c.press('Enter');
    await waitFor('a choice to be set', () => !dialogOf(c).includes('not set'), 10_000);
    await c.pressDialogButton('Accept');
    const update = await c.waitForExchange('agents', 'tasks/update', (e) => e.request.params?.taskId === taskId);
    expect(update.response!.error, JSON.stringify(update.response)).toBeUndefined();
    const sent = JSON.stringify(update.request.params?.inputResponses);
    const chosen = ['keep it', 'delete it'].find((o) => sent.includes(`"answer":"${o}"`));
    expect(chosen, sent).toBeDefined();
    // The result's conversation: the user's answer, given to the agent as its own option.
    const note = await notificationWith(`"text":"${chosen}","by":"user"`);
    expect(note).toContain('<status>completed</status>');
  });

  test('Decline in the dialog: the agent is told the user declined, and finishes', async () => {
    const c = await session();
    const mark = `task-decline-${Date.now()}`;
    const taskId = await askTheUser(c, mark, { question: `${mark} May I push?` });
    await c.pressDialogButton('Decline');
    const update = await c.waitForExchange('agents', 'tasks/update', (e) => e.request.params?.taskId === taskId);
    expect(update.response!.error, JSON.stringify(update.response)).toBeUndefined();
    expect(JSON.stringify(update.request.params?.inputResponses)).toContain('"action":"decline"');
    const note = await notificationWith('The user declined to answer this question');
    expect(note).toContain('<status>completed</status>');
    console.log(`declined: agent ${await agentOf(c, taskId)}\n${sequenceOf(c, taskId)}`);
  });

  test('run_team becomes a task; the notification carries the team’s answer', async () => {
    const c = await session();
    const mark = `task-team-${Date.now()}`;
    await c.submit(
      `Team. ${call('run_team', { topology: 'pipeline', members: ['claude', 'claude'], task: `${mark} write a haiku` })}`,
    );
    const taskId = taskHandle(await callOf(c, 'run_team', mark));
    const note = await notificationWith(`stage 1 (claude) answered`);
    expect(note).toContain('<status>completed</status>');
    expect(note).toContain(`FAKE REPLY (turn 1): ${mark} write a haiku`);
    console.log(`team as a task: ${await agentOf(c, taskId)}\n${note}`);
  });

  test('stopping the task in Claude Code’s task panel sends tasks/cancel, which ends the agent', async () => {
    const c = await session();
    const mark = `task-cancel-${Date.now()}`;
    // The agent's model never answers: the agent runs until it is stopped.
    await c.submit(`Delegate. ${call('spawn_claude', { prompt: `${mark} [[fake:slow:600000]]` })}`);
    const taskId = taskHandle(await callOf(c, 'spawn_claude', mark));
    const agentRequest = () => api.requests.find((r) => r.prompt.startsWith(mark));
    await waitFor('the agent to ask its model', () => agentRequest() !== undefined, 120_000);

    // The footer offers the running task; its panel shows polyspawn's task and stops it with x.
    await c.waitForScreen('to manage');
    c.press('Down');
    await c.waitForScreen('to view tasks');
    c.press('Enter');
    const panel = await c.waitForScreen('x to stop');
    expect(panel).toContain(taskId);
    c.press('x');
    const cancel = await c.waitForExchange('agents', 'tasks/cancel', (e) => e.request.params?.taskId === taskId);
    expect(cancel.response!.error, JSON.stringify(cancel.response)).toBeUndefined();
    // The agent's claude was ended: its request to the model was dropped mid-wait.
    await waitFor('the agent to be stopped', () => agentRequest()!.outcome === 'slow-aborted', 60_000);
    // The panel falls back from the task to its list ("No tasks currently running"), and takes
    // keys (Ctrl-C too) until it is closed: one Esc a time, since a double Esc opens the rewind menu.
    for (let presses = 0; presses < 3 && c.screen().includes('Esc to close'); presses++) {
      const before = c.screen();
      c.press('Escape');
      await waitFor('the panel to take the Esc', () => c.screen() !== before, 5_000).catch(() => {});
    }
    expect(c.screen()).not.toContain('Esc to close');
  });
});

// ---------------------------------------------------------------------------------------------

describe('claude -p: the blocking path', () => {
  test('spawn_claude with wait_s answers with the agent’s result; no task is made', async () => {
    const dir = mkdtempSync(join(homes.dir, 'print-'));
    const tap = join(dir, 'tap-agents.jsonl');
    const config = writeMcpConfig(dir, { agents }, () => tap);
    const mark = `print-spawn-${Date.now()}`;
    const prompt = `Delegate. ${call('spawn_claude', { prompt: `${mark} name a colour`, wait_s: 150 })}`;
    const args = ['-p', '--output-format', 'json', '--mcp-config', config, '--strict-mcp-config'];
    args.push('--permission-mode', 'acceptEdits', '--allowedTools', 'mcp__agents');
    const done = await runCli(clis.claude, args, prompt, project, cliEnv(orchestratorEnv));
    expect(done.code, done.stderr).toBe(0);

    const [spawned] = exchangesOf(readTap(tap), 'tools/call');
    expect(spawned?.request.params?.name).toBe('spawn_claude');
    expect(declaresTasks(spawned!.request)).toBe(false);
    expect(spawned!.response?.result?.resultType ?? 'complete').toBe('complete');
    expect(exchangesOf(readTap(tap), 'tasks/get')).toEqual([]);
    // The model got the agent's answer as the tool's result, and passed it on.
    const answer = (JSON.parse(done.stdout) as { result: string }).result;
    expect(answer).toMatch(/^TOOL_RESULT: /);
    expect(answer).toContain(`FAKE REPLY (turn 1): ${mark} name a colour`);
  });
});
